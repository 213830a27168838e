/*
 * fuzz_snapshot: libFuzzer target for the template state file reader
 * (vmm/template/snapshot.c).
 *
 * Each input is parsed twice: as it is (the checksums must reject nearly
 * everything), and resealed -- the header's CRC and SHA-256 recomputed over
 * the mutated body -- so the structural checks behind them (section
 * lengths, padding, duplicates, counts) see arbitrary input too. Every
 * section found is walked with snap_get/snap_get_exact/snap_get_u64, and
 * every pointer handed out must lie inside the input.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "template/snapshot.h"

static void walk(const uint8_t *buf, size_t len, const struct snap *s)
{
	uint8_t out[64];
	uint64_t v;
	struct tlv t;
	unsigned i;
	uint16_t tag;

	for (i = 0; i < s->nr; i++) {
		const struct snap_section *sec = &s->sec[i];

		if (sec->len && (sec->data < buf || sec->data + sec->len > buf + len))
			abort();
		if (snap_find(s, sec->type, sec->index) != sec)
			abort();	/* duplicates must have been refused */
		for (tag = 0; tag < 8; tag++) {
			if (snap_get(sec, tag, &t) == 1 &&
			    (t.val < sec->data || t.val + t.len > sec->data + sec->len))
				abort();
			(void)snap_get_exact(sec, tag, out, tag * 8 % sizeof(out));
			(void)snap_get_u64(sec, tag, &v);
		}
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct snap *s = malloc(sizeof(*s));
	uint8_t *copy;
	uint32_t c;

	if (!s)
		return 0;
	if (!snap_parse(data, size, s))
		walk(data, size, s);
	if (size >= SNAP_HEADER_LEN && size <= SNAP_MAX_LEN) {
		copy = malloc(size);
		if (copy) {
			memcpy(copy, data, size);
			digest_sha256(copy + SNAP_HEADER_LEN, size - SNAP_HEADER_LEN, copy + 24);
			c = (uint32_t)crc32(crc32(0, Z_NULL, 0), copy, 60);
			copy[60] = c;
			copy[61] = c >> 8;
			copy[62] = c >> 16;
			copy[63] = c >> 24;
			if (!snap_parse(copy, size, s))
				walk(copy, size, s);
			free(copy);
		}
	}
	free(s);
	return 0;
}
