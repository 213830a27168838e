/* virtio_mmio: placeholder until implemented. */
