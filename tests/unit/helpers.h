/*
 * helpers: checks that more than one unit suite makes.
 */
#ifndef HUSK_UNIT_HELPERS_H
#define HUSK_UNIT_HELPERS_H

#include <check.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "lib/util.h"

/* ret is -err, and the message husk set names what was wrong. */
static inline void assert_err_msg(int ret, int err, const char *needle)
{
	ck_assert_int_eq(ret, -err);
	ck_assert_msg(strstr(husk_lasterr(), needle),
		      "error '%s' does not mention '%s'", husk_lasterr(), needle);
}

/* Every byte of p[0, len) is v. */
static inline int all_bytes(const uint8_t *p, size_t len, uint8_t v)
{
	size_t i;

	for (i = 0; i < len; i++)
		if (p[i] != v)
			return 0;
	return 1;
}

#endif
