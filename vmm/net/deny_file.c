/*
 * deny_file: read the host-wide egress deny file. See deny_file.h.
 *
 * The whole file is read into memory first (it is bounded), then parsed
 * line by line: a range is parsed by the same code as --deny, so the two
 * can never disagree about what a line means.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "net/deny_file.h"
#include "net/egress.h"
#include "lib/util.h"

const char *deny_file_path(void)
{
	const char *e = getenv(DENY_FILE_ENV);

	return e && *e ? e : DENY_FILE_DEFAULT;
}

/* The file's bytes, NUL-terminated, in *out (freed by the caller); -ENOENT if missing. */
static int slurp(const char *path, char **out, size_t *len)
{
	struct stat st;
	char *buf;
	size_t got = 0;
	ssize_t n;
	int fd, err;

	*out = NULL;
	*len = 0;
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
	if (fd < 0)
		return errno == ENOENT ? -ENOENT :
		       husk_seterr(errno, "egress deny file %s: %s", path, strerror(errno));
	if (fstat(fd, &st) < 0) {
		err = husk_seterr(errno, "egress deny file %s: %s", path, strerror(errno));
		goto out;
	}
	if (!S_ISREG(st.st_mode)) {
		err = husk_seterr(EINVAL, "egress deny file %s: not a regular file", path);
		goto out;
	}
	if (st.st_size > DENY_FILE_MAX_BYTES) {
		err = husk_seterr(EFBIG, "egress deny file %s: larger than %u bytes", path,
				  DENY_FILE_MAX_BYTES);
		goto out;
	}
	buf = malloc(st.st_size + 1);
	if (!buf) {
		err = husk_seterr(ENOMEM, "egress deny file %s: out of memory", path);
		goto out;
	}
	/* Read to the end, but never past the size checked above. */
	while (got < (size_t)st.st_size) {
		n = read(fd, buf + got, st.st_size - got);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			err = husk_seterr(errno, "egress deny file %s: %s", path,
					  strerror(errno));
			free(buf);
			goto out;
		}
		if (n == 0)
			break;
		got += n;
	}
	buf[got] = '\0';
	*out = buf;
	*len = got;
	err = 0;
out:
	close(fd);
	return err;
}

static bool blank(char c)
{
	return c == ' ' || c == '\t' || c == '\r';
}

/* One line (NUL-terminated, no '\n'): 0 if blank, 1 with *d filled, or -errno. */
static int parse_line(const char *path, unsigned no, char *line, size_t len,
		      struct run_deny *d)
{
	char *p = line, *end, *hash;

	if (len > DENY_FILE_MAX_LINE)
		return husk_seterr(EINVAL, "%s:%u: line longer than %d characters", path,
				   no, DENY_FILE_MAX_LINE);
	if (memchr(line, '\0', len))
		return husk_seterr(EINVAL, "%s:%u: NUL byte in the line", path, no);
	hash = strchr(line, '#');
	if (hash)
		*hash = '\0';
	while (blank(*p))
		p++;
	end = p + strlen(p);
	while (end > p && blank(end[-1]))
		*--end = '\0';
	if (!*p)
		return 0;
	if (strpbrk(p, " \t\r"))
		return husk_seterr(EINVAL, "%s:%u: '%s': one range per line", path, no, p);
	if (cli_parse_deny(p, d))
		return husk_seterr(EINVAL, "%s:%u: %s (one range per line, as --deny takes it)",
				   path, no, husk_lasterr());
	return 1;
}

int deny_file_read(const char *path, deny_file_fn fn, void *arg)
{
	struct run_deny d;
	char *buf, *line, *nl;
	size_t len;
	unsigned no = 0;
	int n = 0, err;

	err = slurp(path, &buf, &len);
	if (err == -ENOENT)
		return 0;
	if (err)
		return err;
	for (line = buf; line < buf + len; line = nl + 1) {
		nl = memchr(line, '\n', buf + len - line);
		if (!nl)
			nl = buf + len;
		*nl = '\0';
		no++;
		err = parse_line(path, no, line, nl - line, &d);
		if (err < 0)
			break;
		if (!err)
			continue;
		if (n == DENY_FILE_MAX_RANGES) {
			err = husk_seterr(E2BIG, "%s:%u: more than %d ranges", path, no,
					  DENY_FILE_MAX_RANGES);
			break;
		}
		err = fn(arg, &d, no);
		if (err < 0)
			break;
		n++;
		err = 0;
	}
	free(buf);
	return err < 0 ? err : n;
}

struct ranges {
	struct run_deny *d;
	unsigned n, cap;
};

static int collect(void *arg, const struct run_deny *d, unsigned line)
{
	struct ranges *r = arg;

	if (r->n == r->cap) {
		unsigned cap = r->cap ? r->cap * 2 : 64;
		struct run_deny *p = realloc(r->d, cap * sizeof(*p));

		if (!p)
			return husk_seterr(ENOMEM, "egress deny file: out of memory");
		r->d = p;
		r->cap = cap;
	}
	r->d[r->n++] = *d;
	return 0;
}

int deny_file_apply(const char *path)
{
	struct ranges r = { 0 };
	unsigned i;
	int n, err = 0;

	/* The whole file parses, or nothing of it is applied. */
	n = deny_file_read(path, collect, &r);
	for (i = 0; n > 0 && i < r.n && !err; i++) {
		err = egress_block_cidr(r.d[i].family, run_cidr_addr(&r.d[i]),
					r.d[i].prefixlen);
		if (err)
			husk_seterr(err, "egress deny file %s: %s", path, husk_lasterr());
	}
	free(r.d);
	return n < 0 ? n : err ? err : n;
}
