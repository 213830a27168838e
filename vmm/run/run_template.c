/*
 * run_template: the supervisor's half of templates in husk run.
 *
 * Restoring (--template NAME): the template is opened and checked here
 * (template_open: state file and its seal, memory samples, root image); its
 * state goes to the VM process in a sealed memfd, its memory image and root
 * image as the read-only fds that were checked, so the VM process never
 * opens a host path the template names, and cannot write any of them.
 *
 * Making one (husk template create): the VM process boots the VM, saves it
 * at guest-init's HELLO into the two files of a temporary template and
 * exits. What it wrote is untrusted: the supervisor parses the state back,
 * keeps only its HOST, VM, VCPU and DEVICE sections, adds the META section
 * (its own digests of the kernel and root image) and the MEMORY section
 * (digest and samples it computes from the image), seals the file with the
 * template directory's key, and only then puts the template in place. The
 * kernel and root image the VM boots are the descriptors whose digests the
 * template records.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "run/run_int.h"
#include "template/template.h"
#include "lib/util.h"

void run_tpl_init(struct run_tpl *T)
{
	memset(T, 0, sizeof(*T));
	T->dirfd = T->state_memfd = T->kernel_fd = T->rootfs_fd = -1;
	T->t.mem_fd = T->t.rootfs_fd = T->t.kernel_fd = -1;
	T->n.state_fd = T->n.mem_fd = T->n.tmpfd = -1;
}

/* The checked state, in a memfd sealed against any change. */
static int state_memfd(struct run_tpl *T)
{
	int fd = memfd_create("husk-template-state", MFD_CLOEXEC | MFD_ALLOW_SEALING), err;

	if (fd < 0)
		return husk_seterr(errno, "memfd_create: %s", strerror(errno));
	err = write_all_at(fd, T->t.state, T->t.state_len, 0);
	if (!err && fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE |
			  F_SEAL_SEAL) < 0)
		err = -errno;
	if (err) {
		close(fd);
		return husk_seterr(err, "cannot pass the template's state on: %s", strerror(-err));
	}
	T->state_memfd = fd;
	return 0;
}

int run_tpl_open(struct run_tpl *T, struct run_opts *o, char *rootfs, size_t len)
{
	const struct template_meta *m;
	int err;

	T->dirfd = template_dir_open(o->template_dir ? o->template_dir : TEMPLATE_DEFAULT_DIR,
				     false);
	if (T->dirfd < 0)
		return T->dirfd;
	err = template_open(T->dirfd, o->template_name, o->kernel, o->rootfs, &T->t);
	if (err)
		return err;
	T->open = true;
	m = &T->t.meta;
	/* The VM process reads the root image it was checked as. */
	T->rootfs_fd = T->t.rootfs_fd;
	T->t.rootfs_fd = -1;
	if (o->net == RUN_NET_EGRESS && !m->net)
		return husk_seterr(EINVAL, "template %s has no network card: make it with "
				   "--net egress to give its clones one, or run with --net none",
				   o->template_name);
	/* The machine is the template's. */
	o->mem_mib = m->mem_bytes >> 20;
	o->vcpus = m->vcpus;
	if (o->cpu_milli > o->vcpus * 1000)
		o->cpu_milli = o->vcpus * 1000;
	if (o->pids_max < o->vcpus + RUN_PIDS_OVERHEAD)
		o->pids_max = o->vcpus + RUN_PIDS_OVERHEAD;
	snprintf(rootfs, len, "%s", o->rootfs ? o->rootfs : m->rootfs_path);
	return state_memfd(T);
}

/* The image's digest, and its descriptor in *fdp for the VM process to boot from. */
static int digest_file(const char *what, const char *path, bool allow_blk,
		       uint8_t sha[SNAP_SHA256_LEN], struct file_id *id, int *fdp)
{
	int fd = template_image_open(what, path, allow_blk, id), err;

	if (fd < 0)
		return fd;
	err = digest_sha256_fd(fd, 0, UINT64_MAX, -1, sha);
	if (err) {
		close(fd);
		return err;
	}
	*fdp = fd;
	return 0;
}

int run_tpl_begin(struct run_tpl *T, const struct run_opts *o, const char *kernel,
		  const char *rootfs)
{
	struct template_meta *m = &T->meta;
	int err;

	T->dirfd = template_dir_open(o->template_dir ? o->template_dir : TEMPLATE_DEFAULT_DIR,
				     true);
	if (T->dirfd < 0)
		return T->dirfd;
	/* The key first: a directory that cannot seal a template gets none. */
	err = template_key(T->dirfd, true, T->key);
	if (!err)
		err = template_new_begin(T->dirfd, o->template_name, &T->n);
	if (err)
		return err;
	T->creating = true;
	memset(m, 0, sizeof(*m));
	snprintf(m->name, sizeof(m->name), "%s", o->template_name);
	/* Absolute paths: a clone finds the root image wherever it starts. */
	if (!realpath(kernel, m->kernel_path) || !realpath(rootfs, m->rootfs_path))
		return husk_seterr(errno, "cannot resolve the image paths: %s", strerror(errno));
	err = digest_file("kernel", kernel, false, m->kernel_sha, &m->kernel_id, &T->kernel_fd);
	if (!err)
		err = digest_file("root image", rootfs, true, m->rootfs_sha, &m->rootfs_id,
				  &T->rootfs_fd);
	m->mem_bytes = o->mem_mib << 20;
	m->vcpus = o->vcpus;
	m->net = o->net == RUN_NET_EGRESS;
	return err;
}

/* Copy the sections only the VM process could write, refusing anything else. */
static int take_vm_sections(const struct snap *s, const struct template_meta *m,
			    struct snap_writer *w, struct template_meta *out)
{
	const struct snap_section *host = snap_find(s, SNAP_HOST, 0);
	unsigned i, vcpus = 0;
	uint64_t khz;

	if (!host || snap_get_exact(host, T_HOST_FP, out->host_fp, SNAP_SHA256_LEN) ||
	    snap_get_u64(host, T_HOST_TSC_KHZ, &khz))
		return husk_seterr(EINVAL, "the saved VM has no host fingerprint");
	out->tsc_khz = khz;
	for (i = 0; i < s->nr; i++) {
		const struct snap_section *sec = &s->sec[i];

		switch (sec->type) {
		case SNAP_VCPU:
			if (sec->index >= m->vcpus)
				return husk_seterr(EINVAL, "the saved VM has a vCPU %u", sec->index);
			vcpus++;
			break;
		case SNAP_VM:
		case SNAP_DEVICE:
			break;
		case SNAP_HOST:
			continue;	/* rewritten with META */
		default:
			return husk_seterr(EINVAL, "the saved VM has a section of type %u", sec->type);
		}
		snap_begin(w, sec->type, sec->index);
		snap_put_raw(w, sec->data, sec->len);
		snap_end(w);
	}
	if (vcpus != m->vcpus || !snap_find(s, SNAP_VM, 0))
		return husk_seterr(EINVAL, "the saved VM lacks its vCPUs or VM state");
	return 0;
}

int run_tpl_finish(struct run_tpl *T, const struct run_vm_report *rep, struct run_result *r)
{
	struct template_meta *m = &T->meta;
	struct snap_writer w;
	struct stat st;
	struct snap s;
	uint8_t *buf = NULL;
	int err;

	if (!rep->saved)
		return husk_seterr(EIO, "the VM was not saved");
	if (fstat(T->n.state_fd, &st) < 0 || st.st_size < SNAP_HEADER_LEN ||
	    st.st_size > SNAP_MAX_LEN)
		return husk_seterr(EINVAL, "the saved VM's state is missing or absurd");
	buf = malloc(st.st_size);
	if (!buf)
		return husk_seterr(ENOMEM, "out of memory");
	err = read_exact_at(T->n.state_fd, buf, st.st_size, 0);
	if (!err)
		err = snap_parse(buf, st.st_size, &s);
	snap_writer_init(&w);
	m->created_us = wall_us();
	m->nr_devices = rep->nr_devices < ARRAY_SIZE(m->devices) ? rep->nr_devices :
			ARRAY_SIZE(m->devices);
	memcpy(m->devices, rep->devices, m->nr_devices * sizeof(m->devices[0]));
	if (!err)
		err = take_vm_sections(&s, m, &w, m);
	if (!err) {
		template_meta_write(&w, m);
		err = template_memory_section(T->n.mem_fd, m->mem_bytes, &w, &m->mem_data);
	}
	if (!err)
		err = snap_finish(&w);
	if (!err)
		snap_seal(w.data, w.len, T->key);
	/* Replace what the VM process wrote with the sealed file. */
	if (!err && ftruncate(T->n.state_fd, 0) < 0)
		err = husk_seterr(errno, "cannot rewrite the state file: %s", strerror(errno));
	if (!err) {
		err = write_all_at(T->n.state_fd, w.data, w.len, 0);
		if (err)
			husk_seterr(err, "cannot write the state file: %s", strerror(-err));
	}
	if (!err)
		err = template_new_commit(&T->n);
	if (!err) {
		T->creating = false;
		r->template_data = m->mem_data;
	}
	snap_writer_free(&w);
	free(buf);
	return err;
}

void run_tpl_close(struct run_tpl *T)
{
	if (T->creating)
		template_new_abort(&T->n);
	else if (T->n.state_fd >= 0)
		template_new_abort(&T->n);	/* committed: only closes the fds */
	if (T->open)
		template_close(&T->t);
	if (T->state_memfd >= 0)
		close(T->state_memfd);
	if (T->kernel_fd >= 0)
		close(T->kernel_fd);
	if (T->rootfs_fd >= 0)
		close(T->rootfs_fd);
	if (T->dirfd >= 0)
		close(T->dirfd);
	memset(T->key, 0, sizeof(T->key));
	run_tpl_init(T);
}
