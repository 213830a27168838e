/*
 * host_file: ownership and safe opening of what husk writes for its user.
 * See host_file.h.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "lib/host_file.h"
#include "lib/util.h"

static bool env_id(const char *name, unsigned *out)
{
	uint64_t v;
	const char *s = getenv(name);

	/* 0 is root itself; (uid_t)-1 means "no change" to chown. */
	if (!s || parse_u64(s, 1, (uid_t)-2, &v))
		return false;
	*out = v;
	return true;
}

void host_owner(int dirfd, uid_t *uid, gid_t *gid)
{
	struct stat st;
	unsigned u, g;

	*uid = (uid_t)-1;
	*gid = (gid_t)-1;
	if (geteuid() != 0)
		return;
	if (env_id("SUDO_UID", &u) && env_id("SUDO_GID", &g)) {
		*uid = u;
		*gid = g;
		return;
	}
	if (fstat(dirfd, &st) == 0) {
		*uid = st.st_uid;
		*gid = st.st_gid;
	}
}

/* The directory part of path, opened; *leaf points into path. */
static int open_parent(const char *path, const char **leaf)
{
	char dir[PATH_MAX];
	const char *slash = strrchr(path, '/');
	size_t n;

	if (!slash) {
		*leaf = path;
		return open(".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	}
	*leaf = slash + 1;
	n = slash == path ? 1 : (size_t)(slash - path);
	if (n >= sizeof(dir))
		return -ENAMETOOLONG;
	memcpy(dir, path, n);
	dir[n] = '\0';
	return open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
}

int host_open_output(const char *path, const char *what)
{
	const char *leaf;
	struct stat st;
	uid_t uid;
	gid_t gid;
	int dfd, fd, err;
	bool made = true;

	dfd = open_parent(path, &leaf);
	if (dfd < 0)
		return husk_seterr(dfd == -ENAMETOOLONG ? ENAMETOOLONG : errno,
				   "%s %s: cannot open its directory: %s", what, path,
				   strerror(dfd == -ENAMETOOLONG ? ENAMETOOLONG : errno));
	if (!*leaf || !strcmp(leaf, ".") || !strcmp(leaf, "..")) {
		close(dfd);
		return husk_seterr(EISDIR, "%s %s: not a file name", what, path);
	}
	host_owner(dfd, &uid, &gid);
	/* O_NONBLOCK: opening a FIFO must not wait for a reader. */
	fd = openat(dfd, leaf, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_NOCTTY |
		    O_NONBLOCK | O_CLOEXEC, 0644);
	if (fd < 0 && errno == EEXIST) {
		made = false;
		fd = openat(dfd, leaf, O_WRONLY | O_NOFOLLOW | O_NOCTTY | O_NONBLOCK | O_CLOEXEC);
	}
	if (fd < 0) {
		err = errno;
		close(dfd);
		if (err == ELOOP)
			return husk_seterr(err, "%s %s: is a symbolic link; refusing to follow it",
					   what, path);
		/* A FIFO without a reader: O_NONBLOCK made the open fail, not wait. */
		if (err == ENXIO)
			return husk_seterr(err, "%s %s: not a regular file (a FIFO); refusing to "
					   "write to it", what, path);
		return husk_seterr(err, "%s %s: %s", what, path, strerror(err));
	}
	err = 0;
	if (fstat(fd, &st) < 0)
		err = husk_seterr(errno, "%s %s: %s", what, path, strerror(errno));
	else if (!S_ISREG(st.st_mode))
		err = husk_seterr(EINVAL, "%s %s: not a regular file; refusing to write to it",
				  what, path);
	else if (st.st_nlink != 1)
		err = husk_seterr(EPERM, "%s %s: has %lu hard links; refusing to write to it",
				  what, path, (unsigned long)st.st_nlink);
	else if (!made && geteuid() == 0 && st.st_uid != 0 && st.st_uid != uid)
		err = husk_seterr(EPERM, "%s %s: belongs to uid %u, not to you; refusing to "
				  "overwrite it", what, path, (unsigned)st.st_uid);
	else if (!made && ftruncate(fd, 0) < 0)
		err = husk_seterr(errno, "%s %s: %s", what, path, strerror(errno));
	else if (made && uid != (uid_t)-1 && fchown(fd, uid, gid) < 0)
		err = husk_seterr(errno, "%s %s: chown: %s", what, path, strerror(errno));
	else if (fcntl(fd, F_SETFL, 0) < 0)
		err = husk_seterr(errno, "%s %s: %s", what, path, strerror(errno));
	if (err) {
		close(fd);
		if (made)
			unlinkat(dfd, leaf, 0);
		fd = err;
	}
	close(dfd);
	return fd;
}
