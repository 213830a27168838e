/*
 * oci: husk as an OCI runtime with runc's command line (`husk oci ...`, or
 * husk started as `husk-runc`), for engines that take any runc-compatible
 * binary: podman --runtime, containerd's runc shim (BinaryName), Slurm's
 * oci.conf.
 *
 * A container is one `husk run` job. `create` imports the bundle's root
 * (content-keyed, so an unchanged root is imported once) and starts the
 * `husk run` that is the container's process: it boots the VM and holds
 * the job (--hold-fd on the container's exec.fifo). The engine gets that
 * process's pid; its stdio is the engine's. `start` writes the FIFO's
 * byte and the job runs; the process exits with the job's status. `kill`
 * signals it (husk run stops the VM on SIGTERM, SIGINT and SIGHUP; SIGKILL
 * takes the VM with it), `delete` removes what is left.
 */
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <jansson.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "config.h"
#include "cli_run.h"
#include "image/image.h"
#include "lib/digest.h"
#include "lib/util.h"
#include "net/dns_proxy.h"
#include "net/netns.h"
#include "oci/bundle.h"
#include "oci/console.h"
#include "oci/oci.h"
#include "oci/spec.h"
#include "oci/state.h"
#include "run/run.h"
#include "sandbox/cgroup.h"

static struct {
	const char *root;
	const char *log;
	bool log_json;
	const char *image_dir;
} g = { .root = OCI_DEFAULT_ROOT };

static const char usage[] =
	"usage: husk oci [global options] COMMAND [options] ID\n"
	"       (or husk-runc ...: the same, as a runc-compatible runtime binary)\n"
	"\n"
	"An OCI runtime: every container is a husk VM running its process as one\n"
	"job (docs/oci.md).\n"
	"\n"
	"Commands:\n"
	"  create --bundle DIR [--pid-file F] [--console-socket S] ID\n"
	"                      import the bundle's root, boot the VM, hold the process\n"
	"  start ID            run the container's process\n"
	"  run --bundle DIR [--detach] ID\n"
	"                      create and start; without --detach wait for it, then\n"
	"                      delete it, and exit with its status\n"
	"  state ID            the container's state as JSON\n"
	"  kill ID [SIGNAL]    signal the container (default SIGTERM)\n"
	"  pause ID            freeze the container's VM (its cgroup v2 group)\n"
	"  resume ID           let a paused container's VM run again\n"
	"  update [-r FILE|-] [--cpu-quota N] [--cpu-period N] [--memory N] ID\n"
	"                      a running container's CPU quota (its memory is fixed)\n"
	"  delete [--force] ID remove a stopped (with --force, any) container\n"
	"  features            what this runtime supports, as JSON\n"
	"  list                the containers under --root\n"
	"\n"
	"Global options:\n"
	"  --root DIR          state directory (default " OCI_DEFAULT_ROOT ")\n"
	"  --log FILE          also write errors to FILE\n"
	"  --log-format F      text (default) or json\n"
	"  --image-dir DIR     husk's image store for the bundles' roots\n"
	"  --systemd-cgroup, --debug, --rootless B, --criu P: accepted, no effect\n"
	"  --version           the version, and the OCI spec version\n";

/* An error, on stderr and in --log (as runc writes it, for engines that read it). */
static int oci_err(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int oci_err(const char *fmt, ...)
{
	char msg[2048];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	fprintf(stderr, "husk oci: %s\n", msg);
	if (g.log) {
		FILE *f = fopen(g.log, "ae");

		if (f) {
			if (g.log_json) {
				json_t *o = json_pack("{s:s,s:s}", "level", "error", "msg", msg);
				char *s = o ? json_dumps(o, JSON_COMPACT) : NULL;

				if (s)
					fprintf(f, "%s\n", s);
				free(s);
				json_decref(o);
			} else {
				fprintf(f, "error: %s\n", msg);
			}
			fclose(f);
		}
	}
	return 1;
}

static void rfc3339_now(char *out, size_t len)
{
	struct timespec ts;
	struct tm tm;

	clock_gettime(CLOCK_REALTIME, &ts);
	gmtime_r(&ts.tv_sec, &tm);
	strftime(out, len, "%Y-%m-%dT%H:%M:%S", &tm);
	snprintf(out + strlen(out), len - strlen(out), ".%09ldZ", ts.tv_nsec);
}

/* Read a whole small file (at most max bytes) into a NUL-terminated buffer. */
static char *slurp(const char *path, size_t max, size_t *len)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	struct stat st;
	char *b;

	if (fd < 0) {
		husk_seterr(errno, "%s: %s", path, strerror(errno));
		return NULL;
	}
	if (fstat(fd, &st) || !S_ISREG(st.st_mode) || (size_t)st.st_size > max) {
		close(fd);
		husk_seterr(EINVAL, "%s: not a regular file of at most %zu bytes", path, max);
		return NULL;
	}
	b = malloc(st.st_size + 1);
	if (!b || read_exact_at(fd, b, st.st_size, 0)) {
		free(b);
		close(fd);
		husk_seterr(EIO, "%s: cannot read it", path);
		return NULL;
	}
	close(fd);
	b[st.st_size] = '\0';
	*len = st.st_size;
	return b;
}

/* husk's own binary, for the processes it starts. */
static int self_exe(char *out, size_t len)
{
	ssize_t n = readlink("/proc/self/exe", out, len - 1);

	if (n <= 0)
		return husk_seterr(errno, "cannot find husk's own binary: %s", strerror(errno));
	out[n] = '\0';
	return 0;
}

/*
 * The name a container's root has in the image store while the container
 * exists: an engine's copy of a root differs from the last one (its
 * directories' times), so each container's import is its own, and delete
 * must remove it. An image under other names too stays for them.
 */
static void image_name(const char *id, char out[72])
{
	uint8_t d[DIGEST_SHA256_LEN];
	char hex[2 * DIGEST_SHA256_LEN + 1];

	digest_sha256(id, strlen(id), d);
	digest_hex(d, sizeof(d), hex);
	snprintf(out, 72, IMAGE_OCI_PREFIX "%s", hex);
}

/* Drop the container's name from the store (its image goes with its last name). */
static void image_release(const char *id)
{
	char name[72];
	int err;

	image_name(id, name);
	err = image_rm(g.image_dir ? g.image_dir : IMAGE_DEFAULT_DIR, name);
	if (err && err != -ENOENT)
		fprintf(stderr, "husk oci: warning: %s\n", husk_lasterr());
}

/*
 * The bundle's root into the store, as `husk image import ROOT --name NAME`
 * would, always as a root directory; read with as's rights (not NULL: the
 * bundle is another user's). key gets the image's key.
 */
static int import_root(const char *root, const char *id, const struct image_reader *as,
		       char key[65])
{
	char name[72], init[PATH_MAX];
	struct image_import_opts io = {
		.src = root, .name = name, .dir = g.image_dir ? g.image_dir : IMAGE_DEFAULT_DIR,
		.init = init, .tree = true, .read_as = as, .key_out = key,
	};
	int err;

	image_name(id, name);
	err = run_find_image(NULL, "HUSK_INIT", "husk-init", init, sizeof(init));
	if (!err)
		err = image_import(&io);
	if (err && as)
		return husk_seterr(-err, "cannot import the bundle's root %s, read as its owner "
				   "(uid %u): %s", root, (unsigned)as->uid, husk_lasterr());
	if (err)
		return husk_seterr(-err, "cannot import the bundle's root %s: %s", root,
				   husk_lasterr());
	return 0;
}

static int write_pid_file(const char *path, pid_t pid)
{
	char tmp[PATH_MAX], buf[32];
	int fd, n;

	if ((size_t)snprintf(tmp, sizeof(tmp), "%s.husk-tmp", path) >= sizeof(tmp))
		return husk_seterr(ENAMETOOLONG, "--pid-file is too long");
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0644);
	if (fd < 0)
		return husk_seterr(errno, "--pid-file %s: %s", path, strerror(errno));
	n = snprintf(buf, sizeof(buf), "%d", (int)pid);
	if (write_all(fd, buf, n) || close(fd) || rename(tmp, path)) {
		unlink(tmp);
		return husk_seterr(errno, "--pid-file %s: %s", path, strerror(errno));
	}
	return 0;
}

/*
 * In the engine's network namespace, the DNS proxy forwards to the engine's
 * resolver: the first nameserver of the resolv.conf it gave the container.
 */
static void engine_resolver(const struct oci_spec *s)
{
	struct sockaddr_storage ss;
	socklen_t len;
	char a[INET6_ADDRSTRLEN], v[INET6_ADDRSTRLEN + 16];
	int port;

	if (!s->netns || !s->resolv_conf || getenv("HUSK_DNS_UPSTREAM") ||
	    dns_resolv_conf_upstream(s->resolv_conf, &ss, &len))
		return;
	if (ss.ss_family == AF_INET) {
		struct sockaddr_in *s4 = (struct sockaddr_in *)&ss;

		inet_ntop(AF_INET, &s4->sin_addr, a, sizeof(a));
		port = ntohs(s4->sin_port);
		snprintf(v, sizeof(v), "%s:%d", a, port);
	} else {
		struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)&ss;

		inet_ntop(AF_INET6, &s6->sin6_addr, a, sizeof(a));
		port = ntohs(s6->sin6_port);
		snprintf(v, sizeof(v), "[%s]:%d", a, port);
	}
	setenv("HUSK_DNS_UPSTREAM", v, 1);
}

/* An engine's network namespace, checked at create rather than when the VM starts. */
static int netns_check(const char *path)
{
	int fd = netns_open(path);

	if (fd < 0)
		return husk_seterr(-fd, "config.json: %s", husk_lasterr());
	close(fd);
	return 0;
}

/*
 * The container's process: `husk run` holding its job on fifo_fd; with a
 * terminal, tty (the console's slave) is its stdin, stdout and stderr.
 */
static pid_t spawn_container(const struct oci_spec *s, const char *key, int fifo_fd, int tty)
{
	char exe[PATH_MAX];
	pid_t pid;

	if (self_exe(exe, sizeof(exe)))
		return -1;
	fflush(NULL);
	pid = fork();
	if (pid < 0) {
		husk_seterr(errno, "fork: %s", strerror(errno));
		return -1;
	}
	if (pid == 0) {
		char **argv, **owned;
		/* Not close-on-exec: husk run reads it as --hold-fd. */
		int h = fcntl(fifo_fd, F_DUPFD, 3);

		setsid();
		/*
		 * The console is our controlling terminal: the engine's resizes
		 * of its master reach husk run as SIGWINCH, and its hang-up as
		 * SIGHUP.
		 */
		if (tty >= 0 && (dup2(tty, 0) < 0 || dup2(tty, 1) < 0 || dup2(tty, 2) < 0 ||
				 ioctl(0, TIOCSCTTY, 0)))
			h = -1;
		if (h < 0 || oci_spec_argv(s, key, g.image_dir, h, &argv, &owned)) {
			fprintf(stderr, "husk oci: %s\n", husk_lasterr());
			_exit(125);
		}
		engine_resolver(s);
		execv(exe, argv);
		fprintf(stderr, "husk oci: cannot start %s: %s\n", exe, strerror(errno));
		_exit(125);
	}
	return pid;
}

static pid_t run_child;
static int cmd_start(int argc, char **argv);

/* run: the engine's signals go to the container's process, as runc's do. */
static void forward(int sig)
{
	if (run_child > 0)
		kill(run_child, sig);
}

/*
 * run: the container started at once, and waited for here (it is our
 * child); then deleted. The exit status is the container's.
 */
static int run_wait(const char *id, const char *dir, struct oci_state *st)
{
	static const int sigs[] = { SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2 };
	char path[PATH_MAX];
	int fd, status = 0, code;

	run_child = st->pid;
	for (size_t i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++)
		signal(sigs[i], forward);
	snprintf(path, sizeof(path), "%s/exec.fifo", dir);
	fd = open(path, O_WRONLY | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0 || write(fd, "s", 1) != 1)
		kill(st->pid, SIGKILL);
	if (fd >= 0)
		close(fd);
	st->started = true;
	oci_state_write(dir, st);
	while (waitpid(st->pid, &status, 0) < 0 && errno == EINTR)
		;
	code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
	image_release(id);
	rm_tree_at(AT_FDCWD, dir);
	return code;
}

/* create, and run (create, start, wait, delete; --detach: create and start). */
static int cmd_create(int argc, char **argv, bool run)
{
	static const struct option opts[] = {
		{ "bundle", required_argument, NULL, 'b' }, { "pid-file", required_argument, NULL, 'p' },
		{ "console-socket", required_argument, NULL, 'c' },
		{ "no-pivot", no_argument, NULL, 'n' }, { "no-new-keyring", no_argument, NULL, 'k' },
		{ "preserve-fds", required_argument, NULL, 'f' }, { "detach", no_argument, NULL, 'd' },
		{ NULL, 0, NULL, 0 },
	};
	bool detach = false;
	const char *bundle = ".", *pid_file = NULL, *console = NULL, *id;
	char dir[PATH_MAX], path[PATH_MAX], key[65];
	struct oci_bundle b;
	struct oci_spec s;
	struct oci_state st = { 0 };
	int c, fifo, err, tty = -1;
	pid_t pid;

	optind = 1;
	while ((c = getopt_long(argc, argv, "+b:d", opts, NULL)) != -1) {
		if (c == 'b')
			bundle = optarg;
		else if (c == 'd' && run)
			detach = true;
		else if (c == 'p')
			pid_file = optarg;
		else if (c == 'c')
			console = optarg;
		else if (c == '?')
			return oci_err("create: unknown option (husk oci --help)");
	}
	if (optind != argc - 1)
		return oci_err("%s: needs one container ID", run ? "run" : "create");
	id = argv[optind];
	if (oci_id_check(id) || oci_dir(g.root, id, dir, sizeof(dir)))
		return oci_err("%s", husk_lasterr());
	if (oci_bundle_read(bundle, OCI_CONFIG_MAX, &b))
		return oci_err("%s", husk_lasterr());
	err = oci_spec_parse(b.config, b.config_len, &s);
	if (!err && s.terminal && !console)
		err = husk_seterr(EINVAL, "process.terminal needs --console-socket (the engine's "
				  "end of the container's terminal)");
	if (!err && !s.terminal && console)
		err = husk_seterr(EINVAL, "--console-socket without process.terminal");
	if (!err && !b.engine && oci_spec_confine(&s, b.author.uid))
		err = husk_seterr(EPERM, "%s (%s)", husk_lasterr(), b.why);
	if (!err && s.netns)
		err = netns_check(s.netns);
	oci_bundle_free(&b);
	if (err) {
		oci_spec_free(&s);
		return oci_err("%s", husk_lasterr());
	}
	if (s.root[0] == '/')
		snprintf(path, sizeof(path), "%s", s.root);
	else
		snprintf(path, sizeof(path), "%s/%s", b.dir, s.root);
	if (mkdir_p(g.root, 0700)) {
		oci_spec_free(&s);
		return oci_err("%s", husk_lasterr());
	}
	if (mkdir(dir, 0700)) {
		err = errno;
		oci_spec_free(&s);
		if (err == EEXIST)
			return oci_err("container %s exists already", id);
		return oci_err("cannot make %s: %s", dir, strerror(err));
	}
	if (import_root(path, id, b.engine ? NULL : &b.author, key)) {
		oci_spec_free(&s);
		rm_tree_at(AT_FDCWD, dir);
		return oci_err("%s", husk_lasterr());
	}
	snprintf(path, sizeof(path), "%s/exec.fifo", dir);
	unlink(path);
	/* O_RDWR: the FIFO always has a writer, so its reader sees no EOF before start. */
	if (mkfifo(path, 0600) || (fifo = open(path, O_RDWR | O_NONBLOCK | O_CLOEXEC)) < 0) {
		err = errno;
		oci_spec_free(&s);
		image_release(id);
		rm_tree_at(AT_FDCWD, dir);
		return oci_err("cannot make %s: %s", path, strerror(err));
	}
	if (s.terminal && (tty = oci_console_open(console)) < 0) {
		close(fifo);
		oci_spec_free(&s);
		image_release(id);
		rm_tree_at(AT_FDCWD, dir);
		return oci_err("%s", husk_lasterr());
	}
	pid = spawn_container(&s, key, fifo, tty);
	close(fifo);
	if (tty >= 0)
		close(tty);
	if (pid < 0) {
		oci_spec_free(&s);
		image_release(id);
		rm_tree_at(AT_FDCWD, dir);
		return oci_err("%s", husk_lasterr());
	}
	snprintf(st.id, sizeof(st.id), "%s", id);
	snprintf(st.bundle, sizeof(st.bundle), "%s", b.dir);
	rfc3339_now(st.created, sizeof(st.created));
	st.pid = pid;
	/* Read before the child can be gone: a fork's child exists at once. */
	st.starttime = oci_proc_starttime(pid);
	st.annotations = s.annotations_json;
	err = oci_state_write(dir, &st) || (pid_file && write_pid_file(pid_file, pid));
	oci_spec_free(&s);
	st.annotations = NULL;	/* it was the spec's */
	if (err) {
		kill(pid, SIGKILL);
		image_release(id);
		rm_tree_at(AT_FDCWD, dir);
		return oci_err("%s", husk_lasterr());
	}
	if (run && detach) {
		char *start_argv[] = { "start", (char *)id, NULL };

		return cmd_start(2, start_argv);
	}
	return run ? run_wait(id, dir, &st) : 0;
}

/* The container ID of a command that takes exactly one (and no options). */
static const char *one_id(int argc, char **argv, const char *cmd, char *dir, size_t len)
{
	if (argc != 2) {
		oci_err("%s: needs one container ID", cmd);
		return NULL;
	}
	if (oci_id_check(argv[1]) || oci_dir(g.root, argv[1], dir, len)) {
		oci_err("%s", husk_lasterr());
		return NULL;
	}
	return argv[1];
}

static int cmd_start(int argc, char **argv)
{
	char dir[PATH_MAX], path[PATH_MAX];
	struct oci_state st;
	enum oci_status now;
	int fd;

	if (!one_id(argc, argv, "start", dir, sizeof(dir)))
		return 1;
	if (oci_state_read(dir, &st))
		return oci_err("start %s: %s", argv[1], husk_lasterr());
	now = oci_status(&st);
	if (now != OCI_CREATED) {
		oci_state_free(&st);
		return oci_err("start %s: the container is %s, not created", argv[1],
			       oci_status_name(now));
	}
	snprintf(path, sizeof(path), "%s/exec.fifo", dir);
	fd = open(path, O_WRONLY | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0 || write(fd, "s", 1) != 1) {
		int e = errno;

		if (fd >= 0)
			close(fd);
		oci_state_free(&st);
		return oci_err("start %s: %s: %s", argv[1], path, strerror(e));
	}
	close(fd);
	st.started = true;
	if (oci_state_write(dir, &st)) {
		oci_state_free(&st);
		return oci_err("start %s: %s", argv[1], husk_lasterr());
	}
	unlink(path);
	oci_state_free(&st);
	return 0;
}

static json_t *state_json(const struct oci_state *st)
{
	enum oci_status s = oci_status(st);
	json_t *ann = st->annotations ? json_loads(st->annotations, 0, NULL) : NULL;

	return json_pack("{s:s,s:s,s:s,s:i,s:s,s:s,s:o}", "ociVersion", OCI_VERSION, "id", st->id,
			 "status", oci_status_name(s), "pid", s == OCI_STOPPED ? 0 : (int)st->pid,
			 "bundle", st->bundle, "created", st->created, "annotations",
			 ann ? ann : json_object());
}

static int cmd_state(int argc, char **argv)
{
	char dir[PATH_MAX], *out;
	struct oci_state st;
	json_t *o;

	if (!one_id(argc, argv, "state", dir, sizeof(dir)))
		return 1;
	if (oci_state_read(dir, &st))
		return oci_err("state %s: %s", argv[1], husk_lasterr());
	o = state_json(&st);
	oci_state_free(&st);
	out = o ? json_dumps(o, JSON_INDENT(2)) : NULL;
	json_decref(o);
	if (!out)
		return oci_err("out of memory");
	puts(out);
	free(out);
	return 0;
}

/* A number 1..64, or a name as husk serve's signal takes it. */
static int parse_signal(const char *s)
{
	uint64_t v;

	return parse_u64(s, 1, 64, &v) ? signal_by_name(s) : (int)v;
}

static int cmd_kill(int argc, char **argv)
{
	static const struct option opts[] = { { "all", no_argument, NULL, 'a' },
					      { NULL, 0, NULL, 0 } };
	char dir[PATH_MAX];
	struct oci_state st;
	int c, sig = SIGTERM;

	optind = 1;
	while ((c = getopt_long(argc, argv, "+a", opts, NULL)) != -1)
		if (c == '?')
			return oci_err("kill: unknown option");
	if (optind >= argc || argc - optind > 2)
		return oci_err("kill: needs a container ID and at most one signal");
	if (argc - optind == 2 && (sig = parse_signal(argv[optind + 1])) < 0)
		return oci_err("kill: unknown signal %s", argv[optind + 1]);
	if (oci_id_check(argv[optind]) || oci_dir(g.root, argv[optind], dir, sizeof(dir)))
		return oci_err("%s", husk_lasterr());
	if (oci_state_read(dir, &st))
		return oci_err("kill %s: %s", argv[optind], husk_lasterr());
	oci_state_free(&st);
	if (oci_stopped(&st))
		return oci_err("kill %s: container not running", argv[optind]);
	if (kill(st.pid, sig))
		return oci_err("kill %s: %s", argv[optind], strerror(errno));
	return 0;
}

/*
 * pause and resume: the VM process's cgroup (v2) is frozen, so its vCPUs
 * and its event loop stop where they are; husk run's supervisor, outside
 * that group, still passes on kill's signals, and a fatal one ends a
 * frozen VM too. Time goes on meanwhile: a --timeout counts it.
 */
static int cmd_pause(int argc, char **argv, bool pause)
{
	const char *what = pause ? "pause" : "resume";
	char dir[PATH_MAX];
	struct oci_state st;
	enum oci_status now;

	if (!one_id(argc, argv, what, dir, sizeof(dir)))
		return 1;
	if (oci_state_read(dir, &st))
		return oci_err("%s %s: %s", what, argv[1], husk_lasterr());
	oci_state_free(&st);
	now = oci_status(&st);
	if (pause && now != OCI_RUNNING && now != OCI_CREATED)
		return oci_err("pause %s: the container is %s, not running", argv[1],
			       oci_status_name(now));
	if (!pause && now != OCI_PAUSED)
		return oci_err("resume %s: the container is %s, not paused", argv[1],
			       oci_status_name(now));
	if (cgroup_owned_freeze(st.pid, st.starttime, pause))
		return oci_err("%s %s: %s", what, argv[1], husk_lasterr());
	return 0;
}

/* The VM's RAM of a container, as its config.json set it at create. */
static int config_mem_mib(const struct oci_state *st, uint64_t *mib)
{
	char path[PATH_MAX];
	struct oci_spec spec;
	size_t len;
	char *text;
	int err;

	if (snprintf(path, sizeof(path), "%s/config.json", st->bundle) >= (int)sizeof(path))
		return husk_seterr(ENAMETOOLONG, "the bundle's path is too long");
	text = slurp(path, OCI_CONFIG_MAX, &len);
	if (!text)
		return -EIO;
	err = oci_spec_parse(text, len, &spec);
	*mib = spec.mem_mib ? spec.mem_mib : RUN_DEFAULT_MEM_MIB;
	oci_spec_free(&spec);
	free(text);
	return err;
}

/* --resources: a LinuxResources object from a file or "-" (stdin), bounded. */
static json_t *read_resources(const char *path)
{
	json_error_t je;
	size_t len = 0;
	char *text;
	json_t *o;

	if (!strcmp(path, "-")) {
		/* As bounded as a file: one byte more than the limit is too much. */
		text = malloc(OCI_CONFIG_MAX + 1);
		while (text && len <= OCI_CONFIG_MAX) {
			ssize_t n = read(STDIN_FILENO, text + len, OCI_CONFIG_MAX + 1 - len);

			if (n < 0 && errno == EINTR)
				continue;
			if (n <= 0)
				break;
			len += n;
		}
		if (text && len > OCI_CONFIG_MAX) {
			free(text);
			husk_seterr(EFBIG, "--resources -: more than %u bytes", OCI_CONFIG_MAX);
			return NULL;
		}
		if (!text)
			husk_seterr(ENOMEM, "out of memory");
	} else {
		text = slurp(path, OCI_CONFIG_MAX, &len);
	}
	if (!text)
		return NULL;
	o = json_loadb(text, len, JSON_REJECT_DUPLICATES, &je);
	free(text);
	if (!o)
		husk_seterr(EINVAL, "--resources %s: %s (line %d)", path, je.text, je.line);
	else if (!json_is_object(o)) {
		json_decref(o);
		o = NULL;
		husk_seterr(EINVAL, "--resources %s: not a JSON object", path);
	}
	return o;
}

/* A memory size as runc takes one: parse_size's, with a b after it or not ("64mb"). */
static int parse_memory(const char *s, uint64_t *out)
{
	char num[32];
	size_t n = strlen(s);

	if (!n || n >= sizeof(num))
		return -EINVAL;
	memcpy(num, s, n + 1);
	if (num[n - 1] == 'b' || num[n - 1] == 'B')
		num[n - 1] = '\0';
	return parse_size(num, 0, out);
}

/*
 * update: the CPU quota goes to the VM's cgroup (v2) at once. The VM's RAM
 * is fixed when it boots, so a memory limit is taken only if it is that;
 * the rest of LinuxResources is the VM's own, as at create (docs/oci.md).
 */
static int cmd_update(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "resources", required_argument, NULL, 'r' },
		{ "cpu-quota", required_argument, NULL, 'q' },
		{ "cpu-period", required_argument, NULL, 'p' },
		{ "memory", required_argument, NULL, 'm' },
		{ "blkio-weight", required_argument, NULL, 'x' },
		{ "cpu-share", required_argument, NULL, 'x' },
		{ "cpu-rt-period", required_argument, NULL, 'x' },
		{ "cpu-rt-runtime", required_argument, NULL, 'x' },
		{ "cpuset-cpus", required_argument, NULL, 'x' },
		{ "cpuset-mems", required_argument, NULL, 'x' },
		{ "kernel-memory", required_argument, NULL, 'x' },
		{ "kernel-memory-tcp", required_argument, NULL, 'x' },
		{ "memory-reservation", required_argument, NULL, 'x' },
		{ "memory-swap", required_argument, NULL, 'x' },
		{ "pids-limit", required_argument, NULL, 'x' },
		{ "l3-cache-schema", required_argument, NULL, 'x' },
		{ "mem-bw-schema", required_argument, NULL, 'x' },
		{ NULL, 0, NULL, 0 } };
	const char *res_path = NULL, *id;
	uint64_t quota = 0, period = 0, mem = 0, vm_mib = 0, mib = 0;
	unsigned milli = 0;
	char dir[PATH_MAX];
	struct oci_state st;
	enum oci_status now;
	json_t *res = NULL;
	int c, err;

	optind = 1;
	while ((c = getopt_long(argc, argv, "+r:", opts, NULL)) != -1) {
		switch (c) {
		case 'r':
			res_path = optarg;
			break;
		case 'q':
			if (parse_u64(optarg, 1, UINT32_MAX, &quota))
				return oci_err("update: --cpu-quota %s: 1 to %u", optarg, UINT32_MAX);
			break;
		case 'p':
			if (parse_u64(optarg, 1, UINT32_MAX, &period))
				return oci_err("update: --cpu-period %s: 1 to %u", optarg, UINT32_MAX);
			break;
		case 'm':
			if (parse_memory(optarg, &mem))
				return oci_err("update: --memory %s: bytes, or with k, m or g", optarg);
			break;
		case 'x':
			break;
		default:
			return oci_err("update: unknown option");
		}
	}
	if (argc - optind != 1)
		return oci_err("update: needs one container ID");
	id = argv[optind];
	if (oci_id_check(id) || oci_dir(g.root, id, dir, sizeof(dir)))
		return oci_err("%s", husk_lasterr());
	if (oci_state_read(dir, &st))
		return oci_err("update %s: %s", id, husk_lasterr());
	oci_state_free(&st);
	now = oci_status(&st);
	if (now != OCI_RUNNING && now != OCI_PAUSED)
		return oci_err("update %s: the container is %s, not running", id,
			       oci_status_name(now));
	if (res_path && !(res = read_resources(res_path)))
		return oci_err("update %s: %s", id, husk_lasterr());
	/* The flags override the file, as runc's do. */
	if (!res)
		res = json_object();
	if (quota || period) {
		json_t *cpu = json_object_get(res, "cpu");

		if (!json_is_object(cpu)) {
			cpu = json_object();
			json_object_set_new(res, "cpu", cpu);
		}
		if (quota)
			json_object_set_new(cpu, "quota", json_integer(quota));
		if (period)
			json_object_set_new(cpu, "period", json_integer(period));
	}
	if (mem) {
		json_t *m = json_object();

		json_object_set_new(m, "limit", json_integer(mem));
		json_object_set_new(res, "memory", m);
	}
	err = oci_spec_resources(res, &mib, &milli);
	json_decref(res);
	if (err)
		return oci_err("update %s: %s", id, husk_lasterr());
	if (mib && (config_mem_mib(&st, &vm_mib) || mib != vm_mib))
		return oci_err("update %s: a VM's memory is fixed when it boots (%" PRIu64 " MiB "
			       "asked): a new limit needs a new container", id, mib);
	if (milli && cgroup_owned_set_cpu(st.pid, st.starttime, milli))
		return oci_err("update %s: %s", id, husk_lasterr());
	return 0;
}

/* Wait up to ms for the container's process to be gone. */
static bool wait_gone(const struct oci_state *st, int ms)
{
	int fd = syscall(SYS_pidfd_open, st->pid, 0);
	bool gone;

	if (fd >= 0 && !oci_stopped(st)) {
		struct pollfd p = { .fd = fd, .events = POLLIN };

		poll(&p, 1, ms);
	}
	if (fd >= 0)
		close(fd);
	for (int i = 0; i < ms / 10 && !oci_stopped(st); i++)
		usleep(10000);
	gone = oci_stopped(st);
	return gone;
}

static int cmd_delete(int argc, char **argv)
{
	static const struct option opts[] = { { "force", no_argument, NULL, 'f' },
					      { NULL, 0, NULL, 0 } };
	char dir[PATH_MAX];
	struct oci_state st;
	enum oci_status now;
	bool force = false;
	int c;

	optind = 1;
	while ((c = getopt_long(argc, argv, "+f", opts, NULL)) != -1) {
		if (c == 'f')
			force = true;
		else
			return oci_err("delete: unknown option");
	}
	if (optind != argc - 1)
		return oci_err("delete: needs one container ID");
	if (oci_id_check(argv[optind]) || oci_dir(g.root, argv[optind], dir, sizeof(dir)))
		return oci_err("%s", husk_lasterr());
	if (oci_state_read(dir, &st)) {
		/* A create that died half-way leaves a directory without state. */
		if (force && !access(dir, F_OK)) {
			image_release(argv[optind]);
			rm_tree_at(AT_FDCWD, dir);
			return 0;
		}
		return oci_err("delete %s: %s", argv[optind], husk_lasterr());
	}
	oci_state_free(&st);
	now = oci_status(&st);
	if ((now == OCI_RUNNING || now == OCI_PAUSED) && !force)
		return oci_err("delete %s: the container is running (stop it, or --force)",
			       argv[optind]);
	/* A created container is deleted as runc does: its process goes first. */
	if (now != OCI_STOPPED) {
		kill(st.pid, SIGKILL);
		if (!wait_gone(&st, 10000))
			return oci_err("delete %s: its process %d did not end", argv[optind],
				       (int)st.pid);
	}
	image_release(argv[optind]);
	rm_tree_at(AT_FDCWD, dir);
	return 0;
}

static int cmd_list(int argc, char **argv)
{
	(void)argc;
	(void)argv;
	char dir[PATH_MAX];
	struct dirent **e = NULL;
	int n = scandir(g.root, &e, NULL, alphasort);

	printf("%-24s %-8s %-10s %s\n", "ID", "PID", "STATUS", "BUNDLE");
	for (int i = 0; i < n; i++) {
		struct oci_state st;

		if (e[i]->d_name[0] != '.' && !oci_id_check(e[i]->d_name) &&
		    !oci_dir(g.root, e[i]->d_name, dir, sizeof(dir)) && !oci_state_read(dir, &st)) {
			enum oci_status s = oci_status(&st);

			printf("%-24s %-8d %-10s %s\n", st.id, s == OCI_STOPPED ? 0 : (int)st.pid,
			       oci_status_name(s), st.bundle);
			oci_state_free(&st);
		}
		free(e[i]);
	}
	free(e);
	return 0;
}

static int cmd_features(void)
{
	json_t *o = json_pack(
		"{s:s,s:s,s:[],s:[s,s,s,s,s,s],s:{s:[s,s,s,s,s,s,s],s:[],s:{s:b,s:b,s:b},"
		"s:{s:b}},s:{s:s,s:s,s:s,s:s,s:s,s:s}}",
		"ociVersionMin", "1.0.0", "ociVersionMax", OCI_VERSION, "hooks",
		"mountOptions", "bind", "rbind", "ro", "nosuid", "nodev", "noexec",
		"linux", "namespaces", "cgroup", "ipc", "mount", "network", "pid", "user", "uts",
		"capabilities", "cgroup", "v1", false, "v2", true, "systemd", false,
		"seccomp", "enabled", false,
		"annotations", "io.husk.net", "none or egress: the filtered NIC (in the engine's "
		"network namespace when there is one; none: no NIC)",
		"io.husk.allow", "egress allow rules, comma separated (husk run --allow)",
		"io.husk.allow-host", "host names the job may resolve and reach",
		"io.husk.template", "start the VM from this template (husk template create "
		"NAME --image) instead of booting; its root must be the bundle's",
		"io.husk.timeout", "seconds the container may run (default a week)",
		"io.husk.user", "agentuser (default) or root: the process's user in the guest");
	char *s = o ? json_dumps(o, JSON_INDENT(2)) : NULL;

	json_decref(o);
	if (!s)
		return oci_err("out of memory");
	puts(s);
	free(s);
	return 0;
}

int oci_main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "root", required_argument, NULL, 'r' }, { "log", required_argument, NULL, 'l' },
		{ "log-format", required_argument, NULL, 'F' },
		{ "image-dir", required_argument, NULL, 'i' },
		{ "systemd-cgroup", no_argument, NULL, 's' }, { "debug", no_argument, NULL, 'd' },
		{ "rootless", required_argument, NULL, 'R' }, { "criu", required_argument, NULL, 'C' },
		{ "version", no_argument, NULL, 'v' }, { "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	const char *cmd;
	int c;

	optind = 1;
	opterr = 0;
	while ((c = getopt_long(argc, argv, "+vh", opts, NULL)) != -1) {
		switch (c) {
		case 'r':
			g.root = optarg;
			break;
		case 'l':
			g.log = optarg;
			break;
		case 'F':
			if (strcmp(optarg, "text") && strcmp(optarg, "json"))
				return oci_err("--log-format: text or json, not %s", optarg);
			g.log_json = !strcmp(optarg, "json");
			break;
		case 'i':
			g.image_dir = optarg;
			break;
		case 's': case 'd': case 'R': case 'C':
			break;
		case 'v':
			printf("husk oci version %s\nspec: %s\n", PACKAGE_VERSION, OCI_VERSION);
			return 0;
		case 'h':
			fputs(usage, stdout);
			return 0;
		default:
			return oci_err("unknown global option %s (husk oci --help)",
				       argv[optind - 1]);
		}
	}
	if (optind >= argc) {
		fputs(usage, stderr);
		return 1;
	}
	if (g.root[0] != '/')
		return oci_err("--root must be an absolute path");
	cmd = argv[optind];
	argc -= optind;
	argv += optind;
	if (!strcmp(cmd, "create"))
		return cmd_create(argc, argv, false);
	if (!strcmp(cmd, "run"))
		return cmd_create(argc, argv, true);
	if (!strcmp(cmd, "start"))
		return cmd_start(argc, argv);
	if (!strcmp(cmd, "state"))
		return cmd_state(argc, argv);
	if (!strcmp(cmd, "kill"))
		return cmd_kill(argc, argv);
	if (!strcmp(cmd, "delete"))
		return cmd_delete(argc, argv);
	if (!strcmp(cmd, "pause") || !strcmp(cmd, "resume"))
		return cmd_pause(argc, argv, !strcmp(cmd, "pause"));
	if (!strcmp(cmd, "update"))
		return cmd_update(argc, argv);
	if (!strcmp(cmd, "features"))
		return cmd_features();
	if (!strcmp(cmd, "list"))
		return cmd_list(argc, argv);
	return oci_err("unknown command %s (husk oci --help)", cmd);
}
