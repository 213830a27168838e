/*
 * oci/bundle: find config.json and decide whose it is. See bundle.h.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "lib/accounts.h"
#include "lib/util.h"
#include "oci/bundle.h"

#define MAX_LINKS 40	/* as the kernel's path walk */
#define NOGROUP 65534

struct walk {
	int dfd;		/* the directory reached (O_PATH) */
	unsigned links;
	char *why;		/* the first thing someone else can change, or "" */
	size_t why_len;
};

static bool ours(uid_t u)
{
	return u == 0 || u == geteuid();
}

/* fd's path, for messages. */
static void fd_path(int fd, char *out, size_t len)
{
	char p[32];
	ssize_t n;

	snprintf(p, sizeof(p), "/proc/self/fd/%d", fd);
	n = readlink(p, out, len - 1);
	out[n > 0 ? n : 0] = '\0';
}

/*
 * Note what is at dir/name (name NULL: dir itself) when someone but root
 * and us can change it: its owner, or anyone who may write it (a sticky
 * directory's entries are each checked as they are passed).
 */
static void note(struct walk *w, int dir, const char *name, const struct stat *st)
{
	bool others = !S_ISLNK(st->st_mode) && (st->st_mode & 022) &&
		      !(S_ISDIR(st->st_mode) && (st->st_mode & S_ISVTX));
	char path[PATH_MAX];

	if (w->why[0] || (ours(st->st_uid) && !others))
		return;
	fd_path(dir, path, sizeof(path));
	if (name)
		snprintf(path + strlen(path), sizeof(path) - strlen(path), "%s%s",
			 strcmp(path, "/") ? "/" : "", name);
	if (!ours(st->st_uid))
		snprintf(w->why, w->why_len, "%s belongs to uid %u", path, (unsigned)st->st_uid);
	else
		snprintf(w->why, w->why_len, "%s may be written by others (mode %04o)", path,
			 (unsigned)(st->st_mode & 07777));
}

static int walk(struct walk *w, const char *path);

/* One component: a directory is entered, a symbolic link followed by hand. */
static int step(struct walk *w, const char *name)
{
	char target[PATH_MAX];
	struct stat st;
	ssize_t n;
	int fd;

	if (fstatat(w->dfd, name, &st, AT_SYMLINK_NOFOLLOW))
		return -errno;
	if (S_ISLNK(st.st_mode)) {
		note(w, w->dfd, name, &st);
		if (++w->links > MAX_LINKS)
			return -ELOOP;
		n = readlinkat(w->dfd, name, target, sizeof(target) - 1);
		if (n < 0)
			return -errno;
		target[n] = '\0';
		return walk(w, target);
	}
	fd = openat(w->dfd, name, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	close(w->dfd);
	w->dfd = fd;
	if (fstat(fd, &st))
		return -errno;
	note(w, fd, NULL, &st);
	return 0;
}

/* path from where the walk is (or from / when absolute), noting as it goes. */
static int walk(struct walk *w, const char *path)
{
	char comp[NAME_MAX + 1];
	const char *p = path;
	struct stat st;
	int err;

	if (*p == '/') {
		int fd = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);

		if (fd < 0 || fstat(fd, &st)) {
			err = -errno;
			if (fd >= 0)
				close(fd);
			return err;
		}
		if (w->dfd >= 0)
			close(w->dfd);
		w->dfd = fd;
		note(w, fd, NULL, &st);
	}
	while (*p) {
		size_t n = strcspn(p, "/");

		if (n > NAME_MAX)
			return -ENAMETOOLONG;
		memcpy(comp, p, n);
		comp[n] = '\0';
		p += n;
		p += strspn(p, "/");
		if (n && strcmp(comp, ".") && (err = step(w, comp)))
			return err;
	}
	return 0;
}

/*
 * The user whose config.json it is: its uid, with that user's primary group
 * (/etc/passwd, else nogroup) and no other: fewer rights rather than more.
 */
static void author_of(const struct stat *st, struct image_reader *a)
{
	a->uid = st->st_uid;
	if (account_user_gid(st->st_uid, &a->gid))
		a->gid = NOGROUP;
}

static int read_config(struct walk *w, size_t max, struct oci_bundle *b, struct stat *st)
{
	int fd = openat(w->dfd, "config.json", O_RDONLY | O_NOFOLLOW | O_CLOEXEC), err;

	if (fd < 0)
		return husk_seterr(errno, "%s/config.json: %s", b->dir, strerror(errno));
	if (fstat(fd, st) || !S_ISREG(st->st_mode) || (size_t)st->st_size > max) {
		close(fd);
		return husk_seterr(EINVAL, "%s/config.json: not a regular file of at most %zu bytes",
				   b->dir, max);
	}
	b->config = malloc(st->st_size + 1);
	err = b->config ? read_exact_at(fd, b->config, st->st_size, 0) : -ENOMEM;
	close(fd);
	if (err) {
		oci_bundle_free(b);
		return husk_seterr(-err, "%s/config.json: cannot read it", b->dir);
	}
	b->config[st->st_size] = '\0';
	b->config_len = st->st_size;
	note(w, w->dfd, "config.json", st);
	return 0;
}

int oci_bundle_read(const char *bundle, size_t max, struct oci_bundle *b)
{
	struct walk w = { .dfd = -1, .why = b->why, .why_len = sizeof(b->why) };
	char path[PATH_MAX];
	struct stat st;
	int err;

	memset(b, 0, sizeof(*b));
	/* A relative bundle from the working directory's real path: its whole way is checked. */
	if (bundle[0] != '/' && !getcwd(path, sizeof(path)))
		return husk_seterr(errno, "--bundle %s: %s", bundle, strerror(errno));
	if ((bundle[0] == '/' ? snprintf(path, sizeof(path), "%s", bundle) :
	     snprintf(path + strlen(path), sizeof(path) - strlen(path), "/%s", bundle)) >=
	    (int)sizeof(path))
		return husk_seterr(ENAMETOOLONG, "--bundle %s: too long", bundle);
	err = walk(&w, path);
	if (err) {
		if (w.dfd >= 0)
			close(w.dfd);
		return husk_seterr(-err, "--bundle %s: %s", bundle, strerror(-err));
	}
	fd_path(w.dfd, b->dir, sizeof(b->dir));
	err = read_config(&w, max, b, &st);
	close(w.dfd);
	if (err)
		return err;
	b->engine = !b->why[0];
	if (!b->engine && ours(st.st_uid)) {
		oci_bundle_free(b);
		return husk_seterr(EPERM, "%s/config.json belongs to %s, but %s: husk-runc cannot "
				   "tell who wrote it (an engine's bundle lies on a way that only "
				   "root, or husk-runc's own user, can change)", b->dir,
				   st.st_uid ? "husk-runc's user" : "root", b->why);
	}
	if (!b->engine)
		author_of(&st, &b->author);
	return 0;
}

void oci_bundle_free(struct oci_bundle *b)
{
	free(b->config);
	b->config = NULL;
}
