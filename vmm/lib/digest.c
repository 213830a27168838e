/*
 * digest: SHA-256 (nettle) of memory and files. See digest.h.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <nettle/sha2.h>

#include "lib/digest.h"
#include "lib/util.h"

#define CHUNK (1u << 16)

void digest_sha256(const void *p, size_t len, uint8_t out[DIGEST_SHA256_LEN])
{
	struct sha256_ctx c;

	sha256_init(&c);
	sha256_update(&c, len, p);
	sha256_digest(&c, DIGEST_SHA256_LEN, out);
}

int digest_sha256_fd(int fd, uint64_t off, uint64_t len, int copy_fd,
		     uint8_t out[DIGEST_SHA256_LEN])
{
	/* Not a thread-local: every thread's TLS is zeroed when it starts. */
	unsigned char *buf = malloc(CHUNK);
	struct sha256_ctx c;
	uint64_t done = 0;
	ssize_t n;
	int err = 0;

	if (!buf)
		return husk_seterr(ENOMEM, "out of memory for a digest");
	sha256_init(&c);
	while (done < len) {
		n = pread(fd, buf, len - done < CHUNK ? len - done : CHUNK, off + done);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			err = husk_seterr(errno, "reading for a digest: %s", strerror(errno));
			break;
		}
		if (!n) {
			if (len != UINT64_MAX)
				err = husk_seterr(EIO, "the file ends early");
			break;
		}
		sha256_update(&c, n, buf);
		if (copy_fd >= 0 && (err = write_all_at(copy_fd, buf, n, done))) {
			err = husk_seterr(-err, "writing a copy: %s", strerror(-err));
			break;
		}
		done += n;
	}
	free(buf);
	if (!err)
		sha256_digest(&c, DIGEST_SHA256_LEN, out);
	return err;
}

void digest_hex(const uint8_t *d, size_t len, char *out)
{
	static const char hex[] = "0123456789abcdef";
	size_t i;

	for (i = 0; i < len; i++) {
		out[2 * i] = hex[d[i] >> 4];
		out[2 * i + 1] = hex[d[i] & 15];
	}
	out[2 * len] = '\0';
}
