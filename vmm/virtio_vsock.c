/* virtio_vsock: placeholder until implemented. */
