/*
 * oci/spec: an OCI bundle's config.json, read as hostile input, turned into
 * the command line of the `husk run` that is the container. What husk
 * cannot honour is refused with a message that says so; what an engine
 * always asks for and a VM has anyway (its own /proc, /dev, /sys, cgroup
 * and namespaces, the engine's /etc/hosts and friends) is accepted and left
 * to the guest. Pure: no files but the one read, no processes.
 */
#ifndef HUSK_OCI_SPEC_H
#define HUSK_OCI_SPEC_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define OCI_MAX_ARGS 256
#define OCI_MAX_ENV 256
#define OCI_MAX_BINDS 32
#define OCI_MAX_ALLOW 64
#define OCI_MAX_RLIMITS 16
#define OCI_MAX_TMPFS 8
#define OCI_CONFIG_MAX (4u << 20)	/* a config.json larger than this is refused */
/* A container has no --timeout of its own: it lives this long at most. */
#define OCI_DEFAULT_TIMEOUT_S (7 * 24 * 3600)

struct oci_bind {
	char *src;			/* host path, absolute */
	char *dst;			/* guest path, relative to the workspace */
};

struct oci_spec {
	char *args[OCI_MAX_ARGS + 1];	/* process.args, NULL-terminated */
	int nr_args;
	char *env[OCI_MAX_ENV];		/* process.env, "K=V" */
	int nr_env;
	char *cwd;			/* process.cwd, absolute */
	char *hostname;			/* hostname, or NULL: not set */
	char *root;			/* root.path as given (relative to the bundle or absolute) */
	uint64_t mem_mib;		/* linux.resources.memory.limit, MiB; 0: husk's default */
	unsigned cpu_milli;		/* quota/period in thousandths of a CPU; 0: default */
	unsigned timeout_s;		/* io.husk.timeout, else OCI_DEFAULT_TIMEOUT_S */
	bool egress;			/* io.husk.net = egress, or the engine's netns */
	bool net_none;			/* io.husk.net = none: no NIC, whatever the netns */
	char *netns;			/* linux.namespaces' network path: the NIC's home */
	char *resolv_conf;		/* the engine's resolv.conf (its bind mount's source) */
	bool terminal;			/* process.terminal: a pty (--console-socket) */
	bool guest_root;		/* io.husk.user = root: uid 0 in the guest */
	char *template_name;		/* io.husk.template: start from it, not a boot */
	char *allow[OCI_MAX_ALLOW];	/* io.husk.allow, comma separated */
	int nr_allow;
	char *allow_host[OCI_MAX_ALLOW];	/* io.husk.allow-host */
	int nr_allow_host;
	struct oci_bind binds[OCI_MAX_BINDS];
	int nr_binds;
	char *annotations_json;		/* the annotations object, for state */
	char *rlimits[OCI_MAX_RLIMITS];	/* process.rlimits as husk run --rlimit values */
	int nr_rlimits;
	char *tmpfs[OCI_MAX_TMPFS];	/* tmpfs mounts as husk run --tmpfs values */
	int nr_tmpfs;
};

/*
 * Parse config.json's text (len bytes). 0, or -errno with the reason in
 * husk_lasterr(); *s is filled on success and must be freed either way.
 */
int oci_spec_parse(const char *text, size_t len, struct oci_spec *s);
void oci_spec_free(struct oci_spec *s);

/*
 * What a config.json of another user's (uid: not the engine's, see
 * oci/bundle.h) may not ask for: copies of host files (bind mounts) and a
 * network namespace, which husk-runc would reach with its own rights, not
 * uid's. 0, or -EPERM naming the first of them; the engine's resolv.conf
 * is forgotten.
 */
int oci_spec_confine(struct oci_spec *s, unsigned uid);

/*
 * What husk honours of a LinuxResources object (config.json's
 * linux.resources, or `update --resources`): the memory limit as the VM's
 * RAM in MiB, the CPU quota over its period in thousandths of a CPU. Fields
 * absent or not positive leave *mem_mib and *cpu_milli as they were;
 * others are the VM's own (docs/oci.md). 0, or -errno with the reason.
 */
int oci_spec_resources(json_t *res, uint64_t *mem_mib, unsigned *cpu_milli);

/*
 * The command line of the container's `husk run` ("husk", "run", options,
 * "--", the process). image is the imported root's key, image_dir its store, hold_fd
 * the --hold-fd. Strings point into s or are allocated into *owned (free
 * each, then the array); argv is NULL-terminated. 0 or -errno.
 */
int oci_spec_argv(const struct oci_spec *s, const char *image, const char *image_dir,
		  int hold_fd, char ***argv, char ***owned);

#endif
