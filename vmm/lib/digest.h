/*
 * digest: SHA-256 of memory and of files, and digests as hex, for every
 * module that names content by its digest (templates, images).
 */
#ifndef HUSK_DIGEST_H
#define HUSK_DIGEST_H

#include <stddef.h>
#include <stdint.h>

#define DIGEST_SHA256_LEN 32

void digest_sha256(const void *p, size_t len, uint8_t out[DIGEST_SHA256_LEN]);
/*
 * fd's bytes [off, off + len) by pread (len UINT64_MAX: to its end; a file
 * that ends before off + len is an error), written to copy_fd from its
 * offset 0 as well when copy_fd >= 0. -errno with husk_seterr().
 */
int digest_sha256_fd(int fd, uint64_t off, uint64_t len, int copy_fd,
		     uint8_t out[DIGEST_SHA256_LEN]);
/* len bytes as 2 * len lower-case hex digits and a NUL. */
void digest_hex(const uint8_t *d, size_t len, char *out);

#endif
