/* placeholder */
#include "suites.h"
Suite *virtio_mmio_suite(void)
{
	return suite_create("virtio_mmio");
}
