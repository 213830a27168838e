/* placeholder */
#include "suites.h"
Suite *cpuid_suite(void)
{
	return suite_create("cpuid");
}
