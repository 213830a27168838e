/*
 * cli_image: parse `husk image ...`. See cli_image.h.
 */
#include <errno.h>
#include <getopt.h>
#include <string.h>

#include "cli.h"
#include "cli_image.h"
#include "image/image.h"
#include "lib/util.h"

const char cli_image_usage[] =
	"usage: husk image import SRC [--name NAME] [--ref REF] [--json] [--image-dir DIR]\n"
	"       husk image ls [--json] [--image-dir DIR]\n"
	"       husk image rm NAME [--image-dir DIR]\n"
	"\n"
	"Container images as guest roots: `husk run --image NAME` boots a fresh VM\n"
	"on the image's files and runs its Entrypoint and Cmd (or the command\n"
	"given) as agentuser, with the image's Env and WorkingDir.\n"
	"\n"
	"  import SRC    SRC is an OCI image layout (a directory or its tar archive,\n"
	"                e.g. `podman save --format oci-archive`), a `docker save`\n"
	"                archive (tar or tar.gz), or an unpacked root directory.\n"
	"                Every blob is checked against its digest, layers are\n"
	"                applied in order (whiteouts honoured, device nodes left\n"
	"                out, nothing outside the image touched) and husk's\n"
	"                guest-init is added at /.husk/init. The result is a\n"
	"                read-only ext4 image kept by content: an unchanged image\n"
	"                is imported once.\n"
	"  ls            list images: names, key, size, layers, source\n"
	"  rm NAME       remove a name; the image goes with its last name (or at\n"
	"                once when NAME is its key)\n"
	"\n"
	"  --name NAME   name the image (moved from an image that had it)\n"
	"  --ref REF     which image of a source that holds several (its\n"
	"                org.opencontainers.image.ref.name, or a docker tag)\n"
	"  --image-dir D the store (default /var/lib/husk/images, created 0700)\n"
	"  --json        import: the stored record; ls: a JSON array\n"
	"\n"
	"Exit status: 0 done, 2 usage error, 125 failure (the reason on stderr).\n";

int cli_parse_image(int argc, char **argv, struct image_opts *o)
{
	enum { O_NAME = 256, O_REF, O_DIR, O_JSON, O_HELP };
	static const struct option opts[] = {
		{ "name", required_argument, NULL, O_NAME },
		{ "ref", required_argument, NULL, O_REF },
		{ "image-dir", required_argument, NULL, O_DIR },
		{ "json", no_argument, NULL, O_JSON },
		{ "help", no_argument, NULL, O_HELP },
		{ NULL, 0, NULL, 0 },
	};
	const char *act;
	int c, err;

	static const char *const actions[] = { "import", "ls|list", "rm|remove" };

	memset(o, 0, sizeof(*o));
	err = cli_action(argc, argv, "image", actions, ARRAY_SIZE(actions));
	if (err < 0)
		return err;
	if (err == CLI_ACTION_HELP) {
		o->help = true;
		return 0;
	}
	o->action = (enum image_action)err;
	act = argv[1];
	optind = 0;
	opterr = 0;
	argv++;
	argc--;
	while ((c = getopt_long(argc, argv, ":", opts, NULL)) != -1) {
		switch (c) {
		case O_NAME:
		case O_REF:
			if (o->action != IMG_IMPORT)
				return husk_seterr(EINVAL, "--%s is for image import",
						   c == O_NAME ? "name" : "ref");
			if (c == O_NAME)
				o->name = optarg;
			else
				o->ref = optarg;
			break;
		case O_DIR:
			if (!*optarg)
				return husk_seterr(EINVAL, "--image-dir needs a directory");
			o->dir = optarg;
			break;
		case O_JSON:
			if (o->action == IMG_RM)
				return husk_seterr(EINVAL, "--json is for image import and ls");
			o->json = true;
			break;
		case O_HELP:
			o->help = true;
			return 0;
		default:
			return cli_bad_option(c, argv);
		}
	}
	if (o->action == IMG_LS) {
		if (optind < argc)
			return husk_seterr(EINVAL, "image ls takes no argument ('%s')", argv[optind]);
	} else {
		if (optind >= argc)
			return husk_seterr(EINVAL, "image %s needs %s", act,
					   o->action == IMG_IMPORT ? "a SRC" : "a NAME");
		if (o->action == IMG_IMPORT)
			o->src = argv[optind++];
		else
			o->name = argv[optind++];
		if (optind < argc)
			return husk_seterr(EINVAL, "unexpected '%s'", argv[optind]);
		if (!*(o->src ? o->src : o->name))
			return husk_seterr(EINVAL, "image %s: an empty argument", act);
	}
	if (o->name && (err = image_name_check(o->name)))
		return err;
	if (o->ref && !*o->ref)
		return husk_seterr(EINVAL, "--ref needs a name");
	if (!o->dir)
		o->dir = IMAGE_DEFAULT_DIR;
	return 0;
}
