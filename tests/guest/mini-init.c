/*
 * mini-init: the /init of the integration tests' tiny initramfs. It proves
 * the guest reached userspace: mounts /dev and /proc, tells husk "init
 * reached" through its control registers (guest-init/ctl.c), prints a marker with the CPU count the
 * kernel brought up, runs /job.sh with /bin/sh if the image has one (the
 * demo's sample job), and powers the VM off through husk's register (with
 * reboot(2) as the fallback, which reboot=k turns into an i8042 reset).
 * With "mini-init.kmsg" on the kernel command line it then prints the
 * kernel's log records with their timestamps ("HUSK-KMSG <us> <text>"), so
 * tools/bench-phases gets the kernel's own phases after the marker, off
 * the timed path.
 */
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/reboot.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include "guest-init/ctl.h"
#include "machine/husk_ctl.h"

static void console_stdio(void)
{
	int fd;

	mkdir("/dev", 0755);
	mount("devtmpfs", "/dev", "devtmpfs", 0, NULL);
	fd = open("/dev/console", O_RDWR);
	if (fd >= 0) {
		dup2(fd, 0);
		dup2(fd, 1);
		dup2(fd, 2);
		if (fd > 2)
			close(fd);
	}
}

static int count_cpus(void)
{
	char buf[4096];
	FILE *f = fopen("/proc/cpuinfo", "r");
	int n = 0;

	if (!f)
		return -1;
	while (fgets(buf, sizeof(buf), f))
		if (!strncmp(buf, "processor", 9))
			n++;
	fclose(f);
	return n;
}

static int run_job(void)
{
	int st;
	pid_t pid;

	if (access("/job.sh", R_OK))
		return 0;
	pid = fork();
	if (pid == 0) {
		execl("/bin/sh", "sh", "/job.sh", (char *)NULL);
		perror("exec /bin/sh");
		_exit(127);
	}
	if (pid < 0 || waitpid(pid, &st, 0) < 0)
		return 125;
	st = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
	printf("HUSK-MINI-INIT: job exited %d\n", st);
	fflush(stdout);
	return st;
}

static long mem_total_kib(void)
{
	char buf[256];
	FILE *f = fopen("/proc/meminfo", "r");
	long kib = -1;

	while (f && fgets(buf, sizeof(buf), f))
		if (sscanf(buf, "MemTotal: %ld kB", &kib) == 1)
			break;
	if (f)
		fclose(f);
	return kib;
}

static int cmdline_has(const char *word)
{
	char buf[4096], *tok, *save;
	FILE *f = fopen("/proc/cmdline", "r");
	int found = 0;

	if (!f)
		return 0;
	if (fgets(buf, sizeof(buf), f))
		for (tok = strtok_r(buf, " \n", &save); tok && !found;
		     tok = strtok_r(NULL, " \n", &save))
			found = !strcmp(tok, word);
	fclose(f);
	return found;
}

/* Each record of /dev/kmsg: "prio,seq,usec,flags;text". */
static void dump_kmsg(void)
{
	char rec[8192];
	int fd = open("/dev/kmsg", O_RDONLY | O_NONBLOCK);
	ssize_t n;

	if (fd < 0)
		return;
	while ((n = read(fd, rec, sizeof(rec) - 1)) > 0) {
		char *semi, *nl, *p;
		unsigned long long us;

		rec[n] = '\0';
		semi = strchr(rec, ';');
		p = strchr(rec, ',');
		if (!semi || !p || !(p = strchr(p + 1, ',')) ||
		    sscanf(p + 1, "%llu", &us) != 1)
			continue;
		nl = strchr(semi + 1, '\n');
		if (nl)
			*nl = '\0';
		printf("HUSK-KMSG %llu %s\n", us, semi + 1);
	}
	close(fd);
	fflush(stdout);
}

int main(void)
{
	int have_ctl, status;

	console_stdio();
	/* devtmpfs first: on arm64 the registers are reached through /dev/mem. */
	have_ctl = ctl_open();
	ctl_write(HUSK_CTL_EVENT, HUSK_EV_INIT);
	mkdir("/proc", 0555);
	mount("proc", "/proc", "proc", 0, NULL);
	printf("HUSK-MINI-INIT: reached userspace, cpus=%d, husk-port=%s, mem_mib=%ld\n",
	       count_cpus(), have_ctl ? "yes" : "no",
	       mem_total_kib() / 1024);
	fflush(stdout);
	if (cmdline_has("mini-init.kmsg"))
		dump_kmsg();
	status = run_job();
	/* The UART sends from the kernel's tty buffer: let it drain first. */
	tcdrain(STDOUT_FILENO);
	ctl_write(HUSK_CTL_POWEROFF, status);
	reboot(RB_AUTOBOOT);
	return 0;
}
