/*
 * vm_snapshot: a whole VM into a template and back. Saving pauses nothing
 * itself: the caller has stopped the VM (vm_stop) and joined its vCPU
 * threads (vm_join); then the event loop is stopped, every vCPU finishes its
 * pending I/O and is saved, then the VM's clock and interrupt controllers,
 * every virtio device, the UART and last guest RAM. Restoring takes two
 * steps: vm_create() with vm_config.restore set builds the same machine,
 * devices in the same slots, RAM mapped from the template's image; then
 * vm_restore_state() puts the saved state over it, before any vCPU runs.
 * The caller confines itself between the two (husk run: the jail), since
 * the state is input: every section is checked again here, and what KVM
 * is given is limited to what a guest on this host could have reached.
 */
#ifndef HUSK_VM_SNAPSHOT_H
#define HUSK_VM_SNAPSHOT_H

#include "template/snapshot.h"
#include "template/template.h"
#include "machine/vm.h"

#define SNAP_DEV_UART 100		/* SNAP_DEVICE index of COM1 */
enum { T_UART_STATE = 1 };

/* What vm_create needs to restore instead of boot. */
struct vm_restore {
	const struct snap *snap;	/* the template's checked state file */
	const struct template_meta *meta;
	int mem_fd;			/* its memory image, read-only */
};

/*
 * Save a stopped, joined VM: HOST, VM, VCPU and DEVICE sections into w, RAM
 * into mem_fd (gmem_save; *mem_data its written bytes), the virtio device
 * ids in slot order into ids/nr_ids (for the template's META). -errno.
 */
int vm_snapshot(struct vm *vm, struct snap_writer *w, int mem_fd, uint64_t *mem_data,
		uint32_t *ids, unsigned *nr_ids);
/* After vm_create(): the saved state over the freshly built machine. */
int vm_restore_state(struct vm *vm, const struct vm_restore *r);

#endif
