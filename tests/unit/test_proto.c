/* placeholder */
#include "suites.h"
Suite *proto_suite(void)
{
	return suite_create("proto");
}
