/*
 * cmdline: build the guest kernel command line within the length limit.
 */
#include <errno.h>
#include <string.h>

#include "machine/cmdline.h"
#include "lib/util.h"

void cmdline_init(struct cmdline *c, char *buf, size_t max)
{
	c->buf = buf;
	c->len = 0;
	c->max = max;
	if (max)
		buf[0] = '\0';
}

int cmdline_append(struct cmdline *c, const char *text)
{
	size_t n = strlen(text), sep = c->len ? 1 : 0;
	const unsigned char *p;

	for (p = (const unsigned char *)text; *p; p++)
		if (*p < 0x20 || *p == 0x7f)
			return husk_seterr(EINVAL, "kernel command line contains a control "
					   "character (0x%02x)", *p);
	if (!n)
		return 0;
	if (c->len + sep + n + 1 > c->max)
		return husk_seterr(E2BIG, "kernel command line would be %zu bytes; the limit "
				   "is %zu", c->len + sep + n, c->max ? c->max - 1 : 0);
	if (sep)
		c->buf[c->len++] = ' ';
	memcpy(c->buf + c->len, text, n + 1);
	c->len += n;
	return 0;
}
