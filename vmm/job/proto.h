/*
 * proto: the control protocol between husk (host) and guest-init, carried on
 * one vsock stream that guest-init opens to the host (CID 2, port
 * PROTO_VSOCK_PORT) as soon as it is up. Shared by both sides; see
 * docs/protocol.md for the conversation.
 *
 * Every message is a frame: an 8-byte header (little-endian u32 payload
 * length, u16 type, u16 protocol version) and the payload. Structured
 * payloads (job spec, exit record) are TLV lists: u16 tag, u32 length, value.
 * Both sides treat the peer as untrusted: oversized, truncated or unknown
 * frames are errors that end the conversation cleanly.
 */
#ifndef HUSK_PROTO_H
#define HUSK_PROTO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define PROTO_VERSION 7
#define PROTO_VSOCK_PORT 1024		/* guest-init connects here on the host */
#define PROTO_HDR_LEN 8
#define PROTO_MAX_PAYLOAD (1u << 20)	/* larger frames are rejected */
#define PROTO_MAX_ARGS 4096
#define PROTO_MAX_ENV 4096
#define PROTO_MAX_GETS 64
#define PROTO_HOSTNAME_MAX 63
#define PROTO_MAX_RLIMITS 16
#define PROTO_RLIMIT_LEN 20		/* T_JOB_RLIMIT's value */
#define PROTO_MAX_TMPFS 8
#define PROTO_TMPFS_HDR 16		/* T_JOB_TMPFS's fixed part, before the path */
#define PROTO_TMPFS_NOEXEC 1u		/* T_JOB_TMPFS flag */
#define PROTO_MAX_EXECS 64		/* live execs of one session */
#define PROTO_ID_LEN 4			/* the u32 id that begins every session frame */
/*
 * On a non-blocking fd, proto_send waits at most this long for the peer to
 * make room: a peer that stops reading is an error, not a hang.
 */
#define PROTO_SEND_TIMEOUT_MS 10000

enum proto_type {
	/* guest -> host */
	P_HELLO = 1,		/* guest-init is ready; payload: TLV (T_INIT_*) */
	P_STARTED = 2,		/* the job's process is running */
	P_STDOUT = 3,		/* job output chunk */
	P_STDERR = 4,
	P_EXIT = 5,		/* TLV exit record (T_EXIT_*) */
	P_FILES_OUT = 6,	/* chunk of the gzip'd tar for --get; empty = end */
	P_DONE = 7,		/* guest-init is about to power off */
	/* guest -> host, sessions; each payload begins with the u32 id */
	P_XSTARTED = 8,		/* that exec's process exists and is about to exec */
	P_XOUT = 9,		/* u8 stream (1 stdout, 2 stderr), then 1..64 KiB of output */
	P_XEXIT = 10,		/* TLV exit record (T_EXIT_*) of that exec */
	P_XFILES = 11,		/* chunk of that get's gzip'd tar; the id alone = end */
	P_XDONE = 12,		/* that put is extracted */
	P_XERROR = 13,		/* UTF-8 message: that exec, put or get failed */
	/* host -> guest */
	P_JOB = 16,		/* TLV job spec (T_JOB_*) */
	P_STDIN = 17,		/* stdin chunk; empty = EOF */
	P_FILES_IN = 18,	/* chunk of the gzip'd tar for --put; empty = end */
	/* host -> guest, sessions; each payload begins with the u32 id */
	P_EXEC = 19,		/* TLV exec spec: T_JOB_ARG, T_JOB_ENV, T_JOB_CWD,
				 * T_JOB_STDIN, T_JOB_TIMEOUT_MS */
	P_XSTDIN = 20,		/* stdin bytes for that exec; the id alone = EOF */
	P_XSIGNAL = 21,		/* u32 signal number for that exec */
	P_PUT = 22,		/* chunk of a gzip'd tar into the workspace; the id alone = end */
	P_GET = 23,		/* workspace-relative path to archive and send back */
	P_END = 24,		/* no id, empty: end the session */
	/* host -> guest, one-shot job with T_JOB_TERMINAL */
	P_RESIZE = 25,		/* u32 rows << 16 | columns: the terminal's new window */
	/* either way */
	P_ERROR = 32,		/* UTF-8 message; the sender stops after it */
};

enum proto_tag {
	/* P_JOB */
	T_JOB_ARG = 1,		/* repeated, in order */
	T_JOB_ENV = 2,		/* repeated "K=V" */
	T_JOB_CWD = 3,
	T_JOB_TIMEOUT_MS = 4,	/* u64; 0 = none */
	T_JOB_WORKSPACE_MIB = 5,	/* u32 */
	T_JOB_CLOCK_NS = 6,	/* u64 CLOCK_REALTIME of the host */
	T_JOB_RNG_SEED = 7,	/* bytes to credit to the guest RNG */
	T_JOB_STDIN = 8,	/* u8: 1 = stdin frames follow, else /dev/null */
	T_JOB_FILES_IN = 9,	/* u8: 1 = P_FILES_IN frames before the job starts */
	T_JOB_GET = 10,		/* repeated workspace-relative path to return */
	T_JOB_MEM_LIMIT = 11,	/* u64 bytes for the job's cgroup; 0 = none */
	T_JOB_PIDS_LIMIT = 12,	/* u32 */
	T_JOB_NOFILE = 13,	/* u32 RLIMIT_NOFILE */
	T_JOB_FSIZE = 14,	/* u64 RLIMIT_FSIZE bytes */
	T_JOB_NET_ADDR = 15,	/* u32 guest IPv4 for eth0 (network order); else no net */
	T_JOB_NET_GW = 16,	/* u32 default gateway and DNS server (network order) */
	T_JOB_NET_PREFIX = 17,	/* u8 prefix length of T_JOB_NET_ADDR (1..32) */
	T_JOB_NET_MAC = 18,	/* 6 bytes: eth0's address (a template's clones differ) */
	T_JOB_SESSION = 19,	/* u8 1: a session: no argv, no gets; P_EXEC etc. follow */
	T_JOB_HOSTNAME = 20,	/* the job's host name (proto_hostname_ok) */
	T_JOB_TERMINAL = 21,	/* u32 rows << 16 | columns (0: unknown): a pty, not pipes */
	T_JOB_RLIMIT = 22,	/* repeated: u32 resource, u64 soft, u64 hard (~0: unlimited) */
	T_JOB_TMPFS = 23,	/* repeated: u64 size (0: default), u32 mode, u32 flags, path */
	T_JOB_ROOT = 24,	/* u8 1: the job stays uid 0, with a container's capabilities */
	T_JOB_VERBOSE = 25,	/* u8 1: guest-init says on the console what it keeps quiet */
	/* P_EXIT */
	T_EXIT_CODE = 32,	/* u32, when the job exited */
	T_EXIT_SIGNAL = 33,	/* u32, when a signal killed it */
	T_EXIT_TIMED_OUT = 34,	/* u8 */
	T_EXIT_USER_US = 35,	/* u64 CPU time */
	T_EXIT_SYS_US = 36,	/* u64 */
	T_EXIT_MAXRSS_KIB = 37,	/* u64 peak RSS */
	T_EXIT_START_NS = 38,	/* u64 guest CLOCK_REALTIME at job start */
	T_EXIT_END_NS = 39,	/* u64 at job end */
	/* P_HELLO, P_STARTED */
	T_INIT_VERSION = 48,	/* string (HELLO) */
	T_INIT_STEP = 49,	/* repeated: u8 enum init_step, u64 guest CLOCK_BOOTTIME us */
};

/*
 * guest-init's steps from the kernel's hand-over to the job's exec, each
 * marked when it ended. HELLO carries those before it, STARTED all of them;
 * the host shows them (JSON "guest_us") and trusts them for nothing.
 */
enum init_step {
	IS_KERNEL,		/* guest-init's main(): the kernel's boot is over */
	IS_PID1_SETUP,		/* /dev, /proc, /sys, /tmp, console */
	IS_CONNECTED,		/* the vsock connection to the host */
	IS_WORKSPACE,		/* the workspace mounted */
	IS_NET_PREPARE,		/* /run and resolv.conf ready */
	IS_CGROUP,		/* the job's cgroup made */
	IS_JOB_INIT,		/* the job's init spawned in its namespaces */
	IS_HELLO,		/* HELLO sent */
	IS_JOB_RECEIVED,	/* the job spec parsed */
	IS_JOB_SETUP,		/* clock, entropy, workspace size, network, limits */
	IS_FILES_IN,		/* --put files unpacked */
	IS_JOB_STARTED,		/* the job's process exists, about to exec */
	IS_NR
};
#define INIT_STEP_LEN 9		/* u8 + u64 */

/* The JSON key of a step ("kernel", ...), or "?". */
const char *proto_step_name(unsigned step);

/* The u32 LE at p (a session frame's id, signal number). */
static inline uint32_t le32_get(const uint8_t *p)
{
	return p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static inline void le32_put(uint8_t *p, uint32_t v)
{
	p[0] = v;
	p[1] = v >> 8;
	p[2] = v >> 16;
	p[3] = v >> 24;
}

static inline uint64_t le64_get(const uint8_t *p)
{
	return le32_get(p) | (uint64_t)le32_get(p + 4) << 32;
}
static inline void le64_put(uint8_t *p, uint64_t v)
{
	le32_put(p, (uint32_t)v);
	le32_put(p + 4, (uint32_t)(v >> 32));
}

struct proto_hdr {
	uint32_t len;
	uint16_t type;
	uint16_t version;
};

/* Encode a header into 8 bytes; decode validates version and length. */
void proto_hdr_encode(uint8_t out[PROTO_HDR_LEN], uint16_t type, uint32_t len);
int proto_hdr_decode(const uint8_t in[PROTO_HDR_LEN], struct proto_hdr *h);
bool proto_type_known(uint16_t type);
/* A host name both sides accept: 1..63 of [A-Za-z0-9.-], not starting with - or . */
bool proto_hostname_ok(const char *s);
/*
 * A resource limit a job may ask for (RLIMIT_*, the same numbers on every
 * Linux architecture husk runs: not RSS, which does nothing).
 */
bool proto_rlimit_ok(uint32_t resource);
/*
 * Where a job's tmpfs may go: an absolute path of at most 4095 bytes with no
 * empty, "." or ".." component, not "/", not in /proc, /sys or /dev, and
 * neither the workspace, inside it nor above it (files in and out go
 * through the workspace as guest-init sees it).
 */
bool proto_tmpfs_path_ok(const char *path, const char *workspace);

/* A growable buffer for building TLV payloads. */
struct tlv_buf {
	uint8_t *data;
	size_t len, cap;
	bool failed;		/* an append ran out of memory or over the limit */
};
void tlv_init(struct tlv_buf *b);
void tlv_free(struct tlv_buf *b);
void tlv_put(struct tlv_buf *b, uint16_t tag, const void *val, uint32_t len);
void tlv_put_str(struct tlv_buf *b, uint16_t tag, const char *s);
void tlv_put_u8(struct tlv_buf *b, uint16_t tag, uint8_t v);
void tlv_put_u32(struct tlv_buf *b, uint16_t tag, uint32_t v);
void tlv_put_u64(struct tlv_buf *b, uint16_t tag, uint64_t v);

/* Iterate over a received TLV payload; every element is bounds-checked. */
struct tlv_iter {
	const uint8_t *p;
	size_t left;
};
struct tlv {
	uint16_t tag;
	uint32_t len;
	const uint8_t *val;
};
void tlv_iter_init(struct tlv_iter *it, const uint8_t *p, size_t len);
/* 1 next element, 0 end, -EINVAL truncated element. */
int tlv_next(struct tlv_iter *it, struct tlv *t);
int tlv_u8(const struct tlv *t, uint8_t *v);	/* -EINVAL on wrong length */
int tlv_u32(const struct tlv *t, uint32_t *v);
int tlv_u64(const struct tlv *t, uint64_t *v);
/* Copy a string value (no NULs inside) into a fresh malloc'd C string. */
int tlv_str(const struct tlv *t, char **s);

/*
 * Blocking frame I/O on a stream fd (both sides use it on their control
 * socket). proto_send writes header and payload; proto_recv reads one
 * frame into a malloc'd payload (*payload NULL when len is 0).
 */
int proto_send(int fd, uint16_t type, const void *payload, uint32_t len);
int proto_recv(int fd, struct proto_hdr *h, uint8_t **payload);

/*
 * Incremental frame reader for non-blocking fds (husk's event loop must
 * never block on a guest that sends half a frame and stalls).
 */
struct proto_reader {
	uint8_t hdr[PROTO_HDR_LEN];
	size_t hdr_got;
	struct proto_hdr h;
	uint8_t *payload;
	size_t got;
};
void proto_reader_init(struct proto_reader *r);
void proto_reader_free(struct proto_reader *r);
/*
 * Read what is available. Returns 1 with a complete frame (the caller owns
 * *payload afterwards), 0 when more bytes are needed (EAGAIN), -EPIPE at EOF
 * between frames, -EPROTO on EOF inside a frame or an invalid header.
 */
int proto_reader_read(struct proto_reader *r, int fd, struct proto_hdr *h, uint8_t **payload);

/*
 * Frames queued for a non-blocking fd, so an event loop never waits for a
 * peer that reads slowly or not at all. The caller bounds what it queues
 * (proto_outq_len) and flushes when the fd is writable.
 */
struct proto_outq {
	uint8_t *buf;
	size_t head, len, cap;		/* bytes [head, len) are still to be written */
};
void proto_outq_init(struct proto_outq *q);
void proto_outq_free(struct proto_outq *q);
/* Queue one frame; -EMSGSIZE over PROTO_MAX_PAYLOAD, -ENOMEM. */
int proto_outq_add(struct proto_outq *q, uint16_t type, const void *payload, uint32_t len);
size_t proto_outq_len(const struct proto_outq *q);
/* Write what fd takes now: bytes written (0: none, or nothing queued) or -errno. */
ssize_t proto_outq_flush(struct proto_outq *q, int fd);

#endif
