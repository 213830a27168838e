/* placeholder */
#include "suites.h"
Suite *loader_suite(void)
{
	return suite_create("loader");
}
