/*
 * phase: marks of the cold path's steps (phase.h).
 */
#include <stdlib.h>
#include <string.h>

#include "machine/phase.h"
#include "lib/util.h"

static struct phase_log *cur;
static uint64_t base;

static const char *const names[PH_NR] = {
	[PH_EXEC] = "exec",
	[PH_OPTIONS] = "options",
	[PH_SUP_PREPARE] = "sup_prepare",
	[PH_SUP_NET] = "sup_net",
	[PH_SUP_CGROUP] = "sup_cgroup",
	[PH_SUP_JAIL] = "sup_jail",
	[PH_SUP_DNS] = "sup_dns",
	[PH_SUP_FORK] = "sup_fork",
	[PH_SUP_GO] = "sup_go",
	[PH_KVM_OPEN] = "kvm_open",
	[PH_VM_CREATE] = "vm_create",
	[PH_MEMORY] = "memory",
	[PH_DEVICES] = "devices",
	[PH_LOAD] = "load",
	[PH_VCPUS] = "vcpus",
	[PH_RESTORE] = "restore",
	[PH_JAIL] = "jail",
	[PH_THREADS] = "threads",
	[PH_SECCOMP] = "seccomp",
	[PH_FIRST_RUN] = "first_kvm_run",
};

void phase_init(struct phase_log *log, uint64_t start_us)
{
	int i;

	cur = log;
	base = start_us;
	if (log)
		for (i = 0; i < PH_NR; i++)
			log->us[i] = -1;
}

void phase_move(struct phase_log *log)
{
	if (cur && log && log != cur)
		*log = *cur;
	cur = log;
}

void phase_set(enum phase p, int64_t us)
{
	if (cur && (unsigned)p < PH_NR)
		__atomic_store_n(&cur->us[p], us < 0 ? -1 : us, __ATOMIC_RELAXED);
}

void phase_mark(enum phase p)
{
	phase_set(p, (int64_t)(now_us() - base));
}

const char *phase_name(enum phase p)
{
	return (unsigned)p < PH_NR ? names[p] : "?";
}

const struct phase_log *phase_current(void)
{
	return cur;
}

void phase_json(FILE *f, const struct phase_log *log)
{
	int i;

	fputs("\"phases_us\":{", f);
	for (i = 0; i < PH_NR; i++) {
		int64_t v = log ? log->us[i] : -1;

		if (v >= 0)
			fprintf(f, "%s\"%s\":%lld", i ? "," : "", names[i], (long long)v);
		else
			fprintf(f, "%s\"%s\":null", i ? "," : "", names[i]);
	}
	fputc('}', f);
}

void phase_import(struct phase_log *dst, const struct phase_log *src, int64_t elapsed_us)
{
	int i;

	for (i = 0; i < PH_NR; i++) {
		int64_t v = src->us[i];

		dst->us[i] = v >= 0 && v <= elapsed_us ? v : -1;
	}
}

int64_t phase_exec_us(const char *spawn_env, uint64_t now)
{
	uint64_t spawn;

	if (!spawn_env || parse_u64(spawn_env, 1, UINT64_MAX, &spawn) ||
	    spawn > now || now - spawn > 10000000)
		return -1;
	return (int64_t)(now - spawn);
}
