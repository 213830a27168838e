/*
 * cli_template: parse `husk template ...`. See cli_template.h.
 */
#include <errno.h>
#include <getopt.h>
#include <string.h>

#include "cli.h"
#include "cli_template.h"
#include "template/template.h"
#include "lib/util.h"
#include "machine/vm.h"

const char cli_template_usage[] =
	"usage: husk template create NAME [--kernel K] [--rootfs R | --image IMAGE\n"
	"                            [--image-dir DIR]] [--mem MiB]\n"
	"                            [--vcpus N] [--net none|egress] [--cpus N]\n"
	"                            [--console FILE] [--json] [--template-dir DIR]\n"
	"       husk template ls [--json] [--template-dir DIR]\n"
	"       husk template rm NAME [--template-dir DIR]\n"
	"       husk template verify NAME [--template-dir DIR]\n"
	"\n"
	"A template is a VM booted once to the point where guest-init waits for a\n"
	"job, then saved: `husk run --template NAME -- CMD` starts every job from it\n"
	"in milliseconds instead of booting. Each clone is a new machine: fresh\n"
	"entropy, the host's clock, its own network identity and empty workspace.\n"
	"\n"
	"  create NAME      boot a VM with these options, save it as NAME, destroy it\n"
	"  ls               list templates: name, size on disk, created, guest RAM,\n"
	"                   vCPUs, NIC, kernel and root image digests\n"
	"  rm NAME          remove NAME (runs that use it keep it until they end)\n"
	"  verify NAME      read all of NAME's memory image against its digest\n"
	"\n"
	"  --kernel K, --rootfs R, --mem MiB, --vcpus N, --cpus N, --console FILE\n"
	"                   as for husk run\n"
	"  --image IMAGE    boot on an imported container image (husk image ls);\n"
	"                   its clones run with --template NAME --image IMAGE\n"
	"  --image-dir DIR  where images live (default /var/lib/husk/images)\n"
	"  --net MODE       egress: the template has a NIC, so its clones may use\n"
	"                   --net egress (each with its own tap, address, filter);\n"
	"                   none (default): clones run with --net none only\n"
	"  --template-dir D where templates live (default /var/lib/husk/templates;\n"
	"                   created 0700)\n"
	"  --json           ls: a JSON array; create: the record of the boot\n"
	"\n"
	"Exit status: 0 done, 2 usage error, 125 failure (the reason on stderr).\n";

static int parse_create(int argc, char **argv, struct template_opts *o)
{
	enum { O_KERNEL = 256, O_ROOTFS, O_MEM, O_VCPUS, O_NET, O_CPUS, O_CONSOLE, O_JSON,
	       O_DIR, O_VERBOSE, O_NO_JAIL, O_UID_RANGE, O_HELP, O_IMAGE, O_IMAGE_DIR };
	static const struct option opts[] = {
		{ "kernel", required_argument, NULL, O_KERNEL },
		{ "rootfs", required_argument, NULL, O_ROOTFS },
		{ "image", required_argument, NULL, O_IMAGE },
		{ "image-dir", required_argument, NULL, O_IMAGE_DIR },
		{ "mem", required_argument, NULL, O_MEM },
		{ "vcpus", required_argument, NULL, O_VCPUS },
		{ "net", required_argument, NULL, O_NET },
		{ "cpus", required_argument, NULL, O_CPUS },
		{ "console", required_argument, NULL, O_CONSOLE },
		{ "json", no_argument, NULL, O_JSON },
		{ "template-dir", required_argument, NULL, O_DIR },
		{ "verbose", no_argument, NULL, O_VERBOSE },
		{ "no-jail", no_argument, NULL, O_NO_JAIL },
		{ "uid-range", required_argument, NULL, O_UID_RANGE },
		{ "help", no_argument, NULL, O_HELP },
		{ NULL, 0, NULL, 0 },
	};
	struct run_opts *r = &o->run;
	uint64_t v;
	int c, err = 0;

	while (!err && (c = getopt_long(argc, argv, ":", opts, NULL)) != -1) {
		switch (c) {
		case O_KERNEL:
			r->kernel = optarg;
			break;
		case O_ROOTFS:
			r->rootfs = optarg;
			break;
		case O_IMAGE:
			r->image = optarg;
			break;
		case O_IMAGE_DIR:
			r->image_dir = optarg;
			break;
		case O_MEM:
			err = cli_num_opt("--mem", optarg, CLI_MIN_MEM_MIB, CLI_MAX_MEM_MIB,
					  &r->mem_mib);
			break;
		case O_VCPUS:
			err = cli_num_opt("--vcpus", optarg, 1, VM_MAX_VCPUS, &v);
			if (!err)
				r->vcpus = v;
			break;
		case O_NET:
			if (!strcmp(optarg, "none"))
				r->net = RUN_NET_NONE;
			else if (!strcmp(optarg, "egress"))
				r->net = RUN_NET_EGRESS;
			else
				err = husk_seterr(EINVAL, "--net must be none or egress, not '%s'",
						  optarg);
			break;
		case O_CPUS:
			err = cli_parse_cpus(optarg, &r->cpu_milli);
			break;
		case O_CONSOLE:
			r->console = optarg;
			break;
		case O_JSON:
			o->json = r->json = true;
			break;
		case O_DIR:
			o->dir = optarg;
			break;
		case O_VERBOSE:
			r->verbose = true;
			break;
		case O_NO_JAIL:
			r->no_jail = true;
			break;
		case O_UID_RANGE:
			err = cli_parse_uid_range(optarg, &r->uid_base, &r->uid_count);
			break;
		case O_HELP:
			o->help = true;
			return 0;
		default:
			return cli_bad_option(c, argv);
		}
	}
	if (err)
		return err;
	if (r->image && r->rootfs)
		return husk_seterr(EINVAL, "--image is the root image: not with --rootfs");
	if (r->image_dir && !r->image)
		return husk_seterr(EINVAL, "--image-dir without --image");
	if (r->cpu_milli > r->vcpus * 1000)
		return husk_seterr(EINVAL, "--cpus is more than the VM's %u vCPU(s) can use",
				   r->vcpus);
	if (r->net == RUN_NET_EGRESS) {
		r->conn_rate = RUN_DEFAULT_CONN_RATE;
		r->egress_limit = RUN_DEFAULT_EGRESS_LIMIT;
		r->max_dests = RUN_DEFAULT_MAX_DESTS;
	}
	return 0;
}

/* The common options of ls, rm and verify. */
static int parse_simple(int argc, char **argv, struct template_opts *o, bool json_ok)
{
	enum { O_DIR = 256, O_JSON, O_HELP };
	static const struct option opts[] = {
		{ "template-dir", required_argument, NULL, O_DIR },
		{ "json", no_argument, NULL, O_JSON },
		{ "help", no_argument, NULL, O_HELP },
		{ NULL, 0, NULL, 0 },
	};
	int c;

	while ((c = getopt_long(argc, argv, ":", opts, NULL)) != -1) {
		switch (c) {
		case O_DIR:
			o->dir = optarg;
			break;
		case O_JSON:
			if (!json_ok)
				return husk_seterr(EINVAL, "--json is for template ls and create");
			o->json = true;
			break;
		case O_HELP:
			o->help = true;
			return 0;
		default:
			return cli_bad_option(c, argv);
		}
	}
	return 0;
}

int cli_parse_template(int argc, char **argv, struct template_opts *o)
{
	static const char *const actions[] = { "create", "ls|list", "rm|remove", "verify" };
	const char *act;
	int err;

	memset(o, 0, sizeof(*o));
	cli_run_defaults(&o->run);
	err = cli_action(argc, argv, "template", actions, ARRAY_SIZE(actions));
	if (err < 0)
		return err;
	if (err == CLI_ACTION_HELP) {
		o->help = true;
		return 0;
	}
	o->action = (enum template_action)err;
	act = argv[1];
	optind = 0;
	opterr = 0;
	/* Options may come before or after the name: getopt sees argv[1..]. */
	argv++;
	argc--;
	if (o->action == TPL_CREATE)
		err = parse_create(argc, argv, o);
	else
		err = parse_simple(argc, argv, o, o->action == TPL_LS);
	if (err || o->help)
		return err;
	if (o->action == TPL_LS) {
		if (optind < argc)
			return husk_seterr(EINVAL, "template ls takes no name ('%s')", argv[optind]);
	} else {
		if (optind >= argc)
			return husk_seterr(EINVAL, "template %s needs a NAME", act);
		o->name = argv[optind++];
		if (optind < argc)
			return husk_seterr(EINVAL, "unexpected '%s' after the template name",
					   argv[optind]);
		if ((err = template_name_check(o->name)))
			return err;
	}
	if (o->dir && !*o->dir)
		return husk_seterr(EINVAL, "--template-dir needs a directory");
	if (!o->dir)
		o->dir = TEMPLATE_DEFAULT_DIR;
	o->run.template_name = o->name;
	o->run.template_dir = o->dir;
	o->run.template_create = o->action == TPL_CREATE;
	return 0;
}
