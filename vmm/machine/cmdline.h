/*
 * cmdline: build the guest kernel command line from husk's own parameters
 * and the user's, within the kernel's length limit.
 */
#ifndef HUSK_CMDLINE_H
#define HUSK_CMDLINE_H

#include <stddef.h>

struct cmdline {
	char *buf;
	size_t len;
	size_t max;	/* capacity in bytes including the NUL */
};

void cmdline_init(struct cmdline *c, char *buf, size_t max);
/*
 * Append text (one or more space-separated parameters). Refuses control
 * characters and anything that would not fit, leaving the line unchanged.
 */
int cmdline_append(struct cmdline *c, const char *text);

#endif
