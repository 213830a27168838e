/*
 * boot-timer: time a VMM from spawn until a marker line appears on its
 * output, the same way for every VMM, so figures are comparable.
 *
 *   boot-timer [--marker STR] [--kill-after-marker] [--timeout SEC]
 *              [--output FILE] -- CMD...
 *
 * Prints one line: marker_us=N exit_us=N maxrss_kib=N status=N
 * (marker_us -1 if the marker never came). maxrss is the peak resident set
 * of the VMM process (its guest RAM included, as for any VMM).
 * --kill-after-marker stops VMMs that do not exit when the guest reboots.
 * --output keeps a copy of the command's stdout.
 * The command gets HUSK_SPAWN_US, the CLOCK_MONOTONIC microseconds of the
 * fork, so husk can say how long its exec took.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static long long now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000000LL + ts.tv_nsec / 1000;
}

int main(int argc, char **argv)
{
	const char *marker = "HUSK-MINI-INIT: reached userspace";
	long long t0, t_marker = -1, t_exit, deadline;
	int kill_after = 0, timeout = 120, i, p[2], st = 0, out = -1;
	char win[8192];
	size_t wlen = 0;
	struct rusage ru;
	pid_t pid;

	for (i = 1; i < argc && strcmp(argv[i], "--"); i++) {
		if (!strcmp(argv[i], "--marker") && i + 1 < argc)
			marker = argv[++i];
		else if (!strcmp(argv[i], "--kill-after-marker"))
			kill_after = 1;
		else if (!strcmp(argv[i], "--timeout") && i + 1 < argc)
			timeout = atoi(argv[++i]);
		else if (!strcmp(argv[i], "--output") && i + 1 < argc)
			out = open(argv[++i], O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
		else
			break;
	}
	if (i >= argc - 1 || strcmp(argv[i], "--")) {
		fprintf(stderr, "usage: boot-timer [--marker STR] [--kill-after-marker] "
			"[--timeout SEC] -- CMD...\n");
		return 2;
	}
	if (pipe(p) < 0) {
		perror("pipe");
		return 1;
	}
	t0 = now_us();
	pid = fork();
	if (pid == 0) {
		char spawn[24];

		/* husk reports its exec time against this (phase.h); others ignore it. */
		snprintf(spawn, sizeof(spawn), "%lld", t0);
		setenv("HUSK_SPAWN_US", spawn, 1);
		dup2(p[1], 1);
		close(p[0]);
		close(p[1]);
		execvp(argv[i + 1], argv + i + 1);
		perror(argv[i + 1]);
		_exit(127);
	}
	close(p[1]);
	deadline = t0 + timeout * 1000000LL;
	for (;;) {
		struct pollfd pf = { .fd = p[0], .events = POLLIN };
		long long left = (deadline - now_us()) / 1000;
		ssize_t n;

		if (left <= 0 || poll(&pf, 1, (int)left) <= 0) {
			kill(pid, SIGKILL);
			break;
		}
		n = read(p[0], win + wlen, sizeof(win) - 1 - wlen);
		if (n <= 0)
			break;
		if (out >= 0 && write(out, win + wlen, n) != n)
			perror("boot-timer: --output");
		wlen += n;
		win[wlen] = '\0';
		if (t_marker < 0 && strstr(win, marker)) {
			t_marker = now_us();
			if (kill_after)
				kill(pid, SIGKILL);
		}
		/* Keep a tail so a marker split across reads is still found. */
		if (wlen > sizeof(win) / 2) {
			size_t keep = strlen(marker);

			memmove(win, win + wlen - keep, keep);
			wlen = keep;
		}
	}
	while (wait4(pid, &st, 0, &ru) < 0 && errno == EINTR)
		;
	t_exit = now_us();
	printf("marker_us=%lld exit_us=%lld maxrss_kib=%ld status=%d\n",
	       t_marker < 0 ? -1 : t_marker - t0, t_exit - t0, ru.ru_maxrss,
	       WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st));
	return t_marker < 0;
}
