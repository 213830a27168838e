/*
 * accounts: /etc/passwd and /etc/group lookups without NSS. See accounts.h.
 */
#include <errno.h>
#include <grp.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/accounts.h"

const char *accounts_passwd_path = "/etc/passwd";
const char *accounts_group_path = "/etc/group";

/*
 * Entries come through fgetpwent_r/fgetgrent_r, which parse a stream and
 * never consult nsswitch.conf. A line longer than the buffer (a group with
 * many members) is read again into a bigger one: on ERANGE glibc rewinds
 * the stream to the start of that line.
 */
struct reader {
	FILE *f;
	char *buf;
	size_t len;
};

static bool reader_open(struct reader *r, const char *path)
{
	r->f = fopen(path, "re");
	r->len = 1024;
	r->buf = r->f ? malloc(r->len) : NULL;
	if (r->f && !r->buf) {
		fclose(r->f);
		r->f = NULL;
	}
	return r->f;
}

static void reader_close(struct reader *r)
{
	free(r->buf);
	fclose(r->f);
}

/* Doubles the buffer after ERANGE; false when it cannot (or must not) grow. */
static bool reader_grow(struct reader *r)
{
	char *b;

	if (r->len >= (1u << 20))
		return false;	/* no sane account line is a megabyte */
	b = realloc(r->buf, r->len * 2);
	if (!b)
		return false;
	r->buf = b;
	r->len *= 2;
	return true;
}

static struct passwd *next_user(struct reader *r, struct passwd *pw)
{
	struct passwd *out;
	int e;

	while ((e = fgetpwent_r(r->f, pw, r->buf, r->len, &out)) == ERANGE)
		if (!reader_grow(r))
			return NULL;
	return e ? NULL : out;
}

static struct group *next_group(struct reader *r, struct group *gr)
{
	struct group *out;
	int e;

	while ((e = fgetgrent_r(r->f, gr, r->buf, r->len, &out)) == ERANGE)
		if (!reader_grow(r))
			return NULL;
	return e ? NULL : out;
}

/* The user with this uid, copied out: its name (cap bytes) and primary gid. */
static bool find_user(uid_t uid, char *name, size_t cap, gid_t *gid)
{
	struct reader r;
	struct passwd pw, *p;
	bool hit = false;

	if (!reader_open(&r, accounts_passwd_path))
		return false;
	while (!hit && (p = next_user(&r, &pw))) {
		if (p->pw_uid != uid)
			continue;
		hit = true;
		if (name)
			snprintf(name, cap, "%s", p->pw_name);
		if (gid)
			*gid = p->pw_gid;
	}
	reader_close(&r);
	return hit;
}

bool account_uid_taken(uid_t uid)
{
	return find_user(uid, NULL, 0, NULL);
}

/*
 * The first group that matches: by gid when name is NULL, else by name.
 * With member set, the group must also list that user.
 */
static bool find_group(const char *name, gid_t gid, const char *member, gid_t *out)
{
	struct reader r;
	struct group gr, *g;
	bool hit = false;
	char **m;

	if (!reader_open(&r, accounts_group_path))
		return false;
	while (!hit && (g = next_group(&r, &gr))) {
		if (name ? strcmp(g->gr_name, name) != 0 : g->gr_gid != gid)
			continue;
		if (member) {
			for (m = g->gr_mem; m && *m && !hit; m++)
				hit = !strcmp(*m, member);
			if (!hit)
				continue;
		}
		hit = true;
		if (out)
			*out = g->gr_gid;
	}
	reader_close(&r);
	return hit;
}

bool account_gid_taken(gid_t gid)
{
	return find_group(NULL, gid, NULL, NULL);
}

int account_group_gid(const char *name, gid_t *gid)
{
	return find_group(name, 0, NULL, gid) ? 0 : -ENOENT;
}

int account_user_gid(uid_t uid, gid_t *gid)
{
	return find_user(uid, NULL, 0, gid) ? 0 : -ENOENT;
}

bool account_in_group(uid_t uid, gid_t want)
{
	char name[256];
	gid_t primary;

	if (!find_user(uid, name, sizeof(name), &primary))
		return false;
	return primary == want || find_group(NULL, want, name, NULL);
}
