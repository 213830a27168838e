/* placeholder */
#include "suites.h"
Suite *vsock_suite(void)
{
	return suite_create("vsock");
}
