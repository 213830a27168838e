/* placeholder */
#include "suites.h"
Suite *bootparams_suite(void)
{
	return suite_create("bootparams");
}
