/* placeholder */
#include "suites.h"
Suite *virtqueue_suite(void)
{
	return suite_create("virtqueue");
}
