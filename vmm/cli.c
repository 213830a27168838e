/*
 * cli: parse and validate husk's command line. See cli.h.
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "lib/util.h"
#include "machine/arch.h"
#include "machine/vm.h"

const char cli_usage[] =
	"usage: husk COMMAND [OPTIONS]\n"
	"\n"
	"Commands:\n"
	"  run       run a command in a fresh, ephemeral microVM\n"
	"  template  make, list, check and remove templates (saved booted VMs)\n"
	"  image     import, list and remove container images (guest roots)\n"
	"  serve     the host daemon: sandboxes for clients on a Unix socket\n"
	"  ps        list the sandboxes of a husk serve\n"
	"  exec      run a command in a husk serve session\n"
	"  kill      end a husk serve sandbox\n"
	"  mcp       a Model Context Protocol server whose tools run in a sandbox\n"
	"  oci       an OCI runtime with runc's command line (also as husk-runc)\n"
	"  boot      boot a kernel in a microVM and print its console\n"
	"  version   print husk's version\n"
	"  help      print this help (also: husk --help, husk COMMAND --help)\n";

const char cli_boot_usage[] =
	"usage: husk boot --kernel PATH [--initrd PATH] [--cmdline STR] [--mem MiB]\n"
	"                 [--vcpus N] [--console FILE|-] [--timeout SEC] [--json]\n"
	"                 [--disk PATH] [--rng] [--no-stdin] [--boot-timer]\n"
	"                 [--profile FILE] [--no-hugepages] [--verbose]\n"
	"\n"
	"Boot " ARCH_KERNEL_KIND " in a fresh microVM and\n"
	"print its serial console until the guest powers off or reboots. What is\n"
	"typed on stdin goes to the guest's console.\n"
	"\n"
	"  --kernel PATH    kernel image (required)\n"
	"  --initrd PATH    initial ramdisk\n"
	"  --cmdline STR    extra kernel parameters, after husk's own:\n"
	"                   \"" ARCH_CMDLINE_BASE "\"\n"
	"  --mem MiB        guest memory, 32..65536 (default 256)\n"
	"  --vcpus N        virtual CPUs, 1..32 (default 1)\n"
	"  --console FILE   write the console to FILE instead of stdout ('-')\n"
	"  --timeout SEC    stop the VM after SEC seconds (default: no limit)\n"
	"  --disk PATH      raw disk image as a read-only virtio-blk device (/dev/vda)\n"
	"  --rng            virtio-rng device fed from the host's getrandom()\n"
	"  --vsock PATH     virtio-vsock, guest CID 3, bridged to Unix sockets at PATH\n"
	"  --json           print a JSON result record on stdout at the end\n"
	"  --no-stdin       do not forward stdin to the guest console\n"
	"  --boot-timer     Firecracker's boot timer: a guest's byte write of 123 at\n"
	"                   0xd0000000 is \"boot done\" (Guest-boot-time on stderr);\n"
	"                   virtio devices then start at 0xd0001000\n"
	"  --profile FILE   sample vCPU 0's instruction pointer about once a millisecond\n"
	"                   into FILE (\"us rip\" lines; tools/bench/profile.py names them)\n"
	"  --no-hugepages   back guest RAM with small pages only (default: transparent\n"
	"                   huge pages where the host has them: faster boots, up to\n"
	"                   2 MiB of host memory per region the guest touches)\n"
	"  --verbose        debug messages on stderr\n"
	"\n"
	"Exit status: 0 guest powered off or rebooted, 1 host-side error, 2 usage\n"
	"error, 3 guest kernel panic, 4 guest crashed, 5 timeout, 128+N stopped by\n"
	"signal N.\n";

enum cli_command cli_command(int argc, char **argv)
{
	const char *c;

	if (argc < 2) {
		husk_seterr(EINVAL, "no command given");
		return CLI_NONE;
	}
	c = argv[1];
	if (!strcmp(c, "help") || !strcmp(c, "--help") || !strcmp(c, "-h"))
		return CLI_HELP;
	if (!strcmp(c, "version") || !strcmp(c, "--version"))
		return CLI_VERSION;
	if (!strcmp(c, "boot"))
		return CLI_BOOT;
	if (!strcmp(c, "run"))
		return CLI_RUN;
	if (!strcmp(c, "template"))
		return CLI_TEMPLATE;
	if (!strcmp(c, "image"))
		return CLI_IMAGE;
	if (!strcmp(c, "serve"))
		return CLI_SERVE;
	if (!strcmp(c, "ps"))
		return CLI_PS;
	if (!strcmp(c, "exec"))
		return CLI_EXEC;
	if (!strcmp(c, "kill"))
		return CLI_KILL;
	if (!strcmp(c, "mcp"))
		return CLI_MCP;
	if (!strcmp(c, "oci"))
		return CLI_OCI;
	husk_seterr(EINVAL, "unknown command '%s'", c);
	return CLI_NONE;
}

int cli_num_opt(const char *name, const char *val, uint64_t min, uint64_t max,
		uint64_t *out)
{
	int err = parse_u64(val, min, max, out);

	if (err)
		return husk_seterr(EINVAL, "%s '%s' is not a number in %llu..%llu", name, val,
				   (unsigned long long)min, (unsigned long long)max);
	return 0;
}

int cli_action(int argc, char **argv, const char *cmd, const char *const *actions,
	       unsigned n)
{
	char choices[256] = "";
	const char *act = argc >= 2 ? argv[1] : NULL;
	unsigned i;

	for (i = 0; i < n; i++) {
		const char *bar = strchr(actions[i], '|');
		size_t l = bar ? (size_t)(bar - actions[i]) : strlen(actions[i]);

		if (act && ((strlen(act) == l && !strncmp(act, actions[i], l)) ||
			    (bar && !strcmp(act, bar + 1))))
			return (int)i;
		snprintf(choices + strlen(choices), sizeof(choices) - strlen(choices), "%s%.*s",
			 i ? (i + 1 == n ? " or " : ", ") : "", (int)l, actions[i]);
	}
	if (!act)
		return husk_seterr(EINVAL, "%s needs an action: %s", cmd, choices);
	if (!strcmp(act, "--help") || !strcmp(act, "-h") || !strcmp(act, "help"))
		return CLI_ACTION_HELP;
	return husk_seterr(EINVAL, "unknown %s action '%s' (%s)", cmd, act, choices);
}

int cli_bad_option(int c, char **argv)
{
	if (c == ':')
		return husk_seterr(EINVAL, "option %s needs a value", argv[optind - 1]);
	/* Inside a cluster like -xy, optind has not moved yet: name the letter. */
	if (optopt)
		return husk_seterr(EINVAL, "unknown option '-%c'", optopt);
	return husk_seterr(EINVAL, "unknown option '%s'", argv[optind - 1]);
}

static int need_value(const char *name, const char *val)
{
	if (!*val)
		return husk_seterr(EINVAL, "%s needs a non-empty value", name);
	return 0;
}

int cli_parse_boot(int argc, char **argv, struct boot_opts *o)
{
	enum { O_KERNEL = 256, O_INITRD, O_CMDLINE, O_MEM, O_VCPUS, O_CONSOLE,
	       O_TIMEOUT, O_JSON, O_VERBOSE, O_HELP, O_NO_STDIN, O_DISK, O_RNG, O_VSOCK,
	       O_BOOT_TIMER, O_PROFILE, O_NO_HUGEPAGES };
	static const struct option opts[] = {
		{ "kernel", required_argument, NULL, O_KERNEL },
		{ "initrd", required_argument, NULL, O_INITRD },
		{ "cmdline", required_argument, NULL, O_CMDLINE },
		{ "mem", required_argument, NULL, O_MEM },
		{ "vcpus", required_argument, NULL, O_VCPUS },
		{ "console", required_argument, NULL, O_CONSOLE },
		{ "timeout", required_argument, NULL, O_TIMEOUT },
		{ "json", no_argument, NULL, O_JSON },
		{ "no-stdin", no_argument, NULL, O_NO_STDIN },
		{ "disk", required_argument, NULL, O_DISK },
		{ "rng", no_argument, NULL, O_RNG },
		{ "vsock", required_argument, NULL, O_VSOCK },
		{ "boot-timer", no_argument, NULL, O_BOOT_TIMER },
		{ "profile", required_argument, NULL, O_PROFILE },
		{ "no-hugepages", no_argument, NULL, O_NO_HUGEPAGES },
		{ "verbose", no_argument, NULL, O_VERBOSE },
		{ "help", no_argument, NULL, O_HELP },
		{ NULL, 0, NULL, 0 },
	};
	uint64_t v;
	int c, err = 0;

	memset(o, 0, sizeof(*o));
	o->mem_mib = CLI_DEFAULT_MEM_MIB;
	o->vcpus = 1;
	o->console = "-";
	optind = 0;	/* 0, not 1: glibc fully resets its state between parses */
	opterr = 0;
	while (!err && (c = getopt_long(argc, argv, "+:", opts, NULL)) != -1) {
		switch (c) {
		case O_KERNEL:
			o->kernel = optarg;
			err = need_value("--kernel", optarg);
			break;
		case O_INITRD:
			o->initrd = optarg;
			err = need_value("--initrd", optarg);
			break;
		case O_CMDLINE:
			o->cmdline = optarg;
			break;
		case O_MEM:
			err = cli_num_opt("--mem", optarg, CLI_MIN_MEM_MIB, CLI_MAX_MEM_MIB, &o->mem_mib);
			break;
		case O_VCPUS:
			err = cli_num_opt("--vcpus", optarg, 1, VM_MAX_VCPUS, &v);
			if (!err)
				o->vcpus = v;
			break;
		case O_CONSOLE:
			o->console = optarg;
			err = need_value("--console", optarg);
			break;
		case O_TIMEOUT:
			err = cli_num_opt("--timeout", optarg, 1, CLI_MAX_TIMEOUT_SEC, &o->timeout_sec);
			break;
		case O_JSON:
			o->json = true;
			break;
		case O_NO_STDIN:
			o->no_stdin = true;
			break;
		case O_DISK:
			o->disk = optarg;
			err = need_value("--disk", optarg);
			break;
		case O_BOOT_TIMER:
			o->boot_timer = true;
			break;
		case O_PROFILE:
			o->profile = optarg;
			err = need_value("--profile", optarg);
			break;
		case O_RNG:
			o->rng = true;
			break;
		case O_NO_HUGEPAGES:
			o->no_hugepages = true;
			break;
		case O_VSOCK:
			o->vsock = optarg;
			err = need_value("--vsock", optarg);
			break;
		case O_VERBOSE:
			o->verbose = true;
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
	if (optind < argc)
		return husk_seterr(EINVAL, "unexpected argument '%s'", argv[optind]);
	if (!o->kernel)
		return husk_seterr(EINVAL, "--kernel PATH is required");
	if (o->json && !strcmp(o->console, "-"))
		return husk_seterr(EINVAL, "--json needs --console FILE: stdout carries the "
				   "JSON record");
	return 0;
}
