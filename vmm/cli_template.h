/*
 * cli_template: parse `husk template create|ls|rm|verify`. Pure, like the
 * other parsers; the work is in template.c and run.c.
 */
#ifndef HUSK_CLI_TEMPLATE_H
#define HUSK_CLI_TEMPLATE_H

#include <stdbool.h>

#include "cli_run.h"

enum template_action { TPL_CREATE, TPL_LS, TPL_RM, TPL_VERIFY };

struct template_opts {
	enum template_action action;
	const char *name;		/* create, rm, verify */
	const char *dir;		/* --template-dir, or the default */
	bool json;			/* ls: a JSON array; create: the run's record */
	bool help;
	/* create: how the VM that is saved is made (run.c boots it). */
	struct run_opts run;
};

/* Parse "husk template ..." (argv[0] is "template"). 0 or -EINVAL. */
int cli_parse_template(int argc, char **argv, struct template_opts *o);

extern const char cli_template_usage[];

#endif
