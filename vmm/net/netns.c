/*
 * netns: the VM's tap in a network namespace the caller made. See netns.h.
 *
 * Translation is nft(8)'s job, run in a child that joined the namespace: a
 * ruleset of four commands is not worth a netlink nf_tables encoder here,
 * and linking libnftables would load it into every husk run for the few
 * that join a namespace.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/nsfs.h>
#include <sched.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "net/netns.h"
#include "lib/util.h"

/*
 * fd is the namespace husk runs in, or the initial one (pid 1's, when it can
 * be read): the host's own network, whose forwarding and NAT husk never
 * changes.
 */
static bool hosts_own(int fd)
{
	static const char *const own[] = { "/proc/thread-self/ns/net", "/proc/1/ns/net" };
	struct stat ns, o;

	if (fstat(fd, &ns))
		return false;
	for (size_t i = 0; i < ARRAY_SIZE(own); i++)
		if (!stat(own[i], &o) && o.st_dev == ns.st_dev && o.st_ino == ns.st_ino)
			return true;
	return false;
}

int netns_open(const char *path)
{
	int fd, type;

	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return husk_seterr(errno, "network namespace %s: %s", path, strerror(errno));
	type = ioctl(fd, NS_GET_NSTYPE);
	if (type != CLONE_NEWNET) {
		close(fd);
		return husk_seterr(EINVAL, "%s is not a network namespace (want /run/netns/NAME "
				   "or /proc/PID/ns/net)", path);
	}
	if (hosts_own(fd)) {
		close(fd);
		return husk_seterr(EPERM, "network namespace %s is the host's own (husk's, or the "
				   "initial one): husk turns on forwarding and adds NAT only in a "
				   "namespace of a container's; --net egress without --netns puts "
				   "the NIC on this host", path);
	}
	return fd;
}

int netns_enter(int nsfd)
{
	int saved = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);

	if (saved < 0)
		return husk_seterr(errno, "cannot open this thread's network namespace: %s",
				   strerror(errno));
	if (setns(nsfd, CLONE_NEWNET)) {
		int err = errno;

		close(saved);
		return husk_seterr(err, "cannot enter the network namespace: %s%s", strerror(err),
				   err == EPERM ? " (needs CAP_SYS_ADMIN)" : "");
	}
	return saved;
}

int netns_leave(int saved)
{
	int err = setns(saved, CLONE_NEWNET) ? errno : 0;

	close(saved);
	if (err)
		return husk_seterr(err, "cannot return to husk's network namespace: %s",
				   strerror(err));
	return 0;
}

/* nft CMDS inside nsfd's namespace; its complaint, if any, in the error. */
static int nft_in(int nsfd, const char *cmds, bool forward)
{
	char buf[64], out[512];
	const char *nft = sbin_path("nft", buf, sizeof(buf));
	int pfd[2], st, err = 0;
	ssize_t n, got = 0;
	pid_t pid;

	if (pipe2(pfd, O_CLOEXEC))
		return husk_seterr(errno, "pipe: %s", strerror(errno));
	fflush(NULL);
	pid = fork();
	if (pid < 0) {
		err = errno;
		close(pfd[0]);
		close(pfd[1]);
		return husk_seterr(err, "fork: %s", strerror(err));
	}
	if (!pid) {
		int fd;

		dup2(pfd[1], 1);
		dup2(pfd[1], 2);
		if (setns(nsfd, CLONE_NEWNET)) {
			write_best_effort(2, "cannot enter the namespace\n", 27);
			_exit(126);
		}
		/* /proc/sys/net is the opener's namespace's. */
		if (forward) {
			fd = open("/proc/sys/net/ipv4/ip_forward", O_WRONLY | O_CLOEXEC);
			if (fd < 0 || write(fd, "1", 1) != 1) {
				write_best_effort(2, "cannot turn on IPv4 forwarding\n", 31);
				_exit(126);
			}
			close(fd);
		}
		execlp(nft, "nft", cmds, (char *)NULL);
		write_best_effort(2, "nft(8) not found: install the Debian package nftables\n", 54);
		_exit(127);
	}
	close(pfd[1]);
	while (got < (ssize_t)sizeof(out) - 1 &&
	       ((n = read(pfd[0], out + got, sizeof(out) - 1 - got)) > 0 ||
		(n < 0 && errno == EINTR)))
		got += n > 0 ? n : 0;
	close(pfd[0]);
	out[got] = '\0';
	while (got && (out[got - 1] == '\n' || out[got - 1] == ' '))
		out[--got] = '\0';
	while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
		;
	if (WIFEXITED(st) && !WEXITSTATUS(st))
		return 0;
	for (char *p = out; *p; p++)
		if (*p == '\n')
			*p = ' ';
	return husk_seterr(EIO, "network namespace: nft %s: %s",
			   WIFEXITED(st) ? "failed" : "was killed", got ? out : "no message");
}

int netns_nat_add(int nsfd, unsigned slot, const char *tap, struct in_addr guest)
{
	char cmds[512], ip[INET_ADDRSTRLEN];

	inet_ntop(AF_INET, &guest, ip, sizeof(ip));
	/* Add-delete-add in one transaction: a dead run's table of this slot is replaced. */
	snprintf(cmds, sizeof(cmds),
		 "add table ip husk_%u; delete table ip husk_%u; add table ip husk_%u; "
		 "add chain ip husk_%u post { type nat hook postrouting priority srcnat; "
		 "policy accept; }; "
		 "add rule ip husk_%u post ip saddr %s oifname != \"%s\" masquerade",
		 slot, slot, slot, slot, slot, ip, tap);
	return nft_in(nsfd, cmds, true);
}

int netns_nat_del(int nsfd, unsigned slot)
{
	char cmds[64];

	snprintf(cmds, sizeof(cmds), "delete table ip husk_%u", slot);
	return nft_in(nsfd, cmds, false);
}
