/*
 * name: what an image may be called, and which names mean a key (image.h).
 * Its own file because the command-line and API parsers check names and
 * are built without the store.
 */
#include <errno.h>
#include <stdbool.h>
#include <string.h>

#include "image/image.h"
#include "lib/util.h"

int image_name_check(const char *name)
{
	size_t i, n = strlen(name);

	if (!n || n > 128)
		return husk_seterr(EINVAL, "image name '%s': 1 to 128 characters", name);
	for (i = 0; i < n; i++) {
		char c = name[i];
		bool alnum = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');

		if (!alnum && (!i || !strchr("._:/@+-", c)))
			return husk_seterr(EINVAL, "image name '%s': letters, digits and ._:/@+- only, "
					   "starting with a letter or digit", name);
	}
	if (strstr(name, ".."))
		return husk_seterr(EINVAL, "image name '%s' contains '..'", name);
	return 0;
}

bool image_is_key(const char *s, size_t min)
{
	size_t i, n = strlen(s);

	if (n < min || n > 64)
		return false;
	for (i = 0; i < n; i++)
		if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
			return false;
	return true;
}
