/*
 * fuzz_api: libFuzzer target for husk serve's request parser (serve/api.c),
 * which sees every byte a client of the daemon sends.
 *
 * The input is one request line. Checks: a parse either fails with an
 * error code and a message, or yields a request whose fields are
 * consistent (a known op; run/create with a NULL-terminated worker command
 * line that husk run's parser accepted; decoded data no longer than its
 * base64); every answer builder makes one line of valid JSON out of what
 * was parsed; base64 data round-trips; the check of a request's egress
 * rules against what a client may open either passes or refuses with
 * -EACCES and a reason, for a client and for an admin's strict worker;
 * nothing leaks.
 */
#include <errno.h>
#include <stdint.h>
#include <sys/socket.h>
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

/* A fake host: its one address is 192.0.2.10. */
static int fake_is_host(int family, const void *addr)
{
	static const uint8_t h4[4] = { 192, 0, 2, 10 };

	return family == AF_INET && !memcmp(addr, h4, 4);
}

static void check_rules(const struct api_req *r)
{
	static const struct api_net_limits lim = { NULL, 0, fake_is_host };

	for (int client = 0; client < 2; client++) {
		int err = api_check_rules(r, &lim, client);

		if (err && (err != -EACCES || !husk_lasterr()[0]))
			abort();
	}
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
	check_rules(&r);
	check_line(api_ok(r.id, json_pack("{s:s}", "op", api_op_name(r.op))));
	check_line(api_event(r.id, "stdout", NULL));
	api_req_free(&r);
	return 0;
}
