/*
 * oci/state: the state directory of husk's OCI runtime (state.h). The
 * files in it are husk's own, but the directory may be shared with other
 * users of --root: state.json is read with a size bound and checked like
 * any input, and written to a temporary name, then renamed.
 */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lib/util.h"
#include "oci/state.h"
#include "sandbox/cgroup.h"


int oci_id_check(const char *id)
{
	size_t n = strlen(id);

	if (!n || n > OCI_ID_MAX || !strcmp(id, ".") || !strcmp(id, ".."))
		return husk_seterr(EINVAL, "container ID '%s': 1 to %d of A-Z a-z 0-9 _ + - .",
				   id, OCI_ID_MAX);
	for (size_t i = 0; i < n; i++) {
		char c = id[i];

		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
		      c == '_' || c == '+' || c == '-' || c == '.'))
			return husk_seterr(EINVAL, "container ID '%s': 1 to %d of A-Z a-z 0-9 _ + "
					   "- .", id, OCI_ID_MAX);
	}
	return 0;
}

int oci_dir(const char *root, const char *id, char *out, size_t len)
{
	if ((size_t)snprintf(out, len, "%s/%s", root, id) >= len)
		return husk_seterr(ENAMETOOLONG, "--root %s is too long", root);
	return 0;
}

int oci_state_write(const char *dir, const struct oci_state *st)
{
	char tmp[PATH_MAX], path[PATH_MAX];
	json_t *ann = st->annotations ? json_loads(st->annotations, 0, NULL) : json_object();
	json_t *o = json_pack("{s:s,s:s,s:i,s:I,s:s,s:b,s:s,s:o}", "ociVersion", OCI_VERSION,
			      "id", st->id, "pid", (int)st->pid, "starttime",
			      (json_int_t)st->starttime, "bundle", st->bundle, "started",
			      st->started, "created", st->created, "annotations",
			      ann ? ann : json_object());
	char *s = o ? json_dumps(o, JSON_COMPACT) : NULL;
	int fd, err;

	json_decref(o);
	if (!s)
		return husk_seterr(ENOMEM, "out of memory");
	snprintf(tmp, sizeof(tmp), "%s/.state.json.%d", dir, (int)getpid());
	snprintf(path, sizeof(path), "%s/state.json", dir);
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd < 0) {
		free(s);
		return husk_seterr(errno, "cannot write %s: %s", tmp, strerror(errno));
	}
	err = write_all(fd, s, strlen(s));
	free(s);
	if (!err && fsync(fd))
		err = -errno;
	close(fd);
	if (!err && rename(tmp, path))
		err = -errno;
	if (err) {
		unlink(tmp);
		return husk_seterr(-err, "cannot write %s: %s", path, strerror(-err));
	}
	return 0;
}

int oci_state_read(const char *dir, struct oci_state *st)
{
	char path[PATH_MAX];
	json_error_t je;
	json_t *o, *ann;
	const char *id, *bundle, *created;
	json_int_t pid, t;

	memset(st, 0, sizeof(*st));
	snprintf(path, sizeof(path), "%s/state.json", dir);
	if (access(path, F_OK))
		return husk_seterr(ENOENT, "container does not exist");
	o = json_load_file(path, JSON_REJECT_DUPLICATES, &je);
	if (!o)
		return husk_seterr(EINVAL, "%s: %s", path, je.text);
	id = json_string_value(json_object_get(o, "id"));
	bundle = json_string_value(json_object_get(o, "bundle"));
	created = json_string_value(json_object_get(o, "created"));
	pid = json_integer_value(json_object_get(o, "pid"));
	t = json_integer_value(json_object_get(o, "starttime"));
	ann = json_object_get(o, "annotations");
	if (!id || !bundle || !created || pid <= 0 || pid > 1 << 22 || t < 0 ||
	    strlen(id) > OCI_ID_MAX || strlen(bundle) >= sizeof(st->bundle) ||
	    strlen(created) >= sizeof(st->created) || !json_is_object(ann)) {
		json_decref(o);
		return husk_seterr(EINVAL, "%s is damaged", path);
	}
	snprintf(st->id, sizeof(st->id), "%s", id);
	snprintf(st->bundle, sizeof(st->bundle), "%s", bundle);
	snprintf(st->created, sizeof(st->created), "%s", created);
	st->pid = pid;
	st->starttime = t;
	st->started = json_is_true(json_object_get(o, "started"));
	st->annotations = json_dumps(ann, JSON_COMPACT);
	json_decref(o);
	return 0;
}

void oci_state_free(struct oci_state *st)
{
	free(st->annotations);
	st->annotations = NULL;
}

uint64_t oci_proc_starttime(pid_t pid)
{
	char path[64], buf[1024], *p;
	unsigned long long t = 0;
	char state;
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return 0;
	buf[n] = '\0';
	/* The name may hold anything, ')' included: the state follows the last one. */
	p = strrchr(buf, ')');
	if (!p || sscanf(p + 1, " %c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %*u %*u %*d %*d "
			 "%*d %*d %*d %*d %llu", &state, &t) != 2)
		return 0;
	if (state == 'Z' || state == 'X')
		return 0;
	return t;
}

bool oci_stopped(const struct oci_state *st)
{
	uint64_t t = oci_proc_starttime(st->pid);

	return !t || t != st->starttime;
}

enum oci_status oci_status(const struct oci_state *st)
{
	if (oci_stopped(st))
		return OCI_STOPPED;
	if (cgroup_owned_frozen(st->pid, st->starttime) == 1)
		return OCI_PAUSED;
	return st->started ? OCI_RUNNING : OCI_CREATED;
}

const char *oci_status_name(enum oci_status s)
{
	static const char *const names[] = { "creating", "created", "running", "stopped",
					      "paused" };

	return names[s];
}
