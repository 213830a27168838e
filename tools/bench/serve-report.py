#!/usr/bin/env python3
"""Tabulate tools/bench-serve's samples: jobs/s, start latency p50/p99 and
ratios of husk serve against a loop of husk run processes.

serve-report.py RAW [--json]
RAW holds the test host's output, whose "BENCH-SERVE-JSON" line is read, or
a document an earlier --json printed. --json prints one JSON document
(figures, ratios and every sample) instead of the tables.
"""
import json
import math
import sys

LOOP_COLD, LOOP_TPL = "husk run", "husk run --template"
SV_COLD, SV_TPL, SV_POOL = "serve run cold", "serve run template", "serve run pool"
SV_WARM, SV_EXEC = "serve run pool warm", "serve exec in a pooled session"
ROWS = [(LOOP_COLD, "husk run -- true (cold)"),
        (LOOP_TPL, "husk run --template base"),
        (SV_COLD, "serve: run, cold"),
        (SV_TPL, "serve: run, template, no pool"),
        (SV_POOL, "serve: run, pool"),
        (SV_WARM, "serve: run, pool ready before each"),
        (SV_EXEC, "serve: exec in a pooled session")]
MARKS = [("husk_start", "husk up"), ("first_kvm_run", "1st KVM_RUN"),
         ("vm_restored", "restored"), ("init", "HELLO"), ("job_start", "job/session")]


def pct(vals, q):
    """Nearest rank: with fewer than 100 samples p99 is the largest."""
    v = sorted(x for x in vals if x is not None)
    if not v:
        return None
    return v[max(0, min(len(v), math.ceil(q * len(v))) - 1)]


def fig(m, key):
    ok = [s for s in m["samples"] if s and s.get("ok")]
    vals = [s.get(key) for s in ok]
    return {"p50": pct(vals, 0.5), "p99": pct(vals, 0.99), "n": sum(v is not None for v in vals)}


def summary(m):
    kinds = {}
    for s in m["samples"]:
        if s and s.get("ok"):
            kinds[s.get("kind") or "?"] = kinds.get(s.get("kind") or "?", 0) + 1
    marks = {}
    for k, _ in MARKS:
        vals = [s.get("marks", {}).get(k) for s in m["samples"] if s and s.get("ok")]
        if any(v is not None for v in vals):
            marks[k] = pct(vals, 0.5)
    warm = m["mode"] in (SV_WARM,)
    return {"mode": m["mode"], "concurrency": m["concurrency"], "n": m["n"], "ok": m["ok"],
            "jobs_per_s": None if warm else m["jobs_per_s"], "wall_s": m["wall_s"],
            "start_ms": fig(m, "start"), "exit_ms": fig(m, "exit"), "done_ms": fig(m, "done"),
            "starts": kinds, "marks_p50_ms": marks,
            "errors": [s.get("error") for s in m["samples"] if s and not s.get("ok")][:3]}


def ratio(a, b):
    return a / b if a is not None and b else None


def main():
    raw, as_json = sys.argv[1], "--json" in sys.argv[2:]
    doc = None
    text = open(raw, errors="replace").read()
    if text.lstrip().startswith("{"):
        doc = json.loads(text)
    for line in text.splitlines():
        if line.startswith("BENCH-SERVE-JSON "):
            doc = json.loads(line[len("BENCH-SERVE-JSON "):])
    if doc is None:
        sys.exit("serve-report: no BENCH-SERVE-JSON line in %s" % raw)
    info, C = doc["info"], doc["info"]["concurrency"]
    S = {}
    for m in doc["modes"]:
        S[(m["mode"], m["concurrency"])] = summary(m)

    def get(mode, conc, what, q="p50"):
        s = S.get((mode, conc))
        if not s:
            return None
        if what == "jobs_per_s":
            return s["jobs_per_s"]
        return s[what][q]

    ratios = {
        "pool_start_p50_over_cold_husk_run": ratio(get(SV_WARM, 1, "start_ms"),
                                                   get(LOOP_COLD, 1, "start_ms")),
        "pool_start_p50_over_template_husk_run": ratio(get(SV_WARM, 1, "start_ms"),
                                                       get(LOOP_TPL, 1, "start_ms")),
        "pool_exit_p50_over_cold_husk_run": ratio(get(SV_WARM, 1, "exit_ms"),
                                                  get(LOOP_COLD, 1, "exit_ms")),
        "session_exec_start_p50_over_cold_husk_run": ratio(get(SV_EXEC, 1, "start_ms"),
                                                           get(LOOP_COLD, 1, "start_ms")),
    }
    for conc in sorted({1, C}):
        tag = "seq" if conc == 1 else "c%d" % conc
        for a, b, name in ((SV_COLD, LOOP_COLD, "cold"), (SV_TPL, LOOP_TPL, "template"),
                           (SV_POOL, LOOP_TPL, "pool_over_template_loop"),
                           (SV_POOL, LOOP_COLD, "pool_over_cold_loop")):
            ratios["jobs_per_s_%s_%s" % (name, tag)] = ratio(get(a, conc, "jobs_per_s"),
                                                             get(b, conc, "jobs_per_s"))
    if as_json:
        json.dump({"info": info, "figures": list(S.values()), "ratios": ratios,
                   "modes": doc["modes"]}, sys.stdout, indent=1)
        print()
        return

    def f(v, w=7, d=1):
        return ("%*.*f" % (w, d, v)) if v is not None else "%*s" % (w, "-")

    print()
    print("husk serve against a loop of husk run processes: `true` as the job, %d per mode,"
          % info["n"])
    print("1 client and %d at once; pool.base = %d; test host %s, %s vCPU, %s MiB; template"
          " made in %.1f s" % (C, info["pool"], info.get("uname", "?"), info.get("cpus", "?"),
                               info.get("mem_mib", "?"), info.get("template_create_s", 0)))
    print()
    print("%-36s %9s %9s   %s" % ("jobs/s", "1 client", "%d at once" % C, "ok, how they started"))
    for key, label in ROWS:
        if key == SV_WARM:
            continue
        s1, sc = S.get((key, 1)), S.get((key, C))
        if not s1 and not sc:
            continue
        starts = []
        for s in (s1, sc if C != 1 else None):
            if s:
                starts.append("%d/%d %s" % (s["ok"], s["n"], ", ".join(
                    "%s %d" % kv for kv in sorted(s["starts"].items()))))
        print("%-36s %9s %9s   %s" % (label, f(s1 and s1["jobs_per_s"], 9, 2),
                                     f(sc and sc["jobs_per_s"], 9, 2) if C != 1 else "",
                                     "; ".join(starts)))
    for conc in sorted({1, C}):
        print()
        print("%-46s %15s %15s %15s" % ("ms, " + ("1 client" if conc == 1 else
                                                  "%d at once" % conc), "start", "exit", "done"))
        print("%-46s %7s %7s %7s %7s %7s %7s" % ("", "p50", "p99", "p50", "p99", "p50", "p99"))
        for key, label in ROWS:
            s = S.get((key, conc))
            if not s:
                continue
            print("%-46s %s %s %s %s %s %s" % (label, f(s["start_ms"]["p50"]),
                                               f(s["start_ms"]["p99"]), f(s["exit_ms"]["p50"]),
                                               f(s["exit_ms"]["p99"]), f(s["done_ms"]["p50"]),
                                               f(s["done_ms"]["p99"])))
    print()
    print("where a start goes, 1 client, p50 ms after the spawn or the request "
          "(the record's timings)")
    print("%-36s" % "" + "".join("%13s" % label for _, label in MARKS))
    for key, label in ROWS[:4]:
        s = S.get((key, 1))
        if s:
            print("%-36s" % label + "".join("%13s" % f(s["marks_p50_ms"].get(k), 13)
                                             for k, _ in MARKS))
    print("""
husk up: the husk process (husk run, or the daemon's worker) started; 1st KVM_RUN,
restored (the template's state set), HELLO (guest-init's): the record's timings_us;
job/session: the job started (husk run), the session is up (serve: "started").

start: husk run: spawn -> the job's process started (record timings_us.job_start,
       guest-init's STARTED); serve run and exec: request sent -> the "started"
       event, guest-init's XSTARTED (the job's process exists, about to exec).
exit:  -> the job exited (husk run: record timings_us.job_end; serve: the "exit" event).
done:  husk run: -> the husk process exited; serve: -> the final line (record,
       sandbox gone). p99 is the nearest rank: the slowest sample below 100 jobs.
"pool, ready before each": every request sent once health showed K clones
       ready (pooled_ready: restored and warmed up) and nothing running.
       "serve: run, pool" sends jobs back to back: a request may take a clone
       still being restored ("start":"pool" all the same).""")
    print()
    print("ratios")
    rows = [("pooled start p50 / husk run (cold) start p50", "pool_start_p50_over_cold_husk_run"),
            ("pooled start p50 / husk run --template start p50",
             "pool_start_p50_over_template_husk_run"),
            ("pooled job exit p50 / husk run (cold) job exit p50",
             "pool_exit_p50_over_cold_husk_run"),
            ("session exec start p50 / husk run (cold) start p50",
             "session_exec_start_p50_over_cold_husk_run")]
    for conc in sorted({1, C}):
        tag, who = ("seq", "1 client") if conc == 1 else ("c%d" % conc, "%d at once" % conc)
        rows += [("jobs/s serve cold / husk run cold, %s" % who, "jobs_per_s_cold_" + tag),
                 ("jobs/s serve template / husk run --template, %s" % who,
                  "jobs_per_s_template_" + tag),
                 ("jobs/s serve pool / husk run --template, %s" % who,
                  "jobs_per_s_pool_over_template_loop_" + tag),
                 ("jobs/s serve pool / husk run cold, %s" % who,
                  "jobs_per_s_pool_over_cold_loop_" + tag)]
    for label, k in rows:
        print("  %-58s %s" % (label, f(ratios.get(k), 8, 3)))
    print()
    print("Goal: a pooled job starts in a few ms; the daemon sustains several times the")
    print("process loop's job rate. Figures only, not a test: these machines are noisy.")
    for s in S.values():
        if s["ok"] < s["n"]:
            print("%s (%d at once): %d of %d failed, e.g. %s" % (s["mode"], s["concurrency"],
                  s["n"] - s["ok"], s["n"], (s["errors"] or ["?"])[0]))
    if info.get("daemon_exit"):
        print("husk serve exited %s; its log ends:\n%s" % (info["daemon_exit"],
                                                          info.get("daemon_log_tail", "")))


main()
