/*
 * vm_snapshot: a whole VM into a template and back. See vm_snapshot.h.
 */
#include <errno.h>
#include <string.h>

#include "lib/util.h"
#include "template/vm_snapshot.h"

int vm_snapshot(struct vm *vm, struct snap_writer *w, int mem_fd, uint64_t *mem_data,
		uint32_t *ids, unsigned *nr_ids)
{
	uint8_t fp[SNAP_SHA256_LEN], uart[UART_STATE_LEN];
	unsigned i;
	int err;

	/* No device may move a queue while it is being written down. */
	evloop_stop(&vm->loop);
	err = arch_host_fp(&vm->kvm, fp);
	if (err)
		return err;
	snap_begin(w, SNAP_HOST, 0);
	snap_put(w, T_HOST_FP, fp, sizeof(fp));
	snap_put_u64(w, T_HOST_TSC_KHZ, vm->tsc_khz);
	snap_end(w);
	err = arch_save_state(vm, w);
	if (err)
		return err;
	for (i = 0; i < vm->nr_virtio; i++) {
		virtio_mmio_save(vm->virtio[i], w);
		ids[i] = vm->virtio[i]->ops->device_id;
	}
	*nr_ids = vm->nr_virtio;
	pthread_mutex_lock(&vm->dev_lock);
	uart_save(&vm->uart, uart);
	pthread_mutex_unlock(&vm->dev_lock);
	snap_begin(w, SNAP_DEVICE, SNAP_DEV_UART);
	snap_put(w, T_UART_STATE, uart, sizeof(uart));
	snap_end(w);
	if (w->failed)
		return husk_seterr(ENOMEM, "the VM's state does not fit a state file");
	return gmem_save(&vm->mem, mem_fd, mem_data);
}

/* The template is from this kind of host: fingerprint and TSC. */
static int check_host(struct vm *vm, const struct template_meta *m)
{
	uint8_t fp[SNAP_SHA256_LEN];
	int err = arch_host_fp(&vm->kvm, fp);

	return err ? err : template_check_fp(m, fp, vm->tsc_khz);
}

int vm_restore_state(struct vm *vm, const struct vm_restore *r)
{
	const struct snap_section *sec;
	uint8_t uart[UART_STATE_LEN];
	unsigned i;
	int err;

	/* Before anything is set: a template from another kind of host is refused. */
	err = check_host(vm, r->meta);
	if (err)
		return err;
	if (r->meta->vcpus != vm->nr_vcpus || r->meta->nr_devices != vm->nr_virtio)
		return husk_seterr(EINVAL, "template %s has %llu vCPUs and %u devices, this VM "
				   "%u and %u", r->meta->name, (unsigned long long)r->meta->vcpus,
				   r->meta->nr_devices, vm->nr_vcpus, vm->nr_virtio);
	err = arch_restore_state(vm, r);
	if (err)
		return err;
	for (i = 0; i < vm->nr_virtio; i++) {
		sec = snap_find(r->snap, SNAP_DEVICE, i);
		if (!sec)
			return husk_seterr(EINVAL, "the template has no state for device slot %u", i);
		err = virtio_mmio_restore(vm->virtio[i], sec);
		if (err)
			return err;
	}
	sec = snap_find(r->snap, SNAP_DEVICE, SNAP_DEV_UART);
	err = sec ? snap_get_exact(sec, T_UART_STATE, uart, sizeof(uart)) :
		    husk_seterr(EINVAL, "the template has no UART state");
	if (!err) {
		pthread_mutex_lock(&vm->dev_lock);
		err = uart_restore(&vm->uart, uart);
		pthread_mutex_unlock(&vm->dev_lock);
		if (err)
			err = husk_seterr(err, "the template's UART state is invalid");
	}
	return err;
}
