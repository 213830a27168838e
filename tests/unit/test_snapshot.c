/*
 * Unit tests for snapshot: the template state file survives a round trip,
 * and every corruption -- each flipped byte, each truncation, an extension,
 * a wrong version, a duplicate section, absurd lengths -- is refused; a
 * file's seal holds only under the key it was sealed with, and a file
 * altered and re-checksummed without the key is refused.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "template/snapshot.h"
#include "suites.h"
#include "lib/util.h"

static void build(struct snap_writer *w)
{
	static const char blob[1000] = "vcpu";
	unsigned i;

	snap_writer_init(w);
	snap_begin(w, SNAP_META, 0);
	snap_put_str(w, 1, "kernel");
	snap_put_u64(w, 2, 512ull << 20);
	snap_end(w);
	for (i = 0; i < 3; i++) {
		snap_begin(w, SNAP_VCPU, i);
		snap_put(w, 7, blob, sizeof(blob) - i);	/* odd lengths: padding */
		snap_put_u64(w, 8, i);
		snap_end(w);
	}
	snap_begin(w, SNAP_DEVICE, 0);		/* an empty section */
	snap_end(w);
	ck_assert_int_eq(snap_finish(w), 0);
}

START_TEST(round_trip)
{
	struct snap_writer w;
	struct snap s;
	const struct snap_section *sec;
	char str[16] = "";
	uint64_t v;
	unsigned i;
	struct tlv t;

	build(&w);
	ck_assert_uint_eq(w.len % 8, 0);
	ck_assert_int_eq(snap_parse(w.data, w.len, &s), 0);
	ck_assert_uint_eq(s.nr, 5);
	sec = snap_find(&s, SNAP_META, 0);
	ck_assert_ptr_nonnull(sec);
	ck_assert_int_eq(snap_get(sec, 1, &t), 1);
	ck_assert_uint_eq(t.len, 6);
	memcpy(str, t.val, t.len);
	ck_assert_str_eq(str, "kernel");
	ck_assert_int_eq(snap_get_u64(sec, 2, &v), 0);
	ck_assert_uint_eq(v, 512ull << 20);
	ck_assert_int_eq(snap_get(sec, 99, &t), 0);
	ck_assert_int_eq(snap_get_u64(sec, 1, &v), -EINVAL);	/* wrong length */
	ck_assert_int_eq(snap_get_u64(sec, 99, &v), -ENOENT);
	for (i = 0; i < 3; i++) {
		sec = snap_find(&s, SNAP_VCPU, i);
		ck_assert_ptr_nonnull(sec);
		ck_assert_int_eq(snap_get_u64(sec, 8, &v), 0);
		ck_assert_uint_eq(v, i);
	}
	ck_assert_ptr_null(snap_find(&s, SNAP_VCPU, 3));
	sec = snap_find(&s, SNAP_DEVICE, 0);
	ck_assert_ptr_nonnull(sec);
	ck_assert_uint_eq(sec->len, 0);
	snap_writer_free(&w);
}
END_TEST

/* Every single flipped byte anywhere is caught (CRC or SHA-256). */
START_TEST(every_flip_refused)
{
	struct snap_writer w;
	struct snap s;
	size_t i;

	build(&w);
	for (i = 0; i < w.len; i++) {
		w.data[i] ^= 0x20;
		ck_assert_msg(snap_parse(w.data, w.len, &s) < 0, "flip at %zu accepted", i);
		w.data[i] ^= 0x20;
	}
	ck_assert_int_eq(snap_parse(w.data, w.len, &s), 0);
	snap_writer_free(&w);
}
END_TEST

START_TEST(every_truncation_refused)
{
	struct snap_writer w;
	struct snap s;
	uint8_t *big;
	size_t n;

	build(&w);
	for (n = 0; n < w.len; n++)
		ck_assert_msg(snap_parse(w.data, n, &s) < 0, "truncation to %zu accepted", n);
	big = calloc(1, w.len + 8);
	memcpy(big, w.data, w.len);
	ck_assert_int_eq(snap_parse(big, w.len + 8, &s), -EINVAL);
	ck_assert_ptr_nonnull(strstr(husk_lasterr(), "truncated or extended"));
	free(big);
	snap_writer_free(&w);
}
END_TEST

/* Rewrite the header's checksums after tampering, as a careful forger would. */
static void reseal(uint8_t *buf, size_t len)
{
	uint32_t c;

	digest_sha256(buf + SNAP_HEADER_LEN, len - SNAP_HEADER_LEN, buf + 24);
	c = (uint32_t)crc32(crc32(0, Z_NULL, 0), buf, 92);
	buf[92] = c;
	buf[93] = c >> 8;
	buf[94] = c >> 16;
	buf[95] = c >> 24;
}

START_TEST(structure_refused)
{
	struct snap_writer w;
	struct snap s;

	build(&w);
	/* Another format version (1: before the seal). */
	w.data[8] = 1;
	reseal(w.data, w.len);
	ck_assert_int_eq(snap_parse(w.data, w.len, &s), -EPROTONOSUPPORT);
	ck_assert_ptr_nonnull(strstr(husk_lasterr(), "version 1"));
	w.data[8] = SNAP_VERSION;
	/* Not a state file. */
	ck_assert_int_eq(snap_parse((const uint8_t *)"HUSKSNAX", 8, &s), -EINVAL);
	/* More sections claimed than there are. */
	w.data[56] = 6;
	reseal(w.data, w.len);
	ck_assert_int_lt(snap_parse(w.data, w.len, &s), 0);
	w.data[56] = 5;
	/* A section claiming more bytes than the file has. */
	w.data[SNAP_HEADER_LEN + 8] = 0xff;
	w.data[SNAP_HEADER_LEN + 9] = 0xff;
	reseal(w.data, w.len);
	ck_assert_int_eq(snap_parse(w.data, w.len, &s), -EINVAL);
	snap_writer_free(&w);

	/* Two sections of one type and index. */
	snap_writer_init(&w);
	snap_begin(&w, SNAP_VCPU, 1);
	snap_end(&w);
	snap_begin(&w, SNAP_VCPU, 1);
	snap_end(&w);
	ck_assert_int_eq(snap_finish(&w), 0);
	ck_assert_int_eq(snap_parse(w.data, w.len, &s), -EINVAL);
	ck_assert_ptr_nonnull(strstr(husk_lasterr(), "twice"));
	snap_writer_free(&w);
}
END_TEST

static const uint8_t key_a[SNAP_KEY_LEN] = "this directory's key, 32 bytes!";
static const uint8_t key_b[SNAP_KEY_LEN] = "another directory's key, 32 by.";

/* The seal: only the key it was made with accepts it, and it covers every byte. */
START_TEST(sealed)
{
	struct snap_writer w;
	struct snap s;
	size_t i;

	build(&w);
	/* As snap_finish leaves it: intact, but nobody's. */
	ck_assert_int_eq(snap_parse(w.data, w.len, &s), 0);
	ck_assert_int_eq(snap_check_seal(w.data, w.len, key_a), -EBADMSG);
	snap_seal(w.data, w.len, key_a);
	ck_assert_int_eq(snap_parse(w.data, w.len, &s), 0);
	ck_assert_int_eq(snap_check_seal(w.data, w.len, key_a), 0);
	/* Another directory's key: correct CRCs and SHA-256, wrong seal. */
	ck_assert_int_eq(snap_check_seal(w.data, w.len, key_b), -EBADMSG);
	ck_assert_ptr_nonnull(strstr(husk_lasterr(), "not sealed with this template directory's key"));
	/* Any byte changed and every checksum recomputed: the seal no longer holds. */
	for (i = 0; i < w.len; i++) {
		if ((i >= 24 && i < 56) || (i >= 60 && i < SNAP_HEADER_LEN))
			continue;	/* what reseal() recomputes, and the seal itself */
		w.data[i] ^= 0x01;
		reseal(w.data, w.len);
		ck_assert_msg(snap_check_seal(w.data, w.len, key_a) == -EBADMSG,
			      "a change at %zu kept the seal", i);
		w.data[i] ^= 0x01;
	}
	reseal(w.data, w.len);
	ck_assert_int_eq(snap_check_seal(w.data, w.len, key_a), 0);
	snap_writer_free(&w);
}
END_TEST

START_TEST(writer_misuse)
{
	struct snap_writer w;

	snap_writer_init(&w);
	snap_put_u64(&w, 1, 1);			/* outside a section */
	ck_assert_int_eq(snap_finish(&w), -ENOMEM);
	snap_writer_free(&w);
	snap_writer_init(&w);
	snap_begin(&w, SNAP_VM, 0);		/* never ended */
	ck_assert_int_eq(snap_finish(&w), -ENOMEM);
	snap_writer_free(&w);
	snap_writer_init(&w);			/* no sections: valid, empty */
	ck_assert_int_eq(snap_finish(&w), 0);
	snap_writer_free(&w);
}
END_TEST

START_TEST(digests)
{
	uint8_t d[SNAP_SHA256_LEN];
	char hex[2 * SNAP_SHA256_LEN + 1];

	digest_sha256("abc", 3, d);
	digest_hex(d, sizeof(d), hex);
	ck_assert_str_eq(hex, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}
END_TEST

Suite *snapshot_suite(void)
{
	Suite *s = suite_create("snapshot");
	TCase *tc = tcase_create("format");

	tcase_add_test(tc, round_trip);
	tcase_add_test(tc, every_flip_refused);
	tcase_add_test(tc, every_truncation_refused);
	tcase_add_test(tc, structure_refused);
	tcase_add_test(tc, sealed);
	tcase_add_test(tc, writer_misuse);
	tcase_add_test(tc, digests);
	suite_add_tcase(s, tc);
	return s;
}
