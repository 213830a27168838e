/*
 * cli_run: parse and validate `husk run`. See cli_run.h.
 */
#include <errno.h>
#include <getopt.h>
#include <string.h>

#include "cli.h"
#include "cli_run.h"
#include "util.h"
#include "vm.h"

const char cli_run_usage[] =
	"usage: husk run [--kernel K] [--rootfs R] [--mem MiB] [--vcpus N]\n"
	"                [--timeout SEC] [--workspace-size MiB] [--env K=V]...\n"
	"                [--put HOSTPATH:GUESTPATH]... [--get GUESTPATH:HOSTDIR]...\n"
	"                [--get-always] [--stdin] [--max-output BYTES] [--json]\n"
	"                [--console FILE] [--verbose] -- CMD [ARGS...]\n"
	"\n"
	"Boot a fresh microVM, run CMD inside as the unprivileged agentuser in a\n"
	"tmpfs workspace (/tmp/workspace) on a read-only root, stream its stdout and\n"
	"stderr, and destroy the VM.\n"
	"\n"
	"  --kernel K          guest kernel (default: the built-in image)\n"
	"  --rootfs R          read-only root image (default: the built-in image)\n"
	"  --mem MiB           guest memory, 32..65536 (default 512)\n"
	"  --vcpus N           virtual CPUs, 1..32 (default 1)\n"
	"  --timeout SEC       kill the job after SEC seconds (default 120)\n"
	"  --workspace-size M  workspace tmpfs size in MiB (default 256)\n"
	"  --env K=V           set a variable in the job's environment\n"
	"  --put A:B           copy host file or directory A to workspace path B first\n"
	"  --get B:DIR         copy workspace path B into host directory DIR after\n"
	"                      the job, only if it succeeded (see --get-always)\n"
	"  --get-always        also bring results back when the job failed\n"
	"  --stdin             forward husk's stdin to the job (default: /dev/null)\n"
	"  --max-output BYTES  pass at most BYTES of stdout and of stderr (default\n"
	"                      16 MiB each); the rest is counted and dropped\n"
	"  --json              print a JSON result record on stdout at the end\n"
	"  --console FILE      write the guest's serial console to FILE\n"
	"  --verbose           debug messages on stderr\n"
	"\n"
	"Exit status: the job's exit code; 128+N if a signal N killed it; 124 the\n"
	"job timed out; 125 the VM or husk failed; 2 usage error (nothing started).\n";

const char *cli_workspace_path(const char *p)
{
	static const char ws[] = "/tmp/workspace/";
	const char *c;

	if (!strncmp(p, ws, sizeof(ws) - 1))
		p += sizeof(ws) - 1;
	if (!*p || *p == '/' || strlen(p) > 4095)
		return NULL;
	for (c = p; *c; ) {
		size_t n = strcspn(c, "/");

		if (n == 2 && !strncmp(c, "..", 2))
			return NULL;
		c += n;
		while (*c == '/')
			c++;
	}
	return p;
}

/* Split "A:B" at the last colon that leaves both sides non-empty. */
static int split_xfer(const char *opt, char *arg, struct run_xfer *x, bool guest_first)
{
	char *colon = strrchr(arg, ':');
	const char *g;

	if (!colon || colon == arg || !colon[1])
		return husk_seterr(EINVAL, "%s needs %s", opt,
				   guest_first ? "GUESTPATH:HOSTDIR" : "HOSTPATH:GUESTPATH");
	*colon = '\0';
	if (guest_first) {
		g = arg;
		x->host = colon + 1;
	} else {
		x->host = arg;
		g = colon + 1;
	}
	x->guest = cli_workspace_path(g);
	if (!x->guest)
		return husk_seterr(EINVAL, "%s: guest path '%s' must be inside the workspace "
				   "(relative, no '..')", opt, g);
	return 0;
}

int cli_parse_run(int argc, char **argv, struct run_opts *o)
{
	enum { O_KERNEL = 256, O_ROOTFS, O_MEM, O_VCPUS, O_TIMEOUT, O_WS, O_ENV, O_PUT,
	       O_GET, O_GET_ALWAYS, O_STDIN, O_JSON, O_CONSOLE, O_VERBOSE, O_HELP, O_MAX_OUTPUT };
	static const struct option opts[] = {
		{ "kernel", required_argument, NULL, O_KERNEL },
		{ "rootfs", required_argument, NULL, O_ROOTFS },
		{ "mem", required_argument, NULL, O_MEM },
		{ "vcpus", required_argument, NULL, O_VCPUS },
		{ "timeout", required_argument, NULL, O_TIMEOUT },
		{ "workspace-size", required_argument, NULL, O_WS },
		{ "env", required_argument, NULL, O_ENV },
		{ "put", required_argument, NULL, O_PUT },
		{ "get", required_argument, NULL, O_GET },
		{ "get-always", no_argument, NULL, O_GET_ALWAYS },
		{ "max-output", required_argument, NULL, O_MAX_OUTPUT },
		{ "stdin", no_argument, NULL, O_STDIN },
		{ "json", no_argument, NULL, O_JSON },
		{ "console", required_argument, NULL, O_CONSOLE },
		{ "verbose", no_argument, NULL, O_VERBOSE },
		{ "help", no_argument, NULL, O_HELP },
		{ NULL, 0, NULL, 0 },
	};
	uint64_t v;
	int c, err = 0;

	memset(o, 0, sizeof(*o));
	o->mem_mib = RUN_DEFAULT_MEM_MIB;
	o->vcpus = 1;
	o->timeout_sec = RUN_DEFAULT_TIMEOUT_SEC;
	o->workspace_mib = RUN_DEFAULT_WORKSPACE_MIB;
	o->max_output = RUN_DEFAULT_MAX_OUTPUT;
	optind = 0;
	opterr = 0;
	while (!err && (c = getopt_long(argc, argv, "+:", opts, NULL)) != -1) {
		switch (c) {
		case O_KERNEL:
			o->kernel = optarg;
			break;
		case O_ROOTFS:
			o->rootfs = optarg;
			break;
		case O_MEM:
			err = cli_num_opt("--mem", optarg, CLI_MIN_MEM_MIB, CLI_MAX_MEM_MIB, &o->mem_mib);
			break;
		case O_VCPUS:
			err = cli_num_opt("--vcpus", optarg, 1, VM_MAX_VCPUS, &v);
			if (!err)
				o->vcpus = v;
			break;
		case O_TIMEOUT:
			err = cli_num_opt("--timeout", optarg, 1, CLI_MAX_TIMEOUT_SEC, &o->timeout_sec);
			break;
		case O_WS:
			err = cli_num_opt("--workspace-size", optarg, 1, RUN_MAX_WORKSPACE_MIB,
					  &o->workspace_mib);
			break;
		case O_ENV:
			if (!strchr(optarg, '=') || optarg[0] == '=')
				err = husk_seterr(EINVAL, "--env needs K=V, not '%s'", optarg);
			else if (o->nr_env == RUN_MAX_ENV)
				err = husk_seterr(EINVAL, "more than %d --env", RUN_MAX_ENV);
			else
				o->env[o->nr_env++] = optarg;
			break;
		case O_PUT:
			if (o->nr_put == RUN_MAX_PUTS)
				err = husk_seterr(EINVAL, "more than %d --put", RUN_MAX_PUTS);
			else
				err = split_xfer("--put", optarg, &o->put[o->nr_put++], false);
			break;
		case O_GET:
			if (o->nr_get == RUN_MAX_GETS)
				err = husk_seterr(EINVAL, "more than %d --get", RUN_MAX_GETS);
			else
				err = split_xfer("--get", optarg, &o->get[o->nr_get++], true);
			break;
		case O_MAX_OUTPUT:
			err = cli_num_opt("--max-output", optarg, 0, UINT64_MAX / 2, &o->max_output);
			break;
		case O_GET_ALWAYS:
			o->get_always = true;
			break;
		case O_STDIN:
			o->stdin = true;
			break;
		case O_JSON:
			o->json = true;
			break;
		case O_CONSOLE:
			o->console = optarg;
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
	if (optind >= argc)
		return husk_seterr(EINVAL, "no command given: husk run [OPTIONS] -- CMD [ARGS...]");
	if (o->get_always && !o->nr_get)
		return husk_seterr(EINVAL, "--get-always without --get");
	o->argv = argv + optind;
	o->argc = argc - optind;
	return 0;
}
