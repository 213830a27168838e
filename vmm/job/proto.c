/*
 * proto: framing and TLV coding of the host <-> guest-init control protocol
 * (see proto.h for the contract and docs/protocol.md for the conversation).
 *
 * Linked into both husk and the static guest-init, so it depends on libc
 * and husk_seterr() only. Everything that comes off the wire is checked
 * before it is used: header version and length, TLV element bounds, string
 * contents. Integers are little-endian on the wire whatever the host is.
 */
#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include "job/proto.h"
#include "lib/util.h"

#define TLV_HDR_LEN 6	/* u16 tag + u32 length */

static void put_le16(uint8_t *p, uint16_t v)
{
	p[0] = v;
	p[1] = v >> 8;
}

static void put_le32(uint8_t *p, uint32_t v)
{
	put_le16(p, v);
	put_le16(p + 2, v >> 16);
}

static void put_le64(uint8_t *p, uint64_t v)
{
	put_le32(p, v);
	put_le32(p + 4, v >> 32);
}

static uint16_t get_le16(const uint8_t *p)
{
	return p[0] | (uint16_t)p[1] << 8;
}

static uint32_t get_le32(const uint8_t *p)
{
	return get_le16(p) | (uint32_t)get_le16(p + 2) << 16;
}

static uint64_t get_le64(const uint8_t *p)
{
	return get_le32(p) | (uint64_t)get_le32(p + 4) << 32;
}

/* ---- frame headers ---- */

void proto_hdr_encode(uint8_t out[PROTO_HDR_LEN], uint16_t type, uint32_t len)
{
	put_le32(out, len);
	put_le16(out + 4, type);
	put_le16(out + 6, PROTO_VERSION);
}

const char *proto_step_name(unsigned step)
{
	static const char *const names[IS_NR] = {
		[IS_KERNEL] = "kernel", [IS_PID1_SETUP] = "pid1_setup",
		[IS_CONNECTED] = "connected", [IS_WORKSPACE] = "workspace",
		[IS_NET_PREPARE] = "net_prepare", [IS_CGROUP] = "cgroup",
		[IS_JOB_INIT] = "job_init", [IS_HELLO] = "hello",
		[IS_JOB_RECEIVED] = "job_received", [IS_JOB_SETUP] = "job_setup",
		[IS_FILES_IN] = "files_in", [IS_JOB_STARTED] = "job_started",
	};

	return step < IS_NR ? names[step] : "?";
}

bool proto_hostname_ok(const char *s)
{
	size_t i, n = s ? strlen(s) : 0;

	if (n < 1 || n > PROTO_HOSTNAME_MAX || s[0] == '-' || s[0] == '.')
		return false;
	for (i = 0; i < n; i++)
		if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= 'A' && s[i] <= 'Z') ||
		      (s[i] >= '0' && s[i] <= '9') || s[i] == '-' || s[i] == '.'))
			return false;
	return true;
}

bool proto_rlimit_ok(uint32_t resource)
{
	return resource < RLIM_NLIMITS && resource != RLIMIT_RSS;
}

/* a is b, or a directory above or below b. */
static bool path_related(const char *a, const char *b)
{
	size_t na = strlen(a), nb = strlen(b), n = na < nb ? na : nb;

	return !strncmp(a, b, n) && (na == nb || (na < nb ? b[n] : a[n]) == '/');
}

bool proto_tmpfs_path_ok(const char *path, const char *workspace)
{
	static const char *const vm_own[] = { "/proc", "/sys", "/dev" };
	const char *p = path, *slash;
	size_t n = strlen(path), i;

	if (n < 2 || n > 4095 || path[0] != '/' || path[n - 1] == '/')
		return false;
	for (p = path + 1; *p; p = slash + 1) {
		slash = strchr(p, '/');
		n = slash ? (size_t)(slash - p) : strlen(p);
		if (!n || (n == 1 && p[0] == '.') || (n == 2 && p[0] == '.' && p[1] == '.'))
			return false;
		if (!slash)
			break;
	}
	/* Their only ancestor is "/", refused above. */
	for (i = 0; i < sizeof(vm_own) / sizeof(vm_own[0]); i++)
		if (path_related(path, vm_own[i]))
			return false;
	return !path_related(path, workspace);
}

bool proto_type_known(uint16_t type)
{
	switch (type) {
	case P_HELLO: case P_STARTED: case P_STDOUT: case P_STDERR:
	case P_EXIT: case P_FILES_OUT: case P_DONE:
	case P_JOB: case P_STDIN: case P_FILES_IN:
	case P_XSTARTED: case P_XOUT: case P_XEXIT: case P_XFILES: case P_XDONE:
	case P_XERROR: case P_EXEC: case P_XSTDIN: case P_XSIGNAL: case P_PUT:
	case P_GET: case P_END: case P_RESIZE:
	case P_ERROR:
		return true;
	}
	return false;
}

/*
 * Every header problem is -EPROTO: the peer is either broken or hostile and
 * the conversation ends either way; husk_lasterr() says which check failed.
 */
int proto_hdr_decode(const uint8_t in[PROTO_HDR_LEN], struct proto_hdr *h)
{
	h->len = get_le32(in);
	h->type = get_le16(in + 4);
	h->version = get_le16(in + 6);
	if (h->version != PROTO_VERSION)
		return husk_seterr(EPROTO, "control frame has protocol version %u, expected %u",
				   h->version, PROTO_VERSION);
	if (h->len > PROTO_MAX_PAYLOAD)
		return husk_seterr(EPROTO, "control frame of %u bytes exceeds the limit of %u",
				   h->len, PROTO_MAX_PAYLOAD);
	if (!proto_type_known(h->type))
		return husk_seterr(EPROTO, "control frame has unknown type %u", h->type);
	return 0;
}

/* ---- TLV builder ---- */

void tlv_init(struct tlv_buf *b)
{
	memset(b, 0, sizeof(*b));
}

void tlv_free(struct tlv_buf *b)
{
	free(b->data);
	tlv_init(b);
}

/*
 * Appends never fail loudly: the first failure sets b->failed and later
 * appends do nothing, so a builder can check once before sending. The limit
 * is PROTO_MAX_PAYLOAD because a TLV list always travels in one frame.
 */
void tlv_put(struct tlv_buf *b, uint16_t tag, const void *val, uint32_t len)
{
	size_t need, cap;
	uint8_t *p;

	if (b->failed)
		return;
	if (len > PROTO_MAX_PAYLOAD - TLV_HDR_LEN ||
	    b->len > PROTO_MAX_PAYLOAD - TLV_HDR_LEN - len) {
		b->failed = true;
		return;
	}
	need = b->len + TLV_HDR_LEN + len;
	if (need > b->cap) {
		cap = b->cap ? b->cap : 256;
		while (cap < need)
			cap *= 2;
		p = realloc(b->data, cap);
		if (!p) {
			b->failed = true;
			return;
		}
		b->data = p;
		b->cap = cap;
	}
	p = b->data + b->len;
	put_le16(p, tag);
	put_le32(p + 2, len);
	if (len)
		memcpy(p + TLV_HDR_LEN, val, len);
	b->len = need;
}

void tlv_put_str(struct tlv_buf *b, uint16_t tag, const char *s)
{
	size_t n = strlen(s);

	if (n > PROTO_MAX_PAYLOAD) {
		b->failed = true;
		return;
	}
	tlv_put(b, tag, s, n);
}

void tlv_put_u8(struct tlv_buf *b, uint16_t tag, uint8_t v)
{
	tlv_put(b, tag, &v, 1);
}

void tlv_put_u32(struct tlv_buf *b, uint16_t tag, uint32_t v)
{
	uint8_t le[4];

	put_le32(le, v);
	tlv_put(b, tag, le, sizeof(le));
}

void tlv_put_u64(struct tlv_buf *b, uint16_t tag, uint64_t v)
{
	uint8_t le[8];

	put_le64(le, v);
	tlv_put(b, tag, le, sizeof(le));
}

/* ---- TLV iterator ---- */

void tlv_iter_init(struct tlv_iter *it, const uint8_t *p, size_t len)
{
	it->p = p;
	it->left = len;
}

/* A truncated element leaves the iterator where it is: it stays an error. */
int tlv_next(struct tlv_iter *it, struct tlv *t)
{
	uint32_t len;

	if (!it->left)
		return 0;
	if (it->left < TLV_HDR_LEN)
		return husk_seterr(EINVAL, "truncated TLV header (%zu bytes left)", it->left);
	len = get_le32(it->p + 2);
	if (len > it->left - TLV_HDR_LEN)
		return husk_seterr(EINVAL, "TLV tag %u claims %u bytes, only %zu left",
				   get_le16(it->p), len, it->left - TLV_HDR_LEN);
	t->tag = get_le16(it->p);
	t->len = len;
	t->val = it->p + TLV_HDR_LEN;
	it->p += TLV_HDR_LEN + len;
	it->left -= TLV_HDR_LEN + len;
	return 1;
}

static int tlv_want_len(const struct tlv *t, uint32_t want)
{
	if (t->len != want)
		return husk_seterr(EINVAL, "TLV tag %u has %u bytes, expected %u",
				   t->tag, t->len, want);
	return 0;
}

int tlv_u8(const struct tlv *t, uint8_t *v)
{
	int err = tlv_want_len(t, 1);

	if (!err)
		*v = t->val[0];
	return err;
}

int tlv_u32(const struct tlv *t, uint32_t *v)
{
	int err = tlv_want_len(t, 4);

	if (!err)
		*v = get_le32(t->val);
	return err;
}

int tlv_u64(const struct tlv *t, uint64_t *v)
{
	int err = tlv_want_len(t, 8);

	if (!err)
		*v = get_le64(t->val);
	return err;
}

int tlv_str(const struct tlv *t, char **s)
{
	char *p;

	/* A NUL inside would silently truncate the string on the C side. */
	if (memchr(t->val, 0, t->len))
		return husk_seterr(EINVAL, "TLV tag %u: string contains a NUL byte", t->tag);
	p = malloc((size_t)t->len + 1);
	if (!p)
		return husk_seterr(ENOMEM, "out of memory for a %u-byte string", t->len);
	if (t->len)
		memcpy(p, t->val, t->len);
	p[t->len] = 0;
	*s = p;
	return 0;
}

/* ---- blocking frame I/O ---- */

/* Wait until fd is ready: lets the blocking calls work on O_NONBLOCK fds too. */
/* Wait for a non-blocking fd; timeout_ms < 0 waits forever, else -ETIMEDOUT. */
static int wait_fd(int fd, short events, int timeout_ms)
{
	struct pollfd pfd = { .fd = fd, .events = events };
	int r;

	while ((r = poll(&pfd, 1, timeout_ms)) < 0)
		if (errno != EINTR)
			return -errno;
	return r ? 0 : -ETIMEDOUT;
}

/* sendmsg with MSG_NOSIGNAL so a vanished peer is -EPIPE, not SIGPIPE. */
static ssize_t write_iov(int fd, struct iovec *iov, int n)
{
	struct msghdr msg = { .msg_iov = iov, .msg_iovlen = n };
	ssize_t r = sendmsg(fd, &msg, MSG_NOSIGNAL);

	if (r < 0 && errno == ENOTSOCK)
		r = writev(fd, iov, n);
	return r;
}

int proto_send(int fd, uint16_t type, const void *payload, uint32_t len)
{
	uint8_t hdr[PROTO_HDR_LEN];
	struct iovec iov[2];
	int n = 0, err;
	ssize_t r;

	if (len > PROTO_MAX_PAYLOAD)
		return husk_seterr(EMSGSIZE, "refusing to send a %u-byte frame (limit %u)",
				   len, PROTO_MAX_PAYLOAD);
	proto_hdr_encode(hdr, type, len);
	iov[n++] = (struct iovec){ hdr, sizeof(hdr) };
	if (len)
		iov[n++] = (struct iovec){ (void *)payload, len };
	while (n) {
		r = write_iov(fd, iov, n);
		if (r < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN || errno == EWOULDBLOCK) {
				err = wait_fd(fd, POLLOUT, PROTO_SEND_TIMEOUT_MS);
				if (err)
					return husk_seterr(err, "waiting to send a control frame: %s",
							   strerror(-err));
				continue;
			}
			err = errno;
			return husk_seterr(err, "sending a control frame: %s", strerror(err));
		}
		/* Short write: skip what went out and go again with the rest. */
		while (n && (size_t)r >= iov[0].iov_len) {
			r -= iov[0].iov_len;
			iov[0] = iov[1];
			n--;
		}
		if (n) {
			iov[0].iov_base = (uint8_t *)iov[0].iov_base + r;
			iov[0].iov_len -= r;
		}
	}
	return 0;
}

/* Read exactly len bytes; returns the count read before EOF, or -errno. */
static ssize_t read_full(int fd, uint8_t *p, size_t len)
{
	size_t got = 0;
	ssize_t r;
	int err;

	while (got < len) {
		r = read(fd, p + got, len - got);
		if (r > 0) {
			got += r;
		} else if (r == 0) {
			break;
		} else if (errno == EAGAIN || errno == EWOULDBLOCK) {
			err = wait_fd(fd, POLLIN, -1);
			if (err)
				return err;
		} else if (errno != EINTR) {
			return -errno;
		}
	}
	return got;
}

int proto_recv(int fd, struct proto_hdr *h, uint8_t **payload)
{
	uint8_t hdr[PROTO_HDR_LEN], *p = NULL;
	ssize_t r;
	int err;

	*payload = NULL;
	r = read_full(fd, hdr, sizeof(hdr));
	if (r < 0)
		return husk_seterr(r, "reading a control frame: %s", strerror(-r));
	if (r == 0)
		return husk_seterr(EPIPE, "control connection closed by the peer");
	if (r < PROTO_HDR_LEN)
		return husk_seterr(EPROTO, "control connection closed inside a frame header");
	err = proto_hdr_decode(hdr, h);
	if (err)
		return err;
	if (!h->len)
		return 0;
	p = malloc(h->len);
	if (!p)
		return husk_seterr(ENOMEM, "out of memory for a %u-byte control frame", h->len);
	r = read_full(fd, p, h->len);
	if (r < 0 || (size_t)r < h->len) {
		free(p);
		if (r < 0)
			return husk_seterr(r, "reading a control frame: %s", strerror(-r));
		return husk_seterr(EPROTO, "control connection closed inside a %u-byte frame",
				   h->len);
	}
	*payload = p;
	return 0;
}

/* ---- incremental reader ---- */

void proto_reader_init(struct proto_reader *r)
{
	memset(r, 0, sizeof(*r));
}

void proto_reader_free(struct proto_reader *r)
{
	free(r->payload);
	proto_reader_init(r);
}

/* hdr_got beyond the header size marks a reader that already failed. */
#define READER_DEAD ((size_t)-1)

static int reader_fail(struct proto_reader *r, int err)
{
	free(r->payload);
	r->payload = NULL;
	r->hdr_got = READER_DEAD;
	return err;
}

/*
 * One read() per step, never more than the current frame still needs, so
 * no bytes of the next frame are buffered here: the caller calls again
 * after a frame until it gets 0 (which matters with edge-triggered epoll).
 * Errors are final: the stream has lost its framing, so every later call
 * fails too until proto_reader_free().
 */
int proto_reader_read(struct proto_reader *r, int fd, struct proto_hdr *h, uint8_t **payload)
{
	ssize_t n;
	int err;

	for (;;) {
		if (r->hdr_got > PROTO_HDR_LEN)
			return husk_seterr(EPROTO, "control stream already failed");
		if (r->hdr_got == PROTO_HDR_LEN && r->got == r->h.len) {
			*h = r->h;
			*payload = r->payload;
			r->payload = NULL;
			r->hdr_got = 0;
			r->got = 0;
			return 1;
		}
		if (r->hdr_got < PROTO_HDR_LEN)
			n = read(fd, r->hdr + r->hdr_got, PROTO_HDR_LEN - r->hdr_got);
		else
			n = read(fd, r->payload + r->got, r->h.len - r->got);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN || errno == EWOULDBLOCK)
				return 0;
			err = errno;
			return reader_fail(r, husk_seterr(err, "reading a control frame: %s",
							  strerror(err)));
		}
		if (n == 0) {
			if (r->hdr_got == 0)
				return reader_fail(r, husk_seterr(EPIPE,
						"control connection closed by the peer"));
			return reader_fail(r, husk_seterr(EPROTO,
					"control connection closed inside a frame"));
		}
		if (r->hdr_got < PROTO_HDR_LEN) {
			r->hdr_got += n;
			if (r->hdr_got < PROTO_HDR_LEN)
				continue;
			if (proto_hdr_decode(r->hdr, &r->h))
				return reader_fail(r, -EPROTO);
			r->got = 0;
			if (r->h.len) {
				r->payload = malloc(r->h.len);
				if (!r->payload)
					return reader_fail(r, husk_seterr(ENOMEM,
							"out of memory for a %u-byte frame", r->h.len));
			}
		} else {
			r->got += n;
		}
	}
}

/* ---- queued output ---- */

void proto_outq_init(struct proto_outq *q)
{
	memset(q, 0, sizeof(*q));
}

void proto_outq_free(struct proto_outq *q)
{
	free(q->buf);
	proto_outq_init(q);
}

size_t proto_outq_len(const struct proto_outq *q)
{
	return q->len - q->head;
}

int proto_outq_add(struct proto_outq *q, uint16_t type, const void *payload, uint32_t len)
{
	size_t need;

	if (len > PROTO_MAX_PAYLOAD)
		return husk_seterr(EMSGSIZE, "refusing to queue a %u-byte frame (limit %u)",
				   len, PROTO_MAX_PAYLOAD);
	/* Reclaim what was written before growing. */
	if (q->head && q->head == q->len)
		q->head = q->len = 0;
	need = q->len + PROTO_HDR_LEN + len;
	if (need > q->cap && q->head) {
		memmove(q->buf, q->buf + q->head, q->len - q->head);
		q->len -= q->head;
		q->head = 0;
		need = q->len + PROTO_HDR_LEN + len;
	}
	if (need > q->cap) {
		size_t cap = need > 2 * q->cap ? need : 2 * q->cap;
		uint8_t *nb = realloc(q->buf, cap);

		if (!nb)
			return husk_seterr(ENOMEM, "out of memory for a control frame");
		q->buf = nb;
		q->cap = cap;
	}
	proto_hdr_encode(q->buf + q->len, type, len);
	if (len)
		memcpy(q->buf + q->len + PROTO_HDR_LEN, payload, len);
	q->len += PROTO_HDR_LEN + len;
	return 0;
}

ssize_t proto_outq_flush(struct proto_outq *q, int fd)
{
	size_t done = 0;

	while (q->head < q->len) {
		ssize_t n = write(fd, q->buf + q->head, q->len - q->head);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			break;
		if (n < 0)
			return husk_seterr(errno, "sending a control frame: %s", strerror(errno));
		q->head += n;
		done += n;
	}
	if (q->head == q->len)
		q->head = q->len = 0;
	return done;
}
