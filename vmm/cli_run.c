/*
 * cli_run: parse and validate `husk run`. See cli_run.h.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
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
	"                [--console FILE] [--net none|egress] [--allow RULE]...\n"
	"                [--conn-rate N] [--egress-limit BYTES]\n"
	"                [--verbose] -- CMD [ARGS...]\n"
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
	"  --net MODE          none (default): no network card; egress: a NIC whose\n"
	"                      traffic is denied except DNS and what --allow opens\n"
	"  --allow RULE        with --net egress, allow CIDR[:tcp|udp|icmp|any\n"
	"                      [:PORT[-PORT],...]], e.g. 198.51.100.0/24:tcp:80,443\n"
	"  --conn-rate N       with --net egress, kill the VM when it opens more than\n"
	"                      N new connections in one second (default 100)\n"
	"  --egress-limit B    with --net egress, kill the VM when it sends more than\n"
	"                      B bytes in total (default 1 GiB)\n"
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

/* "P" or "P-Q" (1..65535, P <= Q), comma separated, at most the map's limit. */
static int parse_ports(const char *arg, const char *s, struct run_allow *a)
{
	if (!*s)
		goto bad;
	while (*s) {
		unsigned long lo, hi;
		char *end;

		if (a->nports == EGRESS_MAX_PORT_RANGES)
			return husk_seterr(EINVAL, "--allow %s: more than %d port ranges", arg,
					   EGRESS_MAX_PORT_RANGES);
		if (*s < '0' || *s > '9')
			goto bad;
		lo = hi = strtoul(s, &end, 10);
		if (*end == '-') {
			if (end[1] < '0' || end[1] > '9')
				goto bad;
			hi = strtoul(end + 1, &end, 10);
		}
		if (lo < 1 || hi > 65535 || lo > hi || (*end && *end != ','))
			goto bad;
		a->ports[a->nports].lo = lo;
		a->ports[a->nports].hi = hi;
		a->nports++;
		s = *end ? end + 1 : end;
		if (*end && !*s)
			goto bad;
	}
	return 0;
bad:
	return husk_seterr(EINVAL, "--allow %s: ports must be PORT[-PORT],... in 1..65535",
			   arg);
}

int cli_parse_allow(const char *arg, struct run_allow *a)
{
	char buf[128], *proto, *ports, *slash, *end;
	unsigned long len;
	uint32_t mask;

	memset(a, 0, sizeof(*a));
	if (strlen(arg) >= sizeof(buf))
		return husk_seterr(EINVAL, "--allow %.40s...: too long", arg);
	strcpy(buf, arg);
	proto = strchr(buf, ':');
	ports = NULL;
	if (proto) {
		*proto++ = '\0';
		ports = strchr(proto, ':');
		if (ports)
			*ports++ = '\0';
	}
	slash = strchr(buf, '/');
	if (!slash || !slash[1])
		return husk_seterr(EINVAL, "--allow %s: needs an IPv4 CIDR a.b.c.d/len", arg);
	*slash = '\0';
	len = strtoul(slash + 1, &end, 10);
	if (*end || len > 32 || slash[1] < '0' || slash[1] > '9' ||
	    inet_pton(AF_INET, buf, &a->addr) != 1)
		return husk_seterr(EINVAL, "--allow %s: needs an IPv4 CIDR a.b.c.d/len", arg);
	mask = len ? htonl(~0u << (32 - len)) : 0;
	if (a->addr.s_addr & ~mask)
		return husk_seterr(EINVAL, "--allow %s: host bits set after /%lu", arg, len);
	a->prefixlen = len;
	a->protos = EGRESS_P_ANY;
	if (proto) {
		if (!strcmp(proto, "tcp"))
			a->protos = EGRESS_P_TCP;
		else if (!strcmp(proto, "udp"))
			a->protos = EGRESS_P_UDP;
		else if (!strcmp(proto, "icmp"))
			a->protos = EGRESS_P_ICMP;
		else if (strcmp(proto, "any"))
			return husk_seterr(EINVAL, "--allow %s: protocol must be tcp, udp, icmp "
					   "or any", arg);
	}
	if (ports) {
		if (a->protos == EGRESS_P_ICMP)
			return husk_seterr(EINVAL, "--allow %s: icmp has no ports", arg);
		return parse_ports(arg, ports, a);
	}
	return 0;
}

int cli_parse_run(int argc, char **argv, struct run_opts *o)
{
	enum { O_KERNEL = 256, O_ROOTFS, O_MEM, O_VCPUS, O_TIMEOUT, O_WS, O_ENV, O_PUT,
	       O_GET, O_GET_ALWAYS, O_STDIN, O_JSON, O_CONSOLE, O_VERBOSE, O_HELP, O_MAX_OUTPUT,
	       O_NET, O_ALLOW, O_CONN_RATE, O_EGRESS_LIMIT };
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
		{ "net", required_argument, NULL, O_NET },
		{ "allow", required_argument, NULL, O_ALLOW },
		{ "conn-rate", required_argument, NULL, O_CONN_RATE },
		{ "egress-limit", required_argument, NULL, O_EGRESS_LIMIT },
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
		case O_NET:
			if (!strcmp(optarg, "none"))
				o->net = RUN_NET_NONE;
			else if (!strcmp(optarg, "egress"))
				o->net = RUN_NET_EGRESS;
			else
				err = husk_seterr(EINVAL, "--net must be none or egress, not '%s'",
						  optarg);
			break;
		case O_ALLOW:
			if (o->nr_allow == RUN_MAX_ALLOW)
				err = husk_seterr(EINVAL, "more than %d --allow", RUN_MAX_ALLOW);
			else
				err = cli_parse_allow(optarg, &o->allow[o->nr_allow++]);
			break;
		case O_CONN_RATE:
			err = cli_num_opt("--conn-rate", optarg, 1, RUN_MAX_CONN_RATE,
					  &o->conn_rate);
			break;
		case O_EGRESS_LIMIT:
			err = cli_num_opt("--egress-limit", optarg, 1, UINT64_MAX / 2,
					  &o->egress_limit);
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
	if (o->nr_allow && o->net != RUN_NET_EGRESS)
		return husk_seterr(EINVAL, "--allow needs --net egress");
	if (o->conn_rate && o->net != RUN_NET_EGRESS)
		return husk_seterr(EINVAL, "--conn-rate needs --net egress");
	if (o->egress_limit && o->net != RUN_NET_EGRESS)
		return husk_seterr(EINVAL, "--egress-limit needs --net egress");
	if (o->net == RUN_NET_EGRESS) {
		if (!o->conn_rate)
			o->conn_rate = RUN_DEFAULT_CONN_RATE;
		if (!o->egress_limit)
			o->egress_limit = RUN_DEFAULT_EGRESS_LIMIT;
	}
	o->argv = argv + optind;
	o->argc = argc - optind;
	return 0;
}
