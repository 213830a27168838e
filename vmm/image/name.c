/*
 * name: what an image may be called (image.h). Its own file because the
 * command-line parsers check names and are built without the store.
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
