/* guest-init internal interfaces: placeholder. */
