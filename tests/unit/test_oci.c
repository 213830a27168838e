/*
 * Unit tests for oci/spec, oci/bundle and oci/state: a bundle's config.json
 * as the container's husk run command line, what is refused and why, whose
 * a config.json is (the engine's or another user's) and what another
 * user's may not name, and the container IDs and state files of the
 * runtime.
 */
#include <fcntl.h>
#include <sched.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "helpers.h"
#include "lib/util.h"
#include "net/netns.h"
#include "oci/bundle.h"
#include "oci/spec.h"
#include "oci/state.h"
#include "suites.h"

/* A config.json as `runc spec` writes it, with the parts the tests change. */
static char *config(const char *process_extra, const char *mounts, const char *linux_extra,
		    const char *annotations)
{
	char *s;

	ck_assert_int_gt(asprintf(&s,
		"{\"ociVersion\":\"1.0.2-dev\",\"process\":{\"terminal\":false,"
		"\"user\":{\"uid\":0,\"gid\":0},\"args\":[\"sh\",\"-c\",\"echo hi\"],"
		"\"env\":[\"PATH=/usr/bin:/bin\",\"TERM=xterm\"],\"cwd\":\"/\"%s},"
		"\"root\":{\"path\":\"rootfs\",\"readonly\":true},\"hostname\":\"runc\","
		"\"mounts\":[{\"destination\":\"/proc\",\"type\":\"proc\",\"source\":\"proc\"},"
		"{\"destination\":\"/dev\",\"type\":\"tmpfs\",\"source\":\"tmpfs\"},"
		"{\"destination\":\"/dev/pts\",\"type\":\"devpts\",\"source\":\"devpts\"},"
		"{\"destination\":\"/sys/fs/cgroup\",\"type\":\"cgroup\",\"source\":\"cgroup\"},"
		"{\"destination\":\"/etc/hosts\",\"type\":\"bind\",\"source\":\"/x/hosts\","
		"\"options\":[\"rbind\"]}%s],"
		"\"linux\":{\"namespaces\":[{\"type\":\"pid\"},{\"type\":\"network\"},"
		"{\"type\":\"mount\"}]%s}%s%s}",
		process_extra, mounts, linux_extra, annotations[0] ? ",\"annotations\":" : "",
		annotations), 0);
	return s;
}

/* config() with process.terminal set to v (JSON text). */
static char *with_terminal(const char *v)
{
	char *c = config("", "", "", ""), *at = strstr(c, "\"terminal\":false"), *s;

	ck_assert_ptr_nonnull(at);
	ck_assert_int_gt(asprintf(&s, "%.*s\"terminal\":%s%s", (int)(at - c), c, v,
				  at + strlen("\"terminal\":false")), 0);
	free(c);
	return s;
}

static int parse(char *text, struct oci_spec *s)
{
	int err = oci_spec_parse(text, strlen(text), s);

	free(text);
	return err;
}

/* The argv as one string, for comparisons. */
static char *joined(const struct oci_spec *s)
{
	char **argv, **owned, *out = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&out, &len);

	ck_assert_int_eq(oci_spec_argv(s, "abc123", NULL, 7, &argv, &owned), 0);
	for (int i = 0; argv[i]; i++)
		fprintf(f, "%s%s", i ? " " : "", argv[i]);
	fclose(f);
	for (int i = 0; owned[i]; i++)
		free(owned[i]);
	free(owned);
	free(argv);
	return out;
}

START_TEST(runc_spec_becomes_a_job)
{
	struct oci_spec s;
	char *a;

	ck_assert_int_eq(parse(config("", "", "", ""), &s), 0);
	a = joined(&s);
	ck_assert_str_eq(a, "husk run --hold-fd=7 --stdin --image abc123 --timeout=604800 --cwd / "
			 "--hostname runc --env PATH=/usr/bin:/bin --env TERM=xterm -- sh -c echo hi");
	ck_assert_str_eq(s.root, "rootfs");
	ck_assert(!s.terminal);
	free(a);
	oci_spec_free(&s);
	/* podman -t: the job gets a terminal. */
	ck_assert_int_eq(parse(with_terminal("true"), &s), 0);
	ck_assert(s.terminal);
	a = joined(&s);
	ck_assert_ptr_nonnull(strstr(a, " --hostname runc --tty --env "));
	free(a);
	oci_spec_free(&s);
}
END_TEST

START_TEST(limits_binds_and_annotations)
{
	struct oci_spec s;
	char *a;

	ck_assert_int_eq(parse(config("", ",{\"destination\":\"/tmp/workspace/data\",\"type\":"
				      "\"bind\",\"source\":\"/srv/data\",\"options\":[\"rbind\","
				      "\"ro\"]}", ",\"resources\":{\"memory\":{\"limit\":"
				      "268435456},\"cpu\":{\"quota\":150000,\"period\":100000}}",
				      "{\"io.husk.net\":\"egress\",\"io.husk.allow\":"
				      "\"192.0.2.1/32:tcp:443,198.51.100.0/24\",\"org.example\":\"x\"}"),
			       &s), 0);
	a = joined(&s);
	ck_assert_str_eq(a, "husk run --hold-fd=7 --stdin --image abc123 --timeout=604800 --cwd / "
			 "--hostname runc --mem=256 --cpus=1.500 --env PATH=/usr/bin:/bin --env TERM=xterm --net "
			 "egress --allow 192.0.2.1/32:tcp:443 --allow 198.51.100.0/24 --put "
			 "/srv/data:data -- sh -c echo hi");
	ck_assert_ptr_nonnull(strstr(s.annotations_json, "org.example"));
	free(a);
	oci_spec_free(&s);
}
END_TEST

/* Each refused with a message naming what and why. */
START_TEST(refusals)
{
	static const struct { const char *proc, *mounts, *lin, *ann, *why; } c[] = {
		{ "", ",{\"destination\":\"/tmp/workspace/d\",\"type\":\"bind\",\"source\":"
		  "\"/srv\",\"options\":[\"rbind\"]}", "", "", "writable" },
		{ "", ",{\"destination\":\"/data\",\"type\":\"bind\",\"source\":\"/srv\","
		  "\"options\":[\"ro\"]}", "", "", "/tmp/workspace" },
		{ "", ",{\"destination\":\"/data\",\"type\":\"tmpfs\",\"source\":\"t\","
		  "\"options\":[\"ro\"]}", "", "", "read-only" },
		{ "", ",{\"destination\":\"/tmp/workspace/t\",\"type\":\"tmpfs\",\"source\":\"t\"}",
		  "", "", "not the workspace" },
		{ "", ",{\"destination\":\"/data\",\"type\":\"tmpfs\",\"source\":\"t\","
		  "\"options\":[\"mode=99\"]}", "", "", "an option is not one of" },
		{ "", ",{\"destination\":\"/data\",\"type\":\"overlay\",\"source\":\"o\"}", "",
		  "", "read-only" },
		{ "", "", ",\"resources\":{\"memory\":{\"limit\":1048576}}", "", "MiB" },
		{ "", "", "", "{\"io.husk.nett\":\"egress\"}", "io.husk.nett" },
		{ "", "", "", "{\"io.husk.allow\":\"192.0.2.1/32\"}", "io.husk.net=egress" },
		{ "", "", "", "{\"io.husk.net\":\"egress\",\"io.husk.allow\":\"nonsense\"}",
		  "io.husk.allow" },
		{ "", "", "", "{\"io.husk.timeout\":\"0\"}", "io.husk.timeout" },
		{ "", "", "", "{\"io.husk.user\":\"0\"}", "'agentuser' or 'root'" },
		{ "", "", "", "{\"io.husk.template\":\"../x\"}", "io.husk.template" },
	};

	struct oci_spec s;

	for (size_t i = 0; i < sizeof(c) / sizeof(c[0]); i++) {
		ck_assert_msg(parse(config(c[i].proc, c[i].mounts, c[i].lin, c[i].ann), &s) != 0,
			      "case %zu was taken", i);
		ck_assert_msg(strstr(husk_lasterr(), c[i].why), "case %zu: %s", i, husk_lasterr());
		oci_spec_free(&s);
	}
	ck_assert_int_ne(parse(with_terminal("1"), &s), 0);
	ck_assert_ptr_nonnull(strstr(husk_lasterr(), "process.terminal must be true or false"));
	oci_spec_free(&s);
}
END_TEST

/* config() with the network namespace at path (JSON string text) and annotations. */
static char *with_netns(const char *path, const char *mounts, const char *ann)
{
	static const char ns[] = "{\"type\":\"network\"}";
	char *t = config("", mounts, "", ann), *at = strstr(t, ns), *q;

	ck_assert_ptr_nonnull(at);
	ck_assert_int_gt(asprintf(&q, "%.*s{\"type\":\"network\",\"path\":%s}%s",
				  (int)(at - t), t, path, at + strlen(ns)), 0);
	free(t);
	return q;
}

START_TEST(engine_netns_is_the_nics_home)
{
	static const char resolv[] = ",{\"destination\":\"/etc/resolv.conf\",\"type\":\"bind\","
				     "\"source\":\"/run/x/resolv.conf\",\"options\":[\"rbind\"]}";
	struct oci_spec s;
	char *j;

	/* The engine made a network namespace: the guest's NIC goes there, filtered. */
	ck_assert_int_eq(parse(with_netns("\"/run/netns/x\"", resolv, ""), &s), 0);
	ck_assert(s.egress);
	ck_assert_str_eq(s.netns, "/run/netns/x");
	ck_assert_str_eq(s.resolv_conf, "/run/x/resolv.conf");
	j = joined(&s);
	ck_assert_ptr_nonnull(strstr(j, " --net egress --netns /run/netns/x "));
	free(j);
	oci_spec_free(&s);
	/* With allow rules and no annotation: the namespace is the network. */
	ck_assert_int_eq(parse(with_netns("\"/proc/1/ns/net\"", "",
					  "{\"io.husk.allow\":\"192.0.2.0/24:tcp:443\"}"), &s), 0);
	j = joined(&s);
	ck_assert_ptr_nonnull(strstr(j, "--netns /proc/1/ns/net --allow 192.0.2.0/24:tcp:443"));
	/* Root in the guest only on the annotation; process.user.uid 0 is not asking. */
	ck_assert_ptr_null(strstr(j, "--user"));
	free(j);
	oci_spec_free(&s);
	ck_assert_int_eq(parse(config("", "", "", "{\"io.husk.user\":\"root\","
					 "\"io.husk.template\":\"py-3\"}"), &s), 0);
	j = joined(&s);
	ck_assert_ptr_nonnull(strstr(j, " --user root "));
	ck_assert_ptr_nonnull(strstr(j, " --image abc123 --timeout="));
	ck_assert_ptr_nonnull(strstr(j, " --template py-3 "));
	free(j);
	oci_spec_free(&s);
	/* io.husk.net=none: no NIC, wherever the engine put the container. */
	ck_assert_int_eq(parse(with_netns("\"/run/netns/x\"", "",
					  "{\"io.husk.net\":\"none\"}"), &s), 0);
	ck_assert(!s.egress);
	ck_assert_ptr_null(s.netns);
	j = joined(&s);
	ck_assert_ptr_null(strstr(j, "--net"));
	free(j);
	oci_spec_free(&s);
	/* A new, empty namespace (no path) is no network; rules need one. */
	ck_assert_int_ne(parse(config("", "", "", "{\"io.husk.allow\":\"192.0.2.0/24\"}"), &s),
			 0);
	ck_assert_ptr_nonnull(strstr(husk_lasterr(), "need a network"));
	oci_spec_free(&s);
	ck_assert_int_ne(parse(with_netns("\"run/netns/x\"", "", ""), &s), 0);
	ck_assert_ptr_nonnull(strstr(husk_lasterr(), "must be absolute"));
	oci_spec_free(&s);
}
END_TEST

/* config() with root.path given (JSON string text) instead of "rootfs". */
static char *with_root(const char *path, const char *mounts)
{
	char *t = config("", mounts, "", ""), *at = strstr(t, "\"path\":\"rootfs\""), *q;

	ck_assert_ptr_nonnull(at);
	ck_assert_int_gt(asprintf(&q, "%.*s\"path\":%s%s", (int)(at - t), t, path,
				  at + strlen("\"path\":\"rootfs\"")), 0);
	free(t);
	return q;
}

/*
 * A config.json that is not the engine's (another user's bundle): no copy
 * of a host file, no network namespace; its root is read with the user's
 * rights (oci/bundle.c, tests/image/oci-bundle.test), so a root.path of
 * /etc is not refused here.
 */
START_TEST(another_users_config_is_confined)
{
	static const char shadow[] = ",{\"destination\":\"/tmp/workspace/x\",\"type\":\"bind\","
				     "\"source\":\"/etc/shadow\",\"options\":[\"ro\",\"bind\"]}";
	static const char resolv[] = ",{\"destination\":\"/etc/resolv.conf\",\"type\":\"bind\","
				     "\"source\":\"/run/x/resolv.conf\",\"options\":[\"rbind\"]}";
	struct oci_spec s;

	/* The engine's may name them, as runc's may. */
	ck_assert_int_eq(parse(with_root("\"/etc\"", shadow), &s), 0);
	ck_assert_int_eq(s.nr_binds, 1);
	ck_assert_str_eq(s.root, "/etc");
	assert_err_msg(oci_spec_confine(&s, 1000), EPERM, "bind mount of /etc/shadow");
	ck_assert_ptr_nonnull(strstr(husk_lasterr(), "uid 1000"));
	oci_spec_free(&s);
	ck_assert_int_eq(parse(with_netns("\"/proc/1/ns/net\"", resolv, ""), &s), 0);
	assert_err_msg(oci_spec_confine(&s, 1000), EPERM, "network namespace (/proc/1/ns/net)");
	oci_spec_free(&s);
	/* Without them it runs, and the engine's resolv.conf is not read. */
	ck_assert_int_eq(parse(with_root("\"/etc\"", resolv), &s), 0);
	ck_assert_ptr_nonnull(s.resolv_conf);
	ck_assert_int_eq(oci_spec_confine(&s, 1000), 0);
	ck_assert_ptr_null(s.resolv_conf);
	oci_spec_free(&s);
}
END_TEST

/* husk's own network namespace is the host's: no forwarding or NAT is ever set there. */
START_TEST(hosts_own_netns_refused)
{
	int fd;

	assert_err_msg(netns_open("/proc/self/ns/net"), EPERM, "the host's own");
	assert_err_msg(netns_open("/proc/thread-self/ns/net"), EPERM, "the host's own");
	fd = netns_open("/proc/self/ns/mnt");
	ck_assert_int_eq(fd, -EINVAL);
}
END_TEST

/*
 * The initial namespace too: pid 1's, which is not this thread's. Pid 1 of
 * the machine may be out of reach (another user namespace), so the test
 * makes its own: a new PID namespace with its own /proc, whose pid 1 keeps
 * the network the test started in while its child moves to a new one and
 * asks for /proc/1/ns/net. Needs root.
 */
static int initial_netns_child(void)
{
	pid_t pid;
	int st;

	if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) ||
	    mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL))
		return 10;
	pid = fork();
	if (pid < 0)
		return 11;
	if (pid == 0) {
		int fd;

		if (unshare(CLONE_NEWNET))
			_exit(12);
		fd = netns_open("/proc/1/ns/net");
		if (fd >= 0)
			_exit(13);
		_exit(fd == -EPERM && strstr(husk_lasterr(), "the host's own") ? 0 : 14);
	}
	if (waitpid(pid, &st, 0) != pid || !WIFEXITED(st))
		return 15;
	return WEXITSTATUS(st);
}

START_TEST(initial_netns_refused)
{
	pid_t pid;
	int st;

	if (geteuid() != 0) {
		unit_skip("initial_netns_refused", "needs root (a PID and a network namespace)");
		return;
	}
	ck_assert_int_eq(unshare(CLONE_NEWPID | CLONE_NEWNS), 0);
	pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0)
		_exit(initial_netns_child());
	ck_assert_int_eq(waitpid(pid, &st, 0), pid);
	ck_assert(WIFEXITED(st));
	ck_assert_msg(WEXITSTATUS(st) == 0, "pid 1's namespace: step %d failed", WEXITSTATUS(st));
}
END_TEST

/* dir/name with this text, owned by uid:uid. */
static void put(const char *dir, const char *name, const char *text, unsigned mode, uid_t uid)
{
	char p[512];
	int fd;

	snprintf(p, sizeof(p), "%s/%s", dir, name);
	fd = open(p, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(write(fd, text, strlen(text)), (ssize_t)strlen(text));
	ck_assert_int_eq(fchmod(fd, mode), 0);
	ck_assert_int_eq(fchown(fd, uid, uid), 0);
	close(fd);
}

/* A bundle directory base/name, mode, owned by uid. */
static void bundle_dir(const char *base, const char *name, unsigned mode, uid_t uid, char *out)
{
	sprintf(out, "%s/%s", base, name);
	ck_assert_int_eq(mkdir(out, mode), 0);
	ck_assert_int_eq(chmod(out, mode), 0);
	ck_assert_int_eq(chown(out, uid, uid), 0);
}

/* Read bundle: 0 and whether it is the engine's, or the error. */
static int whose(const char *bundle, bool *engine, uid_t *author)
{
	struct oci_bundle b;
	int err = oci_bundle_read(bundle, 4096, &b);

	*engine = b.engine;
	*author = b.author.uid;
	if (!err)
		ck_assert_str_eq(b.config, "{}");
	oci_bundle_free(&b);
	return err;
}

/*
 * Whose a config.json is: the engine's when it and all the way to it are
 * root's (or ours) and no one else may write them; another user's when it
 * is that user's; refused when it is root's but someone else could have
 * put it there (a directory or a link of another user's, a directory
 * anyone may write).
 */
START_TEST(whose_bundle)
{
	char base[] = "/tmp/husk-oci-bundle.XXXXXX", eng[128], usr[128], open_[128], p[256];
	bool engine;
	uid_t author;

	if (!unit_need_root("whose_bundle"))
		return;
	ck_assert_ptr_nonnull(mkdtemp(base));
	ck_assert_int_eq(chmod(base, 0755), 0);
	bundle_dir(base, "eng", 0755, 0, eng);
	put(eng, "config.json", "{}", 0644, 0);
	ck_assert_int_eq(whose(eng, &engine, &author), 0);
	ck_assert(engine);
	snprintf(p, sizeof(p), "%s/eng-link", base);
	ck_assert_int_eq(symlink("eng", p), 0);
	ck_assert_int_eq(whose(p, &engine, &author), 0);
	ck_assert(engine);

	/* Another user's bundle: its owner is the author. */
	bundle_dir(base, "usr", 0755, 65534, usr);
	put(usr, "config.json", "{}", 0644, 65534);
	ck_assert_int_eq(whose(usr, &engine, &author), 0);
	ck_assert(!engine);
	ck_assert_uint_eq(author, 65534);

	/* Root's config.json where another user could have put it. */
	put(usr, "config.json", "{}", 0644, 0);
	assert_err_msg(whose(usr, &engine, &author), EPERM, "belongs to uid 65534");
	ck_assert_ptr_nonnull(strstr(husk_lasterr(), "cannot tell who wrote it"));
	/* Another user's link to the engine's bundle. */
	snprintf(p, sizeof(p), "%s/usr-link", base);
	ck_assert_int_eq(symlink(eng, p), 0);
	ck_assert_int_eq(lchown(p, 65534, 65534), 0);
	assert_err_msg(whose(p, &engine, &author), EPERM, "usr-link belongs to uid 65534");
	/* A directory anyone may write on the way; with the sticky bit, as /tmp, it is fine. */
	bundle_dir(base, "open", 0777, 0, open_);
	snprintf(p, sizeof(p), "%s/open/b", base);
	ck_assert_int_eq(mkdir(p, 0755), 0);
	put(p, "config.json", "{}", 0644, 0);
	assert_err_msg(whose(p, &engine, &author), EPERM, "may be written by others");
	ck_assert_int_eq(chmod(open_, 01777), 0);
	ck_assert_int_eq(whose(p, &engine, &author), 0);
	ck_assert(engine);
	/* And config.json itself. */
	put(p, "config.json", "{}", 0666, 0);
	assert_err_msg(whose(p, &engine, &author), EPERM, "config.json may be written by others");
	rm_tree_at(AT_FDCWD, base);
}
END_TEST

START_TEST(hostile_configs)
{
	static const char *const bad[] = {
		"", "[]", "{\"ociVersion\":\"2.0\"}", "{\"ociVersion\":\"1.0\"}",
		"{\"ociVersion\":\"1.0\",\"process\":{\"args\":[],\"cwd\":\"/\"},"
		"\"root\":{\"path\":\"r\"}}",
		"{\"ociVersion\":\"1.0\",\"process\":{\"args\":[\"a\"],\"cwd\":\"rel\"},"
		"\"root\":{\"path\":\"r\"}}",
		"{\"ociVersion\":\"1.0\",\"process\":{\"args\":[\"a\"],\"cwd\":\"/\",\"env\":"
		"[\"NOEQUALS\"]},\"root\":{\"path\":\"r\"}}",
		"{\"ociVersion\":\"1.0\",\"process\":{\"args\":[1],\"cwd\":\"/\"},"
		"\"root\":{\"path\":\"r\"}}",
		"{\"ociVersion\":\"1.0\",\"process\":{\"args\":[\"a\"],\"cwd\":\"/\"}}",
		"{\"ociVersion\":\"1.0\",\"process\":{\"args\":[\"a\"],\"cwd\":\"/\"},"
		"\"root\":{\"path\":\"r\"},\"hooks\":{\"prestart\":[{\"path\":\"/bin/x\"}]}}",
		"{\"ociVersion\":\"1.0\",\"ociVersion\":\"1.0\"}",
		"{\"ociVersion\":\"1.0\",\"process\":{\"args\":[\"a\\u0000b\"],\"cwd\":\"/\"},"
		"\"root\":{\"path\":\"r\"}}",
		"{\"ociVersion\":\"1.0\",\"process\":{\"args\":[\"a\"],\"cwd\":\"/\"},"
		"\"root\":{\"path\":\"r\"},\"hostname\":\"a b;rm\"}",
		"{\"ociVersion\":\"1.0\",\"process\":{\"args\":[\"a\"],\"cwd\":\"/\"},"
		"\"root\":{\"path\":\"r\"},\"hostname\":7}",
		"{\"ociVersion\":\"1.0\",\"process\":{\"args\":[\"a\"],\"cwd\":\"/\"},"
		"\"root\":{\"path\":\"r\"},\"hostname\":\"-x\"}",
	};

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct oci_spec s;

		ck_assert_msg(oci_spec_parse(bad[i], strlen(bad[i]), &s) != 0, "taken: %s", bad[i]);
		oci_spec_free(&s);
	}
}
END_TEST

/* A tmpfs of the job's: size, mode and noexec kept, the rest dropped. */
START_TEST(tmpfs_honoured)
{
	struct oci_spec s;
	char *a;

	ck_assert_int_eq(parse(config("", ",{\"destination\":\"/data\",\"type\":\"tmpfs\","
				      "\"source\":\"tmpfs\",\"options\":[\"rw\",\"rprivate\","
				      "\"noexec\",\"nosuid\",\"nodev\",\"tmpcopyup\","
				      "\"size=65536k\"]},{\"destination\":\"/cache\",\"type\":"
				      "\"tmpfs\",\"source\":\"tmpfs\"}", "", ""), &s), 0);
	a = joined(&s);
	ck_assert_ptr_nonnull(strstr(a, " --tmpfs /data:noexec,size=65536k --tmpfs /cache "));
	free(a);
	oci_spec_free(&s);
}
END_TEST

/* process.rlimits become --rlimit; RLIMIT_RSS (no effect in Linux) is dropped. */
START_TEST(rlimits_honoured)
{
	struct oci_spec s;
	char *a;

	ck_assert_int_eq(parse(config(",\"rlimits\":[{\"type\":\"RLIMIT_NOFILE\",\"hard\":1024,"
				      "\"soft\":512},{\"type\":\"RLIMIT_RSS\",\"hard\":1,"
				      "\"soft\":1},{\"type\":\"RLIMIT_NPROC\",\"hard\":4194304,"
				      "\"soft\":4194304}]", "", "", ""), &s), 0);
	a = joined(&s);
	ck_assert_ptr_nonnull(strstr(a, " --rlimit RLIMIT_NOFILE=512:1024 --rlimit "
				     "RLIMIT_NPROC=4194304:4194304 "));
	ck_assert_ptr_null(strstr(a, "RSS"));
	free(a);
	oci_spec_free(&s);
	ck_assert_int_eq(parse(config(",\"rlimits\":[{\"type\":\"RLIMIT_BOGUS\",\"hard\":1,"
				      "\"soft\":1}]", "", "", ""), &s), -EINVAL);
	ck_assert_ptr_nonnull(strstr(husk_lasterr(), "process.rlimits[0]"));
	oci_spec_free(&s);
	ck_assert_int_eq(parse(config(",\"rlimits\":[{\"type\":\"RLIMIT_CORE\",\"hard\":1,"
				      "\"soft\":2}]", "", "", ""), &s), -EINVAL);
	ck_assert_ptr_nonnull(strstr(husk_lasterr(), "over the hard"));
	oci_spec_free(&s);
	ck_assert_int_eq(parse(config(",\"rlimits\":[{\"type\":\"RLIMIT_CORE\",\"hard\":-1,"
				      "\"soft\":0}]", "", "", ""), &s), -EINVAL);
	oci_spec_free(&s);
	ck_assert_int_eq(parse(config(",\"rlimits\":{}", "", "", ""), &s), -EINVAL);
	oci_spec_free(&s);
}
END_TEST

/* update's resources: what is honoured, what is kept, what is refused. */
START_TEST(update_resources)
{
	uint64_t mib = 7;
	unsigned milli = 9;
	json_t *r;

	r = json_loads("{\"cpu\":{\"quota\":25000,\"period\":100000},"
		       "\"memory\":{\"limit\":268435457},\"pids\":{\"limit\":5}}", 0, NULL);
	ck_assert_int_eq(oci_spec_resources(r, &mib, &milli), 0);
	ck_assert_uint_eq(milli, 250);
	ck_assert_uint_eq(mib, 257);	/* rounded up to whole MiB */
	json_decref(r);
	/* Absent, zero or negative: unchanged; a quota without a period is of 100 ms. */
	mib = 7;
	r = json_loads("{\"cpu\":{\"quota\":1},\"memory\":{\"limit\":-1}}", 0, NULL);
	ck_assert_int_eq(oci_spec_resources(r, &mib, &milli), 0);
	ck_assert_uint_eq(mib, 7);
	ck_assert_uint_eq(milli, 1);
	json_decref(r);
	ck_assert_int_eq(oci_spec_resources(NULL, &mib, &milli), 0);
	r = json_loads("{\"memory\":{\"limit\":1024}}", 0, NULL);
	ck_assert_int_eq(oci_spec_resources(r, &mib, &milli), -ERANGE);
	json_decref(r);
	r = json_loads("{\"cpu\":{\"quota\":99999999999}}", 0, NULL);
	ck_assert_int_eq(oci_spec_resources(r, &mib, &milli), -EINVAL);
	json_decref(r);
	r = json_loads("[1]", 0, NULL);
	ck_assert_int_eq(oci_spec_resources(r, &mib, &milli), -EINVAL);
	json_decref(r);
}
END_TEST

START_TEST(ids)
{
	ck_assert_int_eq(oci_id_check("abc-DEF_1.2+x"), 0);
	ck_assert_int_ne(oci_id_check(""), 0);
	ck_assert_int_ne(oci_id_check(".."), 0);
	ck_assert_int_ne(oci_id_check("a/b"), 0);
	ck_assert_int_ne(oci_id_check("a b"), 0);
}
END_TEST

START_TEST(state_round_trip)
{
	char dir[] = "/tmp/husk-oci-unit.XXXXXX";
	struct oci_state st = { .pid = getpid(), .started = true }, back;

	ck_assert_ptr_nonnull(mkdtemp(dir));
	snprintf(st.id, sizeof(st.id), "c1");
	snprintf(st.bundle, sizeof(st.bundle), "/b");
	snprintf(st.created, sizeof(st.created), "2026-12-03T00:00:00Z");
	st.starttime = oci_proc_starttime(getpid());
	ck_assert_uint_gt(st.starttime, 0);
	st.annotations = "{\"k\":\"v\"}";
	ck_assert_int_eq(oci_state_write(dir, &st), 0);
	ck_assert_int_eq(oci_state_read(dir, &back), 0);
	ck_assert_str_eq(back.id, "c1");
	ck_assert_int_eq(back.pid, getpid());
	ck_assert_str_eq(back.annotations, "{\"k\":\"v\"}");
	ck_assert_int_eq(oci_status(&back), OCI_RUNNING);
	/* The same pid with another start time is another process. */
	back.starttime++;
	ck_assert_int_eq(oci_status(&back), OCI_STOPPED);
	oci_state_free(&back);
	rm_tree_at(AT_FDCWD, dir);
}
END_TEST

Suite *oci_suite(void)
{
	Suite *s = suite_create("oci");
	TCase *tc = tcase_create("spec");

	tcase_add_test(tc, runc_spec_becomes_a_job);
	tcase_add_test(tc, limits_binds_and_annotations);
	tcase_add_test(tc, refusals);
	tcase_add_test(tc, engine_netns_is_the_nics_home);
	tcase_add_test(tc, hostile_configs);
	tcase_add_test(tc, update_resources);
	tcase_add_test(tc, rlimits_honoured);
	tcase_add_test(tc, tmpfs_honoured);
	tcase_add_test(tc, ids);
	tcase_add_test(tc, state_round_trip);
	tcase_add_test(tc, another_users_config_is_confined);
	tcase_add_test(tc, hosts_own_netns_refused);
	tcase_add_test(tc, initial_netns_refused);
	tcase_add_test(tc, whose_bundle);
	suite_add_tcase(s, tc);
	return s;
}
