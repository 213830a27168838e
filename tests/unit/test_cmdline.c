/* placeholder */
#include "suites.h"
Suite *cmdline_suite(void)
{
	return suite_create("cmdline");
}
