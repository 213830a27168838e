/*
 * template: templates on disk. A template is a directory under the template
 * directory (default /var/lib/husk/templates, mode 0700, owned by the user
 * husk runs as) holding two files:
 *
 *   state    the snapshot.h container: META (what it was made from), HOST
 *            (the fingerprint of the host that made it), MEMORY (size,
 *            digest and sample checksums of the memory image), VM, VCPU and
 *            DEVICE sections
 *   memory   guest RAM in guest-physical order, sparse (gmem_save)
 *
 * The directory also holds ".key", the secret every state file in it is
 * sealed with (snapshot.h): 32 random bytes, mode 0600, made by the first
 * template create. A state file made elsewhere, by another user, or
 * altered and re-checksummed is refused because its seal does not match.
 *
 * A template is built in a private ".NAME.tmp-PID" directory and renamed
 * into place when complete; it is never changed afterwards, only removed
 * (renamed out of the way first, so a run mapping it keeps working).
 * Opening one for a restore checks everything that is cheap enough to check
 * every time: the whole state file (checksums, version, seal), the memory
 * image's size and a sample of its pages against the recorded checksums,
 * and the images the run asks for against the recorded digests; the VM
 * process, which has KVM, checks the host's fingerprint and TSC frequency
 * (template_check_fp). template_verify_memory() reads all of the memory
 * image against its SHA-256. Nothing here needs KVM: the fuzz targets link
 * it as it is.
 */
#ifndef HUSK_TEMPLATE_H
#define HUSK_TEMPLATE_H

#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "template/snapshot.h"

#define TEMPLATE_DEFAULT_DIR "/var/lib/husk/templates"
#define TEMPLATE_NAME_MAX 64
#define TEMPLATE_SAMPLES 64		/* memory pages checked on every restore */
/* How far the TSC may differ from the template's without TSC scaling. */
#define TEMPLATE_TSC_PPM 250

enum {	/* SNAP_META */
	T_META_NAME = 1, T_META_CREATED_US, T_META_HUSK_VERSION,
	T_META_KERNEL_SHA, T_META_ROOTFS_SHA, T_META_KERNEL_PATH, T_META_ROOTFS_PATH,
	T_META_KERNEL_ID, T_META_ROOTFS_ID, T_META_MEM_BYTES, T_META_VCPUS, T_META_NET,
	T_META_CMDLINE, T_META_DEVICES,
};
enum {	/* SNAP_HOST */
	T_HOST_FP = 1, T_HOST_TSC_KHZ,
};
enum {	/* SNAP_MEMORY */
	T_MEM_SIZE = 1, T_MEM_DATA, T_MEM_SHA, T_MEM_SAMPLES,
};

/* A file's identity: a template's image unchanged since it was made. */
struct file_id {
	uint64_t dev, ino, size, mtime_ns, ctime_ns;
};
int file_id_of(int fd, struct file_id *id);
/*
 * Open a template's image (kernel, root) to be read to its end: a regular
 * file, or a block device when allow_blk (a path the user named), never a
 * FIFO waited on for a writer; its identity in *id. The fd, or -errno
 * with husk_lasterr() naming what and path.
 */
int template_image_open(const char *what, const char *path, bool allow_blk,
			struct file_id *id);

#define TEMPLATE_KEY_FILE ".key"
/*
 * The directory's sealing key into key: DIR/.key, which must be a regular
 * file of SNAP_KEY_LEN bytes, the euid's, mode 0600 or stricter. When there
 * is none: made (create), else -ENOKEY. -errno with husk_lasterr().
 */
int template_key(int dirfd, bool create, uint8_t key[SNAP_KEY_LEN]);

/* What a template says about itself (from its META, HOST, MEMORY sections). */
struct template_meta {
	char name[TEMPLATE_NAME_MAX + 1];
	uint64_t created_us;
	uint8_t kernel_sha[SNAP_SHA256_LEN], rootfs_sha[SNAP_SHA256_LEN];
	char kernel_path[PATH_MAX], rootfs_path[PATH_MAX];
	struct file_id kernel_id, rootfs_id;
	uint64_t mem_bytes, vcpus;
	bool net;
	uint32_t devices[8];		/* virtio device ids in slot order */
	unsigned nr_devices;
	uint8_t host_fp[SNAP_SHA256_LEN];
	uint64_t tsc_khz;
	uint64_t mem_size, mem_data;
	uint8_t mem_sha[SNAP_SHA256_LEN];
};

/* Letters, digits, '.', '_', '-'; 1..64 bytes; not starting with '.'. */
int template_name_check(const char *name);
/* Open the template directory (creating it, 0700, when create); -errno. */
int template_dir_open(const char *dir, bool create);

/* The META and HOST sections of m (template create; the MEMORY one separately). */
void template_meta_write(struct snap_writer *w, const struct template_meta *m);
/* Parse the META, HOST and MEMORY sections of a checked state file. */
int template_meta_read(const struct snap *s, struct template_meta *m);

/* ---- making one ---- */
struct template_new {
	int dirfd;			/* the template directory */
	int tmpfd;			/* the private directory being filled */
	char tmpname[TEMPLATE_NAME_MAX + 32];
	char name[TEMPLATE_NAME_MAX + 1];
	int state_fd, mem_fd;		/* O_RDWR, in tmpfd */
};
/* -EEXIST when NAME exists already. */
int template_new_begin(int dirfd, const char *name, struct template_new *t);
/* fsync both files, rename the directory to NAME (never over one). */
int template_new_commit(struct template_new *t);
/* Remove what was written (any state). */
void template_new_abort(struct template_new *t);
/* Digest and page samples of a finished memory image, into the MEMORY section. */
int template_memory_section(int mem_fd, uint64_t size, struct snap_writer *w,
			    uint64_t *data);

/* ---- using one ---- */
struct template {
	uint8_t *state;			/* the whole state file */
	size_t state_len;
	struct snap snap;
	struct template_meta meta;
	int mem_fd;			/* O_RDONLY */
	/* The images as checked, O_RDONLY: what the VM must read, not their paths. */
	int rootfs_fd;
	int kernel_fd;			/* -1 when the run named no kernel */
};
/*
 * Open NAME for a restore: the checks of the header comment but the host's
 * (the VM process makes those, with KVM: vm_restore_state). kernel/rootfs
 * are the paths the run will use (NULL: not given, the template's own are
 * used, rootfs checked). The root image may be a block device only when
 * rootfs names it: the path a template recorded is never opened as one.
 * Every refusal is an error naming the part that is wrong.
 */
int template_open(int dirfd, const char *name, const char *kernel, const char *rootfs,
		  struct template *t);
void template_close(struct template *t);
/*
 * The host checks: fp, this host's fingerprint (arch_host_fp), must be the
 * template's, and tsc_khz within TEMPLATE_TSC_PPM of its TSC frequency.
 */
int template_check_fp(const struct template_meta *m, const uint8_t fp[SNAP_SHA256_LEN],
		      uint32_t tsc_khz);
/* Read the whole memory image against its SHA-256 (husk template verify). */
int template_verify_memory(const struct template *t);

/* ---- listing and removing ---- */
struct template_info {
	struct template_meta meta;
	uint64_t disk_bytes;		/* blocks both files use */
	bool ok;			/* the state file checked out */
	char problem[160];
};
/* Every template in the directory, sorted by name; free(*out). */
int template_list(int dirfd, struct template_info **out, unsigned *n);
int template_remove(int dirfd, const char *name);
/* Remove .NAME.tmp-PID / .NAME.rm-PID directories whose husk is gone. */
void template_clean_stale(int dirfd);

#endif
