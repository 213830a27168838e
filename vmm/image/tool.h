/*
 * tool: the host programs an import runs (GNU tar for a root directory,
 * mke2fs for the root image).
 *
 * Each is found in the system's own directories (/usr/sbin, /usr/bin,
 * /sbin, /bin), never through the caller's PATH, and runs in an environment
 * of husk's making (a fixed PATH, LC_ALL=C): variables such as TAR_OPTIONS
 * or MKE2FS_CONFIG change neither which program runs nor what it does, so
 * the same source is the same image whoever imports it, and an import run
 * as root (husk-runc) runs nothing its caller chose.
 */
#ifndef HUSK_IMAGE_TOOL_H
#define HUSK_IMAGE_TOOL_H

#include <sys/types.h>

/*
 * A user whose rights a program runs with instead of husk's, with that one
 * group and no supplementary ones: a bundle of another user's is read with
 * that user's rights (docs/oci.md).
 */
struct image_reader {
	uid_t uid;
	gid_t gid;
};

/*
 * Run the program argv[0] (a bare name; pkg: the Debian package that has
 * it) with stdin /dev/null, stdout out_fd (-1: /dev/null), stderr kept for
 * the error, and no other descriptor of ours; as `as` (with no way back to
 * more rights) when given, else as we are. 0 when it exits 0, else -errno
 * with what failed and the program's first words on stderr in
 * husk_lasterr().
 */
int image_tool_run(char *const argv[], const char *pkg, int out_fd,
		   const struct image_reader *as);

#endif
