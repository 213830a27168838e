/* virtio_rng: placeholder until implemented. */
