/* placeholder */
#include "suites.h"
Suite *cli_suite(void)
{
	return suite_create("cli");
}
