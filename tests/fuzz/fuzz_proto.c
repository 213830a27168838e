/*
 * fuzz_proto: libFuzzer target for the control protocol decoders.
 *
 * The input is used three ways: as a sequence of 8-byte headers for
 * proto_hdr_decode(), as a TLV payload walked with tlv_next() and every typed
 * accessor, and as a byte stream written into a non-blocking socketpair in
 * input-chosen slices and read back with proto_reader_read() (each complete
 * frame's payload is walked as TLV too). Checks: decoded lengths stay within
 * PROTO_MAX_PAYLOAD, TLV values stay inside the buffer, a failed reader stays
 * failed, and nothing leaks.
 */
#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "job/proto.h"

static void walk_tlv(const uint8_t *p, size_t len)
{
	struct tlv_iter it;
	struct tlv t;
	uint64_t v64;
	uint32_t v32;
	uint8_t v8;
	char *s;
	int r;

	tlv_iter_init(&it, p, len);
	while ((r = tlv_next(&it, &t)) == 1) {
		if (t.len && (t.val < p || t.val + t.len > p + len))
			abort();
		(void)tlv_u8(&t, &v8);
		(void)tlv_u32(&t, &v32);
		(void)tlv_u64(&t, &v64);
		if (tlv_str(&t, &s) == 0) {
			if (strlen(s) != t.len)
				abort();
			free(s);
		}
	}
	if (r != 0 && r != -EINVAL)
		abort();
}

static void reader_run(const uint8_t *data, size_t size)
{
	struct proto_reader rd;
	struct proto_hdr h;
	uint8_t *payload;
	int sv[2], r = 0, frames = 0;
	size_t off = 0;

	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv))
		return;
	proto_reader_init(&rd);
	while (off < size) {
		/* Slice length from the data itself: 1..64 bytes. */
		size_t n = (data[off] % 64) + 1;
		ssize_t w;

		if (n > size - off)
			n = size - off;
		w = write(sv[1], data + off, n);
		if (w <= 0)
			break;
		off += w;
		while ((r = proto_reader_read(&rd, sv[0], &h, &payload)) == 1) {
			if (h.len > PROTO_MAX_PAYLOAD || (h.len && !payload) ||
			    h.version != PROTO_VERSION)
				abort();
			walk_tlv(payload, h.len);
			free(payload);
			frames++;
		}
		if (r < 0)
			break;
	}
	if (r >= 0) {
		close(sv[1]);
		sv[1] = -1;
		while ((r = proto_reader_read(&rd, sv[0], &h, &payload)) == 1) {
			walk_tlv(payload, h.len);
			free(payload);
		}
		if (r != -EPIPE && r != -EPROTO)
			abort();
	}
	/* Once failed, the reader keeps failing. */
	if (r < 0 && proto_reader_read(&rd, sv[0], &h, &payload) >= 0)
		abort();
	proto_reader_free(&rd);
	close(sv[0]);
	if (sv[1] >= 0)
		close(sv[1]);
	(void)frames;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct proto_hdr h;
	size_t off;

	for (off = 0; off + PROTO_HDR_LEN <= size && off < 64 * PROTO_HDR_LEN;
	     off += PROTO_HDR_LEN) {
		if (proto_hdr_decode(data + off, &h) == 0) {
			if (h.len > PROTO_MAX_PAYLOAD || h.version != PROTO_VERSION)
				abort();
			(void)proto_type_known(h.type);
		}
	}
	walk_tlv(data, size);
	if (size > PROTO_HDR_LEN)
		walk_tlv(data + PROTO_HDR_LEN, size - PROTO_HDR_LEN);
	reader_run(data, size);
	return 0;
}
