/*
 * fuzz_oci: libFuzzer target for husk oci's reading of a bundle's
 * config.json (oci/spec.c), which an engine or a hostile bundle writes.
 *
 * The input is the file's bytes. Checks: a parse fails with a message, or
 * yields a container whose fields hold what the command line needs (a
 * program, an absolute cwd, binds inside the workspace, a memory size
 * husk run takes); its husk run command line is NULL-terminated, ends in
 * "--" and the program's arguments, and carries no argument that would be
 * taken for an option before "--" by mistake; nothing leaks.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "lib/util.h"
#include "oci/spec.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct oci_spec s;
	char **argv, **owned;
	int i, dash = -1;

	if (oci_spec_parse((const char *)data, size, &s)) {
		if (!husk_lasterr()[0])
			abort();
		oci_spec_free(&s);
		return 0;
	}
	if (!s.nr_args || !s.args[0] || s.args[s.nr_args] || !s.cwd || s.cwd[0] != '/' || !s.root)
		abort();
	if (s.mem_mib && (s.mem_mib < CLI_MIN_MEM_MIB || s.mem_mib > CLI_MAX_MEM_MIB))
		abort();
	for (i = 0; i < s.nr_binds; i++)
		if (s.binds[i].src[0] != '/' || s.binds[i].dst[0] == '/' ||
		    strstr(s.binds[i].dst, ".."))
			abort();
	if (!oci_spec_argv(&s, "key", NULL, 3, &argv, &owned)) {
		for (i = 0; argv[i]; i++)
			if (!strcmp(argv[i], "--") && dash < 0)
				dash = i;
		if (dash < 0 || i - dash - 1 != s.nr_args || strcmp(argv[0], "husk"))
			abort();
		for (i = 0; owned[i]; i++)
			free(owned[i]);
		free(owned);
		free(argv);
	}
	oci_spec_free(&s);
	return 0;
}
