/* placeholder */
#include "suites.h"
Suite *tar_suite(void)
{
	return suite_create("tar");
}
