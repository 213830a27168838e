/*
 * Unit tests for proto: frame headers (round trip, wrong version, oversized
 * length, unknown type), the TLV builder and iterator (every value kind,
 * every truncation point, lengths past the end, strings with NULs, the
 * payload limit), blocking send/recv over a socketpair (including EOF in a
 * header, in a payload and between frames) and the incremental reader fed
 * one byte at a time through a non-blocking socketpair.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include "job/proto.h"
#include "suites.h"
#include "lib/util.h"

static int sv[2] = { -1, -1 };

static void pair_setup(void)
{
	ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
}

static void pair_teardown(void)
{
	if (sv[0] >= 0)
		close(sv[0]);
	if (sv[1] >= 0)
		close(sv[1]);
	sv[0] = sv[1] = -1;
}

static void raw_hdr(uint8_t *b, uint32_t len, uint16_t type, uint16_t version)
{
	b[0] = len;
	b[1] = len >> 8;
	b[2] = len >> 16;
	b[3] = len >> 24;
	b[4] = type;
	b[5] = type >> 8;
	b[6] = version;
	b[7] = version >> 8;
}

/* ---- headers ---- */

START_TEST(hdr_round_trip)
{
	uint8_t b[PROTO_HDR_LEN];
	struct proto_hdr h;

	proto_hdr_encode(b, P_STDOUT, 0x12345);
	/* The wire format is fixed little-endian, not host order. */
	ck_assert_uint_eq(b[0], 0x45);
	ck_assert_uint_eq(b[1], 0x23);
	ck_assert_uint_eq(b[2], 0x01);
	ck_assert_uint_eq(b[3], 0);
	ck_assert_uint_eq(b[4], P_STDOUT);
	ck_assert_uint_eq(b[6], PROTO_VERSION);
	ck_assert_int_eq(proto_hdr_decode(b, &h), 0);
	ck_assert_uint_eq(h.len, 0x12345);
	ck_assert_uint_eq(h.type, P_STDOUT);
	ck_assert_uint_eq(h.version, PROTO_VERSION);

	proto_hdr_encode(b, P_ERROR, PROTO_MAX_PAYLOAD);
	ck_assert_int_eq(proto_hdr_decode(b, &h), 0);
	ck_assert_uint_eq(h.len, PROTO_MAX_PAYLOAD);
	ck_assert_uint_eq(h.type, P_ERROR);
}
END_TEST

START_TEST(hdr_wrong_version)
{
	uint8_t b[PROTO_HDR_LEN];
	struct proto_hdr h;

	raw_hdr(b, 4, P_STDIN, PROTO_VERSION + 1);
	ck_assert_int_eq(proto_hdr_decode(b, &h), -EPROTO);
	ck_assert_ptr_nonnull(strstr(husk_lasterr(), "version"));
	raw_hdr(b, 4, P_STDIN, 0);
	ck_assert_int_eq(proto_hdr_decode(b, &h), -EPROTO);
}
END_TEST

START_TEST(hdr_oversized)
{
	uint8_t b[PROTO_HDR_LEN];
	struct proto_hdr h;

	raw_hdr(b, PROTO_MAX_PAYLOAD + 1, P_STDOUT, PROTO_VERSION);
	ck_assert_int_eq(proto_hdr_decode(b, &h), -EPROTO);
	ck_assert_ptr_nonnull(strstr(husk_lasterr(), "limit"));
	raw_hdr(b, 0xffffffff, P_STDOUT, PROTO_VERSION);
	ck_assert_int_eq(proto_hdr_decode(b, &h), -EPROTO);
}
END_TEST

START_TEST(hdr_unknown_type)
{
	static const uint16_t known[] = {
		P_HELLO, P_STARTED, P_STDOUT, P_STDERR, P_EXIT, P_FILES_OUT, P_DONE,
		P_JOB, P_STDIN, P_FILES_IN, P_ERROR,
		P_XSTARTED, P_XOUT, P_XEXIT, P_XFILES, P_XDONE, P_XERROR,
		P_EXEC, P_XSTDIN, P_XSIGNAL, P_PUT, P_GET, P_END, P_RESIZE,
	};
	static const uint16_t unknown[] = { 0, 14, 15, 26, 31, 33, 0xffff };
	uint8_t b[PROTO_HDR_LEN];
	struct proto_hdr h;
	unsigned i;

	for (i = 0; i < ARRAY_SIZE(known); i++) {
		ck_assert(proto_type_known(known[i]));
		raw_hdr(b, 0, known[i], PROTO_VERSION);
		ck_assert_int_eq(proto_hdr_decode(b, &h), 0);
	}
	for (i = 0; i < ARRAY_SIZE(unknown); i++) {
		ck_assert(!proto_type_known(unknown[i]));
		raw_hdr(b, 0, unknown[i], PROTO_VERSION);
		ck_assert_int_eq(proto_hdr_decode(b, &h), -EPROTO);
	}
}
END_TEST

/* ---- TLV ---- */

/* A list with one element of every kind, in a fixed order. */
static void build_all(struct tlv_buf *b)
{
	static const uint8_t raw[] = { 0, 1, 2, 0xff };

	tlv_init(b);
	tlv_put_str(b, T_JOB_ARG, "echo");
	tlv_put_str(b, T_JOB_ARG, "");
	tlv_put_u8(b, T_JOB_STDIN, 1);
	tlv_put_u32(b, T_JOB_PIDS_LIMIT, 0xdeadbeef);
	tlv_put_u64(b, T_JOB_CLOCK_NS, 0x0123456789abcdefull);
	tlv_put(b, T_JOB_RNG_SEED, raw, sizeof(raw));
	tlv_put(b, T_JOB_CWD, NULL, 0);
}

/* Little-endian fields of the spec's fixed values (T_JOB_RLIMIT, T_JOB_TMPFS). */
START_TEST(le_fields)
{
	uint8_t b[8];

	le64_put(b, 0x0102030405060708ull);
	ck_assert_uint_eq(b[0], 0x08);
	ck_assert_uint_eq(b[7], 0x01);
	ck_assert_uint_eq(le64_get(b), 0x0102030405060708ull);
	le64_put(b, UINT64_MAX);
	ck_assert_uint_eq(le64_get(b), UINT64_MAX);
	le32_put(b, 0x11223344);
	ck_assert_uint_eq(b[0], 0x44);
	ck_assert_uint_eq(le32_get(b), 0x11223344);
}
END_TEST

/* Where a job's tmpfs may go, on both sides. */
START_TEST(tmpfs_paths)
{
	static const char *const good[] = { "/data", "/tmp/cache", "/tmp/workspace2", "/procs",
					    "/a/b/c" };
	static const char *const bad[] = { "/", "", "x", "/a/", "/a//b", "/./a", "/a/..",
					   "/proc", "/proc/1", "/sys", "/dev/shm", "/tmp",
					   "/tmp/workspace", "/tmp/workspace/x" };
	size_t i;

	for (i = 0; i < sizeof(good) / sizeof(good[0]); i++)
		ck_assert_msg(proto_tmpfs_path_ok(good[i], "/tmp/workspace"), "%s", good[i]);
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		ck_assert_msg(!proto_tmpfs_path_ok(bad[i], "/tmp/workspace"), "%s", bad[i]);
	ck_assert(proto_rlimit_ok(RLIMIT_NOFILE));
	ck_assert(!proto_rlimit_ok(RLIMIT_RSS));
	ck_assert(!proto_rlimit_ok(RLIM_NLIMITS));
}
END_TEST

START_TEST(tlv_round_trip)
{
	struct tlv_buf b;
	struct tlv_iter it;
	struct tlv t;
	char *s;
	uint8_t u8;
	uint32_t u32;
	uint64_t u64;

	build_all(&b);
	ck_assert(!b.failed);
	ck_assert_uint_eq(b.len, 7 * 6 + 4 + 0 + 1 + 4 + 8 + 4 + 0);
	tlv_iter_init(&it, b.data, b.len);

	ck_assert_int_eq(tlv_next(&it, &t), 1);
	ck_assert_uint_eq(t.tag, T_JOB_ARG);
	ck_assert_int_eq(tlv_str(&t, &s), 0);
	ck_assert_str_eq(s, "echo");
	free(s);

	ck_assert_int_eq(tlv_next(&it, &t), 1);
	ck_assert_int_eq(tlv_str(&t, &s), 0);
	ck_assert_str_eq(s, "");
	free(s);

	ck_assert_int_eq(tlv_next(&it, &t), 1);
	ck_assert_uint_eq(t.tag, T_JOB_STDIN);
	ck_assert_int_eq(tlv_u8(&t, &u8), 0);
	ck_assert_uint_eq(u8, 1);
	ck_assert_int_eq(tlv_u32(&t, &u32), -EINVAL);
	ck_assert_int_eq(tlv_u64(&t, &u64), -EINVAL);

	ck_assert_int_eq(tlv_next(&it, &t), 1);
	ck_assert_uint_eq(t.tag, T_JOB_PIDS_LIMIT);
	ck_assert_int_eq(tlv_u32(&t, &u32), 0);
	ck_assert_uint_eq(u32, 0xdeadbeef);
	ck_assert_int_eq(tlv_u8(&t, &u8), -EINVAL);
	ck_assert_int_eq(tlv_u64(&t, &u64), -EINVAL);

	ck_assert_int_eq(tlv_next(&it, &t), 1);
	ck_assert_uint_eq(t.tag, T_JOB_CLOCK_NS);
	ck_assert_int_eq(tlv_u64(&t, &u64), 0);
	ck_assert_uint_eq(u64, 0x0123456789abcdefull);
	ck_assert_int_eq(tlv_u32(&t, &u32), -EINVAL);

	ck_assert_int_eq(tlv_next(&it, &t), 1);
	ck_assert_uint_eq(t.tag, T_JOB_RNG_SEED);
	ck_assert_uint_eq(t.len, 4);
	ck_assert_uint_eq(t.val[3], 0xff);
	/* Raw bytes with a NUL are fine as bytes but not as a string. */
	ck_assert_int_eq(tlv_str(&t, &s), -EINVAL);

	ck_assert_int_eq(tlv_next(&it, &t), 1);
	ck_assert_uint_eq(t.tag, T_JOB_CWD);
	ck_assert_uint_eq(t.len, 0);

	ck_assert_int_eq(tlv_next(&it, &t), 0);
	ck_assert_int_eq(tlv_next(&it, &t), 0);
	tlv_free(&b);
	ck_assert_ptr_null(b.data);
}
END_TEST

START_TEST(tlv_empty_list)
{
	struct tlv_iter it;
	struct tlv t;

	tlv_iter_init(&it, NULL, 0);
	ck_assert_int_eq(tlv_next(&it, &t), 0);
}
END_TEST

/* Every proper prefix that ends inside an element must fail, never read past. */
START_TEST(tlv_truncated_every_cut)
{
	struct tlv_buf b;
	struct tlv_iter it;
	struct tlv t;
	size_t cut, bounds[8], nb = 0, i;
	int r;
	bool boundary;

	build_all(&b);
	/* Element boundaries: a cut there is a shorter but valid list. */
	tlv_iter_init(&it, b.data, b.len);
	bounds[nb++] = 0;
	while (tlv_next(&it, &t) == 1)
		bounds[nb++] = b.len - it.left;
	for (cut = 0; cut < b.len; cut++) {
		uint8_t *copy = malloc(cut ? cut : 1);

		/* An exact-size heap copy lets sanitizers catch any over-read. */
		memcpy(copy, b.data, cut);
		boundary = false;
		for (i = 0; i < nb; i++)
			boundary |= bounds[i] == cut;
		tlv_iter_init(&it, copy, cut);
		while ((r = tlv_next(&it, &t)) == 1)
			;
		if (boundary) {
			ck_assert_int_eq(r, 0);
		} else {
			ck_assert_int_eq(r, -EINVAL);
			/* A failed iterator stays failed. */
			ck_assert_int_eq(tlv_next(&it, &t), -EINVAL);
		}
		free(copy);
	}
	tlv_free(&b);
}
END_TEST

START_TEST(tlv_len_past_end)
{
	/* tag 1, length 5, but only 4 value bytes follow. */
	static const uint8_t p1[] = { 1, 0, 5, 0, 0, 0, 'a', 'b', 'c', 'd' };
	/* A length that would wrap a 32-bit pointer sum. */
	static const uint8_t p2[] = { 1, 0, 0xff, 0xff, 0xff, 0xff, 'a' };
	/* Good element, then one whose length is past the end. */
	static const uint8_t p3[] = { 2, 0, 1, 0, 0, 0, 'x', 3, 0, 2, 0, 0, 0, 'y' };
	struct tlv_iter it;
	struct tlv t;

	tlv_iter_init(&it, p1, sizeof(p1));
	ck_assert_int_eq(tlv_next(&it, &t), -EINVAL);
	tlv_iter_init(&it, p2, sizeof(p2));
	ck_assert_int_eq(tlv_next(&it, &t), -EINVAL);
	tlv_iter_init(&it, p3, sizeof(p3));
	ck_assert_int_eq(tlv_next(&it, &t), 1);
	ck_assert_uint_eq(t.tag, 2);
	ck_assert_uint_eq(t.val[0], 'x');
	ck_assert_int_eq(tlv_next(&it, &t), -EINVAL);
}
END_TEST

START_TEST(tlv_str_embedded_nul)
{
	static const uint8_t v[] = { 'a', 0, 'b' };
	static const uint8_t v2[] = { 'a', 'b', 0 };
	struct tlv t = { .tag = T_JOB_ARG, .len = sizeof(v), .val = v };
	char *s = (char *)0x1;

	ck_assert_int_eq(tlv_str(&t, &s), -EINVAL);
	ck_assert_ptr_eq(s, (char *)0x1);	/* untouched on failure */
	t.val = v2;
	ck_assert_int_eq(tlv_str(&t, &s), -EINVAL);
	t.len = 2;
	ck_assert_int_eq(tlv_str(&t, &s), 0);
	ck_assert_str_eq(s, "ab");
	free(s);
}
END_TEST

/* What --hostname, the OCI hostname and guest-init accept: one rule for all. */
START_TEST(hostnames)
{
	static const char *const good[] = { "a", "box-1", "web.example.org", "A9",
		"123456789012345678901234567890123456789012345678901234567890123" };
	static const char *const bad[] = { NULL, "", "-x", ".x", "a b", "a_b", "x;rm", "é",
		"a\nb", "1234567890123456789012345678901234567890123456789012345678901234" };
	size_t i;

	for (i = 0; i < sizeof(good) / sizeof(good[0]); i++)
		ck_assert_msg(proto_hostname_ok(good[i]), "'%s' refused", good[i]);
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		ck_assert_msg(!proto_hostname_ok(bad[i]), "bad name %zu accepted", i);
}
END_TEST

START_TEST(tlv_limit)
{
	struct tlv_buf b;
	uint8_t *big = calloc(1, PROTO_MAX_PAYLOAD);

	ck_assert_ptr_nonnull(big);
	/* Exactly one frame's worth fits. */
	tlv_init(&b);
	tlv_put(&b, T_JOB_RNG_SEED, big, PROTO_MAX_PAYLOAD - 6);
	ck_assert(!b.failed);
	ck_assert_uint_eq(b.len, PROTO_MAX_PAYLOAD);
	/* One more byte, even an empty element, does not. */
	tlv_put(&b, T_JOB_CWD, NULL, 0);
	ck_assert(b.failed);
	ck_assert_uint_eq(b.len, PROTO_MAX_PAYLOAD);
	/* Once failed, later appends are ignored. */
	tlv_put_u8(&b, T_JOB_STDIN, 1);
	ck_assert_uint_eq(b.len, PROTO_MAX_PAYLOAD);
	tlv_free(&b);

	tlv_init(&b);
	tlv_put(&b, T_JOB_RNG_SEED, big, PROTO_MAX_PAYLOAD - 5);
	ck_assert(b.failed);
	ck_assert_uint_eq(b.len, 0);
	tlv_free(&b);

	/* Lengths near UINT32_MAX must not wrap the checks. */
	tlv_init(&b);
	tlv_put_u8(&b, T_JOB_STDIN, 1);
	tlv_put(&b, T_JOB_RNG_SEED, big, 0xfffffffa);
	ck_assert(b.failed);
	ck_assert_uint_eq(b.len, 7);
	tlv_free(&b);
	free(big);
}
END_TEST

/* ---- blocking I/O ---- */

START_TEST(send_recv_pair)
{
	struct tlv_buf b;
	struct proto_hdr h;
	uint8_t *p;

	build_all(&b);
	ck_assert_int_eq(proto_send(sv[0], P_JOB, b.data, b.len), 0);
	ck_assert_int_eq(proto_send(sv[0], P_STDIN, NULL, 0), 0);
	ck_assert_int_eq(proto_send(sv[0], P_STDOUT, "hi", 2), 0);

	ck_assert_int_eq(proto_recv(sv[1], &h, &p), 0);
	ck_assert_uint_eq(h.type, P_JOB);
	ck_assert_uint_eq(h.len, b.len);
	ck_assert_mem_eq(p, b.data, b.len);
	free(p);
	ck_assert_int_eq(proto_recv(sv[1], &h, &p), 0);
	ck_assert_uint_eq(h.type, P_STDIN);
	ck_assert_uint_eq(h.len, 0);
	ck_assert_ptr_null(p);
	ck_assert_int_eq(proto_recv(sv[1], &h, &p), 0);
	ck_assert_uint_eq(h.type, P_STDOUT);
	ck_assert_mem_eq(p, "hi", 2);
	free(p);

	close(sv[0]);
	sv[0] = -1;
	ck_assert_int_eq(proto_recv(sv[1], &h, &p), -EPIPE);
	ck_assert_ptr_null(p);
	tlv_free(&b);
}
END_TEST

/* A frame bigger than the socket buffer: the sender must loop on short writes. */
static void *big_frame;

START_TEST(send_recv_large)
{
	struct proto_hdr h;
	uint8_t *p;
	size_t i;
	pid_t pid;

	big_frame = malloc(PROTO_MAX_PAYLOAD);
	for (i = 0; i < PROTO_MAX_PAYLOAD; i++)
		((uint8_t *)big_frame)[i] = i * 7;
	pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0)
		_exit(proto_send(sv[0], P_FILES_OUT, big_frame, PROTO_MAX_PAYLOAD) ? 1 : 0);
	ck_assert_int_eq(proto_recv(sv[1], &h, &p), 0);
	ck_assert_uint_eq(h.len, PROTO_MAX_PAYLOAD);
	ck_assert_mem_eq(p, big_frame, PROTO_MAX_PAYLOAD);
	free(p);
	free(big_frame);
	ck_assert_int_eq(proto_send(sv[0], P_DONE, NULL, PROTO_MAX_PAYLOAD + 1), -EMSGSIZE);
}
END_TEST

START_TEST(recv_eof_in_header)
{
	struct proto_hdr h;
	uint8_t b[PROTO_HDR_LEN], *p;

	proto_hdr_encode(b, P_STDOUT, 3);
	ck_assert_int_eq(write(sv[0], b, 5), 5);
	close(sv[0]);
	sv[0] = -1;
	ck_assert_int_eq(proto_recv(sv[1], &h, &p), -EPROTO);
}
END_TEST

START_TEST(recv_eof_in_payload)
{
	struct proto_hdr h;
	uint8_t b[PROTO_HDR_LEN], *p;

	proto_hdr_encode(b, P_STDOUT, 3);
	ck_assert_int_eq(write(sv[0], b, sizeof(b)), sizeof(b));
	ck_assert_int_eq(write(sv[0], "ab", 2), 2);
	close(sv[0]);
	sv[0] = -1;
	ck_assert_int_eq(proto_recv(sv[1], &h, &p), -EPROTO);
	ck_assert_ptr_null(p);
}
END_TEST

START_TEST(recv_bad_header)
{
	struct proto_hdr h;
	uint8_t b[PROTO_HDR_LEN], *p;

	raw_hdr(b, 1, P_STDOUT, PROTO_VERSION + 1);
	ck_assert_int_eq(write(sv[0], b, sizeof(b)), sizeof(b));
	ck_assert_int_eq(proto_recv(sv[1], &h, &p), -EPROTO);
	ck_assert_ptr_null(p);
}
END_TEST

START_TEST(send_to_closed_peer)
{
	close(sv[1]);
	sv[1] = -1;
	/* MSG_NOSIGNAL: an error, not a SIGPIPE that kills the test. */
	ck_assert_int_eq(proto_send(sv[0], P_STDOUT, "x", 1), -EPIPE);
}
END_TEST

/* ---- incremental reader ---- */

static void nonblock(int fd)
{
	ck_assert_int_eq(fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK), 0);
}

START_TEST(reader_byte_by_byte)
{
	struct proto_reader r;
	struct proto_hdr h;
	uint8_t wire[64], *p = NULL;
	size_t n = 0, i;
	int frames = 0, ret;

	/* Three frames back to back: payload, empty, payload. */
	proto_hdr_encode(wire + n, P_STDIN, 5);
	memcpy(wire + n + PROTO_HDR_LEN, "hello", 5);
	n += PROTO_HDR_LEN + 5;
	proto_hdr_encode(wire + n, P_STDIN, 0);
	n += PROTO_HDR_LEN;
	proto_hdr_encode(wire + n, P_FILES_IN, 2);
	memcpy(wire + n + PROTO_HDR_LEN, "\x1f\x8b", 2);
	n += PROTO_HDR_LEN + 2;

	nonblock(sv[1]);
	proto_reader_init(&r);
	ck_assert_int_eq(proto_reader_read(&r, sv[1], &h, &p), 0);
	for (i = 0; i < n; i++) {
		ck_assert_int_eq(write(sv[0], wire + i, 1), 1);
		while ((ret = proto_reader_read(&r, sv[1], &h, &p)) == 1) {
			frames++;
			if (frames == 1) {
				ck_assert_uint_eq(i, PROTO_HDR_LEN + 5 - 1);
				ck_assert_uint_eq(h.type, P_STDIN);
				ck_assert_uint_eq(h.len, 5);
				ck_assert_mem_eq(p, "hello", 5);
			} else if (frames == 2) {
				ck_assert_uint_eq(h.len, 0);
				ck_assert_ptr_null(p);
			} else {
				ck_assert_uint_eq(i, n - 1);
				ck_assert_uint_eq(h.type, P_FILES_IN);
				ck_assert_mem_eq(p, "\x1f\x8b", 2);
			}
			free(p);
			p = NULL;
		}
		ck_assert_int_eq(ret, 0);
	}
	ck_assert_int_eq(frames, 3);
	close(sv[0]);
	sv[0] = -1;
	ck_assert_int_eq(proto_reader_read(&r, sv[1], &h, &p), -EPIPE);
	proto_reader_free(&r);
}
END_TEST

START_TEST(reader_eof_mid_frame)
{
	struct proto_reader r;
	struct proto_hdr h;
	uint8_t b[PROTO_HDR_LEN], *p = NULL;

	nonblock(sv[1]);
	proto_hdr_encode(b, P_STDIN, 4);
	ck_assert_int_eq(write(sv[0], b, sizeof(b)), sizeof(b));
	ck_assert_int_eq(write(sv[0], "ab", 2), 2);
	proto_reader_init(&r);
	ck_assert_int_eq(proto_reader_read(&r, sv[1], &h, &p), 0);
	close(sv[0]);
	sv[0] = -1;
	ck_assert_int_eq(proto_reader_read(&r, sv[1], &h, &p), -EPROTO);
	ck_assert_int_eq(proto_reader_read(&r, sv[1], &h, &p), -EPROTO);
	proto_reader_free(&r);
}
END_TEST

START_TEST(reader_eof_mid_header)
{
	struct proto_reader r;
	struct proto_hdr h;
	uint8_t b[PROTO_HDR_LEN], *p = NULL;

	nonblock(sv[1]);
	proto_hdr_encode(b, P_STDIN, 4);
	ck_assert_int_eq(write(sv[0], b, 3), 3);
	close(sv[0]);
	sv[0] = -1;
	proto_reader_init(&r);
	ck_assert_int_eq(proto_reader_read(&r, sv[1], &h, &p), -EPROTO);
	proto_reader_free(&r);
}
END_TEST

START_TEST(reader_eof_between_frames)
{
	struct proto_reader r;
	struct proto_hdr h;
	uint8_t *p = NULL;

	nonblock(sv[1]);
	ck_assert_int_eq(proto_send(sv[0], P_STDIN, "x", 1), 0);
	close(sv[0]);
	sv[0] = -1;
	proto_reader_init(&r);
	ck_assert_int_eq(proto_reader_read(&r, sv[1], &h, &p), 1);
	free(p);
	ck_assert_int_eq(proto_reader_read(&r, sv[1], &h, &p), -EPIPE);
	proto_reader_free(&r);
}
END_TEST

START_TEST(reader_bad_header)
{
	struct proto_reader r;
	struct proto_hdr h;
	uint8_t b[PROTO_HDR_LEN], *p = NULL;

	nonblock(sv[1]);
	/* Unknown type with an empty payload must not come out as a frame. */
	raw_hdr(b, 0, 99, PROTO_VERSION);
	ck_assert_int_eq(write(sv[0], b, sizeof(b)), sizeof(b));
	proto_reader_init(&r);
	ck_assert_int_eq(proto_reader_read(&r, sv[1], &h, &p), -EPROTO);
	ck_assert_int_eq(proto_reader_read(&r, sv[1], &h, &p), -EPROTO);
	proto_reader_free(&r);

	raw_hdr(b, PROTO_MAX_PAYLOAD + 1, P_STDIN, PROTO_VERSION);
	ck_assert_int_eq(write(sv[0], b, sizeof(b)), sizeof(b));
	proto_reader_init(&r);
	ck_assert_int_eq(proto_reader_read(&r, sv[1], &h, &p), -EPROTO);
	proto_reader_free(&r);
}
END_TEST

Suite *proto_suite(void)
{
	Suite *s = suite_create("proto");
	TCase *tc = tcase_create("hdr");
	TCase *tt = tcase_create("tlv");
	TCase *ti = tcase_create("io");

	tcase_add_test(tc, le_fields);
	tcase_add_test(tc, tmpfs_paths);
	tcase_add_test(tc, hdr_round_trip);
	tcase_add_test(tc, hdr_wrong_version);
	tcase_add_test(tc, hdr_oversized);
	tcase_add_test(tc, hdr_unknown_type);
	suite_add_tcase(s, tc);

	tcase_add_test(tt, tlv_round_trip);
	tcase_add_test(tt, hostnames);
	tcase_add_test(tt, tlv_empty_list);
	tcase_add_test(tt, tlv_truncated_every_cut);
	tcase_add_test(tt, tlv_len_past_end);
	tcase_add_test(tt, tlv_str_embedded_nul);
	tcase_add_test(tt, tlv_limit);
	suite_add_tcase(s, tt);

	tcase_add_checked_fixture(ti, pair_setup, pair_teardown);
	tcase_add_test(ti, send_recv_pair);
	tcase_add_test(ti, send_recv_large);
	tcase_add_test(ti, recv_eof_in_header);
	tcase_add_test(ti, recv_eof_in_payload);
	tcase_add_test(ti, recv_bad_header);
	tcase_add_test(ti, send_to_closed_peer);
	tcase_add_test(ti, reader_byte_by_byte);
	tcase_add_test(ti, reader_eof_mid_frame);
	tcase_add_test(ti, reader_eof_mid_header);
	tcase_add_test(ti, reader_eof_between_frames);
	tcase_add_test(ti, reader_bad_header);
	suite_add_tcase(s, ti);
	return s;
}
