/*
 * fuzz_api: libFuzzer target for husk serve's request parser (serve/api.c),
 * which sees every byte a client of the daemon sends.
 *
 * The input is one request line. Checks: a parse either fails with an
 * error code and a message, or yields a request whose fields are
 * consistent (a known op; run/create with a NULL-terminated worker command
 * line that husk run's parser accepted; decoded data no longer than its
 * base64); every answer builder makes one line of valid JSON out of what
 * was parsed; base64 data round-trips; nothing leaks.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "lib/util.h"
#include "serve/api.h"

static void check_line(char *l)
{
	json_t *j;
	size_t n;

	if (!l)
		return;	/* out of memory only */
	n = strlen(l);
	if (!n || l[n - 1] != '\n' || memchr(l, '\n', n - 1))
		abort();
	j = json_loadb(l, n - 1, 0, NULL);
	if (!j || !json_is_object(j) || !json_object_get(j, "re"))
		abort();
	json_decref(j);
	free(l);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct api_req r;
	const char *code;
	int err = api_parse((const char *)data, size, &r, &code);

	if (err) {
		if (!code || !husk_lasterr()[0])
			abort();
		check_line(api_error(r.id, code, husk_lasterr(), NULL));
		api_req_free(&r);
		return 0;
	}
	if (code || r.op >= OP__NR || !r.id)
		abort();
	if ((r.op == OP_RUN || r.op == OP_CREATE) && (r.wargc < 5 || r.wargv[r.wargc]))
		abort();
	if (r.op == OP_RUN && (!r.cmd.argc || !r.cmd.argv[0] || r.cmd.argv[r.cmd.argc]))
		abort();
	if (r.data) {
		json_t *b = api_b64(r.data, r.data_len);
		uint8_t *back;
		size_t len;

		if (!b || api_unb64(b, &back, &len) || len != r.data_len ||
		    memcmp(back, r.data, len))
			abort();
		free(back);
		json_decref(b);
	}
	check_line(api_ok(r.id, json_pack("{s:s}", "op", api_op_name(r.op))));
	check_line(api_event(r.id, "stdout", NULL));
	api_req_free(&r);
	return 0;
}
