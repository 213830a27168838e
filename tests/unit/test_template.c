/*
 * Unit tests for template: templates on disk without KVM -- names, the
 * directory's permissions, making one (temporary directory, rename, never
 * over an existing one), listing, removing, and every check a restore
 * makes on the files: state file intact and sealed with this directory's
 * key, memory image of the right size with its sampled pages unchanged,
 * the root image and kernel the ones it was made from (and read through
 * the descriptor that was checked, a block device only when the run names
 * it), the host's fingerprint and TSC.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "suites.h"
#include "template/template.h"
#include "lib/util.h"
#include "machine/vm.h"
#include "virtio/virtio_blk.h"
#include "virtio/virtio_mmio.h"

#define MEM (16u << 20)

static char dir[64], tdir[96], kernel[96], rootfs[96];

static void put_file(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");

	ck_assert_ptr_nonnull(f);
	fputs(text, f);
	fclose(f);
}

static void digest_of(const char *path, uint8_t out[SNAP_SHA256_LEN], struct file_id *id)
{
	int fd = open(path, O_RDONLY);

	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(digest_sha256_fd(fd, 0, UINT64_MAX, -1, out), 0);
	ck_assert_int_eq(file_id_of(fd, id), 0);
	close(fd);
}

static void setup(void)
{
	strcpy(dir, "/tmp/husk-tpl-test-XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(dir));
	snprintf(tdir, sizeof(tdir), "%s/templates", dir);
	snprintf(kernel, sizeof(kernel), "%s/vmlinux", dir);
	snprintf(rootfs, sizeof(rootfs), "%s/rootfs.ext4", dir);
	put_file(kernel, "a kernel");
	put_file(rootfs, "a root image");
}

static void teardown(void)
{
	int fd = open("/tmp", O_RDONLY | O_DIRECTORY);

	rm_tree_at(fd, dir + 5);
	close(fd);
}

/* A template as template create would leave it (no KVM sections), from root. */
static void make_from(int dfd, const char *name, const char *root)
{
	struct template_new t;
	struct template_meta m;
	struct snap_writer w;
	uint8_t page[4096], key[SNAP_KEY_LEN];
	unsigned i;

	ck_assert_int_eq(template_key(dfd, true, key), 0);
	ck_assert_int_eq(template_new_begin(dfd, name, &t), 0);
	ck_assert_int_eq(ftruncate(t.mem_fd, MEM), 0);
	for (i = 0; i < 200; i++) {
		memset(page, i + 1, sizeof(page));
		ck_assert_int_eq(pwrite(t.mem_fd, page, sizeof(page), i * 3 * 4096ull), 4096);
	}
	memset(&m, 0, sizeof(m));
	snprintf(m.name, sizeof(m.name), "%s", name);
	m.created_us = 1700000000000000ull;
	digest_of(kernel, m.kernel_sha, &m.kernel_id);
	digest_of(root, m.rootfs_sha, &m.rootfs_id);
	snprintf(m.kernel_path, sizeof(m.kernel_path), "%s", kernel);
	snprintf(m.rootfs_path, sizeof(m.rootfs_path), "%s", root);
	m.mem_bytes = MEM;
	m.vcpus = 2;
	m.devices[0] = 2;
	m.devices[1] = 19;
	m.nr_devices = 2;
	m.tsc_khz = 2000000;
	snap_writer_init(&w);
	template_meta_write(&w, &m);
	ck_assert_int_eq(template_memory_section(t.mem_fd, MEM, &w, NULL), 0);
	ck_assert_int_eq(snap_finish(&w), 0);
	snap_seal(w.data, w.len, key);
	ck_assert_int_eq(pwrite(t.state_fd, w.data, w.len, 0), (ssize_t)w.len);
	snap_writer_free(&w);
	ck_assert_int_eq(template_new_commit(&t), 0);
	template_new_abort(&t);		/* closes the fds; the template stays */
}

static void make(int dfd, const char *name)
{
	make_from(dfd, name, rootfs);
}

START_TEST(names)
{
	ck_assert_int_eq(template_name_check("py311-base_v2.1"), 0);
	ck_assert_int_eq(template_name_check(""), -EINVAL);
	ck_assert_int_eq(template_name_check(".hidden"), -EINVAL);
	ck_assert_int_eq(template_name_check("a/b"), -EINVAL);
	ck_assert_int_eq(template_name_check(".."), -EINVAL);
	ck_assert_int_eq(template_name_check("sp ace"), -EINVAL);
	ck_assert_int_eq(template_name_check("x123456789012345678901234567890123456789012345678901234567890123"), 0);
	ck_assert_int_eq(template_name_check("x1234567890123456789012345678901234567890123456789012345678901234"), -EINVAL);
}
END_TEST

START_TEST(directory_permissions)
{
	struct stat st;
	int fd;

	ck_assert_int_lt(template_dir_open(tdir, false), 0);		/* none yet */
	fd = template_dir_open(tdir, true);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(fstat(fd, &st), 0);
	ck_assert_uint_eq(st.st_mode & 07777, 0700);
	close(fd);
	ck_assert_int_eq(chmod(tdir, 0755), 0);
	ck_assert_int_eq(template_dir_open(tdir, false), -EPERM);
	ck_assert_ptr_nonnull(strstr(husk_lasterr(), "mode 0700"));
}
END_TEST

START_TEST(make_list_open_remove)
{
	struct template_info *v;
	struct template t;
	unsigned n;
	int dfd = template_dir_open(tdir, true), err;

	ck_assert_int_ge(dfd, 0);
	make(dfd, "beta");
	make(dfd, "alpha");
	/* Never over an existing one. */
	{
		struct template_new tn;

		ck_assert_int_eq(template_new_begin(dfd, "alpha", &tn), -EEXIST);
		template_new_abort(&tn);
	}
	ck_assert_int_eq(template_list(dfd, &v, &n), 0);
	ck_assert_uint_eq(n, 2);
	ck_assert_str_eq(v[0].meta.name, "alpha");
	ck_assert_str_eq(v[1].meta.name, "beta");
	ck_assert(v[0].ok);
	ck_assert_uint_eq(v[0].meta.vcpus, 2);
	ck_assert_uint_eq(v[0].meta.mem_data, 200 * 4096);
	ck_assert_uint_le(v[0].disk_bytes, 2u << 20);		/* sparse */
	free(v);

	err = template_open(dfd, "alpha", kernel, NULL, &t);
	ck_assert_msg(err == 0, "%s", husk_lasterr());
	ck_assert_uint_eq(t.meta.mem_size, MEM);
	ck_assert_int_eq(template_verify_memory(&t), 0);
	template_close(&t);
	ck_assert_int_eq(template_open(dfd, "gamma", NULL, NULL, &t), -ENOENT);
	ck_assert_ptr_nonnull(strstr(husk_lasterr(), "no such template"));

	ck_assert_int_eq(template_remove(dfd, "beta"), 0);
	ck_assert_int_eq(template_remove(dfd, "beta"), -ENOENT);
	ck_assert_int_eq(template_list(dfd, &v, &n), 0);
	ck_assert_uint_eq(n, 1);
	free(v);
	close(dfd);
}
END_TEST

static int dfd_with_one(void)
{
	int dfd = template_dir_open(tdir, true);

	ck_assert_int_ge(dfd, 0);
	make(dfd, "t");
	return dfd;
}

START_TEST(refuses_altered_files)
{
	struct template t;
	char p[160];
	uint8_t b = 0x77;
	int dfd = dfd_with_one(), fd;

	/* A page of the memory image changed: a sample catches it. */
	snprintf(p, sizeof(p), "%s/t/memory", tdir);
	fd = open(p, O_WRONLY);
	ck_assert_int_eq(pwrite(fd, &b, 1, 0), 1);
	close(fd);
	ck_assert_int_eq(template_open(dfd, "t", NULL, NULL, &t), -EBADMSG);
	ck_assert_ptr_nonnull(strstr(husk_lasterr(), "altered or damaged"));
	ck_assert_int_eq(template_remove(dfd, "t"), 0);

	/* Truncated memory image. */
	make(dfd, "t");
	ck_assert_int_eq(truncate(p, MEM / 2), 0);
	ck_assert_int_eq(template_open(dfd, "t", NULL, NULL, &t), -EINVAL);
	ck_assert_ptr_nonnull(strstr(husk_lasterr(), "truncated"));
	ck_assert_int_eq(template_remove(dfd, "t"), 0);

	/* A byte of the state file changed. */
	make(dfd, "t");
	snprintf(p, sizeof(p), "%s/t/state", tdir);
	fd = open(p, O_RDWR);
	ck_assert_int_eq(pwrite(fd, &b, 1, 100), 1);
	close(fd);
	ck_assert_int_eq(template_open(dfd, "t", NULL, NULL, &t), -EBADMSG);
	ck_assert_int_eq(template_remove(dfd, "t"), 0);

	/* A change far inside the image, between samples: template verify sees it. */
	make(dfd, "t");
	snprintf(p, sizeof(p), "%s/t/memory", tdir);
	fd = open(p, O_WRONLY);
	ck_assert_int_eq(pwrite(fd, &b, 1, 3 * 4096 * 5 + 17), 1);
	close(fd);
	if (template_open(dfd, "t", NULL, NULL, &t) == 0) {
		ck_assert_int_eq(template_verify_memory(&t), -EBADMSG);
		template_close(&t);
	}
	close(dfd);
}
END_TEST

START_TEST(refuses_other_images)
{
	struct template t;
	int dfd = dfd_with_one();

	/* The same content elsewhere is fine (digest), another content is not. */
	ck_assert_int_eq(template_open(dfd, "t", kernel, rootfs, &t), 0);
	template_close(&t);
	put_file(kernel, "another kernel");
	ck_assert_int_eq(template_open(dfd, "t", kernel, NULL, &t), -EINVAL);
	ck_assert_ptr_nonnull(strstr(husk_lasterr(), "not the one the template was made from"));
	/* Touched but the same bytes: accepted through the digest. */
	put_file(kernel, "a kernel");
	ck_assert_int_eq(template_open(dfd, "t", kernel, NULL, &t), 0);
	template_close(&t);
	/* The root image is always checked, even when the run names none. */
	put_file(rootfs, "a changed root image");
	ck_assert_int_eq(template_open(dfd, "t", NULL, NULL, &t), -EINVAL);
	ck_assert_ptr_nonnull(strstr(husk_lasterr(), "root image"));
	close(dfd);
}
END_TEST

/* Copy template name of directory from into directory to (a foreign template). */
static void copy_template(const char *from, const char *to, const char *name)
{
	static const char *const files[] = { "state", "memory" };
	char src[256], dst[256], buf[1 << 16];
	unsigned i;
	ssize_t n;

	snprintf(dst, sizeof(dst), "%s/%s", to, name);
	ck_assert_int_eq(mkdir(dst, 0700), 0);
	for (i = 0; i < 2; i++) {
		int in, out;

		snprintf(src, sizeof(src), "%s/%s/%s", from, name, files[i]);
		snprintf(dst, sizeof(dst), "%s/%s/%s", to, name, files[i]);
		in = open(src, O_RDONLY);
		out = open(dst, O_WRONLY | O_CREAT | O_EXCL, 0600);
		ck_assert_int_ge(in, 0);
		ck_assert_int_ge(out, 0);
		while ((n = read(in, buf, sizeof(buf))) > 0)
			ck_assert_int_eq(write(out, buf, n), n);
		close(in);
		close(out);
	}
}

/* Intact, checksums right, but sealed by another directory's key: refused. */
START_TEST(refuses_foreign_seal)
{
	struct template_info *v;
	struct template t;
	char other[128], p[192];
	unsigned n;
	int dfd = dfd_with_one(), ofd;

	snprintf(other, sizeof(other), "%s/elsewhere", dir);
	ofd = template_dir_open(other, true);
	ck_assert_int_ge(ofd, 0);
	make(ofd, "foreign");
	ck_assert_int_eq(template_open(ofd, "foreign", NULL, NULL, &t), 0);
	template_close(&t);
	copy_template(other, tdir, "foreign");
	ck_assert_int_eq(template_open(dfd, "foreign", NULL, NULL, &t), -EBADMSG);
	ck_assert_ptr_nonnull(strstr(husk_lasterr(), "not sealed with this template directory's key"));
	ck_assert_int_eq(template_list(dfd, &v, &n), 0);
	ck_assert_uint_eq(n, 2);
	ck_assert(!v[0].ok);			/* "foreign" sorts first */
	ck_assert_ptr_nonnull(strstr(v[0].problem, "not sealed"));
	ck_assert(v[1].ok);
	free(v);

	/* No key at all: nothing in the directory can be checked. */
	snprintf(p, sizeof(p), "%s/%s", tdir, TEMPLATE_KEY_FILE);
	ck_assert_int_eq(unlink(p), 0);
	ck_assert_int_eq(template_open(dfd, "t", NULL, NULL, &t), -ENOKEY);
	ck_assert_ptr_nonnull(strstr(husk_lasterr(), "has no key"));
	/* A key others could read is no key. */
	put_file(p, "0123456789abcdef0123456789abcdef");
	ck_assert_int_eq(chmod(p, 0644), 0);
	ck_assert_int_eq(template_open(dfd, "t", NULL, NULL, &t), -EPERM);
	ck_assert_ptr_nonnull(strstr(husk_lasterr(), "mode 0600"));
	close(ofd);
	close(dfd);
}
END_TEST

/* The root image the VM reads is the descriptor that was checked, not the path again. */
START_TEST(checked_image_is_read)
{
	char big[128], swap[128];
	struct template t;
	struct vm *vm;
	uint8_t *ram, buf[16];
	uint32_t cap;
	int dfd = template_dir_open(tdir, true), fd;

	ck_assert_int_ge(dfd, 0);
	snprintf(big, sizeof(big), "%s/root.img", dir);
	snprintf(swap, sizeof(swap), "%s/other.img", dir);
	fd = open(big, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	ck_assert_int_eq(ftruncate(fd, 2 * 512), 0);	/* two sectors */
	ck_assert_int_eq(pwrite(fd, "checked", 7, 0), 7);
	close(fd);
	make_from(dfd, "t", big);
	ck_assert_int_eq(template_open(dfd, "t", NULL, NULL, &t), 0);
	ck_assert_int_ge(t.rootfs_fd, 0);
	/* Another image put at the path after the check. */
	fd = open(swap, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	ck_assert_int_eq(ftruncate(fd, 8 * 512), 0);
	ck_assert_int_eq(pwrite(fd, "swapped", 7, 0), 7);
	close(fd);
	ck_assert_int_eq(rename(swap, big), 0);
	ck_assert_int_eq(pread(t.rootfs_fd, buf, 7, 0), 7);
	ck_assert_int_eq(memcmp(buf, "checked", 7), 0);
	/* The disk built from it is the checked image: two sectors, not eight. */
	ram = calloc(1, 1 << 20);
	vm = calloc(1, sizeof(*vm));
	vm->fd = -1;
	gmem_init_buffer(&vm->mem, ram, 1 << 20);
	ck_assert_int_eq(virtio_blk_create_fd(vm, big, t.rootfs_fd, true), 0);
	virtio_mmio_access(vm->virtio[0], 0x100, false, (uint8_t *)&cap, 4);
	ck_assert_uint_eq(cap, 2);
	virtio_mmio_destroy(vm->virtio[0]);
	/* The device has its own copy: the template's stays open. */
	ck_assert_int_ge(fcntl(t.rootfs_fd, F_GETFD), 0);
	template_close(&t);
	free(vm);
	free(ram);
	close(dfd);
}
END_TEST

/* A template whose recorded root is a block device: only when the run names it. */
START_TEST(block_device_root)
{
	const char *blk = "/dev/loop0";
	struct template t;
	struct stat st;
	int dfd;

	if (!unit_need_root("a block device as a template's root"))
		return;
	if (stat(blk, &st) || !S_ISBLK(st.st_mode) || st.st_size) {
		unit_skip("a block device as a template's root", "no empty /dev/loop0 here");
		return;
	}
	dfd = template_dir_open(tdir, true);
	ck_assert_int_ge(dfd, 0);
	make_from(dfd, "blk", blk);
	ck_assert_int_eq(template_open(dfd, "blk", NULL, NULL, &t), -EPERM);
	ck_assert_ptr_nonnull(strstr(husk_lasterr(), "is a block device"));
	ck_assert_int_eq(template_open(dfd, "blk", NULL, blk, &t), 0);
	ck_assert_int_ge(t.rootfs_fd, 0);
	template_close(&t);
	/* Never as the kernel. */
	ck_assert_int_eq(template_open(dfd, "blk", blk, blk, &t), -EPERM);
	close(dfd);
}
END_TEST

/* The host checks: another fingerprint refuses, a TSC recalibrated by a few kHz does not. */
START_TEST(host_checks)
{
	struct template_meta m;
	uint8_t fp[SNAP_SHA256_LEN];

	memset(&m, 0, sizeof(m));
	strcpy(m.name, "t");
	memset(m.host_fp, 0xab, sizeof(m.host_fp));
	memcpy(fp, m.host_fp, sizeof(fp));
	m.tsc_khz = 2000000;
	ck_assert_int_eq(template_check_fp(&m, fp, 2000000), 0);
	ck_assert_int_eq(template_check_fp(&m, fp, 2000000 + 500), 0);	/* 250 ppm */
	ck_assert_int_eq(template_check_fp(&m, fp, 2000000 - 500), 0);
	ck_assert_int_eq(template_check_fp(&m, fp, 2000000 + 501), -EINVAL);
	ck_assert_ptr_nonnull(strstr(husk_lasterr(), "kHz TSC"));
	ck_assert_int_eq(template_check_fp(&m, fp, 0), -EINVAL);
	fp[31] ^= 1;
	ck_assert_int_eq(template_check_fp(&m, fp, 2000000), -EINVAL);
	ck_assert_ptr_nonnull(strstr(husk_lasterr(), "another kind of host"));
}
END_TEST

START_TEST(stale_temporaries_removed)
{
	char p[160];
	struct stat st;
	int dfd = template_dir_open(tdir, true);

	/* A dead husk's half-made template (pid 999999 does not exist). */
	snprintf(p, sizeof(p), "%s/.x.tmp-999999", tdir);
	ck_assert_int_eq(mkdir(p, 0700), 0);
	snprintf(p, sizeof(p), "%s/.x.tmp-999999/memory", tdir);
	put_file(p, "junk");
	template_clean_stale(dfd);
	snprintf(p, sizeof(p), "%s/.x.tmp-999999", tdir);
	ck_assert_int_eq(stat(p, &st), -1);
	close(dfd);
}
END_TEST

Suite *template_suite(void)
{
	Suite *s = suite_create("template");
	TCase *tc = tcase_create("disk");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, names);
	tcase_add_test(tc, directory_permissions);
	tcase_add_test(tc, make_list_open_remove);
	tcase_add_test(tc, refuses_altered_files);
	tcase_add_test(tc, refuses_other_images);
	tcase_add_test(tc, refuses_foreign_seal);
	tcase_add_test(tc, checked_image_is_read);
	tcase_add_test(tc, block_device_root);
	tcase_add_test(tc, host_checks);
	tcase_add_test(tc, stale_temporaries_removed);
	suite_add_tcase(s, tc);
	return s;
}
