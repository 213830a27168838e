/*
 * cli: parse and validate husk's command line into option structs. Pure:
 * no files are opened here, so every rule is unit-tested. A rejected
 * command line leaves its reason in husk_lasterr().
 */
#ifndef HUSK_CLI_H
#define HUSK_CLI_H

#include <stdbool.h>
#include <stdint.h>

#define CLI_DEFAULT_MEM_MIB 256
#define CLI_MIN_MEM_MIB 32
#define CLI_MAX_MEM_MIB (64 * 1024)
#define CLI_MAX_TIMEOUT_SEC (7 * 24 * 3600)

enum cli_command {
	CLI_NONE, CLI_HELP, CLI_VERSION, CLI_BOOT, CLI_RUN, CLI_TEMPLATE, CLI_IMAGE, CLI_SERVE, CLI_PS,
	CLI_EXEC, CLI_KILL, CLI_MCP, CLI_OCI,
};

struct boot_opts {
	const char *kernel;
	const char *initrd;
	const char *cmdline;
	const char *console;	/* "-" for stdout */
	const char *disk;	/* read-only virtio-blk image, or NULL */
	bool rng;		/* virtio-rng */
	const char *vsock;	/* virtio-vsock host socket path (guest CID 3), or NULL */
	uint64_t mem_mib;
	unsigned vcpus;
	uint64_t timeout_sec;	/* 0: none */
	bool json;
	bool no_stdin;		/* do not forward stdin to the guest console */
	bool no_hugepages;	/* guest RAM in small pages only */
	bool boot_timer;	/* Firecracker's boot-timer device at the first MMIO slot */
	const char *profile;	/* sample vCPU 0's rip into this file, or NULL */
	bool verbose;
	bool help;
};

/* Which command argv names (argv[1]); CLI_NONE with an error if unknown. */
enum cli_command cli_command(int argc, char **argv);
/* Parse "husk boot ..." (argv[0] is "boot"). Returns 0 or -EINVAL. */
int cli_parse_boot(int argc, char **argv, struct boot_opts *o);

/* Shared by the parsers: a number option in [min, max], and getopt's ':'/'?' cases. */
int cli_num_opt(const char *name, const char *val, uint64_t min, uint64_t max,
		uint64_t *out);
int cli_bad_option(int c, char **argv);
/*
 * The action of a command that has them ("husk image import ..."): its
 * index in actions[] (each "name" or "name|alias"), CLI_ACTION_HELP for
 * help, --help or -h, or -EINVAL naming the choices.
 */
#define CLI_ACTION_HELP 1000
int cli_action(int argc, char **argv, const char *cmd, const char *const *actions,
	       unsigned n);

extern const char cli_usage[];
extern const char cli_boot_usage[];

#endif
