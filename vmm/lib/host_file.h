/*
 * host_file: what husk creates on the host for its user -- the console log,
 * the result record, the files of --get -- and who owns it.
 *
 * husk usually runs as root, in directories other users can write (/tmp)
 * and with names the user typed. So an output file is opened without
 * following a symbolic link in its last component, only ever as a regular
 * file with one link (never a FIFO, a device or a hard link to someone
 * else's file), truncated only after those checks, and given to the
 * invoking user rather than to root.
 */
#ifndef HUSK_HOST_FILE_H
#define HUSK_HOST_FILE_H

#include <sys/types.h>

/*
 * The owner of what husk creates in directory dirfd for its user. As root:
 * SUDO_UID/SUDO_GID when both are set and valid (husk started through
 * sudo), else the owner of the directory. Not root: (uid_t)-1/(gid_t)-1,
 * "leave as created".
 */
void host_owner(int dirfd, uid_t *uid, gid_t *gid);

/*
 * Open path for writing a report (what names it in messages, e.g.
 * "--console"). Creates it (mode 0644) or truncates an existing regular
 * file; refuses a symlink, anything not a regular file, a file with more
 * than one link, and, as root, an existing file owned by someone other than
 * root or host_owner(). Returns the fd (O_CLOEXEC) or -errno with
 * husk_lasterr() naming the file and the reason.
 */
int host_open_output(const char *path, const char *what);

#endif
