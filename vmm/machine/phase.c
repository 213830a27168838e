/*
 * phase: marks of the cold path's steps (phase.h).
 */
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

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
	[PH_IMAGES] = "images",
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
	if (log) {
		for (i = 0; i < PH_NR; i++)
			log->us[i] = -1;
		for (i = 0; i < PH_CPU_NR; i++)
			log->cpu_us[i] = -1;
	}
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

/* This process's CPU time so far (a clock_gettime the seccomp filters allow). */
static int64_t process_cpu_us(void)
{
	struct timespec ts;

	if (clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts))
		return -1;
	return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

void phase_mark(enum phase p)
{
	int c = p == PH_SUP_GO ? PH_CPU_SUPERVISOR : p == PH_FIRST_RUN ? PH_CPU_VM : -1;

	phase_set(p, (int64_t)(now_us() - base));
	if (cur && c >= 0)
		__atomic_store_n(&cur->cpu_us[c], process_cpu_us(), __ATOMIC_RELAXED);
}

const char *phase_name(enum phase p)
{
	return (unsigned)p < PH_NR ? names[p] : "?";
}

const struct phase_log *phase_current(void)
{
	return cur;
}

static void json_value(FILE *f, bool comma, const char *name, int64_t v)
{
	if (v >= 0)
		fprintf(f, "%s\"%s\":%lld", comma ? "," : "", name, (long long)v);
	else
		fprintf(f, "%s\"%s\":null", comma ? "," : "", name);
}

void phase_json(FILE *f, const struct phase_log *log)
{
	static const char *const cpu_names[PH_CPU_NR] = { "supervisor", "vm" };
	int i;

	fputs("\"phases_us\":{", f);
	for (i = 0; i < PH_NR; i++)
		json_value(f, i, names[i], log ? log->us[i] : -1);
	fputs("},\"cpu_us\":{", f);
	for (i = 0; i < PH_CPU_NR; i++)
		json_value(f, i, cpu_names[i], log ? log->cpu_us[i] : -1);
	fputc('}', f);
}

void phase_import(struct phase_log *dst, const struct phase_log *src, int64_t elapsed_us)
{
	int i;

	for (i = 0; i < PH_NR; i++) {
		int64_t v = src->us[i];

		dst->us[i] = v >= 0 && v <= elapsed_us ? v : -1;
	}
	for (i = 0; i < PH_CPU_NR; i++) {
		int64_t v = src->cpu_us[i];

		dst->cpu_us[i] = v >= 0 && v / PHASE_MAX_CPUS <= elapsed_us ? v : -1;
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
