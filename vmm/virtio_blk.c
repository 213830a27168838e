/* virtio_blk: placeholder until implemented. */
