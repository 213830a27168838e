/*
 * fuzz_cli: libFuzzer target for the command-line parsers.
 *
 * The input is split on NUL bytes into an argv (at most 64 words, argv[0]
 * forced to "boot" or "run" as husk passes them), which is handed to
 * cli_command(), cli_parse_boot() and cli_parse_run() with getopt reset
 * between calls. Accepted command lines must satisfy the documented limits.
 */
#include <getopt.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "cli_run.h"

#define MAX_ARGS 64

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *buf, *argv[MAX_ARGS + 2], *copy[MAX_ARGS + 2];
	struct boot_opts bo;
	struct run_opts ro;
	int argc = 1, i;
	size_t off = 0;

	buf = malloc(size + 1);
	if (!buf)
		return 0;
	memcpy(buf, data, size);
	buf[size] = 0;
	while (off < size && argc < MAX_ARGS + 1) {
		argv[argc++] = buf + off;
		off += strlen(buf + off) + 1;
	}
	argv[argc] = NULL;

	/* getopt permutes argv: give each parser its own copy. */
	argv[0] = "boot";
	memcpy(copy, argv, sizeof(argv));
	optind = 0;
	opterr = 0;
	memset(&bo, 0, sizeof(bo));
	if (cli_parse_boot(argc, copy, &bo) == 0 && !bo.help) {
		if (!bo.kernel || bo.vcpus < 1 || bo.mem_mib < CLI_MIN_MEM_MIB ||
		    bo.mem_mib > CLI_MAX_MEM_MIB || bo.timeout_sec > CLI_MAX_TIMEOUT_SEC)
			abort();
	}

	argv[0] = "run";
	memcpy(copy, argv, sizeof(argv));
	optind = 0;
	memset(&ro, 0, sizeof(ro));
	if (cli_parse_run(argc, copy, &ro) == 0 && !ro.help) {
		/* An image's Entrypoint and Cmd stand for a command not given. */
		if ((ro.job.argc < 1 && !ro.image && !ro.job.session) ||
		    (ro.job.argc && !ro.job.argv) || ro.job.nr_env > RUN_MAX_ENV ||
		    ro.nr_put > RUN_MAX_PUTS || ro.nr_get > RUN_MAX_GETS)
			abort();
		for (i = 0; i < ro.job.argc; i++)
			if (!ro.job.argv[i])
				abort();
	}
	/* The CLI keeps --tmpfs paths for its life; the fuzzer parses again. */
	for (i = 0; i < (int)ro.job.nr_tmpfs; i++)
		free((char *)ro.job.tmpfs[i].path);

	/* The top-level dispatcher sees "husk <word> ...". */
	copy[0] = "husk";
	for (i = 1; i < argc; i++)
		copy[i] = argv[i];
	copy[argc] = NULL;
	(void)cli_command(argc, copy);
	optind = 0;
	free(buf);
	return 0;
}
