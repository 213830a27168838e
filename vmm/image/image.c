/*
 * image: import container images into husk's store, list, find and remove
 * them. See image.h.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "image/ext4.h"
#include "image/image.h"
#include "image/layer.h"
#include "image/source.h"
#include "lib/util.h"

#define META_SCHEMA "husk.image/1"
#define BUILD_PREFIX ".build-"

/* ---- the store directory and its lock ---- */

static int store_open(const char *dir, bool create)
{
	int fd;

	if (create) {
		int err = mkdir_p(dir, 0700);

		if (err)
			return husk_seterr(-err, "image store %s: %s", dir, husk_lasterr());
	}
	fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return husk_seterr(errno, "image store %s: %s", dir, strerror(errno));
	return fd;
}

static int store_lock(int dfd)
{
	int fd = openat(dfd, ".lock", O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);

	if (fd < 0)
		return husk_seterr(errno, "image store lock: %s", strerror(errno));
	while (flock(fd, LOCK_EX) && errno == EINTR)
		;
	return fd;
}

static json_t *meta_load(int dfd, const char *key)
{
	char name[80];
	json_error_t je;
	json_t *j;
	int fd;

	snprintf(name, sizeof(name), "%s.json", key);
	fd = openat(dfd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return NULL;
	j = json_loadfd(fd, JSON_REJECT_DUPLICATES, &je);
	close(fd);
	if (j && !json_is_object(j)) {
		json_decref(j);
		j = NULL;
	}
	return j;
}

static int meta_save(int dfd, const char *key, json_t *m)
{
	char name[80], tmp[96];
	int fd, err = 0;
	char *text = json_dumps(m, JSON_COMPACT | JSON_SORT_KEYS);

	if (!text)
		return husk_seterr(ENOMEM, "out of memory");
	snprintf(name, sizeof(name), "%s.json", key);
	snprintf(tmp, sizeof(tmp), ".%s.json.%d", key, (int)getpid());
	fd = openat(dfd, tmp, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0 || write_all_at(fd, text, strlen(text), 0) || fsync(fd))
		err = husk_seterr(errno ? errno : EIO, "writing %s: %s", name, strerror(errno));
	if (fd >= 0)
		close(fd);
	if (!err && renameat(dfd, tmp, dfd, name))
		err = husk_seterr(errno, "writing %s: %s", name, strerror(errno));
	if (err)
		unlinkat(dfd, tmp, 0);
	free(text);
	return err;
}

/* Every key of the store, in directory order. */
static int list_keys(int dfd, char (**keys)[65], size_t *n)
{
	DIR *d = fdopendir(dup(dfd));
	struct dirent *e;
	char (*k)[65] = NULL;

	*n = 0;
	if (!d)
		return husk_seterr(errno, "image store: %s", strerror(errno));
	while ((e = readdir(d))) {
		size_t l = strlen(e->d_name);
		char (*nk)[65];

		if (l != 69 || strcmp(e->d_name + 64, ".json"))
			continue;
		nk = realloc(k, (*n + 1) * sizeof(*k));
		if (!nk) {
			free(k);
			closedir(d);
			return husk_seterr(ENOMEM, "out of memory");
		}
		k = nk;
		memcpy(k[*n], e->d_name, 64);
		k[*n][64] = '\0';
		if (image_is_key(k[*n], 64))
			(*n)++;
	}
	closedir(d);
	*keys = k;
	return 0;
}

static bool has_name(json_t *m, const char *name)
{
	json_t *v;
	size_t i;

	json_array_foreach(json_object_get(m, "names"), i, v)
		if (json_string_value(v) && !strcmp(json_string_value(v), name))
			return true;
	return false;
}

/* Drop name from every image but keep; under the lock. */
static int move_name(int dfd, const char *name, const char *keep)
{
	char (*keys)[65];
	size_t n, i, j;
	int err = list_keys(dfd, &keys, &n);

	for (i = 0; !err && i < n; i++) {
		json_t *m, *names, *v;

		if (keep && !strcmp(keys[i], keep))
			continue;
		m = meta_load(dfd, keys[i]);
		if (!m || !has_name(m, name)) {
			json_decref(m);
			continue;
		}
		names = json_object_get(m, "names");
		for (j = json_array_size(names); j-- > 0;) {
			v = json_array_get(names, j);
			if (json_string_value(v) && !strcmp(json_string_value(v), name))
				json_array_remove(names, j);
		}
		err = meta_save(dfd, keys[i], m);
		json_decref(m);
	}
	free(keys);
	return err;
}

/* Build directories of imports that died: their pid is in the name. */
static void sweep_builds(int dfd)
{
	DIR *d = fdopendir(dup(dfd));
	struct dirent *e;

	if (!d)
		return;
	while ((e = readdir(d))) {
		long pid;
		char *end;

		if (strncmp(e->d_name, BUILD_PREFIX, strlen(BUILD_PREFIX)))
			continue;
		pid = strtol(e->d_name + strlen(BUILD_PREFIX), &end, 10);
		if (pid > 0 && *end == '-' && kill((pid_t)pid, 0) && errno == ESRCH)
			rm_tree_at(dfd, e->d_name);
	}
	closedir(d);
}

/* ---- import ---- */

/*
 * A config's string array field into r: absent or null is fine, anything
 * else must be an array of at most max strings of at most 4096 bytes.
 */
static int str_array(json_t *o, const char *key, size_t max, json_t *r)
{
	json_t *a = json_object_get(o, key), *v;
	size_t i;

	if (!a || json_is_null(a))
		return 0;
	if (!json_is_array(a) || json_array_size(a) > max)
		return husk_seterr(EINVAL, "the image config's %s is not an array of at most "
				   "%zu strings", key, max);
	json_array_foreach(a, i, v)
		if (!json_is_string(v) || strlen(json_string_value(v)) > 4096)
			return husk_seterr(EINVAL, "the image config's %s has an entry that is "
					   "not a string of at most 4096 bytes", key);
	return json_object_set(r, key, a);
}

/* What a job needs of the image config ("config" of the OCI config). */
static int job_config(const char *text, json_t **out)
{
	json_t *c, *r = json_object(), *cfg;
	const char *s;
	json_error_t je;

	*out = r;
	if (!text)
		return 0;
	c = json_loads(text, JSON_REJECT_DUPLICATES, &je);
	if (!json_is_object(c)) {
		json_decref(c);
		return husk_seterr(EINVAL, "the image config is not a JSON object");
	}
	s = json_string_value(json_object_get(c, "architecture"));
	if (s && strcmp(s, "amd64")) {
		json_decref(c);
		return husk_seterr(EINVAL, "the image is for %s; husk runs amd64 guests", s);
	}
	cfg = json_object_get(c, "config");
	if (json_is_object(cfg)) {
		if (str_array(cfg, "Entrypoint", IMAGE_MAX_ARGS, r) ||
		    str_array(cfg, "Cmd", IMAGE_MAX_ARGS, r) ||
		    str_array(cfg, "Env", IMAGE_MAX_ARGS, r)) {
			json_decref(c);
			return -EINVAL;
		}
		s = json_string_value(json_object_get(cfg, "WorkingDir"));
		if (s && *s == '/' && strlen(s) < 1024)
			json_object_set_new(r, "WorkingDir", json_string(s));
		s = json_string_value(json_object_get(cfg, "User"));
		if (s && strlen(s) < 256)
			json_object_set_new(r, "User", json_string(s));
	}
	json_decref(c);
	return 0;
}

/* A tar header for husk's own additions (ustar, owned by root). */
static void add_entry(unsigned char *buf, size_t *off, const char *name, char type,
		      unsigned mode, const void *data, size_t len)
{
	unsigned char *h = buf + *off;
	unsigned sum = 0, i;

	memset(h, 0, 512);
	snprintf((char *)h, 100, "%s", name);
	snprintf((char *)h + 100, 8, "%07o", mode);
	snprintf((char *)h + 108, 8, "%07o", 0);
	snprintf((char *)h + 116, 8, "%07o", 0);
	snprintf((char *)h + 124, 12, "%011llo", (unsigned long long)len);
	snprintf((char *)h + 136, 12, "%011o", 0);
	h[156] = type;
	memcpy(h + 257, "ustar", 6);
	memcpy(h + 263, "00", 2);
	memset(h + 148, ' ', 8);
	for (i = 0; i < 512; i++)
		sum += h[i];
	snprintf((char *)h + 148, 8, "%06o", sum);
	*off += 512;
	if (len) {
		memcpy(buf + *off, data, len);
		*off += (len + 511) & ~(size_t)511;
	}
}

/*
 * What husk puts in every image, as one more layer: guest-init, the mount
 * points it needs on a read-only root, an empty resolv.conf it can bind
 * the job's over (replacing a link into /run, which is a tmpfs here).
 */
static int husk_layer(const char *dir, const char *init, int *out)
{
	struct stat st;
	unsigned char *buf;
	void *data;
	size_t off = 0, cap;
	int ifd, fd, err;

	ifd = open(init, O_RDONLY | O_CLOEXEC);
	if (ifd < 0 || fstat(ifd, &st) || !S_ISREG(st.st_mode) || st.st_size > (64 << 20)) {
		err = husk_seterr(errno ? errno : EINVAL, "guest-init %s: %s", init,
				  errno ? strerror(errno) : "not a regular file");
		if (ifd >= 0)
			close(ifd);
		return err;
	}
	cap = 512 * 16 + st.st_size + 1024;
	buf = calloc(1, cap);
	data = malloc(st.st_size ? st.st_size : 1);
	err = buf && data ? read_exact_at(ifd, data, st.st_size, 0) : -ENOMEM;
	close(ifd);
	if (err) {
		free(buf);
		free(data);
		return husk_seterr(-err, "guest-init %s: %s", init,
				   err == -ENOMEM ? "out of memory" : husk_lasterr());
	}
	add_entry(buf, &off, ".husk", '5', 0755, NULL, 0);
	add_entry(buf, &off, "proc", '5', 0555, NULL, 0);
	add_entry(buf, &off, "sys", '5', 0555, NULL, 0);
	add_entry(buf, &off, "dev", '5', 0755, NULL, 0);
	add_entry(buf, &off, "run", '5', 0755, NULL, 0);
	add_entry(buf, &off, "tmp", '5', 01777, NULL, 0);
	add_entry(buf, &off, "tmp/workspace", '5', 0755, NULL, 0);
	add_entry(buf, &off, "etc", '5', 0755, NULL, 0);
	add_entry(buf, &off, "etc/resolv.conf", '0', 0644, NULL, 0);
	add_entry(buf, &off, ".husk/init", '0', 0755, data, st.st_size);
	free(data);
	off += 1024;	/* two zero blocks */
	fd = open(dir, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
	if (fd < 0) {
		free(buf);
		return husk_seterr(errno, "a temporary file in %s: %s", dir, strerror(errno));
	}
	err = write_all_at(fd, buf, off, 0);
	free(buf);
	if (err) {
		close(fd);
		return husk_seterr(-err, "writing husk's layer: %s", strerror(-err));
	}
	*out = fd;
	return 0;
}

static int file_digest(const char *path, char out[IMAGE_DIGEST_LEN])
{
	int fd = open(path, O_RDONLY | O_CLOEXEC), err;

	if (fd < 0)
		return husk_seterr(errno, "%s: %s", path, strerror(errno));
	err = image_sha256_fd(fd, out);
	close(fd);
	return err ? husk_seterr(-err, "%s: %s", path, husk_lasterr()) : 0;
}

struct import_state {
	int dfd;
	char build[64];
	int rootfd;
	struct layer_tree *t;
	struct image_source s;
	json_t *meta;
};

static int build_image(const struct image_import_opts *o, struct import_state *S,
		       const char *key)
{
	char stage[PATH_MAX], img[PATH_MAX];
	const struct layer_stats *ls;
	int fd = -1, err;
	unsigned i;

	snprintf(S->build, sizeof(S->build), BUILD_PREFIX "%d-%s", (int)getpid(), key);
	rm_tree_at(S->dfd, S->build);
	if (mkdirat(S->dfd, S->build, 0700))
		return husk_seterr(errno, "%s/%s: %s", o->dir, S->build, strerror(errno));
	snprintf(stage, sizeof(stage), "%s/%s/root", o->dir, S->build);
	snprintf(img, sizeof(img), "%s/%s/image.ext4", o->dir, S->build);
	if (mkdir(stage, 0700))
		return husk_seterr(errno, "%s: %s", stage, strerror(errno));
	S->rootfd = open(stage, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (S->rootfd < 0)
		return husk_seterr(errno, "%s: %s", stage, strerror(errno));
	S->t = layer_tree_new(S->rootfd, NULL);
	if (!S->t)
		return -EINVAL;	/* husk_lasterr() says why */
	for (i = 0; i < S->s.n_layers; i++) {
		err = layer_apply_fd(S->t, S->s.layers[i].fd, i + 1);
		if (err)
			return err;
	}
	err = husk_layer(o->dir, o->init, &fd);
	if (err)
		return err;
	err = layer_apply_fd(S->t, fd, S->s.n_layers + 1);
	close(fd);
	if (err)
		return husk_seterr(-err, "adding guest-init to the image: %s", husk_lasterr());
	ls = layer_tree_stats(S->t);
	return ext4_build(stage, img, ls->bytes, ls->entries + 64, S->t);
}

static void print_result(const struct image_import_opts *o, const char *key, json_t *meta,
			 bool again, double secs)
{
	if (o->json) {
		json_t *r = json_deep_copy(meta);
		char *t;

		json_object_set_new(r, "imported", json_boolean(!again));
		json_object_set_new(r, "seconds", json_real(secs));
		t = json_dumps(r, JSON_COMPACT | JSON_SORT_KEYS);
		if (t)
			puts(t);
		free(t);
		json_decref(r);
		return;
	}
	printf("%s %s%s%s (%lld MiB, %lld layer(s))%s\n", again ? "already imported:" : "imported:",
	       key, o->name ? " as " : "", o->name ? o->name : "",
	       (long long)(json_integer_value(json_object_get(meta, "size")) >> 20),
	       (long long)json_integer_value(json_object_get(meta, "layers")),
	       again ? "" : "");
}

int image_import(const struct image_import_opts *o)
{
	struct import_state S = { .dfd = -1, .rootfd = -1 };
	char idig[IMAGE_DIGEST_LEN], keyd[IMAGE_DIGEST_LEN], key[65], name[96], img[PATH_MAX];
	char ids[3 * IMAGE_DIGEST_LEN];
	uint64_t t0 = now_us();
	json_t *cfg = NULL, *m;
	bool again = false;
	struct stat st;
	int err, lock = -1;

	if (o->name && (err = image_name_check(o->name)))
		return err;
	S.dfd = store_open(o->dir, true);
	if (S.dfd < 0)
		return S.dfd;
	sweep_builds(S.dfd);
	err = file_digest(o->init, idig);
	if (err)
		goto out;
	if (o->tree)
		err = image_source_open_tree(o->src, o->dir, o->read_as, &S.s);
	else
		err = image_source_open(o->src, o->ref, o->dir, &S.s);
	if (err)
		goto out;
	err = job_config(S.s.config, &cfg);
	if (err)
		goto out;
	snprintf(ids, sizeof(ids), "%s %s ext4-1", S.s.id, idig);
	image_sha256(ids, strlen(ids), keyd);
	snprintf(key, sizeof(key), "%s", keyd + 7);
	snprintf(name, sizeof(name), "%s.ext4", key);
	m = meta_load(S.dfd, key);
	if (m && !fstatat(S.dfd, name, &st, AT_SYMLINK_NOFOLLOW) && S_ISREG(st.st_mode)) {
		again = true;
	} else {
		json_decref(m);
		m = NULL;
		err = build_image(o, &S, key);
		if (err)
			goto out;
		snprintf(img, sizeof(img), "%s/image.ext4", S.build);
		if (fstatat(S.dfd, img, &st, 0)) {
			err = husk_seterr(errno, "the new image: %s", strerror(errno));
			goto out;
		}
		m = json_pack("{s:s, s:s, s:s, s:s, s:s, s:s, s:I, s:I, s:I, s:[], s:O}",
			      "schema", META_SCHEMA, "key", key, "id", S.s.id,
			      "source", o->src, "kind", S.s.kind, "init", idig,
			      "created", (json_int_t)time(NULL), "size", (json_int_t)st.st_size,
			      "layers", (json_int_t)S.s.n_layers, "names", "config", cfg);
		if (!m) {
			err = husk_seterr(ENOMEM, "out of memory");
			goto out;
		}
		{
			const struct layer_stats *ls = layer_tree_stats(S.t);

			json_object_set_new(m, "entries", json_integer((json_int_t)ls->entries));
			json_object_set_new(m, "devices_skipped",
					    json_integer((json_int_t)ls->devices_skipped));
			json_object_set_new(m, "xattrs_ignored",
					    json_integer((json_int_t)ls->xattrs_ignored));
		}
	}
	lock = store_lock(S.dfd);
	if (lock < 0) {
		err = lock;
		goto out;
	}
	if (!again) {
		/* Another import of the same image may have won the race: keep its. */
		if (renameat2(S.dfd, img, S.dfd, name, RENAME_NOREPLACE) && errno != EEXIST) {
			err = husk_seterr(errno, "storing the image: %s", strerror(errno));
			goto out;
		}
		fchmodat(S.dfd, name, 0644, 0);
	}
	{
		/*
		 * Under the lock the stored record wins: names may have changed
		 * since it was read, or a concurrent import of the same image
		 * stored it first (its file kept, ours dropped by the rename).
		 */
		json_t *fresh = meta_load(S.dfd, key);

		if (fresh) {
			json_decref(m);
			m = fresh;
		}
	}
	if (o->name) {
		err = move_name(S.dfd, o->name, key);
		if (!err && !has_name(m, o->name))
			json_array_append_new(json_object_get(m, "names"), json_string(o->name));
	}
	if (!err)
		err = meta_save(S.dfd, key, m);
	if (!err && o->key_out)
		memcpy(o->key_out, key, sizeof(key));
	else if (!err)
		print_result(o, key, m, again, (now_us() - t0) / 1e6);
	json_decref(m);
out:
	if (lock >= 0)
		close(lock);
	if (S.t)
		layer_tree_free(S.t);
	if (S.rootfd >= 0)
		close(S.rootfd);
	if (S.build[0])
		rm_tree_at(S.dfd, S.build);
	image_source_close(&S.s);
	json_decref(cfg);
	close(S.dfd);
	return err;
}

/* ---- ls, rm, find ---- */

int image_ls(const char *dir, bool json)
{
	char (*keys)[65] = NULL;
	json_t *all = json_array();
	size_t n = 0, i;
	int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC), err = 0;

	if (dfd >= 0)
		err = list_keys(dfd, &keys, &n);
	else if (errno != ENOENT)
		err = husk_seterr(errno, "image store %s: %s", dir, strerror(errno));
	for (i = 0; !err && i < n; i++) {
		json_t *m = meta_load(dfd, keys[i]);

		if (m)
			json_array_append_new(all, m);
	}
	if (!err && json) {
		char *t = json_dumps(all, JSON_COMPACT | JSON_SORT_KEYS);

		if (t)
			puts(t);
		free(t);
	} else if (!err) {
		json_t *m;

		printf("%-32s %-12s %8s %6s  %s\n", "NAME", "KEY", "SIZE", "LAYERS", "SOURCE");
		json_array_foreach(all, i, m) {
			json_t *names = json_object_get(m, "names"), *v;
			const char *key = json_string_value(json_object_get(m, "key"));
			size_t j;
			long long mib = json_integer_value(json_object_get(m, "size")) >> 20;
			long long layers = json_integer_value(json_object_get(m, "layers"));
			const char *src = json_string_value(json_object_get(m, "source"));

			if (!json_array_size(names))
				printf("%-32s %-12.12s %6lldMi %6lld  %s\n", "<none>", key ? key : "?",
				       mib, layers, src ? src : "");
			json_array_foreach(names, j, v)
				printf("%-32s %-12.12s %6lldMi %6lld  %s\n", json_string_value(v),
				       key ? key : "?", mib, layers, src ? src : "");
		}
	}
	json_decref(all);
	free(keys);
	if (dfd >= 0)
		close(dfd);
	return err;
}

/* The key that name, a key or a key prefix means. */
static int resolve(int dfd, const char *name, char key[65], json_t **meta)
{
	char (*keys)[65];
	size_t n, i, hits = 0;
	int err = list_keys(dfd, &keys, &n);

	*meta = NULL;
	if (err)
		return err;
	for (i = 0; i < n; i++) {
		json_t *m = meta_load(dfd, keys[i]);

		if (m && has_name(m, name)) {
			memcpy(key, keys[i], 65);
			json_decref(*meta);
			*meta = m;
			hits = 1;
			break;
		}
		if (m && image_is_key(name, IMAGE_KEY_PREFIX_MIN) && !strncmp(keys[i], name, strlen(name))) {
			memcpy(key, keys[i], 65);
			json_decref(*meta);
			*meta = m;
			hits++;
			continue;
		}
		json_decref(m);
	}
	free(keys);
	if (hits == 1)
		return 0;
	json_decref(*meta);
	*meta = NULL;
	return husk_seterr(ENOENT, hits ? "image '%s' is ambiguous: more than one key starts "
			   "so" : "no image '%s' (husk image ls lists them)", name);
}

int image_rm(const char *dir, const char *name)
{
	char key[65], file[80];
	json_t *m = NULL, *names;
	int dfd = store_open(dir, false), lock, err;
	size_t j;

	if (dfd < 0)
		return dfd;
	lock = store_lock(dfd);
	if (lock < 0) {
		close(dfd);
		return lock;
	}
	err = resolve(dfd, name, key, &m);
	if (!err) {
		names = json_object_get(m, "names");
		for (j = json_array_size(names); j-- > 0;)
			if (!strcmp(json_string_value(json_array_get(names, j)) ?: "", name))
				json_array_remove(names, j);
		if (json_array_size(names) && !image_is_key(name, IMAGE_KEY_PREFIX_MIN)) {
			err = meta_save(dfd, key, m);
		} else {
			/* Runs that opened the image keep it until they end. */
			snprintf(file, sizeof(file), "%s.ext4", key);
			if (unlinkat(dfd, file, 0) && errno != ENOENT)
				err = husk_seterr(errno, "removing %s: %s", file, strerror(errno));
			snprintf(file, sizeof(file), "%s.json", key);
			if (!err && unlinkat(dfd, file, 0))
				err = husk_seterr(errno, "removing %s: %s", file, strerror(errno));
		}
	}
	json_decref(m);
	close(lock);
	close(dfd);
	return err;
}

static char **strv(json_t *a, json_t *b, int *n)
{
	size_t na = json_array_size(a), nb = json_array_size(b), i;
	char **v = calloc(na + nb + 1, sizeof(*v));

	*n = 0;
	if (!v)
		return NULL;
	for (i = 0; i < na; i++)
		v[(*n)++] = strdup(json_string_value(json_array_get(a, i)) ?: "");
	for (i = 0; i < nb; i++)
		v[(*n)++] = strdup(json_string_value(json_array_get(b, i)) ?: "");
	for (i = 0; i < (size_t)*n; i++)
		if (!v[i])
			return NULL;	/* out of memory: the process is about to fail anyway */
	return v;
}

int image_find(const char *dir, const char *name, struct image_info *out)
{
	json_t *m, *cfg;
	const char *s;
	int dfd = store_open(dir, false), err;

	memset(out, 0, sizeof(*out));
	if (dfd < 0)
		return dfd;
	err = resolve(dfd, name, out->key, &m);
	close(dfd);
	if (err)
		return err;
	snprintf(out->rootfs, sizeof(out->rootfs), "%s/%s.ext4", dir, out->key);
	cfg = json_object_get(m, "config");
	out->argv = strv(json_object_get(cfg, "Entrypoint"), json_object_get(cfg, "Cmd"), &out->argc);
	out->env = strv(json_object_get(cfg, "Env"), NULL, &out->nr_env);
	s = json_string_value(json_object_get(cfg, "WorkingDir"));
	out->workdir = s && *s ? strdup(s) : NULL;
	s = json_string_value(json_object_get(cfg, "User"));
	out->user = s && *s ? strdup(s) : NULL;
	json_decref(m);
	if (!out->argv || !out->env)
		return husk_seterr(ENOMEM, "out of memory");
	return 0;
}

void image_info_free(struct image_info *i)
{
	int k;

	for (k = 0; i->argv && k < i->argc; k++)
		free(i->argv[k]);
	for (k = 0; i->env && k < i->nr_env; k++)
		free(i->env[k]);
	free(i->argv);
	free(i->env);
	free(i->workdir);
	free(i->user);
	memset(i, 0, sizeof(*i));
}
