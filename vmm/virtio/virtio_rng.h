/*
 * virtio_rng: entropy for the guest from the host's getrandom().
 */
#ifndef HUSK_VIRTIO_RNG_H
#define HUSK_VIRTIO_RNG_H

#include <stdbool.h>
#include <stdint.h>

struct vm;

int virtio_rng_create(struct vm *vm);

#endif
