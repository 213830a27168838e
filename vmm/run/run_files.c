/*
 * run_files: the user's files for `husk run`, handled by the supervisor
 * only (the jailed VM process never sees a host path).
 *
 * --put: every source is packed into one gzip'd tar stream before the VM
 * process starts, back to back in an unlinked file the VM process reads.
 * --get: the guest's tar stream is extracted, with tar.c's checks, into a
 * private staging directory inside each target. The guest does not choose
 * what lands: only the requested path (and what lies below it) is accepted,
 * files lose their execute bits unless --get-keep-modes, everything belongs
 * to the invoking user (host_owner), and the stream's size, entry count and
 * inflate ratio are capped. Only when the run succeeds is the one staged
 * name renamed into each target (RENAME_NOREPLACE), for all targets or for
 * none. Nothing of a failed or killed run stays behind: staging directories
 * of husks that died are removed by the next run using that target.
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

#include "lib/host_file.h"
#include "run/run_int.h"
#include "job/tar.h"
#include "lib/util.h"

#define STAGE_PREFIX ".husk-get-"
/*
 * Past its first TAR_RATIO_GRACE bytes a --get stream may inflate at most
 * this much: text and binaries compress 2-20:1, so only a stream built to
 * make husk inflate (a run of zeros, endless padding) gets near it.
 */
#define GET_MAX_RATIO 256

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

static int get_extractor(struct run_files *f, unsigned idx)
{
	struct run_get *g;

	if (idx >= f->o->nr_get || f->gets[idx].complete)
		return husk_seterr(EPROTO, "the guest sent files that were not asked for");
	g = &f->gets[idx];
	if (!g->x) {
		struct tar_limits lim = {
			.max_bytes = TAR_DEFAULT_MAX_BYTES,
			.max_entries = TAR_DEFAULT_MAX_ENTRIES,
			.max_ratio = GET_MAX_RATIO,
			.only = f->o->get[idx].guest,
			.strip_exec = !f->o->get_keep_modes,
		};
		uid_t uid;
		gid_t gid;

		g->x = tar_extract_new(g->tmpfd, &lim);
		if (!g->x)
			return husk_seterr(ENOMEM, "out of memory for --get");
		host_owner(g->dirfd, &uid, &gid);
		if (uid != (uid_t)-1)
			tar_extract_set_owner(g->x, uid, gid);
	}
	return 0;
}

ssize_t run_files_get_data(struct run_files *f, unsigned idx, const void *p, size_t n,
			   size_t budget)
{
	ssize_t used;
	int err = get_extractor(f, idx);

	if (err)
		return err;
	used = tar_extract_feed_some(f->gets[idx].x, p, n, budget);
	if (used < 0)
		return husk_seterr(EPROTO, "--get %s: %s", f->o->get[idx].guest, husk_lasterr());
	return used;
}

bool run_files_get_busy(const struct run_files *f, unsigned idx)
{
	return idx < f->o->nr_get && f->gets[idx].x && tar_extract_busy(f->gets[idx].x);
}

int run_files_get_end(struct run_files *f, unsigned idx)
{
	struct run_get *g;
	int err;

	err = get_extractor(f, idx);
	if (err)
		return err;
	g = &f->gets[idx];
	if (tar_extract_finish(g->x) < 0)
		return husk_seterr(EPROTO, "--get %s: %s", f->o->get[idx].guest, husk_lasterr());
	g->complete = true;
	return 0;
}

/*
 * The one name a target receives: the first component of the requested
 * path (the extractor let nothing else in). "" when the guest sent an empty
 * archive (the path did not exist there).
 */
static int staged_name(struct run_files *f, unsigned i, char *name, size_t cap)
{
	struct run_get *g = &f->gets[i];
	const char *want = f->o->get[i].guest;
	size_t n = strcspn(want, "/");
	struct dirent *de;
	int fd, err = 0;
	DIR *d;

	if (!g->complete)
		return husk_seterr(EPROTO, "--get %s: the guest never sent it", want);
	if (n >= cap)
		return husk_seterr(ENAMETOOLONG, "--get %s: name too long", want);
	fd = dup(g->tmpfd);
	d = fd >= 0 ? fdopendir(fd) : NULL;
	if (!d) {
		if (fd >= 0)
			close(fd);
		return husk_seterr(errno, "cannot read the staging directory");
	}
	name[0] = '\0';
	rewinddir(d);
	while (!err && (de = readdir(d))) {
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		if (strlen(de->d_name) != n || memcmp(de->d_name, want, n)) {
			err = husk_seterr(EPERM, "--get %s: the staging directory holds \"%s\", "
					  "which was not asked for; nothing was copied", want,
					  de->d_name);
		} else {
			memcpy(name, want, n);
			name[n] = '\0';
		}
	}
	closedir(d);
	return err;
}

/*
 * Rename the staged name of every target into place, or nothing: a name
 * that is taken anywhere stops the whole commit before anything moves, and a
 * rename that fails half way moves back what already went.
 */
static int commit_gets(struct run_files *f)
{
	char names[RUN_MAX_GETS][256];
	struct stat st;
	unsigned i, done;
	int err = 0;

	for (i = 0; i < f->o->nr_get && !err; i++) {
		err = staged_name(f, i, names[i], sizeof(names[i]));
		if (!err && names[i][0] &&
		    fstatat(f->gets[i].dirfd, names[i], &st, AT_SYMLINK_NOFOLLOW) == 0)
			err = husk_seterr(EEXIST, "--get would overwrite %s/%s; nothing was "
					  "copied", f->o->get[i].host, names[i]);
	}
	for (done = 0; done < f->o->nr_get && !err; done++) {
		struct run_get *g = &f->gets[done];

		if (names[done][0] && renameat2(g->tmpfd, names[done], g->dirfd, names[done],
						RENAME_NOREPLACE) < 0)
			err = husk_seterr(errno, "cannot move %s into %s: %s; nothing was copied",
					  names[done], f->o->get[done].host, strerror(errno));
	}
	if (err && done) {
		/* done is one past the failed target: undo the ones before it. */
		for (i = 0; i + 1 < done; i++)
			if (names[i][0])
				renameat2(f->gets[i].dirfd, names[i], f->gets[i].tmpfd, names[i],
					  RENAME_NOREPLACE);
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
		if (g->tmpfd < 0)
			commit = false;		/* never staged: nothing to commit */
	}
	if (commit && f->o->nr_get)
		err = commit_gets(f);		/* its message stays in husk_lasterr() */
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
