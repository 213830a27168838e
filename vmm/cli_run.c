/*
 * cli_run: parse and validate `husk run`. See cli_run.h.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/resource.h>

#include "cli.h"
#include "cli_run.h"
#include "image/image.h"
#include "job/proto.h"
#include "net/dns.h"
#include "lib/util.h"
#include "machine/vm.h"

const char cli_run_usage[] =
	"usage: husk run [--kernel K] [--rootfs R] [--mem MiB] [--vcpus N]\n"
	"                [--timeout SEC] [--workspace-size MiB] [--env K=V]...\n"
	"                [--put HOSTPATH:GUESTPATH]... [--get GUESTPATH:HOSTDIR]...\n"
	"                [--get-always] [--get-keep-modes] [--stdin]\n"
	"                [--max-output BYTES] [--json] [--json-fd N] [--result FILE]\n"
	"                [--console FILE] [--net none|egress] [--netns PATH]\n"
	"                [--allow RULE]...\n"
	"                [--allow-host NAME]... [--deny CIDR]... [--conn-rate N]\n"
	"                [--egress-limit BYTES] [--egress-rate BYTES] [--max-dests N]\n"
	"                [--cpus N] [--pids-max N]\n"
	"                [--uid-range BASE:COUNT] [--no-hugepages] [--no-jail] [--verbose]\n"
	"                [--server PATH]\n"
	"                [--template NAME [--template-dir DIR]]\n"
	"                [--image NAME [--image-dir DIR]] -- CMD [ARGS...]\n"
	"\n"
	"Boot a fresh microVM, run CMD inside as the unprivileged agentuser in a\n"
	"tmpfs workspace (/tmp/workspace) on a read-only root, stream its stdout and\n"
	"stderr, and destroy the VM.\n"
	"\n"
	"  --kernel K          guest kernel (default: the built-in image)\n"
	"  --rootfs R          read-only root image: an ext4 disk image, or a cpio\n"
	"                      archive loaded into guest RAM (default: the built-in\n"
	"                      image, a cpio archive)\n"
	"  --mem MiB           guest memory, 32..65536 (default 512)\n"
	"  --vcpus N           virtual CPUs, 1..32 (default 1)\n"
	"  --timeout SEC       kill the job after SEC seconds (default 120)\n"
	"  --workspace-size M  workspace tmpfs size in MiB (default 256)\n"
	"  --env K=V           set a variable in the job's environment\n"
	"  --put A:B           copy host file or directory A to workspace path B first\n"
	"  --get B:DIR         copy workspace path B into host directory DIR after\n"
	"                      the job, only if it succeeded (see --get-always)\n"
	"  --get-always        also bring results back when the job failed\n"
	"  --get-keep-modes    keep the execute bits the guest gave --get files\n"
	"                      (default: files arrive as 0644, directories 0755)\n"
	"  --stdin             forward husk's stdin to the job (default: /dev/null)\n"
	"  --max-output BYTES  pass at most BYTES of stdout and of stderr (default\n"
	"                      16 MiB each); the rest is counted and dropped\n"
	"  --json              print the JSON result record on stdout at the end,\n"
	"                      always as its own last line\n"
	"  --json-fd N         write the record to file descriptor N instead, out\n"
	"                      of the job's reach (e.g. --json-fd 3 3>result.json)\n"
	"  --result FILE       write the record to FILE (created, or a regular file\n"
	"                      replaced; never through a symbolic link)\n"
	"  --console FILE      write the guest's serial console to FILE\n"
	"  --net MODE          none (default): no network card; egress: a NIC whose\n"
	"                      traffic is denied except DNS and what --allow opens\n"
	"  --netns PATH        with --net egress, put the NIC's host end in the\n"
	"                      network namespace at PATH (/run/netns/NAME): the\n"
	"                      guest's traffic leaves through that namespace's\n"
	"                      routes, translated to its address (needs nft(8))\n"
	"  --allow RULE        with --net egress, allow CIDR[:tcp|udp|icmp|any\n"
	"                      [:PORT[-PORT],...]], e.g. 198.51.100.0/24:tcp:80,443;\n"
	"                      IPv6 in brackets: [2001:db8::]/32:tcp:443\n"
	"  --allow-host NAME   with --net egress, let the guest resolve NAME\n"
	"                      (example.com, or *.example.com for names below it)\n"
	"                      through husk's DNS proxy and reach the addresses in\n"
	"                      the answer for their TTL; other names get NXDOMAIN\n"
	"  --deny CIDR         with --net egress, block CIDR (a.b.c.d/len or\n"
	"                      [IPv6]/len) even inside a wider --allow; of two\n"
	"                      overlapping rules the more specific wins\n"
	"  --conn-rate N       with --net egress, kill the VM when it opens more than\n"
	"                      N new connections in one second (default 100)\n"
	"  --egress-limit B    with --net egress, kill the VM when it sends more than\n"
	"                      B bytes in total (default 1 GiB)\n"
	"  --egress-rate B     with --net egress, kill the VM when it sends more than\n"
	"                      B bytes in one second (default: no limit)\n"
	"  --max-dests N       with --net egress, kill the VM when it has sent to more\n"
	"                      than N distinct addresses (default 256)\n"
	"  --cpus N            host CPU time the VM may use, in CPUs: 0.01..--vcpus,\n"
	"                      up to 3 decimals (default 0.5)\n"
	"  --pids-max N        host tasks (threads) of the VM's jail, at least\n"
	"                      --vcpus + 8 and 16 (default 128)\n"
	"  --uid-range B:C     host uids for per-VM jails: B..B+C-1, never root or\n"
	"                      nobody; uids some user, group or subuid range has\n"
	"                      are skipped (default 1879048192:4096)\n"
	"  --template NAME     start the VM from template NAME (husk template create)\n"
	"                      instead of booting it: the same job in milliseconds;\n"
	"                      its memory, vCPUs, kernel and root image are the\n"
	"                      template's\n"
	"  --template-dir DIR  where templates live (default /var/lib/husk/templates)\n"
	"  --image NAME        boot on imported container image NAME (husk image\n"
	"                      import) instead of the default root; without CMD\n"
	"                      run its Entrypoint and Cmd; its Env comes before\n"
	"                      --env, its WorkingDir is the default --cwd; with\n"
	"                      --template, the template's root must be this image\n"
	"  --image-dir DIR     where images live (default /var/lib/husk/images)\n"
	"  --no-hugepages      back guest RAM with small pages only (default:\n"
	"                      transparent huge pages where the host has them)\n"
	"  --cwd DIR           the job's working directory (default the workspace;\n"
	"                      a relative DIR is below it)\n"
	"  --user USER         agentuser (default) or root: root in the guest, with\n"
	"                      a container's capabilities (the VM is still the\n"
	"                      boundary; the root image stays read-only)\n"
	"  --hostname NAME     the job's host name (its own UTS namespace; 1..63 of\n"
	"                      letters, digits, '-' and '.')\n"
	"  --rlimit NAME=SOFT[:HARD]\n"
	"                      a resource limit of the job's (nofile, nproc, fsize,\n"
	"                      core, stack, ...; a number or 'unlimited'), over the\n"
	"                      defaults (nofile 1024, nproc 512, core 0)\n"
	"  --tmpfs PATH[:OPTS] a tmpfs at PATH in the job's mounts (on a directory\n"
	"                      of the image, or made under /tmp or /run); OPTS:\n"
	"                      size=N[k|m|g], mode=OCTAL (default 1777), noexec\n"
	"  --tty               the job's stdin, stdout and stderr are a terminal (a\n"
	"                      pty in the guest; all output comes on stdout); with\n"
	"                      --stdin from a terminal, that one is put in raw mode\n"
	"  --server PATH       run the job through husk serve on socket PATH (its\n"
	"                      limits, pools and templates; files stay this user's)\n"
	"  --session-fd N      no command: serve a session of commands on the\n"
	"                      SOCK_SEQPACKET socket N (husk serve's workers;\n"
	"                      docs/protocol.md, Sessions)\n"
	"  --policy-fd N       with --net egress: take changes of --allow,\n"
	"                      --allow-host and --deny while the VM runs, as JSON\n"
	"                      on the SOCK_SEQPACKET socket N (husk serve's policy)\n"
	"  --hold-fd N         boot (or restore) the VM, then hold the job until a\n"
	"                      byte can be read from fd N (husk oci: create, then\n"
	"                      start); --timeout counts from then\n"
	"  --no-jail           debugging only: run the VMM without its jail\n"
	"                      (namespaces, uid, cgroup, seccomp); husk warns\n"
	"  --verbose           debug messages on stderr; guest-init's notes (its\n"
	"                      namespaces, its CRNG reseed) on the guest's console\n"
	"\n"
	"Exit status: the job's exit code; 128+N if a signal N killed it; 124 the\n"
	"job timed out; 125 the VM or husk failed; 2 usage error (nothing started).\n";

char *cli_workspace_path(char *p)
{
	static const char ws[] = "/tmp/workspace/";
	char *r, *w;

	if (!strncmp(p, ws, sizeof(ws) - 1)) {
		p += sizeof(ws) - 1;
		while (*p == '/')
			p++;
	}
	if (*p == '/')
		return NULL;
	/* Components joined by single slashes, as the guest's tar names them. */
	for (r = w = p; *r; ) {
		size_t n = strcspn(r, "/");

		if ((n == 1 && r[0] == '.') || (n == 2 && r[0] == '.' && r[1] == '.'))
			return NULL;
		if (w != p && n)
			*w++ = '/';
		memmove(w, r, n);
		w += n;
		r += n;
		while (*r == '/')
			r++;
	}
	*w = '\0';
	if (!*p || w - p > 4095)
		return NULL;
	return p;
}

/* Split "A:B" at the last colon that leaves both sides non-empty. */
static int split_xfer(const char *opt, char *arg, struct run_xfer *x, bool guest_first)
{
	char *colon = strrchr(arg, ':');
	char *g;

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
				   "(relative, no '.' or '..' components)", opt, g);
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

/*
 * "a.b.c.d/len" or "[v6]/len" at the start of s, up to end (exclusive).
 * IPv6 must be bracketed: its colons would otherwise run into the
 * ":PROTO:PORTS" that may follow. Host bits must be zero, so a rule always
 * means exactly the range it shows.
 */
static int parse_cidr(const char *opt, const char *arg, const char *s, size_t n,
		      int *family, struct in_addr *a4, struct in6_addr *a6,
		      unsigned *plen)
{
	char addr[INET6_ADDRSTRLEN + 2];
	const char *slash = memchr(s, '/', n), *len_s;
	unsigned long len = 0;
	unsigned max, i;
	uint8_t *b;
	size_t alen;

	if (!slash || slash == s || slash + 1 == s + n)
		goto bad;
	len_s = slash + 1;
	for (i = 0; len_s + i < s + n; i++) {
		if (len_s[i] < '0' || len_s[i] > '9' || i >= 3)
			goto bad;
		len = len * 10 + (len_s[i] - '0');
	}
	alen = slash - s;
	if (s[0] == '[') {
		if (alen < 3 || s[alen - 1] != ']' || alen - 2 >= sizeof(addr))
			goto bad;
		memcpy(addr, s + 1, alen - 2);
		addr[alen - 2] = '\0';
		if (inet_pton(AF_INET6, addr, a6) != 1)
			goto bad;
		*family = AF_INET6;
		b = a6->s6_addr;
		max = 128;
	} else {
		if (alen >= sizeof(addr))
			goto bad;
		memcpy(addr, s, alen);
		addr[alen] = '\0';
		if (inet_pton(AF_INET, addr, a4) != 1) {
			if (strchr(addr, ':'))
				return husk_seterr(EINVAL, "%s %s: write an IPv6 address in "
						   "brackets: [%s]/%.*s", opt, arg, addr,
						   (int)(s + n - len_s), len_s);
			goto bad;
		}
		*family = AF_INET;
		b = (uint8_t *)&a4->s_addr;
		max = 32;
	}
	if (len > max)
		goto bad;
	for (i = len; i < max; i++)
		if (b[i / 8] & (0x80u >> (i % 8)))
			return husk_seterr(EINVAL, "%s %s: host bits set after /%lu", opt,
					   arg, len);
	*plen = len;
	return 0;
bad:
	return husk_seterr(EINVAL, "%s %s: needs a CIDR: a.b.c.d/len, or [IPv6]/len "
			   "with the IPv6 address in brackets", opt, arg);
}

int cli_parse_allow(const char *arg, struct run_allow *a)
{
	const char *rest, *proto, *ports;
	size_t plen;
	int err;

	memset(a, 0, sizeof(*a));
	/* The CIDR ends at the first ':' after its '/'. */
	rest = strchr(arg, '/');
	rest = rest ? rest + strcspn(rest, ":") : arg + strlen(arg);
	err = parse_cidr("--allow", arg, arg, rest - arg, &a->family, &a->addr,
			 &a->addr6, &a->prefixlen);
	if (err)
		return err;
	a->protos = EGRESS_P_ANY;
	if (!*rest)
		return 0;
	proto = rest + 1;
	ports = strchr(proto, ':');
	plen = ports ? (size_t)(ports - proto) : strlen(proto);
	if (plen == 3 && !strncmp(proto, "tcp", 3))
		a->protos = EGRESS_P_TCP;
	else if (plen == 3 && !strncmp(proto, "udp", 3))
		a->protos = EGRESS_P_UDP;
	else if (plen == 4 && !strncmp(proto, "icmp", 4))
		a->protos = EGRESS_P_ICMP;
	else if (plen != 3 || strncmp(proto, "any", 3))
		return husk_seterr(EINVAL, "--allow %s: protocol must be tcp, udp, icmp "
				   "or any", arg);
	if (ports) {
		if (a->protos == EGRESS_P_ICMP)
			return husk_seterr(EINVAL, "--allow %s: icmp has no ports", arg);
		return parse_ports(arg, ports + 1, a);
	}
	return 0;
}

int cli_parse_deny(const char *arg, struct run_deny *d)
{
	memset(d, 0, sizeof(*d));
	return parse_cidr("--deny", arg, arg, strlen(arg), &d->family, &d->addr,
			  &d->addr6, &d->prefixlen);
}

/* "a.b.c.d/len" or "[ipv6]/len". */
static size_t format_cidr(int family, const void *addr, unsigned plen, char *buf, size_t cap)
{
	char a[INET6_ADDRSTRLEN] = "?";
	int n;

	inet_ntop(family, addr, a, sizeof(a));
	n = snprintf(buf, cap, family == AF_INET6 ? "[%s]/%u" : "%s/%u", a, plen);
	return n < 0 ? 0 : (size_t)n;
}

void cli_format_allow(const struct run_allow *a, char *buf, size_t cap)
{
	size_t n = format_cidr(a->family, run_cidr_addr(a), a->prefixlen, buf, cap);
	const char *p = a->protos == EGRESS_P_TCP ? "tcp" : a->protos == EGRESS_P_UDP ? "udp" :
			a->protos == EGRESS_P_ICMP ? "icmp" : "any";

	if (n < cap && (a->protos != EGRESS_P_ANY || a->nports))
		n += snprintf(buf + n, cap - n, ":%s", p);
	for (unsigned i = 0; i < a->nports && n < cap; i++) {
		const struct egress_port_range *r = &a->ports[i];

		n += snprintf(buf + n, cap - n, r->lo == r->hi ? "%c%u" : "%c%u-%u",
			      i ? ',' : ':', r->lo, r->hi);
	}
}

void cli_format_deny(const struct run_deny *d, char *buf, size_t cap)
{
	format_cidr(d->family, run_cidr_addr(d), d->prefixlen, buf, cap);
}

int cli_parse_cpus(const char *arg, unsigned *milli)
{
	const char *p = arg;
	uint64_t whole = 0;
	unsigned frac = 0, scale = 100;

	if (*p < '0' || *p > '9')
		goto bad;
	for (; *p >= '0' && *p <= '9'; p++) {
		whole = whole * 10 + (*p - '0');
		if (whole > VM_MAX_VCPUS)
			goto bad;
	}
	if (*p == '.') {
		if (p[1] < '0' || p[1] > '9')
			goto bad;
		for (p++; *p >= '0' && *p <= '9'; p++) {
			if (!scale)
				goto bad;	/* finer than 1/1000 CPU */
			frac += (*p - '0') * scale;
			scale /= 10;
		}
	}
	if (*p)
		goto bad;
	*milli = whole * 1000 + frac;
	if (*milli < RUN_MIN_CPU_MILLI || *milli > VM_MAX_VCPUS * 1000)
		goto bad;
	return 0;
bad:
	return husk_seterr(EINVAL, "--cpus '%s' must be a number of CPUs in 0.01..%d with "
			   "at most 3 decimals (and at most --vcpus)", arg, VM_MAX_VCPUS);
}

static const char *const rlimit_names[RLIM_NLIMITS] = {
	[RLIMIT_CPU] = "cpu", [RLIMIT_FSIZE] = "fsize", [RLIMIT_DATA] = "data",
	[RLIMIT_STACK] = "stack", [RLIMIT_CORE] = "core", [RLIMIT_NPROC] = "nproc",
	[RLIMIT_NOFILE] = "nofile", [RLIMIT_MEMLOCK] = "memlock", [RLIMIT_AS] = "as",
	[RLIMIT_LOCKS] = "locks", [RLIMIT_SIGPENDING] = "sigpending",
	[RLIMIT_MSGQUEUE] = "msgqueue", [RLIMIT_NICE] = "nice", [RLIMIT_RTPRIO] = "rtprio",
	[RLIMIT_RTTIME] = "rttime",
};

static int rlimit_value(const char *s, size_t n, uint64_t *v)
{
	char buf[32];

	if (!n || n >= sizeof(buf))
		return -EINVAL;
	memcpy(buf, s, n);
	buf[n] = '\0';
	if (!strcmp(buf, "unlimited") || !strcmp(buf, "infinity")) {
		*v = UINT64_MAX;
		return 0;
	}
	return parse_u64(buf, 0, UINT64_MAX - 1, v);
}

int cli_parse_rlimit(const char *arg, struct job_rlimit *r)
{
	const char *eq = strchr(arg, '='), *name = arg, *colon;
	size_t nlen = eq ? (size_t)(eq - arg) : 0;
	unsigned i;

	if (nlen > 7 && !strncasecmp(name, "RLIMIT_", 7)) {
		name += 7;
		nlen -= 7;
	}
	for (i = 0; eq && i < RLIM_NLIMITS; i++)
		if (rlimit_names[i] && strlen(rlimit_names[i]) == nlen &&
		    !strncasecmp(name, rlimit_names[i], nlen) && proto_rlimit_ok(i))
			break;
	if (!eq || i == RLIM_NLIMITS)
		return husk_seterr(EINVAL, "--rlimit '%s': NAME=SOFT[:HARD] with NAME one of "
				   "cpu fsize data stack core nproc nofile memlock as locks "
				   "sigpending msgqueue nice rtprio rttime", arg);
	r->resource = i;
	colon = strchr(eq + 1, ':');
	if (rlimit_value(eq + 1, colon ? (size_t)(colon - eq - 1) : strlen(eq + 1), &r->soft) ||
	    (colon && rlimit_value(colon + 1, strlen(colon + 1), &r->hard)))
		return husk_seterr(EINVAL, "--rlimit '%s': a limit is a number or 'unlimited'", arg);
	if (!colon)
		r->hard = r->soft;
	if (r->soft > r->hard)
		return husk_seterr(EINVAL, "--rlimit '%s': the soft limit is over the hard one", arg);
	return 0;
}

static int tmpfs_option(const char *o, size_t n, struct job_tmpfs *t)
{
	static const char *const no_op[] = { "rw", "nosuid", "nodev", "noatime", "relatime",
					     "strictatime", "nodiratime" };
	char v[32];
	uint64_t x;
	size_t i;

	for (i = 0; i < sizeof(no_op) / sizeof(no_op[0]); i++)
		if (strlen(no_op[i]) == n && !strncmp(o, no_op[i], n))
			return 0;
	if ((n == 6 && !strncmp(o, "noexec", 6)) || (n == 4 && !strncmp(o, "exec", 4))) {
		t->noexec = n == 6;
		return 0;
	}
	if (n > 5 && n - 5 < sizeof(v) && !strncmp(o, "mode=", 5)) {
		char *end;

		memcpy(v, o + 5, n - 5);
		v[n - 5] = '\0';
		x = strtoull(v, &end, 8);
		if (*end || x > 07777 || v[0] == '-')
			return -EINVAL;
		t->mode = x;
		return 0;
	}
	if (n > 5 && n - 5 < sizeof(v) && !strncmp(o, "size=", 5)) {
		memcpy(v, o + 5, n - 5);
		v[n - 5] = '\0';
		return parse_size(v, 1, &t->size) ? -EINVAL : 0;
	}
	return -EINVAL;
}

int cli_parse_tmpfs(const char *arg, struct job_tmpfs *t)
{
	const char *colon = strchr(arg, ':'), *o, *comma;
	char *path = strndup(arg, colon ? (size_t)(colon - arg) : strlen(arg));

	*t = (struct job_tmpfs){ .mode = JOB_TMPFS_DEFAULT_MODE };
	if (!path)
		return husk_seterr(ENOMEM, "out of memory");
	if (!proto_tmpfs_path_ok(path, "/tmp/workspace")) {
		free(path);
		return husk_seterr(EINVAL, "--tmpfs '%s': an absolute path, not /, not in /proc, "
				   "/sys or /dev, and not the workspace /tmp/workspace, in it or "
				   "above it", arg);
	}
	t->path = path;
	for (o = colon ? colon + 1 : NULL; o && *o; o = comma ? comma + 1 : NULL) {
		comma = strchr(o, ',');
		if (tmpfs_option(o, comma ? (size_t)(comma - o) : strlen(o), t)) {
			free(path);
			t->path = NULL;
			return husk_seterr(EINVAL, "--tmpfs '%s': an option is not one of size=N[k|m|g], "
					   "mode=OCTAL, noexec, exec, rw, nosuid, nodev, noatime, "
					   "relatime, strictatime, nodiratime", arg);
		}
	}
	return 0;
}

int cli_parse_uid_range(const char *arg, uint32_t *base, uint32_t *count)
{
	const char *colon = strchr(arg, ':');
	char b[24];
	uint64_t vb, vc;

	/* Digits only: parse_u64 would skip leading blanks. */
	if (!colon || (size_t)(colon - arg) >= sizeof(b) || arg[0] < '0' || arg[0] > '9' ||
	    colon[1] < '0' || colon[1] > '9')
		goto bad;
	memcpy(b, arg, colon - arg);
	b[colon - arg] = '\0';
	/* (uid_t)-1 means "no change" to setresuid(): never a real uid. */
	if (parse_u64(b, 1, UINT32_MAX - 1, &vb) ||
	    parse_u64(colon + 1, 1, UINT32_MAX - 1, &vc))
		goto bad;
	if (vb + vc - 1 > UINT32_MAX - 1)
		return husk_seterr(EINVAL, "--uid-range %s: the range runs past uid %u",
				   arg, UINT32_MAX - 1);
	/*
	 * Files of unmapped owners show up as nobody inside user namespaces,
	 * and other daemons run as nobody: a jail uid must be nobody else's.
	 */
	if (vb <= RUN_UID_NOBODY && vb + vc - 1 >= RUN_UID_NOBODY)
		return husk_seterr(EINVAL, "--uid-range %s: the range holds uid %d "
				   "(nobody), which other processes share", arg,
				   RUN_UID_NOBODY);
	*base = vb;
	*count = vc;
	return 0;
bad:
	return husk_seterr(EINVAL, "--uid-range '%s' must be BASE:COUNT, BASE >= 1 "
			   "(never root), COUNT >= 1", arg);
}

/* The same prefix both allowed and denied: say which one the user meant. */
static int check_contradictions(const struct run_opts *o)
{
	unsigned i, j;

	for (i = 0; i < o->nr_deny; i++) {
		const struct run_deny *d = &o->deny[i];

		for (j = 0; j < o->nr_allow; j++) {
			const struct run_allow *a = &o->allow[j];

			if (a->family == d->family && a->prefixlen == d->prefixlen &&
			    !memcmp(run_cidr_addr(a), run_cidr_addr(d),
				    d->family == AF_INET6 ? 16 : 4))
				return husk_seterr(EINVAL, "--deny and --allow name the same "
						   "prefix (/%u, rule %u and %u): drop one; of "
						   "two overlapping rules the more specific "
						   "wins", d->prefixlen, i + 1, j + 1);
		}
	}
	return 0;
}

/*
 * The filter keeps one rule per prefix, so two --allow of the same prefix
 * would silently lose one. Same protocols: the port lists are joined (an
 * empty one means every port, which covers the other). Different protocols:
 * refused, since one rule for both would open each protocol's ports to the
 * other.
 */
static int merge_allows(struct run_opts *o)
{
	unsigned i, j, k;

	for (i = 0; i < o->nr_allow; i++) {
		struct run_allow *a = &o->allow[i];

		for (j = i + 1; j < o->nr_allow; ) {
			struct run_allow *b = &o->allow[j];

			if (a->family != b->family || a->prefixlen != b->prefixlen ||
			    memcmp(run_cidr_addr(a), run_cidr_addr(b),
				   a->family == AF_INET6 ? 16 : 4)) {
				j++;
				continue;
			}
			if (a->protos != b->protos)
				return husk_seterr(EINVAL, "--allow rules %u and %u name the same "
						   "prefix with different protocols: husk keeps one "
						   "rule per prefix; allow the protocols on separate "
						   "prefixes or as 'any'", i + 1, j + 1);
			if (!a->nports || !b->nports) {
				a->nports = 0;
			} else {
				if (a->nports + b->nports > EGRESS_MAX_PORT_RANGES)
					return husk_seterr(EINVAL, "--allow rules %u and %u of the same "
							   "prefix have more than %d port ranges "
							   "together", i + 1, j + 1,
							   EGRESS_MAX_PORT_RANGES);
				for (k = 0; k < b->nports; k++)
					a->ports[a->nports++] = b->ports[k];
			}
			/* j is folded into i: close the gap. */
			memmove(b, b + 1, (o->nr_allow - j - 1) * sizeof(*b));
			o->nr_allow--;
		}
	}
	return 0;
}

/*
 * --allow-host NAME: a dns.h pattern. An IPv4 literal is a valid pattern
 * too (all-digit labels), but it would only ever match a query for that
 * text, never open the address: point at --allow instead.
 */
static int parse_allow_host(struct run_opts *o, const char *name)
{
	int err;

	if (o->nr_allow_host == RUN_MAX_ALLOW_HOST)
		return husk_seterr(EINVAL, "more than %d --allow-host", RUN_MAX_ALLOW_HOST);
	err = cli_check_allow_host(name);
	if (!err)
		o->allow_host[o->nr_allow_host++] = name;
	return err;
}

int cli_check_allow_host(const char *name)
{
	struct in_addr a;

	if (inet_pton(AF_INET, name, &a) == 1 || strchr(name, ':'))
		return husk_seterr(EINVAL, "--allow-host '%s' is an address, not a name: "
				   "use --allow ADDRESS/32 (IPv6: --allow [ADDRESS]/128)",
				   name);
	if (dns_pattern_check(name))
		return husk_seterr(EINVAL, "--allow-host '%s' must be a domain name "
				   "(example.com) or a wildcard below one (*.example.com): "
				   "labels of letters, digits, '-' and '_'", name);
	return 0;
}

void cli_run_defaults(struct run_opts *o)
{
	memset(o, 0, sizeof(*o));
	o->mem_mib = RUN_DEFAULT_MEM_MIB;
	o->vcpus = 1;
	o->job.timeout_sec = RUN_DEFAULT_TIMEOUT_SEC;
	o->job.workspace_mib = RUN_DEFAULT_WORKSPACE_MIB;
	o->job.max_output = RUN_DEFAULT_MAX_OUTPUT;
	o->cpu_milli = RUN_DEFAULT_CPU_MILLI;
	o->pids_max = RUN_DEFAULT_PIDS_MAX;
	o->uid_base = RUN_DEFAULT_UID_BASE;
	o->uid_count = RUN_DEFAULT_UID_COUNT;
	o->json_fd = -1;
	o->session_fd = -1;
	o->policy_fd = -1;
	o->hold_fd = -1;
}

int cli_parse_run(int argc, char **argv, struct run_opts *o)
{
	enum { O_KERNEL = 256, O_ROOTFS, O_MEM, O_VCPUS, O_TIMEOUT, O_WS, O_ENV, O_PUT,
	       O_GET, O_GET_ALWAYS, O_STDIN, O_JSON, O_CONSOLE, O_VERBOSE, O_HELP, O_MAX_OUTPUT,
	       O_NET, O_ALLOW, O_CONN_RATE, O_EGRESS_LIMIT, O_EGRESS_RATE, O_MAX_DESTS, O_ALLOW_HOST, O_DENY, O_CPUS,
	       O_PIDS_MAX, O_UID_RANGE, O_NO_JAIL, O_GET_KEEP_MODES, O_JSON_FD, O_RESULT,
	       O_TEMPLATE, O_TEMPLATE_DIR, O_NO_HUGEPAGES, O_SESSION_FD, O_SERVER, O_CWD, O_HOSTNAME, O_TTY,
	       O_RLIMIT, O_TMPFS,
	       O_POLICY_FD, O_IMAGE, O_IMAGE_DIR, O_HOLD_FD, O_NETNS, O_USER, O_ABS_BUILTINS };
	bool mem_set = false, vcpus_set = false;
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
		{ "netns", required_argument, NULL, O_NETNS },
		{ "absolute-builtins", no_argument, NULL, O_ABS_BUILTINS },
		{ "user", required_argument, NULL, O_USER },
		{ "allow", required_argument, NULL, O_ALLOW },
		{ "conn-rate", required_argument, NULL, O_CONN_RATE },
		{ "egress-limit", required_argument, NULL, O_EGRESS_LIMIT },
		{ "egress-rate", required_argument, NULL, O_EGRESS_RATE },
		{ "max-dests", required_argument, NULL, O_MAX_DESTS },
		{ "allow-host", required_argument, NULL, O_ALLOW_HOST },
		{ "deny", required_argument, NULL, O_DENY },
		{ "cpus", required_argument, NULL, O_CPUS },
		{ "pids-max", required_argument, NULL, O_PIDS_MAX },
		{ "uid-range", required_argument, NULL, O_UID_RANGE },
		{ "no-jail", no_argument, NULL, O_NO_JAIL },
		{ "no-hugepages", no_argument, NULL, O_NO_HUGEPAGES },
		{ "session-fd", required_argument, NULL, O_SESSION_FD },
		{ "policy-fd", required_argument, NULL, O_POLICY_FD },
		{ "hold-fd", required_argument, NULL, O_HOLD_FD },
		{ "server", required_argument, NULL, O_SERVER },
		{ "cwd", required_argument, NULL, O_CWD },
		{ "hostname", required_argument, NULL, O_HOSTNAME },
		{ "rlimit", required_argument, NULL, O_RLIMIT },
		{ "tmpfs", required_argument, NULL, O_TMPFS },
		{ "tty", no_argument, NULL, O_TTY },
		{ "get-keep-modes", no_argument, NULL, O_GET_KEEP_MODES },
		{ "json-fd", required_argument, NULL, O_JSON_FD },
		{ "result", required_argument, NULL, O_RESULT },
		{ "template", required_argument, NULL, O_TEMPLATE },
		{ "template-dir", required_argument, NULL, O_TEMPLATE_DIR },
		{ "image", required_argument, NULL, O_IMAGE },
		{ "image-dir", required_argument, NULL, O_IMAGE_DIR },
		{ NULL, 0, NULL, 0 },
	};
	uint64_t v;
	unsigned i;
	int c, err = 0;

	cli_run_defaults(o);
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
			mem_set = true;
			break;
		case O_VCPUS:
			err = cli_num_opt("--vcpus", optarg, 1, VM_MAX_VCPUS, &v);
			if (!err)
				o->vcpus = v;
			vcpus_set = true;
			break;
		case O_TIMEOUT:
			err = cli_num_opt("--timeout", optarg, 1, CLI_MAX_TIMEOUT_SEC, &o->job.timeout_sec);
			break;
		case O_WS:
			err = cli_num_opt("--workspace-size", optarg, 1, RUN_MAX_WORKSPACE_MIB,
					  &o->job.workspace_mib);
			break;
		case O_ENV:
			if (!strchr(optarg, '=') || optarg[0] == '=')
				err = husk_seterr(EINVAL, "--env needs K=V, not '%s'", optarg);
			else if (o->job.nr_env == RUN_MAX_ENV)
				err = husk_seterr(EINVAL, "more than %d --env", RUN_MAX_ENV);
			else
				o->job.env[o->job.nr_env++] = optarg;
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
			err = cli_num_opt("--max-output", optarg, 0, UINT64_MAX / 2, &o->job.max_output);
			break;
		case O_GET_ALWAYS:
			o->get_always = true;
			break;
		case O_STDIN:
			o->job.stdin = true;
			break;
		case O_JSON:
			o->json = true;
			break;
		case O_CONSOLE:
			o->console = optarg;
			break;
		case O_VERBOSE:
			o->verbose = true;
			o->job.verbose = true;
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
		case O_NETNS:
			if (!*optarg || optarg[0] != '/')
				err = husk_seterr(EINVAL, "--netns wants an absolute path, not '%s'",
						  optarg);
			o->netns = optarg;
			break;
		case O_ABS_BUILTINS:
			o->absolute_builtins = true;
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
		case O_EGRESS_RATE:
			err = cli_num_opt("--egress-rate", optarg, 1, UINT64_MAX / 2,
					  &o->egress_rate);
			break;
		case O_MAX_DESTS:
			err = cli_num_opt("--max-dests", optarg, 1, UINT32_MAX, &o->max_dests);
			break;
		case O_ALLOW_HOST:
			err = parse_allow_host(o, optarg);
			break;
		case O_DENY:
			if (o->nr_deny == RUN_MAX_DENY)
				err = husk_seterr(EINVAL, "more than %d --deny", RUN_MAX_DENY);
			else
				err = cli_parse_deny(optarg, &o->deny[o->nr_deny++]);
			break;
		case O_CPUS:
			err = cli_parse_cpus(optarg, &o->cpu_milli);
			break;
		case O_PIDS_MAX:
			err = cli_num_opt("--pids-max", optarg, RUN_MIN_PIDS_MAX,
					  RUN_MAX_PIDS_MAX, &v);
			if (!err)
				o->pids_max = v;
			break;
		case O_UID_RANGE:
			err = cli_parse_uid_range(optarg, &o->uid_base, &o->uid_count);
			break;
		case O_NO_JAIL:
			o->no_jail = true;
			break;
		case O_NO_HUGEPAGES:
			o->no_hugepages = true;
			break;
		case O_CWD:
			o->job.cwd = optarg;
			if (!*optarg || strlen(optarg) >= 4096)
				err = husk_seterr(EINVAL, "--cwd needs a directory (workspace-relative "
						  "or absolute)");
			break;
		case O_HOSTNAME:
			o->job.hostname = optarg;
			if (!proto_hostname_ok(optarg))
				err = husk_seterr(EINVAL, "--hostname '%s' is not a host name (1..%d of "
						  "letters, digits, '-' and '.', not first '-' or '.')",
						  optarg, PROTO_HOSTNAME_MAX);
			break;
		case O_USER:
			if (!strcmp(optarg, "root") || !strcmp(optarg, "0"))
				o->job.root = true;
			else if (!strcmp(optarg, "agentuser"))
				o->job.root = false;
			else
				err = husk_seterr(EINVAL, "--user must be agentuser or root, not '%s' "
						  "(jobs run as one of the guest's two users)", optarg);
			break;
		case O_TTY:
			o->job.terminal = true;
			break;
		case O_RLIMIT:
			if (o->job.nr_rlimits == JOB_MAX_RLIMITS)
				err = husk_seterr(EINVAL, "more than %d --rlimit", JOB_MAX_RLIMITS);
			else
				err = cli_parse_rlimit(optarg, &o->job.rlimits[o->job.nr_rlimits++]);
			break;
		case O_TMPFS:
			if (o->job.nr_tmpfs == JOB_MAX_TMPFS)
				err = husk_seterr(EINVAL, "more than %d --tmpfs", JOB_MAX_TMPFS);
			else
				err = cli_parse_tmpfs(optarg, &o->job.tmpfs[o->job.nr_tmpfs++]);
			break;
		case O_SERVER:
			o->server = optarg;
			if (!*optarg)
				err = husk_seterr(EINVAL, "--server needs husk serve's socket path");
			break;
		case O_SESSION_FD:
			err = cli_num_opt("--session-fd", optarg, 3, 1023, &v);
			if (!err) {
				o->session_fd = v;
				o->job.session = true;
			}
			break;
		case O_POLICY_FD:
			err = cli_num_opt("--policy-fd", optarg, 3, 1023, &v);
			if (!err)
				o->policy_fd = v;
			break;
		case O_HOLD_FD:
			err = cli_num_opt("--hold-fd", optarg, 3, 1023, &v);
			if (!err)
				o->hold_fd = v;
			break;
		case O_GET_KEEP_MODES:
			o->get_keep_modes = true;
			break;
		case O_JSON_FD:
			/* 0 is the job's stdin; 1 and 2 carry its output. */
			err = cli_num_opt("--json-fd", optarg, 3, 1023, &v);
			if (!err)
				o->json_fd = v;
			break;
		case O_RESULT:
			if (!*optarg)
				err = husk_seterr(EINVAL, "--result needs a file name");
			o->result = optarg;
			break;
		case O_TEMPLATE:
			o->template_name = optarg;
			break;
		case O_TEMPLATE_DIR:
			if (!*optarg)
				err = husk_seterr(EINVAL, "--template-dir needs a directory");
			o->template_dir = optarg;
			break;
		case O_IMAGE:
			err = image_name_check(optarg);
			o->image = optarg;
			break;
		case O_IMAGE_DIR:
			if (!*optarg)
				err = husk_seterr(EINVAL, "--image-dir needs a directory");
			o->image_dir = optarg;
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
	if (o->job.session) {
		/* husk serve's worker: the commands come over the session socket. */
		if (optind < argc)
			return husk_seterr(EINVAL, "--session-fd takes no command");
		if (o->job.stdin || o->nr_get || o->get_always || o->get_keep_modes)
			return husk_seterr(EINVAL, "--session-fd: stdin and files go through the "
					   "session, not --stdin or --get");
	} else if (optind >= argc && !o->image) {
		return husk_seterr(EINVAL, "no command given: husk run [OPTIONS] -- CMD [ARGS...]");
	}
	if (o->image_dir && !o->image)
		return husk_seterr(EINVAL, "--image-dir without --image");
	if (o->image && o->rootfs)
		return husk_seterr(EINVAL, "--image is the root image: not with --rootfs");
	if (o->image_dir && o->server)
		return husk_seterr(EINVAL, "--image-dir is the daemon's with --server");
	if (o->job.hostname && o->server)
		return husk_seterr(EINVAL, "--hostname does not go through husk serve (yet)");
	if (o->job.terminal && o->server)
		return husk_seterr(EINVAL, "--tty does not go through husk serve (yet)");
	if (o->job.nr_rlimits && o->server)
		return husk_seterr(EINVAL, "--rlimit does not go through husk serve (yet)");
	if (o->job.nr_tmpfs && o->server)
		return husk_seterr(EINVAL, "--tmpfs does not go through husk serve (yet)");
	if (o->job.root && o->server)
		return husk_seterr(EINVAL, "--user root does not go through husk serve (yet)");
	if (o->netns && o->server)
		return husk_seterr(EINVAL, "--netns is a namespace of this host's: not with "
				   "--server");
	if (o->get_always && !o->nr_get)
		return husk_seterr(EINVAL, "--get-always without --get");
	if (o->get_keep_modes && !o->nr_get)
		return husk_seterr(EINVAL, "--get-keep-modes without --get");
	/* A template fixes its machine: a run can only take it as it is. */
	if (o->template_name && (mem_set || vcpus_set))
		return husk_seterr(EINVAL, "--mem and --vcpus come from the template with "
				   "--template; make another template for another size");
	if (o->template_dir && !o->template_name)
		return husk_seterr(EINVAL, "--template-dir without --template");
	if (o->netns && o->net != RUN_NET_EGRESS)
		return husk_seterr(EINVAL, "--netns needs --net egress");
	if (o->absolute_builtins && o->net != RUN_NET_EGRESS)
		return husk_seterr(EINVAL, "--absolute-builtins needs --net egress");
	if (o->nr_allow && o->net != RUN_NET_EGRESS)
		return husk_seterr(EINVAL, "--allow needs --net egress");
	if (o->nr_allow_host && o->net != RUN_NET_EGRESS)
		return husk_seterr(EINVAL, "--allow-host needs --net egress");
	if (o->nr_deny && o->net != RUN_NET_EGRESS)
		return husk_seterr(EINVAL, "--deny needs --net egress");
	if (o->conn_rate && o->net != RUN_NET_EGRESS)
		return husk_seterr(EINVAL, "--conn-rate needs --net egress");
	if (o->egress_limit && o->net != RUN_NET_EGRESS)
		return husk_seterr(EINVAL, "--egress-limit needs --net egress");
	if (o->egress_rate && o->net != RUN_NET_EGRESS)
		return husk_seterr(EINVAL, "--egress-rate needs --net egress");
	if (o->max_dests && o->net != RUN_NET_EGRESS)
		return husk_seterr(EINVAL, "--max-dests needs --net egress");
	if (o->policy_fd >= 0 && o->net != RUN_NET_EGRESS)
		return husk_seterr(EINVAL, "--policy-fd needs --net egress");
	if (o->policy_fd >= 0 && (o->policy_fd == o->session_fd || o->policy_fd == o->json_fd))
		return husk_seterr(EINVAL, "--policy-fd %d is already another option's fd",
				   o->policy_fd);
	if (o->hold_fd >= 0 && (o->hold_fd == o->session_fd || o->hold_fd == o->json_fd ||
				o->hold_fd == o->policy_fd))
		return husk_seterr(EINVAL, "--hold-fd %d is already another option's fd", o->hold_fd);
	if (o->job.terminal && (o->session_fd >= 0 || o->template_create))
		return husk_seterr(EINVAL, "--tty is a job's: not with --session-fd or a "
				   "template's creation");
	if ((o->job.nr_rlimits || o->job.nr_tmpfs || o->job.root) &&
	    (o->session_fd >= 0 || o->template_create))
		return husk_seterr(EINVAL, "--%s is a job's: not with --session-fd or a "
				   "template's creation", o->job.nr_rlimits ? "rlimit" :
				   o->job.nr_tmpfs ? "tmpfs" : "user");
	if (o->hold_fd >= 0 && (o->session_fd >= 0 || o->template_create))
		return husk_seterr(EINVAL, "--hold-fd holds a job: not with --session-fd or a "
				   "template's creation");
	if ((err = check_contradictions(o)) || (err = merge_allows(o)))
		return err;
	if (o->cpu_milli > o->vcpus * 1000)
		return husk_seterr(EINVAL, "--cpus %u.%03u is more than the VM's %u vCPU(s) "
				   "can use: raise --vcpus or lower --cpus",
				   o->cpu_milli / 1000, o->cpu_milli % 1000, o->vcpus);
	if (o->pids_max < o->vcpus + RUN_PIDS_OVERHEAD)
		return husk_seterr(EINVAL, "--pids-max %u is too small for %u vCPU(s): husk "
				   "needs one task per vCPU plus %d", o->pids_max, o->vcpus,
				   RUN_PIDS_OVERHEAD);
	if (o->net == RUN_NET_EGRESS) {
		if (!o->conn_rate)
			o->conn_rate = RUN_DEFAULT_CONN_RATE;
		if (!o->egress_limit)
			o->egress_limit = RUN_DEFAULT_EGRESS_LIMIT;
		if (!o->max_dests)
			o->max_dests = RUN_DEFAULT_MAX_DESTS;
	}
	o->job.argv = argv + optind;
	o->job.argc = argc - optind;
	/* The guest's side of the transfers: how many puts, which paths come back. */
	o->job.nr_put = o->nr_put;
	for (i = 0; i < o->nr_get; i++)
		o->job.get[i] = o->get[i].guest;
	o->job.nr_get = o->nr_get;
	return 0;
}
