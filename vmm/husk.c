/*
 * husk: the command-line front end. Parses the command, builds the VM,
 * runs the event loop on the main thread (stop notification, signals,
 * console flushing, the wall-clock timeout), then reports how the guest
 * ended: a summary and phase timings on stderr, optionally a JSON record.
 * `husk boot` runs every thread under its seccomp allowlist (seccomp.h).
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdbool.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include "serve/client.h"
#include "mcp/mcp.h"
#include "oci/oci.h"
#include "serve/serve.h"
#include "config.h"
#include "lib/host_file.h"
#include "cli.h"
#include "cli_image.h"
#include "cli_template.h"
#include "machine/guest_prof.h"
#include "lib/json.h"
#include "machine/phase.h"
#include "run/run.h"
#include "sandbox/seccomp.h"
#include "template/template.h"
#include "image/image.h"
#include "lib/util.h"
#include "machine/vm.h"

#define EXIT_HOST_ERROR 1
#define EXIT_USAGE 2
#define EXIT_PANIC 3
#define EXIT_CRASH 4
#define EXIT_TIMEOUT 5

/* "-" is husk's stdout; anything else a regular file (host_file.h). */
static int open_console(const char *path)
{
	if (!strcmp(path, "-"))
		return STDOUT_FILENO;
	return host_open_output(path, "--console");
}

/*
 * Move what is typed on stdin into the guest's receive FIFO, never more
 * than it has room for. Returns -1 once stdin is finished.
 */
static int forward_input(struct vm *vm, int fd)
{
	uint8_t buf[UART_FIFO_SIZE];
	size_t room = vm_console_room(vm);
	ssize_t n;

	if (!room)
		return 0;
	n = read(fd, buf, room < sizeof(buf) ? room : sizeof(buf));
	if (n < 0 && (errno == EINTR || errno == EAGAIN))
		return 0;
	if (n <= 0)
		return -1;
	vm_console_input(vm, buf, n);
	return 0;
}

/*
 * Wait for the VM to stop; returns the signal number that stopped it, or 0.
 * Closes sfd, the stop_signalfd() made before the thread was confined.
 */
static int event_loop(struct vm *vm, uint64_t timeout_us, int in_fd, int sfd)
{
	int sig = 0;

	for (;;) {
		/* stdin is only watched while the guest can take more input. */
		bool want_in = in_fd >= 0 && vm_console_room(vm) > 0;
		struct pollfd p[4] = {
			{ .fd = vm->stop_fd, .events = POLLIN },
			{ .fd = sfd, .events = POLLIN },
			{ .fd = want_in ? in_fd : -1, .events = POLLIN },
			{ .fd = vm->console_kick, .events = POLLIN },
		};
		/* No timer unless something is due: a profile samples every millisecond. */
		int wait_ms = ms_until(timeout_us ? vm->t.start + timeout_us : UINT64_MAX,
				       now_us());
		int r;

		/* A guest that takes no input frees room without telling: look again soon. */
		if (in_fd >= 0 && !want_in && (wait_ms < 0 || wait_ms > CONSOLE_FLUSH_MS))
			wait_ms = CONSOLE_FLUSH_MS;
		if (vm->prof)
			wait_ms = 1;
		r = poll(p, 4, console_wait_ms(&vm->console, wait_ms));

		if (r < 0 && errno != EINTR) {
			vm_stop(vm, VM_STOP_HOST_ERROR, 0, "poll: %s", strerror(errno));
			break;
		}
		console_flush(&vm->console);
		if (r > 0 && (p[0].revents & POLLIN))
			break;
		vm_sample_vcpu0(vm);
		if (r > 0 && sfd >= 0 && (p[1].revents & POLLIN)) {
			struct signalfd_siginfo si;

			if (read(sfd, &si, sizeof(si)) == sizeof(si)) {
				sig = si.ssi_signo;
				vm_stop(vm, VM_STOP_SIGNAL, 0, "stopped by signal %d (%s)",
					sig, strsignal(sig));
				break;
			}
		}
		if (r > 0 && (p[2].revents & (POLLIN | POLLHUP | POLLERR)) &&
		    forward_input(vm, in_fd) < 0)
			in_fd = -1;
		if (r > 0 && (p[3].revents & POLLIN))
			drain_eventfd(vm->console_kick);
		if (timeout_us && now_us() - vm->t.start >= timeout_us) {
			vm_stop(vm, VM_STOP_TIMEOUT, 0, "timed out after %llu s",
				(unsigned long long)(timeout_us / 1000000));
			break;
		}
	}
	if (sfd >= 0)
		close(sfd);
	return sig;
}

static int64_t rel(const struct vm *vm, uint64_t t)
{
	return t ? (int64_t)(t - vm->t.start) : -1;
}

static void print_json(const struct vm *vm, const struct boot_opts *o, int code,
		       uint64_t start_wall, uint64_t teardown)
{
	FILE *f = stdout;

	fprintf(f, "{\"reason\":\"%s\",\"detail\":", vm_reason_name(vm->reason));
	json_put_string(f, vm->detail);
	fprintf(f, ",\"guest_status\":%d,\"exit_code\":%d,\"vcpus\":%u,\"mem_mib\":%llu,"
		"\"console_bytes\":%llu,\"start_epoch_us\":%llu,\"timings_us\":{"
		"\"process_start\":0,\"first_kvm_run\":%lld,\"init\":%lld,\"exit\":%lld,"
		"\"teardown\":%lld,\"boot_timer\":%lld},",
		vm->guest_status, code, o->vcpus, (unsigned long long)o->mem_mib,
		(unsigned long long)vm->console.bytes, (unsigned long long)start_wall,
		(long long)rel(vm, vm->t.first_run), (long long)rel(vm, vm->t.event[HUSK_EV_INIT]),
		(long long)rel(vm, vm->t.exit), (long long)rel(vm, teardown),
		(long long)rel(vm, vm->t.boot_timer));
	phase_json(f, phase_current());
	fputs("}\n", f);
	fflush(f);
}

static int exit_code(const struct vm *vm, int sig)
{
	switch (vm->reason) {
	case VM_STOP_POWEROFF:
	case VM_STOP_RESET:
		return 0;
	case VM_STOP_PANIC:
		return EXIT_PANIC;
	case VM_STOP_CRASH:
		return EXIT_CRASH;
	case VM_STOP_TIMEOUT:
		return EXIT_TIMEOUT;
	case VM_STOP_SIGNAL:
		return 128 + sig;
	default:
		return EXIT_HOST_ERROR;
	}
}

static void block_signals(void)
{
	sigset_t set;

	/* Every thread inherits this mask; the event loop reads them via signalfd. */
	sigemptyset(&set);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGHUP);
	sigaddset(&set, SIGUSR1);
	pthread_sigmask(SIG_BLOCK, &set, NULL);
	/* A closed console pipe must not kill husk. */
	signal(SIGPIPE, SIG_IGN);
}

/* Why a run failed; after a panic or crash, what the guest printed last. */
static void run_error_msg(const struct run_opts *o, const struct run_result *r)
{
	husk_msg("%s", r->error);
	if (r->console_tail[0] && !o->console)
		fprintf(stderr, "husk: the guest console's last output:\n%s%s", r->console_tail,
			r->console_tail[strlen(r->console_tail) - 1] == '\n' ? "" : "\n");
}

static int cmd_boot(int argc, char **argv, uint64_t start, uint64_t start_wall)
{
	static char stdout_buf[BUFSIZ];
	struct boot_opts o;
	struct vm_config cfg;
	struct vm *vm;
	struct guest_prof prof = { 0 };
	uint64_t teardown;
	int fd, sfd, sig, code, err, pfd = -1;

	if (cli_parse_boot(argc, argv, &o)) {
		fprintf(stderr, "husk boot: %s\nTry 'husk boot --help'.\n", husk_lasterr());
		return EXIT_USAGE;
	}
	if (o.help) {
		fputs(cli_boot_usage, stdout);
		return 0;
	}
	husk_verbose = o.verbose;
	phase_mark(PH_OPTIONS);
	if (seccomp_env_check()) {
		fprintf(stderr, "husk boot: %s\n", husk_lasterr());
		return EXIT_USAGE;
	}
	fd = open_console(o.console);
	if (fd < 0) {
		husk_msg("%s", husk_lasterr());
		return EXIT_HOST_ERROR;
	}
	if (o.profile) {
		pfd = host_open_output(o.profile, "--profile");
		if (pfd < 0 || guest_prof_init(&prof, GUEST_PROF_MAX)) {
			husk_msg("%s", husk_lasterr());
			return EXIT_HOST_ERROR;
		}
	}
	block_signals();

	memset(&cfg, 0, sizeof(cfg));
	cfg.net_tap_fd = -1;
	cfg.kernel_path = o.kernel;
	cfg.initrd_path = o.initrd;
	cfg.rootfs_path = o.disk;
	cfg.rng = o.rng;
	cfg.vsock_uds = o.vsock;
	cfg.guest_cid = 3;
	cfg.cmdline = o.cmdline;
	cfg.mem_bytes = o.mem_mib << 20;
	cfg.nr_vcpus = o.vcpus;
	cfg.console_fd = fd;
	cfg.seccomp = true;
	cfg.boot_timer = o.boot_timer;
	cfg.no_hugepages = o.no_hugepages;

	vm = calloc(1, sizeof(*vm));
	if (!vm) {
		husk_msg("out of memory");
		return EXIT_HOST_ERROR;
	}
	/*
	 * Before the main thread is confined: signalfd4 is not on its list, and
	 * stdio would fstat stdout and ask whether it is a tty (ioctl) to size
	 * its buffer on the first write of the --json record.
	 */
	sfd = stop_signalfd();
	setvbuf(stdout, stdout_buf, _IOFBF, sizeof(stdout_buf));
	err = vm_create(vm, &cfg, start);
	if (!err && o.profile)
		vm->prof = &prof;
	if (err || vm_start(vm) || seccomp_install(SECCOMP_KIND_BOOT_MAIN)) {
		husk_msg("cannot start the VM: %s", husk_lasterr());
		vm_stop(vm, VM_STOP_HOST_ERROR, 0, "%s", husk_lasterr());
		vm_destroy(vm);
		free(vm);
		if (sfd >= 0)
			close(sfd);
		if (pfd >= 0)
			close(pfd);
		guest_prof_free(&prof);
		return EXIT_HOST_ERROR;
	}
	phase_mark(PH_SECCOMP);
	if (vm->kvm.pvm)
		husk_msg("warning: this host's KVM is PVM (no hardware virtualization): guest "
			 "kernel code is emulated instruction by instruction, so a Linux boot "
			 "takes many minutes. Use a host with VT-x/AMD-V for real work.");

	sig = event_loop(vm, o.timeout_sec * 1000000u, o.no_stdin ? -1 : STDIN_FILENO, sfd);
	vm_destroy(vm);
	teardown = now_us();
	code = exit_code(vm, sig);

	husk_msg("%s: %s", vm_reason_name(vm->reason), vm->detail);
	if (vm->t.boot_timer) {
		/* Firecracker's wording: harnesses written for it parse this line. */
		uint64_t us = vm->t.boot_timer - vm->t.start;

		husk_msg("Guest-boot-time = %llu us %llu ms", (unsigned long long)us,
			 (unsigned long long)(us / 1000));
	}
	husk_msg("timings_us first_kvm_run=%lld init=%lld exit=%lld teardown=%lld",
		 (long long)rel(vm, vm->t.first_run),
		 (long long)rel(vm, vm->t.event[HUSK_EV_INIT]),
		 (long long)rel(vm, vm->t.exit), (long long)rel(vm, teardown));
	if (pfd >= 0) {
		if (guest_prof_write(&prof, pfd))
			husk_msg("%s", husk_lasterr());
		close(pfd);
		guest_prof_free(&prof);
	}
	if (o.json)
		print_json(vm, &o, code, start_wall, teardown);
	if (fd != STDOUT_FILENO)
		close(fd);
	free(vm);
	return code;
}

/*
 * husk run --image: the image's root and, where the command line is
 * silent, its command, environment and working directory.
 */
static int use_image(struct run_opts *o, struct image_info *img)
{
	static char *argv[IMAGE_MAX_ARGS * 2 + 1];
	int i;

	if (image_find(o->image_dir ? o->image_dir : IMAGE_DEFAULT_DIR, o->image, img)) {
		fprintf(stderr, "husk run: --image %s: %s\n", o->image, husk_lasterr());
		return -1;
	}
	o->rootfs = img->rootfs;
	o->image_init = true;
	/* A session's commands come later, each with its own argv. */
	if (!o->job.argc && !o->job.session) {
		if (!img->argc) {
			fprintf(stderr, "husk run: image %s has no Entrypoint or Cmd: give a "
				"command after --\n", o->image);
			return -1;
		}
		for (i = 0; i < img->argc && i < (int)ARRAY_SIZE(argv) - 1; i++)
			argv[i] = img->argv[i];
		o->job.argv = argv;
		o->job.argc = i;
	}
	if (img->nr_env + o->job.nr_env > JOB_MAX_ENV) {
		fprintf(stderr, "husk run: image %s: its %d Env entries and --env make more "
			"than %d\n", o->image, img->nr_env, JOB_MAX_ENV);
		return -1;
	}
	/* The image's first, so --env overrides it. */
	memmove(o->job.env + img->nr_env, o->job.env, o->job.nr_env * sizeof(o->job.env[0]));
	for (i = 0; i < img->nr_env; i++)
		o->job.env[i] = img->env[i];
	o->job.nr_env += img->nr_env;
	if (!o->job.cwd && img->workdir)
		o->job.cwd = img->workdir;
	return 0;
}

/*
 * husk run --tty: the guest's pty takes the window of ours, and with
 * --stdin from a terminal, ours goes raw while the job runs (the guest's
 * line discipline echoes and edits, as ssh -t does), then back.
 */
static struct termios tty_saved;
static bool tty_raw;

static void tty_begin(struct run_opts *o)
{
	struct winsize ws;
	struct termios raw;

	if (!ioctl(STDIN_FILENO, TIOCGWINSZ, &ws) || !ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws)) {
		o->job.rows = ws.ws_row;
		o->job.cols = ws.ws_col;
	}
	if (!o->job.stdin || !isatty(STDIN_FILENO) || tcgetattr(STDIN_FILENO, &tty_saved))
		return;
	raw = tty_saved;
	cfmakeraw(&raw);
	tty_raw = !tcsetattr(STDIN_FILENO, TCSANOW, &raw);
}

static void tty_end(void)
{
	if (tty_raw)
		tcsetattr(STDIN_FILENO, TCSANOW, &tty_saved);
	tty_raw = false;
}

static int cmd_run(int argc, char **argv, uint64_t start)
{
	static struct image_info img;
	struct run_opts o;
	struct run_result r;
	int code;

	if (cli_parse_run(argc, argv, &o)) {
		fprintf(stderr, "husk run: %s\nTry 'husk run --help'.\n", husk_lasterr());
		return EXIT_USAGE;
	}
	if (o.help) {
		fputs(cli_run_usage, stdout);
		return 0;
	}
	husk_verbose = o.verbose;
	if (o.server)
		return client_run(&o, o.server);
	if (o.image && use_image(&o, &img))
		return RUN_EXIT_FAILURE;
	phase_mark(PH_OPTIONS);
	/* Without the jail there are no filters to weaken. */
	if (o.no_jail)
		seccomp_env_unlocked = true;
	if (seccomp_env_check()) {
		fprintf(stderr, "husk run: %s\n", husk_lasterr());
		return EXIT_USAGE;
	}
	block_signals();
	if (o.job.terminal)
		tty_begin(&o);
	code = run_job(&o, start, &r);
	if (o.job.terminal)
		tty_end();
	if (r.error[0])
		run_error_msg(&o, &r);
	else if (r.timed_out)
		husk_msg("job timed out after %llu s and was killed",
			 (unsigned long long)o.job.timeout_sec);
	if (o.verbose)
		husk_msg("timings_us first_kvm_run=%lld init=%lld job_start=%lld job_end=%lld "
			 "vm_exit=%lld teardown=%lld", (long long)r.t_first_run,
			 (long long)r.t_init, (long long)r.t_job_start, (long long)r.t_job_end,
			 (long long)r.t_exit, (long long)r.t_teardown);
	return code;
}

/* ---- husk image ---- */

static int cmd_image(int argc, char **argv)
{
	struct image_import_opts io = { 0 };
	struct image_opts o;
	char init[PATH_MAX];
	int err;

	if (cli_parse_image(argc, argv, &o)) {
		fprintf(stderr, "husk image: %s\nTry 'husk image --help'.\n", husk_lasterr());
		return EXIT_USAGE;
	}
	if (o.help) {
		fputs(cli_image_usage, stdout);
		return 0;
	}
	switch (o.action) {
	case IMG_IMPORT:
		err = run_find_image(NULL, "HUSK_INIT", "husk-init", init, sizeof(init));
		if (!err) {
			io.src = o.src;
			io.name = o.name;
			io.ref = o.ref;
			io.dir = o.dir;
			io.init = init;
			io.json = o.json;
			err = image_import(&io);
		}
		break;
	case IMG_LS:
		err = image_ls(o.dir, o.json);
		break;
	default:
		err = image_rm(o.dir, o.name);
		break;
	}
	if (err) {
		fprintf(stderr, "husk image: %s\n", husk_lasterr());
		return RUN_EXIT_FAILURE;
	}
	return 0;
}

/* ---- husk template ---- */

static void print_time(char *out, size_t len, uint64_t us)
{
	time_t t = us / 1000000;
	struct tm tm;

	if (!gmtime_r(&t, &tm) || !strftime(out, len, "%Y-%m-%dT%H:%M:%SZ", &tm))
		snprintf(out, len, "?");
}

static void list_templates(const struct template_info *v, unsigned n, bool json)
{
	char when[32], ksha[17], rsha[17];
	unsigned i;

	if (!json)
		printf("%-24s %9s  %-20s %7s %5s %-3s  %-16s %-16s\n", "NAME", "DISK", "CREATED",
		       "RAM", "VCPUS", "NIC", "KERNEL", "ROOTFS");
	else
		fputc('[', stdout);
	for (i = 0; i < n; i++) {
		const struct template_meta *m = &v[i].meta;

		print_time(when, sizeof(when), m->created_us);
		digest_hex(m->kernel_sha, 8, ksha);
		digest_hex(m->rootfs_sha, 8, rsha);
		if (json) {
			char k[65], r[65];

			digest_hex(m->kernel_sha, 32, k);
			digest_hex(m->rootfs_sha, 32, r);
			printf("%s{\"name\":", i ? "," : "");
			json_put_string(stdout, m->name);
			if (!v[i].ok) {
				fputs(",\"ok\":false,\"problem\":", stdout);
				json_put_string(stdout, v[i].problem);
				fputc('}', stdout);
				continue;
			}
			printf(",\"ok\":true,\"disk_bytes\":%llu,\"created\":\"%s\","
			       "\"mem_mib\":%llu,\"vcpus\":%llu,\"net\":%s,\"memory_data_bytes\":%llu,"
			       "\"kernel_sha256\":\"%s\",\"rootfs_sha256\":\"%s\",\"kernel\":",
			       (unsigned long long)v[i].disk_bytes, when,
			       (unsigned long long)(m->mem_bytes >> 20), (unsigned long long)m->vcpus,
			       m->net ? "true" : "false", (unsigned long long)m->mem_data, k, r);
			json_put_string(stdout, m->kernel_path);
			fputs(",\"rootfs\":", stdout);
			json_put_string(stdout, m->rootfs_path);
			fputc('}', stdout);
		} else if (!v[i].ok) {
			printf("%-24s unusable: %s\n", m->name, v[i].problem);
		} else {
			printf("%-24s %8lluM  %-20s %6lluM %5llu %-3s  %-16s %-16s\n", m->name,
			       (unsigned long long)(v[i].disk_bytes >> 20), when,
			       (unsigned long long)(m->mem_bytes >> 20), (unsigned long long)m->vcpus,
			       m->net ? "yes" : "no", ksha, rsha);
		}
	}
	if (json)
		fputs("]\n", stdout);
}

static int cmd_template(int argc, char **argv, uint64_t start)
{
	static struct image_info img;	/* its root path lives as long as the run */
	struct template_opts o;
	struct template_info *v;
	struct template t;
	struct run_result r;
	unsigned n;
	int dfd, err;

	if (cli_parse_template(argc, argv, &o)) {
		fprintf(stderr, "husk template: %s\nTry 'husk template --help'.\n", husk_lasterr());
		return EXIT_USAGE;
	}
	if (o.help) {
		fputs(cli_template_usage, stdout);
		return 0;
	}
	husk_verbose = o.run.verbose;
	if (o.action == TPL_CREATE) {
		if (o.run.no_jail)
			seccomp_env_unlocked = true;
		if (seccomp_env_check()) {
			fprintf(stderr, "husk template: %s\n", husk_lasterr());
			return EXIT_USAGE;
		}
		if (o.run.image) {
			/* Its root (and guest-init's place in it); its config is the clones'. */
			if (image_find(o.run.image_dir ? o.run.image_dir : IMAGE_DEFAULT_DIR,
				       o.run.image, &img)) {
				fprintf(stderr, "husk template: --image %s: %s\n", o.run.image,
					husk_lasterr());
				return RUN_EXIT_FAILURE;
			}
			o.run.rootfs = img.rootfs;
			o.run.image_init = true;
		}
		block_signals();
		err = run_job(&o.run, start, &r);
		if (r.error[0])
			run_error_msg(&o.run, &r);
		else
			husk_msg("template %s made in %.2f s (%llu MiB of guest RAM saved)", o.name,
				 (double)r.t_teardown / 1e6,
				 (unsigned long long)(r.template_data >> 20));
		return err;
	}
	dfd = template_dir_open(o.dir, false);
	if (dfd < 0) {
		/* No directory yet is an empty list, not an error. */
		if (o.action == TPL_LS && dfd == -ENOENT) {
			list_templates(NULL, 0, o.json);
			return 0;
		}
		husk_msg("%s", husk_lasterr());
		return RUN_EXIT_FAILURE;
	}
	switch (o.action) {
	case TPL_LS:
		err = template_list(dfd, &v, &n);
		if (!err) {
			list_templates(v, n, o.json);
			free(v);
		}
		break;
	case TPL_RM:
		err = template_remove(dfd, o.name);
		break;
	default:
		err = template_open(dfd, o.name, NULL, NULL, &t);
		if (!err) {
			err = template_verify_memory(&t);
			if (!err)
				printf("template %s: state, memory image (%llu MiB of data) and root "
				       "image intact\n", o.name, (unsigned long long)(t.meta.mem_data >> 20));
			template_close(&t);
		}
	}
	close(dfd);
	if (err) {
		husk_msg("%s", husk_lasterr());
		return RUN_EXIT_FAILURE;
	}
	return 0;
}

static int cmd_serve(int argc, char **argv)
{
	struct serve_cfg c;
	char exe[PATH_MAX];
	ssize_t n;
	int err = serve_parse(argc, argv, &c);

	if (err == 1) {
		fputs(serve_usage, stdout);
		return 0;
	}
	if (err) {
		fprintf(stderr, "husk serve: %s\n", husk_lasterr());
		return EXIT_USAGE;
	}
	/* Workers run this very binary. */
	n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	if (n <= 0) {
		husk_msg("serve: cannot find its own binary: %s", strerror(errno));
		return 1;
	}
	exe[n] = '\0';
	c.husk_path = exe;
	husk_verbose = c.verbose;
	return serve_main(&c);
}

int main(int argc, char **argv)
{
	static struct phase_log early;
	uint64_t start = now_us(), start_wall = wall_us();

	phase_init(&early, start);
	phase_set(PH_EXEC, phase_exec_us(getenv("HUSK_SPAWN_US"), start));
	/* Engines run an OCI runtime by its path: husk-runc is husk oci. */
	if (argc > 0 && (strrchr(argv[0], '/') ? !strcmp(strrchr(argv[0], '/') + 1, "husk-runc") :
			 !strcmp(argv[0], "husk-runc")))
		return oci_main(argc, argv);

	switch (cli_command(argc, argv)) {
	case CLI_HELP:
		fputs(cli_usage, stdout);
		return 0;
	case CLI_VERSION:
		printf("husk %s\n", PACKAGE_VERSION);
		return 0;
	case CLI_BOOT:
		return cmd_boot(argc - 1, argv + 1, start, start_wall);
	case CLI_RUN:
		return cmd_run(argc - 1, argv + 1, start);
	case CLI_TEMPLATE:
		return cmd_template(argc - 1, argv + 1, start);
	case CLI_IMAGE:
		return cmd_image(argc - 1, argv + 1);
	case CLI_SERVE:
		return cmd_serve(argc - 1, argv + 1);
	case CLI_PS:
		return client_ps(argc - 1, argv + 1);
	case CLI_EXEC:
		return client_exec(argc - 1, argv + 1);
	case CLI_KILL:
		return client_kill(argc - 1, argv + 1);
	case CLI_MCP:
		return mcp_main(argc - 1, argv + 1);
	case CLI_OCI:
		return oci_main(argc - 1, argv + 1);
	default:
		fprintf(stderr, "husk: %s\n\n%s", husk_lasterr(), cli_usage);
		return EXIT_USAGE;
	}
}
