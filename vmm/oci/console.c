/*
 * console: a container's terminal for its engine. See console.h.
 *
 * The engine (conmon, containerd's shim) listens on the console socket and
 * keeps the master: it copies the user's terminal to it and resizes it.
 * husk run --tty then reads the slave's window for the guest's pty and
 * forwards the slave both ways, so the slave must not echo or translate.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <termios.h>
#include <unistd.h>

#include "lib/util.h"
#include "oci/console.h"

static int send_master(const char *path, int master, const char *name)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	char cbuf[CMSG_SPACE(sizeof(int))] = { 0 };
	struct iovec iov = { .iov_base = (void *)name, .iov_len = strlen(name) };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = cbuf,
			     .msg_controllen = sizeof(cbuf) };
	struct cmsghdr *cm = CMSG_FIRSTHDR(&mh);
	int s, err = 0;

	if (strlen(path) >= sizeof(sa.sun_path))
		return husk_seterr(ENAMETOOLONG, "--console-socket %s: path too long", path);
	strcpy(sa.sun_path, path);
	cm->cmsg_level = SOL_SOCKET;
	cm->cmsg_type = SCM_RIGHTS;
	cm->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(cm), &master, sizeof(int));
	s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (s < 0)
		return husk_seterr(errno, "console socket: %s", strerror(errno));
	if (connect(s, (struct sockaddr *)&sa, sizeof(sa)))
		err = husk_seterr(errno, "--console-socket %s: %s", path, strerror(errno));
	else if (sendmsg(s, &mh, MSG_NOSIGNAL) < 0)
		err = husk_seterr(errno, "--console-socket %s: sending the terminal: %s", path,
				  strerror(errno));
	close(s);
	return err;
}

int oci_console_open(const char *path)
{
	struct termios t;
	char name[64];
	int m, sl = -1, err;

	m = posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC);
	if (m < 0)
		return husk_seterr(errno, "a terminal for the container: %s", strerror(errno));
	if (grantpt(m) || unlockpt(m) || ptsname_r(m, name, sizeof(name)) ||
	    (sl = open(name, O_RDWR | O_NOCTTY | O_CLOEXEC)) < 0 || tcgetattr(sl, &t)) {
		err = husk_seterr(errno, "a terminal for the container: %s", strerror(errno));
		goto fail;
	}
	cfmakeraw(&t);
	if (tcsetattr(sl, TCSANOW, &t)) {
		err = husk_seterr(errno, "the container's terminal raw: %s", strerror(errno));
		goto fail;
	}
	err = send_master(path, m, name);
	if (err)
		goto fail;
	close(m);
	return sl;
fail:
	if (sl >= 0)
		close(sl);
	close(m);
	return err;
}
