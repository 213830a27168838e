#!/usr/bin/env python3
"""Tabulate tools/bench-phases' raw lines: medians and p90s of every phase.

phases-report.py RAW [JSON_OUT] [COMPARE_JSON] [VMLINUX]
"""
import json
import re
import subprocess
import sys

HOST_BOOT = ["options", "kvm_open", "vm_create", "memory", "devices", "images", "load",
             "vcpus", "threads", "seccomp", "first_kvm_run"]
HOST_RUN = ["options", "sup_prepare", "sup_net", "sup_cgroup", "sup_jail", "sup_dns",
            "sup_fork", "sup_go", "kvm_open", "vm_create", "memory", "devices", "images",
            "load", "vcpus", "jail", "threads", "seccomp", "first_kvm_run"]
GUEST = ["kernel", "pid1_setup", "connected", "workspace", "net_prepare", "cgroup",
         "job_init", "hello", "job_received", "job_setup", "files_in", "job_started"]
INITCALL = re.compile(r"initcall (\S+?)(\+0x[0-9a-f]+/0x[0-9a-f]+)?( \[\S+\])? returned (-?\d+) after (\d+) usecs")


def parse(path):
    runs = {"boot": {}, "run": {}}
    for line in open(path, errors="replace"):
        line = line.rstrip("\r\n")
        if line == "PHASES-RAW aslr off":
            runs["aslr"] = "off"
            continue
        m = re.match(r"PHASES-RAW (boot|run) (\d+) (\w+) ?(.*)$", line)
        if not m:
            continue
        kind, i, what, rest = m.group(1), int(m.group(2)), m.group(3), m.group(4)
        r = runs[kind].setdefault(i, {"kmsg": []})
        if what == "timer":
            r["timer"] = dict(kv.split("=", 1) for kv in rest.split() if "=" in kv)
        elif what == "json":
            try:
                r["record"] = json.loads(rest)
            except ValueError:
                r["error"] = "no JSON record"
        elif what == "kmsg":
            ts, _, text = rest.partition(" ")
            if ts.isdigit():
                r["kmsg"].append((int(ts), text))
        elif what == "error":
            r["error"] = rest
    return runs


def steps(marks, order):
    """Durations between consecutive reached marks, in time order (ms)."""
    got = sorted(((marks.get(k), k) for k in order if marks.get(k) is not None))
    out, prev = {}, 0
    for t, k in got:
        out[k] = (t - prev) / 1000.0
        prev = t
    return out


def symbols(vmlinux):
    """Address -> function name from the kernel's symbol table: a kernel
    without kallsyms prints initcalls as bare addresses."""
    names = {}
    if not vmlinux:
        return names
    try:
        out = subprocess.run(["nm", vmlinux], capture_output=True, text=True).stdout
    except OSError:
        return names
    for line in out.splitlines():
        f = line.split()
        if len(f) == 3 and f[1] in "tT":
            names["0x" + f[0].lstrip("0")] = f[2]
    return names


def kernel_phases(kmsg, names):
    calls = [t for t, x in kmsg if x.startswith("calling  ")]
    rets = []
    per = {}
    run_init = None
    for t, x in kmsg:
        m = INITCALL.match(x)
        if m:
            rets.append(t)
            fn = names.get(m.group(1), m.group(1))
            per[fn] = per.get(fn, 0) + int(m.group(5)) / 1000.0
        if run_init is None and re.match(r"Run \S+ as init process", x):
            run_init = t
    if not calls or not rets or run_init is None:
        return None, per
    first, last = calls[0], max(rets)
    ph = {
        "before_initcalls": first / 1000.0,
        "initcalls": (last - first) / 1000.0,
        "after_initcalls": (run_init - last) / 1000.0,
        "kernel_to_init": run_init / 1000.0,
        "initcalls_timed_sum": sum(per.values()),
    }
    return ph, per


def host_steps(rec, order):
    """husk's own steps of one record: exec, then each step's duration."""
    ph = rec.get("phases_us", {})
    one = {"host." + k: v for k, v in steps(ph, order).items()}
    if ph.get("exec") is not None:
        one["host.exec"] = ph["exec"] / 1000.0
    # CPU time to the first KVM_RUN: each process's own, and their sum
    # (exec included: the supervisor's, or husk boot's, counts from its fork).
    cpu = rec.get("cpu_us", {})
    total = 0.0
    for k in ("supervisor", "vm"):
        if cpu.get(k) is not None:
            one["cpu." + k] = cpu[k] / 1000.0
            total += cpu[k] / 1000.0
    if cpu.get("vm") is not None:
        one["cpu.to_first_kvm_run"] = total
    return one


def summarise(runs, names):
    s = {"boot": {}, "run": {}}
    for i, r in sorted(runs["boot"].items()):
        rec = r.get("record")
        if not rec:
            continue
        one = host_steps(rec, HOST_BOOT)
        t = rec.get("timings_us", {})
        if t.get("init") is not None and t.get("first_kvm_run") is not None:
            one["guest.first_kvm_run_to_init"] = (t["init"] - t["first_kvm_run"]) / 1000.0
            one["total.init"] = t["init"] / 1000.0
            if "host.exec" in one:
                one["spawn.init"] = one["host.exec"] + one["total.init"]
        kp, per = kernel_phases(r["kmsg"], names)
        for k, v in (kp or {}).items():
            one["kernel." + k] = v
        for k, v in per.items():
            one["initcall." + k] = v
        s["boot"][i] = one
    for i, r in sorted(runs["run"].items()):
        rec = r.get("record")
        if not rec or rec.get("exit_code") != 0:
            continue
        one = host_steps(rec, HOST_RUN)
        g = rec.get("guest_us", {})
        for k, v in steps(g, GUEST).items():
            one["guest." + k] = v
        t = rec.get("timings_us", {})
        prev = t.get("first_kvm_run")
        for k in ("init", "job_start", "job_end", "vm_exit", "teardown"):
            if t.get(k) is not None and prev is not None:
                one["after." + k] = (t[k] - prev) / 1000.0
                prev = t[k]
        for k in ("first_kvm_run", "job_start", "vm_exit", "teardown"):
            if t.get(k) is not None:
                one["total." + k] = t[k] / 1000.0
        ex = r.get("timer", {}).get("exit_us", "")
        if ex.isdigit():
            one["spawn.exit"] = int(ex) / 1000.0
        s["run"][i] = one
    return s


def stat(vals):
    v = sorted(vals)
    if not v:
        return None, None
    med = v[(len(v) - 1) // 2] if len(v) % 2 else (v[len(v) // 2 - 1] + v[len(v) // 2]) / 2
    p90 = v[min(len(v) - 1, int(len(v) * 0.9 + 0.999) - 1)]
    return med, p90


def table(title, per_run, keys, prev=None):
    print()
    print(title)
    hdr = "%-38s %10s %10s" % ("phase (ms)", "median", "p90")
    if prev is not None:
        hdr += " %10s %7s" % ("before", "ratio")
    print(hdr)
    for k in keys:
        med, p90 = stat([r[k] for r in per_run.values() if k in r])
        if med is None:
            continue
        line = "%-38s %10.2f %10.2f" % (k, med, p90)
        if prev is not None and k in prev:
            line += " %10.2f %7.2f" % (prev[k], med / prev[k] if prev[k] else float("nan"))
        print(line)


def end_to_end(s):
    """husk run -- true from its spawn to its exit, over husk boot's time from
    its spawn to init: both runs of a pair came one after the other."""
    boot = [r["spawn.init"] for r in s["boot"].values() if "spawn.init" in r]
    run = [r["spawn.exit"] for r in s["run"].values() if "spawn.exit" in r]
    pairs = [s["run"][i]["spawn.exit"] / s["boot"][i]["spawn.init"] for i in s["run"]
             if i in s["boot"] and "spawn.exit" in s["run"][i] and "spawn.init" in s["boot"][i]]
    if not boot or not run:
        return
    mb, mr = stat(boot)[0], stat(run)[0]
    print()
    print("husk run -- true, spawn to exit, over husk boot, spawn to init")
    print("  medians: %.1f over %.1f ms = %.2fx" % (mr, mb, mr / mb))
    if pairs:
        print("  per interleaved pair: median %.2fx (%.2f-%.2fx, %d pairs)" %
              (stat(pairs)[0], min(pairs), max(pairs), len(pairs)))


def medians(per_run):
    keys = sorted({k for r in per_run.values() for k in r})
    return {k: stat([r[k] for r in per_run.values() if k in r])[0] for k in keys}


def main():
    raw = parse(sys.argv[1])
    aslr = raw.pop("aslr", "on")
    out = sys.argv[2] if len(sys.argv) > 2 and sys.argv[2] else None
    cmp_path = sys.argv[3] if len(sys.argv) > 3 and sys.argv[3] else None
    vmlinux = sys.argv[4] if len(sys.argv) > 4 else None
    s = summarise(raw, symbols(vmlinux))
    prev = None
    print("address randomization in the test host: %s" % aslr)
    if cmp_path:
        old = json.load(open(cmp_path))
        prev = old.get("medians", {})
        if old.get("aslr", "on") != aslr:
            print("warning: %s was measured with address randomization %s: the emulator's "
                  "translation cost differs" % (cmp_path, old.get("aslr", "on")))
    nb, nr = len(s["boot"]), len(s["run"])
    failed = [i for i, r in raw["run"].items() if i not in s["run"]]
    pb = prev.get("boot") if prev else None
    pr = prev.get("run") if prev else None
    table("husk boot, vmlinux + mini-init: husk's steps (exec to first KVM_RUN), %d runs" % nb,
          s["boot"], ["host.exec"] + ["host." + k for k in HOST_BOOT], pb)
    table("husk boot: CPU time used to the first KVM_RUN", s["boot"],
          ["cpu.vm", "cpu.to_first_kvm_run"], pb)
    table("husk boot: the guest kernel (its own clock, initcall_debug)", s["boot"],
          ["kernel.before_initcalls", "kernel.initcalls", "kernel.after_initcalls",
           "kernel.kernel_to_init", "guest.first_kvm_run_to_init", "total.init"], pb)
    m = medians({i: {k: v for k, v in r.items() if k.startswith("initcall.")}
                 for i, r in s["boot"].items()})
    top = sorted(m, key=lambda k: -m[k])[:15]
    table("husk boot: the slowest initcalls", s["boot"], top, pb)
    table("husk run -- true: husk's steps (supervisor, then the VM process), %d runs" % nr,
          s["run"], ["host.exec"] + ["host." + k for k in HOST_RUN], pr)
    table("husk run -- true: CPU time used to the first KVM_RUN (supervisor to its go)",
          s["run"], ["cpu.supervisor", "cpu.vm", "cpu.to_first_kvm_run"], pr)
    table("husk run: guest-init's steps (guest clock; kernel = its boot until init)",
          s["run"], ["guest." + k for k in GUEST], pr)
    table("husk run: as the host saw it", s["run"],
          ["after.init", "after.job_start", "after.job_end", "after.vm_exit", "after.teardown",
           "total.first_kvm_run", "total.job_start", "total.vm_exit", "total.teardown"], pr)
    end_to_end(s)
    if failed:
        print("\nruns of husk run that failed: %s" % ", ".join(map(str, sorted(failed))))
        for i in sorted(failed):
            print("  run %d: %s" % (i, raw["run"][i].get("error", "?")))
    if out:
        with open(out, "w") as f:
            json.dump({"aslr": aslr,
                       "raw": {k: {str(i): {kk: vv for kk, vv in r.items()}
                                   for i, r in v.items()} for k, v in raw.items()},
                       "runs": s,
                       "medians": {"boot": medians(s["boot"]), "run": medians(s["run"])}},
                      f, indent=1)
        print("\nraw numbers in %s" % out)
    return 0 if nb and nr else 1


if __name__ == "__main__":
    sys.exit(main())
