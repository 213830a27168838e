/*
 * fuzz_source: libFuzzer target for image sources read as archives.
 *
 * The input is written to a file and opened as an image source, as
 * `husk image import FILE` does: gzip detection, the archive's index (ustar,
 * GNU long names, PAX paths), manifest.json / index.json / manifests and
 * configs parsed and every blob checked against its digest. A source must
 * either fail cleanly or hold at most IMAGE_MAX_LAYERS open layers, each at
 * offset 0; nothing may be left in the work directory (members are copied
 * into unnamed files only).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dirent.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "image/source.h"

static char dir[64], file[96];

static int entries(const char *d)
{
	DIR *dp = opendir(d);
	struct dirent *e;
	int n = 0;

	if (!dp)
		abort();
	while ((e = readdir(dp)))
		if (strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
			n++;
	closedir(dp);
	return n;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct image_source s;
	unsigned i;
	int fd;

	if (!dir[0]) {
		strcpy(dir, "/tmp/fuzz-source.XXXXXX");
		if (!mkdtemp(dir))
			abort();
		snprintf(file, sizeof(file), "%s.in", dir);
	}
	fd = open(file, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	if (fd < 0 || write(fd, data, size) != (ssize_t)size)
		abort();
	close(fd);
	if (image_source_open(file, NULL, dir, &s) == 0) {
		if (s.n_layers > IMAGE_MAX_LAYERS)
			abort();
		for (i = 0; i < s.n_layers; i++)
			if (s.layers[i].fd < 0 || lseek(s.layers[i].fd, 0, SEEK_CUR) != 0)
				abort();
		image_source_close(&s);
	}
	if (entries(dir))
		abort();	/* a copy left behind */
	return 0;
}
