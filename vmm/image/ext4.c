/*
 * ext4: build a root image from a staged tree. See ext4.h.
 */
#include <errno.h>
#include <ext2fs/ext2fs.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "image/ext4.h"
#include "image/layer.h"
#include "image/tool.h"
#include "lib/util.h"

static int mke2fs(const char *stage, const char *out, uint64_t bytes, uint64_t entries)
{
	/*
	 * 4 KiB blocks round every small file up; directories and metadata need
	 * about as much again; 20 % and 16 MiB of margin. The image is mounted
	 * read-only, so it needs no free space of its own.
	 */
	uint64_t kib = ((bytes >> 10) + entries * 4) * 12 / 10 + (16u << 10);
	char size[32], inodes[32];
	char *argv[] = { "mke2fs", "-q", "-F", "-t", "ext4", "-d", (char *)stage, "-L", "husk-root",
			 "-O", "^has_journal", "-b", "4096", "-I", "256", "-N", inodes,
			 "-E", "root_owner=0:0", (char *)out, size, NULL };

	snprintf(size, sizeof(size), "%lluk", (unsigned long long)kib);
	snprintf(inodes, sizeof(inodes), "%llu", (unsigned long long)(entries + entries / 10 + 64));
	return image_tool_run(argv, "e2fsprogs", -1, NULL);
}

struct fix {
	ext2_filsys fs;
	uint64_t done;
};

/* The inode of path, one component at a time from the root, never following a link. */
static errcode_t lookup(ext2_filsys fs, const char *path, ext2_ino_t *ino)
{
	ext2_ino_t cur = EXT2_ROOT_INO;
	const char *p = path;
	errcode_t e;

	while (*p) {
		const char *s = strchr(p, '/');
		int len = s ? (int)(s - p) : (int)strlen(p);

		e = ext2fs_lookup(fs, cur, p, len, NULL, &cur);
		if (e)
			return e;
		p += len;
		if (*p == '/')
			p++;
	}
	*ino = cur;
	return 0;
}

static int fix_one(void *arg, const char *path, const struct layer_attr *a)
{
	struct fix *f = arg;
	struct ext2_inode in;
	ext2_ino_t ino;
	errcode_t e;

	e = lookup(f->fs, path, &ino);
	if (!e)
		e = ext2fs_read_inode(f->fs, ino, &in);
	if (e)
		return husk_seterr(EIO, "image entry '%s': %s", path, error_message(e));
	/* The type is the staged entry's; only the rest comes from the table. */
	in.i_mode = (in.i_mode & S_IFMT) | (a->mode & 07777);
	in.i_uid = a->uid & 0xffff;
	in.i_gid = a->gid & 0xffff;
	in.osd2.linux2.l_i_uid_high = a->uid >> 16;
	in.osd2.linux2.l_i_gid_high = a->gid >> 16;
	in.i_mtime = (uint32_t)(a->mtime < 0 ? 0 : a->mtime);
	e = ext2fs_write_inode(f->fs, ino, &in);
	if (e)
		return husk_seterr(EIO, "image entry '%s': %s", path, error_message(e));
	f->done++;
	return 0;
}

int ext4_build(const char *stage, const char *out, uint64_t bytes, uint64_t entries,
	       struct layer_tree *t)
{
	struct fix f = { 0 };
	errcode_t e;
	int err;

	err = mke2fs(stage, out, bytes, entries);
	if (err)
		return err;
	e = ext2fs_open(out, EXT2_FLAG_RW | EXT2_FLAG_64BITS, 0, 0, unix_io_manager, &f.fs);
	if (e)
		return husk_seterr(EIO, "opening the new image: %s", error_message(e));
	err = layer_tree_each(t, fix_one, &f);
	e = ext2fs_close_free(&f.fs);
	if (!err && e)
		err = husk_seterr(EIO, "writing the new image: %s", error_message(e));
	return err;
}
