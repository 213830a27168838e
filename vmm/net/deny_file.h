/*
 * deny_file: the host-wide file of extra egress deny ranges, applied to
 * every VM of `husk run --net egress` as absolute denies (no --allow, and no
 * name from --allow-host, opens them).
 *
 * Where: DENY_FILE_DEFAULT, or the path in $HUSK_EGRESS_DENY_FILE (tests,
 * or a host that keeps its configuration elsewhere). Format: one range per
 * line, written as --deny takes it (a.b.c.d/len or [IPv6]/len, host bits
 * zero); '#' starts a comment, blank lines and surrounding blanks are fine.
 *
 * A missing file means no extra ranges. Any other trouble (unreadable, not
 * a regular file, too large, a line that is not one such range) is an error
 * that names path:line, and the run does not start: the host's policy is
 * never applied in part.
 */
#ifndef HUSK_DENY_FILE_H
#define HUSK_DENY_FILE_H

#include "cli_run.h"

#define DENY_FILE_DEFAULT	"/etc/husk/egress-deny"
#define DENY_FILE_ENV		"HUSK_EGRESS_DENY_FILE"
#define DENY_FILE_MAX_BYTES	(1u << 20)
#define DENY_FILE_MAX_LINE	256	/* characters, comment included */
#define DENY_FILE_MAX_RANGES	4000	/* below EGRESS_MAX_BLOCKS: room for the pool */

/* $HUSK_EGRESS_DENY_FILE if set and not empty, else DENY_FILE_DEFAULT. */
const char *deny_file_path(void);

/*
 * Parse path, calling fn(arg, range, line number) for each range in order;
 * fn returns 0 or -errno (which stops the read). Returns the number of
 * ranges (0 for a missing file) or -errno with a message naming path:line.
 */
typedef int (*deny_file_fn)(void *arg, const struct run_deny *d, unsigned line);
int deny_file_read(const char *path, deny_file_fn fn, void *arg);

/*
 * Read path and deny every range in it for every VM (egress_block_cidr),
 * only once the whole file parsed. The filter must be loaded. Returns the
 * number of ranges or -errno.
 */
int deny_file_apply(const char *path);

#endif
