/*
 * cli_image: parse `husk image import|ls|rm`. Pure, like the other
 * parsers; the work is in image/image.c.
 */
#ifndef HUSK_CLI_IMAGE_H
#define HUSK_CLI_IMAGE_H

#include <stdbool.h>

enum image_action { IMG_IMPORT, IMG_LS, IMG_RM };

struct image_opts {
	enum image_action action;
	const char *src;		/* import */
	const char *name;		/* import --name, rm NAME */
	const char *ref;		/* import --ref */
	const char *dir;		/* --image-dir, or the default */
	bool json;
	bool help;
};

/* Parse "husk image ..." (argv[0] is "image"). 0 or -EINVAL. */
int cli_parse_image(int argc, char **argv, struct image_opts *o);

extern const char cli_image_usage[];

#endif
