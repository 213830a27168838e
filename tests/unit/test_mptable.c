/* placeholder */
#include "suites.h"
Suite *mptable_suite(void)
{
	return suite_create("mptable");
}
