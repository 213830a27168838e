/*
 * run_record: the result of `husk run` -- what the supervisor takes from
 * the VM process's report, and the JSON record it prints.
 *
 * The report comes from a process the guest may have taken over, so every
 * field is checked on the way in (run_report_import). The record's shape is
 * versioned by "schema" and fixed by a golden-file unit test; see
 * docs/cli.md for every field.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>

#include "sandbox/cgroup.h"
#include "net/egress.h"
#include "lib/json.h"
#include "run/run_int.h"

/* Copy a NUL-terminated string out of a fixed array that may lack its NUL. */
static void copy_str(char *dst, size_t cap, const char *src, size_t src_cap)
{
	size_t n = strnlen(src, src_cap);

	if (n >= cap)
		n = cap - 1;
	memcpy(dst, src, n);
	dst[n] = '\0';
}

static int64_t timing(int64_t t, int64_t elapsed)
{
	return t >= 0 && t <= elapsed ? t : -1;
}

void run_report_import(struct run_result *r, const struct run_vm_report *v,
		       int64_t elapsed)
{
	r->job_started = v->job_started != 0;
	r->job_exited = v->job_exited != 0 && r->job_started;
	r->timed_out = v->timed_out != 0;
	r->jailed = v->jailed != 0;
	r->stdout_open_line = v->stdout_open_line != 0;
	r->job_code = v->job_code <= 255 ? (int)v->job_code : 0;
	r->job_signal = v->job_signal <= 64 ? (int)v->job_signal : 0;
	if (r->job_exited && (v->job_code > 255 || v->job_signal > 64)) {
		/* Nothing the guest can send gets here: the report itself is bad. */
		r->job_exited = false;
		snprintf(r->error, sizeof(r->error), "the VM process reported an impossible "
			 "exit status");
	}
	r->user_us = v->user_us;
	r->sys_us = v->sys_us;
	r->maxrss_kib = v->maxrss_kib;
	r->stdout_bytes = v->stdout_bytes;
	r->stderr_bytes = v->stderr_bytes;
	r->stdout_dropped = v->stdout_dropped <= v->stdout_bytes ? v->stdout_dropped : v->stdout_bytes;
	r->stderr_dropped = v->stderr_dropped <= v->stderr_bytes ? v->stderr_dropped : v->stderr_bytes;
	r->reason = v->reason < VM_STOP__MAX ? (enum vm_stop_reason)v->reason :
		    VM_STOP_HOST_ERROR;
	r->signal = v->signal < 65 ? (int)v->signal : 0;
	if (!r->error[0])
		copy_str(r->error, sizeof(r->error), v->error, sizeof(v->error));
	copy_str(r->console_tail, sizeof(r->console_tail), v->console_tail,
		 sizeof(v->console_tail));
	r->t_first_run = timing(v->t_first_run, elapsed);
	r->t_init = timing(v->t_init, elapsed);
	r->t_job_start = timing(v->t_job_start, elapsed);
	r->t_job_end = timing(v->t_job_end, elapsed);
	r->t_exit = timing(v->t_exit, elapsed);
	r->t_restore_vm = timing(v->t_restored, elapsed);
	/* The guest's own clock: an hour past its boot is no step of a start. */
	for (int i = 0; i < IS_NR; i++)
		r->guest_steps[i] = v->guest_steps[i] >= 0 &&
				    v->guest_steps[i] <= 3600 * 1000000ll ? v->guest_steps[i] : -1;
}

/* "cgroup": the VM process's group on the host and what it used. */
static void print_cgroup(FILE *f, const struct run_result *r)
{
	if (!r->cg_on) {
		fputs(",\"cgroup\":null", f);
		return;
	}
	fprintf(f, ",\"cgroup\":{\"mode\":\"%s\"", r->cg_mode);
	if (r->cg_have & CGROUP_USAGE_CPU)
		fprintf(f, ",\"cpu_us\":%llu", (unsigned long long)r->cg_cpu_us);
	if (r->cg_have & CGROUP_USAGE_THROTTLED)
		fprintf(f, ",\"cpu_throttled_us\":%llu", (unsigned long long)r->cg_throttled_us);
	if (r->cg_have & CGROUP_USAGE_MEM_PEAK)
		fprintf(f, ",\"memory_peak_bytes\":%llu", (unsigned long long)r->cg_mem_peak);
	if (r->cg_have & CGROUP_USAGE_OOM)
		fprintf(f, ",\"oom_kills\":%llu", (unsigned long long)r->cg_oom_kills);
	fputc('}', f);
}

/* "denied_destinations": the first distinct ones the filter refused. */
static void print_denied(FILE *f, const struct run_result *r)
{
	char addr[INET6_ADDRSTRLEN];
	unsigned i;

	fputs(",\"denied_destinations\":[", f);
	for (i = 0; i < r->nr_denied; i++) {
		const struct egress_denied_dst *d = &r->denied[i];
		const char *proto = d->proto == IPPROTO_TCP ? "tcp" : d->proto == IPPROTO_UDP ?
				    "udp" : d->proto == IPPROTO_ICMP || d->proto == IPPROTO_ICMPV6 ?
				    "icmp" : "other";

		if (!inet_ntop(d->family == 6 ? AF_INET6 : AF_INET, d->addr, addr, sizeof(addr)))
			snprintf(addr, sizeof(addr), "?");
		fprintf(f, "%s{\"address\":\"%s\",\"protocol\":\"%s\",\"port\":%u,"
			"\"reason\":\"%s\"}", i ? "," : "", addr, proto, d->port,
			egress_reason_name(d->reason));
	}
	fputc(']', f);
}

/* The DNS proxy's part of the network section. */
static void print_dns(FILE *f, const struct run_result *r)
{
	unsigned i;

	if (!r->dns_on) {
		fputs(",\"dns\":null", f);
		return;
	}
	fprintf(f, ",\"dns\":{\"queries\":%llu,\"allowed\":%llu,\"refused\":%llu,"
		"\"failed\":%llu,\"malformed\":%llu,\"foreign\":%llu,"
		"\"addresses_opened\":%llu,\"quota_full\":%llu,\"helper_error\":",
		(unsigned long long)r->dns.queries, (unsigned long long)r->dns.allowed,
		(unsigned long long)r->dns.refused, (unsigned long long)r->dns.failed,
		(unsigned long long)r->dns.malformed, (unsigned long long)r->dns.foreign,
		(unsigned long long)r->dns_learn.opened,
		(unsigned long long)r->dns_learn.quota_full);
	if (r->dns_fault[0])
		json_put_string(f, r->dns_fault);
	else
		fputs("null", f);
	fputs(",\"refused_names\":[", f);
	for (i = 0; i < r->nr_dns_refused; i++) {
		if (i)
			fputc(',', f);
		json_put_string(f, r->dns_refused[i]);
	}
	fputs("]}", f);
}

void run_record_json(FILE *f, const struct run_result *r)
{
	fprintf(f, "{\"schema\":\"%s\",\"exit_code\":%d,\"start\":\"%s\","
		"\"job\":{\"started\":%s,\"exited\":%s,",
		RUN_RECORD_SCHEMA, r->exit_code, r->from_template ? "template" : "cold",
		r->job_started ? "true" : "false", r->job_exited ? "true" : "false");
	if (r->job_exited && !r->job_signal)
		fprintf(f, "\"exit\":%d,\"signal\":null,", r->job_code);
	else if (r->job_exited)
		fprintf(f, "\"exit\":null,\"signal\":%d,", r->job_signal);
	else
		fprintf(f, "\"exit\":null,\"signal\":null,");
	fprintf(f, "\"timed_out\":%s,\"cpu_user_us\":%llu,\"cpu_sys_us\":%llu,"
		"\"peak_rss_kib\":%llu},", r->timed_out ? "true" : "false",
		(unsigned long long)r->user_us, (unsigned long long)r->sys_us,
		(unsigned long long)r->maxrss_kib);
	fprintf(f, "\"vm_stop\":\"%s\",\"error\":", vm_reason_name(r->reason));
	if (r->error[0])
		json_put_string(f, r->error);
	else
		fputs("null", f);
	fputs(",\"console_tail\":", f);
	if (r->console_tail[0])
		json_put_string(f, r->console_tail);
	else
		fputs("null", f);
	fprintf(f, ",\"bytes\":{\"stdout\":%llu,\"stderr\":%llu,\"stdout_dropped\":%llu,"
		"\"stderr_dropped\":%llu},\"files_committed\":%s,"
		"\"start_epoch_us\":%llu,\"timings_us\":{\"process_start\":0,"
		"\"first_kvm_run\":%lld,\"init\":%lld,\"job_start\":%lld,\"job_end\":%lld,"
		"\"vm_exit\":%lld,\"teardown\":%lld,\"template_checked\":%lld,"
		"\"vm_restored\":%lld}",
		(unsigned long long)r->stdout_bytes, (unsigned long long)r->stderr_bytes,
		(unsigned long long)r->stdout_dropped, (unsigned long long)r->stderr_dropped,
		r->files_committed ? "true" : "false", (unsigned long long)r->start_epoch_us,
		(long long)r->t_first_run, (long long)r->t_init, (long long)r->t_job_start,
		(long long)r->t_job_end, (long long)r->t_exit, (long long)r->t_teardown,
		(long long)(r->from_template ? r->t_restore_open : -1),
		(long long)(r->from_template ? r->t_restore_vm : -1));
	fputc(',', f);
	phase_json(f, &r->phases);
	fputs(",\"guest_us\":{", f);
	for (int i = 0; i < IS_NR; i++) {
		if (r->guest_steps[i] >= 0)
			fprintf(f, "%s\"%s\":%lld", i ? "," : "", proto_step_name(i),
				(long long)r->guest_steps[i]);
		else
			fprintf(f, "%s\"%s\":null", i ? "," : "", proto_step_name(i));
	}
	fputc('}', f);
	fprintf(f, ",\"jail\":{\"confined\":%s,\"uid\":", r->jailed ? "true" : "false");
	if (r->jailed)
		fprintf(f, "%u}", r->jail_uid);
	else
		fputs("null}", f);
	print_cgroup(f, r);
	if (r->net) {
		const struct egress_counters *c = &r->net_ctr;
		unsigned i;

		/* Counters are null when the filter could not be read. */
		fputs(",\"network\":{\"mode\":\"egress\",\"anomaly\":", f);
		if (r->anomaly[0])
			json_put_string(f, r->anomaly);
		else
			fputs("null", f);
		if (r->net_counters) {
			fprintf(f, ",\"packets_out\":%llu,\"bytes_out\":%llu,\"drops\":%llu,"
				"\"drops_by_reason\":{", (unsigned long long)c->packets,
				(unsigned long long)c->bytes, (unsigned long long)c->dropped);
			for (i = 0; i < EGRESS_DROP__MAX; i++)
				fprintf(f, "%s\"%s\":%llu", i ? "," : "", egress_reason_name(i),
					(unsigned long long)c->drops[i]);
			fprintf(f, "},\"packets_in\":%llu,\"bytes_in\":%llu",
				(unsigned long long)c->in_packets, (unsigned long long)c->in_bytes);
		} else {
			fputs(",\"packets_out\":null,\"bytes_out\":null,\"drops\":null,"
			      "\"drops_by_reason\":null,\"packets_in\":null,\"bytes_in\":null", f);
		}
		print_denied(f, r);
		print_dns(f, r);
		/* Items that run_policy.c wrote with jansson: JSON already. */
		fprintf(f, ",\"policy\":{\"changes\":%u,\"log\":[%s],\"log_full\":%s}",
			r->policy_changes, r->policy_log, r->policy_log_full ? "true" : "false");
		fputc('}', f);
	}
	fputs("}\n", f);
}
