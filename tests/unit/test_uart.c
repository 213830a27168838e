/* placeholder */
#include "suites.h"
Suite *uart_suite(void)
{
	return suite_create("uart");
}
