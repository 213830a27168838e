/*
 * run_files: the user's files for `husk run`, handled by the supervisor
 * only (the jailed VM process never sees a host path).
 *
 * --put: every source is packed into one gzip'd tar stream before the VM
 * process starts, back to back in an unlinked file the VM process reads.
 * --get: the guest's tar stream is extracted, with tar.c's checks, into a
 * private staging directory inside each target; only when the run succeeds
 * is every staged entry renamed into place (RENAME_NOREPLACE, all or nothing
 * per target). Nothing of a failed or killed run stays behind: staging
 * directories of husks that died are removed by the next run using that
 * target.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "run_int.h"
#include "tar.h"
#include "util.h"

#define STAGE_PREFIX ".husk-get-"

void run_files_init(struct run_files *f, const struct run_opts *o)
{
	unsigned i;

	memset(f, 0, sizeof(*f));
	f->o = o;
	f->put_fd = -1;
	for (i = 0; i < RUN_MAX_GETS; i++)
		f->gets[i].dirfd = f->gets[i].tmpfd = -1;
}

/* Staging directories ".husk-get-<pid>-<i>" whose husk is gone. */
static void clean_stale_stages(int dirfd)
{
	int fd = dup(dirfd);
	DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
	struct dirent *de;

	if (!d) {
		if (fd >= 0)
			close(fd);
		return;
	}
	while ((de = readdir(d))) {
		char *end;
		long pid;

		if (strncmp(de->d_name, STAGE_PREFIX, strlen(STAGE_PREFIX)))
			continue;
		pid = strtol(de->d_name + strlen(STAGE_PREFIX), &end, 10);
		if (pid <= 0 || *end != '-' || pid == getpid())
			continue;
		if (kill(pid, 0) < 0 && errno == ESRCH)
			rm_tree_at(dirfd, de->d_name);
	}
	closedir(d);
}

int run_files_open_gets(struct run_files *f)
{
	unsigned i;

	for (i = 0; i < f->o->nr_get; i++) {
		struct run_get *g = &f->gets[i];
		const char *host = f->o->get[i].host;

		g->dirfd = open(host, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		if (g->dirfd < 0)
			return husk_seterr(errno, "--get target %s: %s (it must be an existing "
					   "directory)", host, strerror(errno));
		clean_stale_stages(g->dirfd);
		snprintf(g->tmpname, sizeof(g->tmpname), STAGE_PREFIX "%d-%u", (int)getpid(), i);
		if (mkdirat(g->dirfd, g->tmpname, 0700) < 0)
			return husk_seterr(errno, "cannot create a staging directory in %s: %s",
					   host, strerror(errno));
		g->tmpfd = openat(g->dirfd, g->tmpname, O_RDONLY | O_DIRECTORY | O_NOFOLLOW |
				  O_CLOEXEC);
		if (g->tmpfd < 0)
			return husk_seterr(errno, "cannot open the staging directory in %s: %s",
					   host, strerror(errno));
	}
	return 0;
}

struct put_sink {
	int fd;
	uint64_t n;
};

static int put_write(void *arg, const void *buf, size_t len)
{
	struct put_sink *s = arg;
	const char *p = buf;

	while (len) {
		ssize_t w = write(s->fd, p, len);

		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0)
			return husk_seterr(errno, "cannot stage --put data: %s", strerror(errno));
		p += w;
		len -= w;
		s->n += w;
	}
	return 0;
}

int run_files_build_puts(struct run_files *f, const char *dir, uint64_t *lens)
{
	struct put_sink s;
	unsigned i;
	int err;

	if (!f->o->nr_put)
		return 0;
	f->put_fd = open(dir, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
	if (f->put_fd < 0)
		return husk_seterr(errno, "cannot stage --put files in %s: %s", dir,
				   strerror(errno));
	s.fd = f->put_fd;
	for (i = 0; i < f->o->nr_put; i++) {
		s.n = 0;
		err = tar_create(f->o->put[i].host, f->o->put[i].guest, put_write, &s);
		if (err)
			return husk_seterr(err, "--put %s: %s", f->o->put[i].host, husk_lasterr());
		lens[i] = s.n;
	}
	return 0;
}

int run_files_get_data(struct run_files *f, unsigned idx, const void *p, size_t n)
{
	struct run_get *g;

	if (idx >= f->o->nr_get || f->gets[idx].complete)
		return husk_seterr(EPROTO, "the guest sent files that were not asked for");
	g = &f->gets[idx];
	if (!g->x) {
		struct tar_limits lim = { .max_bytes = TAR_DEFAULT_MAX_BYTES, .max_entries = TAR_DEFAULT_MAX_ENTRIES };

		g->x = tar_extract_new(g->tmpfd, &lim);
		if (!g->x)
			return husk_seterr(ENOMEM, "out of memory for --get");
	}
	if (n && tar_extract_feed(g->x, p, n) < 0)
		return husk_seterr(EPROTO, "--get %s: %s", f->o->get[idx].guest, husk_lasterr());
	return 0;
}

int run_files_get_end(struct run_files *f, unsigned idx)
{
	struct run_get *g;
	int err;

	err = run_files_get_data(f, idx, NULL, 0);	/* creates the extractor */
	if (err)
		return err;
	g = &f->gets[idx];
	if (tar_extract_finish(g->x) < 0)
		return husk_seterr(EPROTO, "--get %s: %s", f->o->get[idx].guest, husk_lasterr());
	g->complete = true;
	return 0;
}

/* Move every staged entry into place, or nothing if any name is taken. */
static int commit_get(struct run_files *f, unsigned i)
{
	struct run_get *g = &f->gets[i];
	struct dirent *de;
	struct stat st;
	int fd, err = 0, pass;
	DIR *d;

	if (!g->complete)
		return husk_seterr(EPROTO, "--get %s: the guest never sent it", f->o->get[i].guest);
	for (pass = 0; pass < 2 && !err; pass++) {
		fd = dup(g->tmpfd);
		d = fd >= 0 ? fdopendir(fd) : NULL;
		if (!d) {
			if (fd >= 0)
				close(fd);
			return husk_seterr(errno, "cannot read the staging directory");
		}
		rewinddir(d);
		while (!err && (de = readdir(d))) {
			if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
				continue;
			if (pass == 0 && fstatat(g->dirfd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0)
				err = husk_seterr(EEXIST, "--get would overwrite %s/%s; nothing was "
						  "copied", f->o->get[i].host, de->d_name);
			else if (pass == 1 && renameat2(g->tmpfd, de->d_name, g->dirfd, de->d_name,
							RENAME_NOREPLACE) < 0)
				err = husk_seterr(errno, "cannot move %s into %s: %s", de->d_name,
						  f->o->get[i].host, strerror(errno));
		}
		closedir(d);
	}
	return err;
}

bool run_files_close(struct run_files *f, bool commit)
{
	unsigned i;
	int err = 0;

	for (i = 0; i < f->o->nr_get; i++) {
		struct run_get *g = &f->gets[i];

		if (g->x)
			tar_extract_free(g->x);
		g->x = NULL;
		if (commit && !err && g->tmpfd >= 0)
			err = commit_get(f, i);	/* its message stays in husk_lasterr() */
	}
	for (i = 0; i < f->o->nr_get; i++) {
		struct run_get *g = &f->gets[i];

		if (g->tmpfd >= 0)
			close(g->tmpfd);
		if (g->dirfd >= 0) {
			rm_tree_at(g->dirfd, g->tmpname);
			close(g->dirfd);
		}
		g->tmpfd = g->dirfd = -1;
	}
	if (f->put_fd >= 0)
		close(f->put_fd);
	f->put_fd = -1;
	return commit && !err && f->o->nr_get;
}
