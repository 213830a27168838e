/*
 * snapshot: the state file of a template -- everything about a paused VM
 * except its memory (vCPUs, interrupt controllers, clock, devices, and what
 * the template was made from) -- as a checked container.
 *
 * Layout (little-endian):
 *
 *   header   "HUSKSNAP", u32 version, u32 header length (96), u64 length of
 *            the sections that follow, 32-byte SHA-256 over them, u32 count
 *            of sections, 32-byte seal, u32 CRC32 of the header's first 92
 *            bytes
 *   section  u32 type, u32 index (e.g. the vCPU number), u32 payload length,
 *            u32 CRC32 of the payload, then the payload, zero-padded to 8
 *
 * A payload is a TLV list (proto.h's u16 tag, u32 length, value): raw KVM
 * structures, numbers, strings. The reader takes nothing on trust: every
 * length is bounded, every CRC and the SHA-256 are checked before any
 * section is handed out, duplicate sections and unknown versions are
 * refused. Unknown section types and tags are skipped (a newer writer may
 * add some); what a restore needs and does not find is its error.
 *
 * The checksums say a file is intact, not who wrote it: anyone can compute
 * them. The seal does: an HMAC-SHA256 under a secret key (template.c keeps
 * one per template directory) over the header's first 60 bytes and every
 * section, so a file sealed with another key, or altered and re-checksummed
 * without the key, is refused by snap_check_seal(). An unsealed file has a
 * seal of zeros; the VM process writes those, the supervisor seals them.
 */
#ifndef HUSK_SNAPSHOT_H
#define HUSK_SNAPSHOT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lib/digest.h"

#include "job/proto.h"

#define SNAP_MAGIC "HUSKSNAP"
#define SNAP_VERSION 2
#define SNAP_HEADER_LEN 96
#define SNAP_KEY_LEN 32		/* the seal's key: 256 random bits */
#define SNAP_SEAL_LEN 32
#define SNAP_MAX_LEN (16u << 20)	/* a state file is ~100 KiB; refuse absurd ones */
#define SNAP_MAX_SECTIONS 256
#define SNAP_MAX_PAYLOAD (4u << 20)

enum snap_type {
	SNAP_META = 1,		/* what the template was made from (T_META_*) */
	SNAP_HOST,		/* host fingerprint (T_HOST_*) */
	SNAP_VM,		/* clock, PIC, IOAPIC, PIT (T_VM_*) */
	SNAP_VCPU,		/* one per vCPU, index = vCPU id (T_VCPU_*) */
	SNAP_DEVICE,		/* one per device, index = virtio slot or SNAP_DEV_* */
	SNAP_MEMORY,		/* the memory file's size, digest, samples (T_MEM_*) */
};

struct snap_section {
	uint32_t type, index, len;
	const uint8_t *data;
};

struct snap {
	unsigned nr;
	struct snap_section sec[SNAP_MAX_SECTIONS];
};

/*
 * Check buf (a whole state file) and index its sections; the sections point
 * into buf. -EINVAL (bad magic, lengths, duplicates), -EBADMSG (a checksum),
 * -EPROTONOSUPPORT (a version this husk does not read), with
 * husk_lasterr() saying which part.
 */
int snap_parse(const uint8_t *buf, size_t len, struct snap *s);
/* The section of type and index, or NULL. */
const struct snap_section *snap_find(const struct snap *s, uint32_t type, uint32_t index);
/* The first TLV element with tag in sec: 1 found, 0 not there, -EINVAL malformed. */
int snap_get(const struct snap_section *sec, uint16_t tag, struct tlv *t);
/* Copy exactly len bytes of tag into out; -ENOENT missing, -EINVAL another length. */
int snap_get_exact(const struct snap_section *sec, uint16_t tag, void *out, size_t len);
int snap_get_u64(const struct snap_section *sec, uint16_t tag, uint64_t *v);

/* Building a state file: sections of TLV elements, then the header. */
struct snap_writer {
	uint8_t *data;			/* header + sections */
	size_t len, cap;
	size_t sec_off;			/* where the open section's header is */
	unsigned nr;
	bool open, failed;
};
void snap_writer_init(struct snap_writer *w);
void snap_writer_free(struct snap_writer *w);
void snap_begin(struct snap_writer *w, uint32_t type, uint32_t index);
void snap_put(struct snap_writer *w, uint16_t tag, const void *val, uint32_t len);
void snap_put_u64(struct snap_writer *w, uint16_t tag, uint64_t v);
void snap_put_str(struct snap_writer *w, uint16_t tag, const char *s);
void snap_end(struct snap_writer *w);
/* Append already-encoded TLV elements (a section copied from another file). */
void snap_put_raw(struct snap_writer *w, const void *p, size_t len);
/* Finish: fills the header, unsealed. The file is w->data, w->len bytes. -errno. */
int snap_finish(struct snap_writer *w);

/*
 * Seal a finished file (len >= SNAP_HEADER_LEN) with key: the header's seal
 * and then its CRC. Callers that hold the key only: the supervisor.
 */
void snap_seal(uint8_t *buf, size_t len, const uint8_t key[SNAP_KEY_LEN]);
/*
 * 0 when buf, a file snap_parse() accepted, carries key's seal; else
 * -EBADMSG with husk_lasterr() saying it was not sealed with this key.
 */
int snap_check_seal(const uint8_t *buf, size_t len, const uint8_t key[SNAP_KEY_LEN]);

/* The template's digests are SHA-256 (lib/digest.h). */
#define SNAP_SHA256_LEN DIGEST_SHA256_LEN

#endif
