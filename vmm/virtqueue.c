/* virtqueue: placeholder until implemented. */
