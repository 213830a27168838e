/*
 * husk-init: the guest's PID 1.
 *
 * Brings the read-only guest up far enough to run one job (pseudo
 * filesystems, a tmpfs /tmp, the console for diagnostics), tells husk
 * through its control port, connects the vsock control channel and then
 * follows the conversation of docs/protocol.md: HELLO, JOB, files in, the
 * job (job.c), EXIT, files out, DONE, power off; or for a session, its
 * frames (session.c) after files in, then DONE. Any internal error is sent
 * as P_ERROR, printed on the console and ends the VM with status 1.
 *
 * PID 1 must never return or die (the kernel panics), so every path ends in
 * power_off(), which does not return.
 *
 * `--test-fd N [--workspace DIR]` runs the same conversation on fd N without
 * any PID 1 duty, so the host can test guest-init through a socketpair.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/magic.h>
#include <linux/random.h>
#include <sys/socket.h>
/* After sys/socket.h: it uses struct sockaddr without including it. */
#include <linux/vm_sockets.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/random.h>
#include <sys/reboot.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/time.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include "init.h"
#include "guest-init/ctl.h"
#include "job/proto.h"
#include "lib/util.h"

struct init_cfg cfg = { .ctl = -1, .workspace = WORKSPACE };

uint64_t realtime_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + ts.tv_nsec;
}

void husk_event(uint32_t code)
{
	ctl_write(HUSK_CTL_EVENT, code);
}

static _Noreturn void power_off(int status)
{
	if (cfg.test_mode)
		exit(status);
	sync();
	/* The UART sends from the tty buffer: let the last messages out. */
	tcdrain(STDERR_FILENO);
	ctl_write(HUSK_CTL_POWEROFF, status);
	/*
	 * No registers: reboot=k turns this into an i8042 reset on x86, PSCI
	 * resets an arm64 guest.
	 */
	reboot(RB_AUTOBOOT);
	for (;;)
		pause();
}

/*
 * Frames reach husk through the vsock device asynchronously; powering off
 * right after the last send could stop the VM before they are delivered.
 * Half-close our side and wait (bounded) for husk to close its side, which
 * it does once it has read everything.
 */
static void await_host_close(void)
{
	struct pollfd p = { .fd = cfg.ctl, .events = POLLIN };
	uint8_t buf[256];
	int i;

	if (cfg.test_mode || cfg.ctl < 0)
		return;
	shutdown(cfg.ctl, SHUT_WR);
	for (i = 0; i < 100; i++) {
		if (poll(&p, 1, 50) < 0 && errno != EINTR)
			return;
		if ((p.revents & (POLLIN | POLLHUP | POLLERR)) &&
		    read(cfg.ctl, buf, sizeof(buf)) <= 0)
			return;
	}
}

static _Noreturn void vfatal(bool send, const char *fmt, va_list ap)
{
	char msg[600];

	vsnprintf(msg, sizeof(msg), fmt, ap);
	fprintf(stderr, "husk-init: %s\n", msg);
	if (send && cfg.ctl >= 0)
		proto_send(cfg.ctl, P_ERROR, msg, strlen(msg));
	await_host_close();
	power_off(1);
}

_Noreturn void fatal(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vfatal(true, fmt, ap);
}

_Noreturn void fatal_quiet(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vfatal(false, fmt, ap);
}

/* ---- PID 1 duties ---- */

static void mount_fs(const char *src, const char *dst, const char *type,
		     unsigned long flags, const char *opts)
{
	mkdir(dst, 0755);	/* usually exists: the root is read-only */
	/* devtmpfs may already be there (CONFIG_DEVTMPFS_MOUNT). */
	if (mount(src, dst, type, flags, opts) && errno != EBUSY)
		fatal("mount %s on %s: %s", type, dst, strerror(errno));
}

static void console_stdio(void)
{
	int fd = open("/dev/console", O_RDWR | O_NOCTTY);

	if (fd < 0)
		return;	/* no console: diagnostics are lost, the job is not */
	dup2(fd, 0);
	dup2(fd, 1);
	dup2(fd, 2);
	if (fd > 2)
		close(fd);
}

/*
 * A root that came as the initramfs (husk run's default) is the kernel's
 * rootfs, a tmpfs: read-only from here on, like a root on the disk, for
 * everyone in the guest. Nothing of the image is written, ever.
 */
static void root_read_only(void)
{
	struct statfs st;

	if (statfs("/", &st))
		fatal("statfs /: %s", strerror(errno));
	if (st.f_type != TMPFS_MAGIC && st.f_type != RAMFS_MAGIC)
		return;
	if (mount(NULL, "/", NULL, MS_REMOUNT | MS_RDONLY, NULL))
		fatal("make the root read-only: %s", strerror(errno));
}

static void pid1_setup(void)
{
	root_read_only();
	mount_fs("devtmpfs", "/dev", "devtmpfs", MS_NOSUID, "mode=0755");
	console_stdio();
	mount_fs("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL);
	mount_fs("sysfs", "/sys", "sysfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL);
	mount_fs("cgroup2", "/sys/fs/cgroup", "cgroup2", MS_NOSUID | MS_NODEV | MS_NOEXEC,
		 NULL);
	mount_fs("tmpfs", "/tmp", "tmpfs", MS_NOSUID | MS_NODEV, "size=16m,mode=1777");
	/*
	 * The job's terminals: the job's init moves this instance into the
	 * job's /dev, and guest-init makes a job's pty here, in its own
	 * namespace, whenever the job's init got that far.
	 */
	mount_fs("devpts", "/dev/pts", "devpts", MS_NOSUID | MS_NOEXEC,
		 "newinstance,ptmxmode=0666,mode=0620,gid=5");
	if (!ctl_open())
		fprintf(stderr, "husk-init: no husk control registers: %s (no husk events)\n",
			strerror(errno));
	husk_event(HUSK_EV_INIT);
}

static void set_clock(uint64_t ns)
{
	struct timespec ts = { ns / 1000000000ull, ns % 1000000000ull };

	if (ns && clock_settime(CLOCK_REALTIME, &ts))
		fatal("clock_settime: %s", strerror(errno));
}

/*
 * Under --verbose, one console line says that the CRNG was reseeded and what
 * it gave just before: clones of one template that print the same bytes
 * there would have handed their jobs the same random bytes without the
 * reseed (tests/testhost/template-inner.sh checks both). Those bytes come
 * from the state every clone of the template shares, so they tell nothing
 * about what the CRNG gives after the reseed.
 */
static void log_reseed(size_t len, const uint8_t *before, size_t n)
{
	char hex[2 * 16 + 1] = "unavailable";
	size_t i;

	for (i = 0; before && i < n && i < 16; i++)
		snprintf(hex + 2 * i, sizeof(hex) - 2 * i, "%02x", before[i]);
	fprintf(stderr, "husk-init: CRNG reseeded with %zu host bytes; just before, it gave %s\n",
		len, hex);
}

static void seed_rng(const uint8_t *seed, size_t len, bool verbose)
{
	struct rand_pool_info *info;
	uint8_t before[8];
	bool sampled = false;
	int fd;

	if (!len)
		return;
	info = calloc(1, sizeof(*info) + len + 4);
	if (!info)
		fatal("out of memory for the RNG seed");
	info->entropy_count = len * 8;
	info->buf_size = len;
	memcpy(info->buf, seed, len);
	fd = open("/dev/urandom", O_WRONLY | O_CLOEXEC);
	if (fd < 0 || ioctl(fd, RNDADDENTROPY, info))
		fatal("credit the RNG seed to /dev/urandom: %s", strerror(errno));
	/*
	 * A VM restored from a template carries the template's CRNG state:
	 * reseed now, so no two clones hand out the same random bytes.
	 */
	if (verbose)
		sampled = getrandom(before, sizeof(before), GRND_NONBLOCK) == sizeof(before);
	if (ioctl(fd, RNDRESEEDCRNG, 0))
		fatal("reseed the kernel's CRNG: %s", strerror(errno));
	if (verbose)
		log_reseed(len, sampled ? before : NULL, sizeof(before));
	close(fd);
	free(info);
}

/*
 * Mounted before the job's init is cloned (its mount namespace is a copy),
 * sized once the job says how big: the size belongs to the superblock, which
 * both namespaces share.
 */
static void mount_workspace(void)
{
	char opts[96];

	snprintf(opts, sizeof(opts), "size=%um,mode=0700,uid=%d,gid=%d",
		 DEFAULT_WORKSPACE_MIB, AGENT_UID, AGENT_GID);
	mount_fs("tmpfs", WORKSPACE, "tmpfs", MS_NOSUID | MS_NODEV, opts);
}

static void size_workspace(uint32_t mib)
{
	char opts[32];

	snprintf(opts, sizeof(opts), "size=%um", mib);
	if (mount(NULL, WORKSPACE, NULL, MS_REMOUNT | MS_NOSUID | MS_NODEV, opts))
		fatal("resize the workspace to %u MiB: %s", mib, strerror(errno));
}

static int connect_host(void)
{
	struct sockaddr_vm sa = {
		.svm_family = AF_VSOCK,
		.svm_cid = VMADDR_CID_HOST,
		.svm_port = PROTO_VSOCK_PORT,
	};
	/*
	 * The kernel gives up on a connect after 2 s, and its answer, if it
	 * comes later, resets the connection the host has already taken as
	 * ours: on a loaded host (a VM stopped, frozen or starved for a few
	 * seconds) that killed the job. The host bounds how long a VM may take
	 * to connect; here, wait for its answer as long as it lets us.
	 */
	struct timeval wait = { .tv_sec = 3600 };
	int fd, tries, err = 0;

	/* The host's listener may come up a moment after the device. */
	for (tries = 0; tries < 50; tries++) {
		fd = socket(AF_VSOCK, SOCK_STREAM | SOCK_CLOEXEC, 0);
		if (fd < 0)
			fatal("vsock socket: %s", strerror(errno));
		if (setsockopt(fd, AF_VSOCK, SO_VM_SOCKETS_CONNECT_TIMEOUT, &wait, sizeof(wait)))
			fatal("vsock connect timeout: %s", strerror(errno));
		if (!connect(fd, (struct sockaddr *)&sa, sizeof(sa)))
			return fd;
		err = errno;
		close(fd);
		usleep(20000);
	}
	fatal("connect to the host on vsock port %d: %s", PROTO_VSOCK_PORT, strerror(err));
}

/* ---- the conversation ---- */

static void send_or_die(uint16_t type, const void *p, uint32_t len)
{
	if (proto_send(cfg.ctl, type, p, len))
		fatal_quiet("%s", husk_lasterr());
}

static void send_tlv(uint16_t type, struct tlv_buf *b)
{
	if (b->failed)
		fatal("out of memory building frame type %u", type);
	send_or_die(type, b->data, b->len);
	tlv_free(b);
}

/*
 * HELLO, then the job. A VM restored from a template wakes up here with
 * its connection gone (the device's transport reset: ECONNRESET): it
 * belonged to the VM process that made the template. Connect again, to the
 * VM process that restored us, and say HELLO there.
 */
#define RECONNECTS_MAX 20

static uint64_t step_us[IS_NR];

void init_step(unsigned step)
{
	struct timespec ts;

	if (step >= IS_NR || clock_gettime(CLOCK_BOOTTIME, &ts))
		return;
	step_us[step] = (uint64_t)ts.tv_sec * 1000000 + (uint64_t)ts.tv_nsec / 1000;
}

void init_steps_put(struct tlv_buf *b)
{
	uint8_t v[INIT_STEP_LEN];
	unsigned i, k;

	for (i = 0; i < IS_NR; i++) {
		if (!step_us[i])
			continue;
		v[0] = (uint8_t)i;
		for (k = 0; k < 8; k++)
			v[1 + k] = (uint8_t)(step_us[i] >> (8 * k));
		tlv_put(b, T_INIT_STEP, v, sizeof(v));
	}
}

static void send_hello(void)
{
	struct tlv_buf b;

	init_step(IS_HELLO);
	tlv_init(&b);
	tlv_put_str(&b, T_INIT_VERSION, INIT_VERSION);
	init_steps_put(&b);
	send_tlv(P_HELLO, &b);
}

/* The job, parsed into js; its P_JOB payload in *raw and *len, for the job's init. */
static void receive_job(struct job_spec *js, uint8_t **raw, size_t *len)
{
	struct proto_hdr h;
	uint8_t *p;
	int err, again = 0;

	for (;;) {
		err = proto_recv(cfg.ctl, &h, &p);
		if (!err)
			break;
		/*
		 * The reset finds the socket in recv() (ECONNRESET) or not yet
		 * (then it is simply no longer connected): either way the
		 * connection belonged to the template's VM process.
		 */
		if (cfg.test_mode || (err != -ECONNRESET && err != -EPIPE && err != -ENOTCONN) ||
		    again++ == RECONNECTS_MAX)
			fatal("waiting for the job: %s", husk_lasterr());
		close(cfg.ctl);
		cfg.ctl = connect_host();
		send_hello();
	}
	if (h.type == P_ERROR)
		fatal_quiet("host sent an error: %.*s", (int)(h.len < 300 ? h.len : 300),
			    p ? (char *)p : "");
	if (h.type != P_JOB)
		fatal("expected a job (frame type %u), got frame type %u", P_JOB, h.type);
	if (job_spec_parse(p, h.len, js))
		fatal("bad job spec: %s", husk_lasterr());
	*raw = p;
	*len = h.len;
}

static void send_exit(const struct job_result *r)
{
	struct tlv_buf b;

	tlv_init(&b);
	exit_record_put(&b, r);
	send_tlv(P_EXIT, &b);
}

/* A session's frames until its end; then, as after a job, DONE. */
static void serve_session(const struct job_spec *js, const uint8_t *raw, size_t len)
{
	int err = session_run(js, raw, len);

	if (err == -ECONNABORTED)
		fatal_quiet("%s", husk_lasterr());
	if (err)
		fatal("session: %s", husk_lasterr());
}

/*
 * One console line with guest-init's namespaces, so that the job's own
 * (readlink /proc/self/ns/...) can be checked against them. Only when
 * asked (husk run --verbose): each console byte is an exit to the VMM, and
 * this line cost a cold job about 20 ms in the test host.
 */
static void log_namespaces(void)
{
	static const char *const ns[] = { "pid", "mnt", "ipc", "uts", "net" };
	char line[320] = "", link[64], path[32];
	size_t i, len = 0;
	ssize_t n;

	for (i = 0; i < ARRAY_SIZE(ns); i++) {
		snprintf(path, sizeof(path), "/proc/self/ns/%s", ns[i]);
		n = readlink(path, link, sizeof(link) - 1);
		if (n <= 0)
			continue;
		len += snprintf(line + len, sizeof(line) - len, " %.*s", (int)n, link);
		if (len >= sizeof(line))
			break;
	}
	fprintf(stderr, "husk-init: guest-init namespaces:%s\n", line);
}

static void usage(void)
{
	fprintf(stderr, "usage: husk-init (as PID 1)\n"
		"       husk-init --test-fd N [--workspace DIR]\n");
	exit(2);
}

static void parse_args(int argc, char **argv)
{
	uint64_t fd;
	int i;

	/* As PID 1 the kernel may pass its own arguments: ignore them all. */
	if (getpid() == 1)
		return;
	for (i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--test-fd") && i + 1 < argc &&
		    !parse_u64(argv[++i], 0, 1 << 20, &fd)) {
			cfg.test_mode = true;
			cfg.ctl = fd;
		} else if (!strcmp(argv[i], "--workspace") && i + 1 < argc) {
			/* A copy: the job's init rewrites our argv strings. */
			cfg.workspace = strdup(argv[++i]);
			if (!cfg.workspace)
				usage();
		} else {
			usage();
		}
	}
	if (!cfg.test_mode)
		usage();
}

int main(int argc, char **argv)
{
	struct job_spec js;
	struct job_result res;
	uint8_t *raw;
	size_t raw_len;
	sigset_t chld;
	int err;

	init_step(IS_KERNEL);
	parse_args(argc, argv);
	/* The argv strings (contiguous) become the job's init's name (jobinit.c). */
	if (argc > 0) {
		cfg.title = argv[0];
		cfg.title_len = argv[argc - 1] + strlen(argv[argc - 1]) + 1 - argv[0];
	}
	/* SIGCHLD goes to the job loop's signalfd; a dead peer is EPIPE. */
	sigemptyset(&chld);
	sigaddset(&chld, SIGCHLD);
	sigprocmask(SIG_BLOCK, &chld, NULL);
	signal(SIGPIPE, SIG_IGN);

	if (cfg.test_mode) {
		fcntl(cfg.ctl, F_SETFD, FD_CLOEXEC);
		cfg.drop_user = geteuid() == 0;
		/*
		 * Without root the job's namespaces cannot be made: it then
		 * runs beside guest-init. The host-side tests check the
		 * namespaces only when they run as root.
		 */
		cfg.namespaces = cfg.drop_user;
		/* Orphans of the job come to us as they would to PID 1. */
		prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);
	} else {
		pid1_setup();
		init_step(IS_PID1_SETUP);
		cfg.drop_user = true;
		cfg.namespaces = true;
		cfg.ctl = connect_host();
		init_step(IS_CONNECTED);
	}

	/*
	 * Everything that does not depend on the job comes before HELLO: a
	 * template saved at HELLO holds it done, and a cold job does not wait.
	 */
	if (!cfg.test_mode) {
		mount_workspace();
		init_step(IS_WORKSPACE);
		if (net_prepare())
			fatal("network: %s", husk_lasterr());
		init_step(IS_NET_PREPARE);
		if (sandbox_cgroup_create())
			fatal("job cgroup: %s", husk_lasterr());
		init_step(IS_CGROUP);
		/* Before the clone: the job's init has its own copy of cfg. */
		cfg.use_cgroup = true;
	}
	if (job_prepare())
		fatal("the job's init: %s", husk_lasterr());
	init_step(IS_JOB_INIT);
	send_hello();
	receive_job(&js, &raw, &raw_len);
	init_step(IS_JOB_RECEIVED);
	if (!cfg.test_mode) {
		if (js.verbose)
			log_namespaces();
		set_clock(js.clock_ns);
		seed_rng(js.seed, js.seed_len, js.verbose);
		size_workspace(js.workspace_mib);
		if (net_setup(&js))
			fatal("network: %s", husk_lasterr());
		if (sandbox_cgroup_limit(&js))
			fatal("job cgroup: %s", husk_lasterr());
	}
	init_step(IS_JOB_SETUP);
	/* -EIO: the helper already sent its P_ERROR. */
	err = files_in(&js);
	if (err == -EIO)
		fatal_quiet("files in failed (reported to the host)");
	if (err)
		fatal("files in: %s", husk_lasterr());
	init_step(IS_FILES_IN);

	if (js.session) {
		serve_session(&js, raw, raw_len);
		free(raw);
		send_or_die(P_DONE, NULL, 0);
		job_spec_free(&js);
		await_host_close();
		power_off(0);
	}
	if (job_run(&js, raw, raw_len, &res))
		fatal("running the job: %s", husk_lasterr());
	free(raw);
	send_exit(&res);

	err = files_out(&js);
	if (err == -EIO)
		fatal_quiet("files out failed (reported to the host)");
	if (err)
		fatal_quiet("files out: %s", husk_lasterr());
	send_or_die(P_DONE, NULL, 0);
	job_spec_free(&js);
	await_host_close();
	power_off(0);
}
