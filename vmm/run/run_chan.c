/*
 * run_chan: messages on the SOCK_SEQPACKET pair between husk run's
 * supervisor and its VM process (see run_int.h). Either end may be the
 * compromised one, so a message is taken whole or refused: MSG_TRUNC makes
 * recv() report a datagram's real length, and one longer than the buffer is
 * an error rather than silently cut short.
 */
#include <errno.h>
#include <string.h>
#include <sys/socket.h>

#include "run/run_int.h"
#include "lib/util.h"

ssize_t run_chan_recv(int fd, void *buf, size_t cap)
{
	ssize_t n;

	do
		n = recv(fd, buf, cap, MSG_DONTWAIT | MSG_TRUNC);
	while (n < 0 && errno == EINTR);
	if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
		return 0;
	/*
	 * A peer that exits with a message of ours unread resets the
	 * connection: it is gone all the same, and its exit says why.
	 */
	if (n == 0 || (n < 0 && errno == ECONNRESET))
		return husk_seterr(EPIPE, "the other process closed the channel");
	if (n < 0)
		return husk_seterr(errno, "the channel failed: %s", strerror(errno));
	if ((size_t)n > cap)
		return husk_seterr(EMSGSIZE, "a %zd-byte message, over the %zu-byte limit",
				   n, cap);
	if ((size_t)n < sizeof(struct chan_hdr))
		return husk_seterr(EPROTO, "a %zd-byte message, shorter than its header", n);
	return n;
}
