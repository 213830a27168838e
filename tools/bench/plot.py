#!/usr/bin/env python3
"""Draw the boot benchmarks as SVG with gnuplot.

plot.py boot RAW OUT.svg     each VMM's time-to-init distribution
                             (tools/bench-boot's BOOT-RAW lines)
plot.py phases JSON OUT.svg  the median of each phase of a cold start,
                             stacked in the order they happen
                             (tools/bench-phases --json)
"""
import json
import os
import re
import subprocess
import sys
import tempfile


def gnuplot(script, data):
    with tempfile.TemporaryDirectory() as d:
        paths = []
        for i, rows in enumerate(data):
            p = os.path.join(d, "d%d" % i)
            with open(p, "w") as f:
                f.write("".join(r + "\n" for r in rows))
            paths.append(p)
        s = script.format(*paths)
        r = subprocess.run(["gnuplot"], input=s, text=True, capture_output=True)
        if r.returncode:
            sys.exit("plot: gnuplot failed: " + r.stderr.strip())


def boot(raw, out):
    runs = {}
    for line in open(raw, errors="replace"):
        m = re.match(r"BOOT-RAW (\S+) .*marker_us=(\d+)", line)
        if m:
            runs.setdefault(m.group(1), []).append(int(m.group(2)) / 1000.0)
    if not runs:
        sys.exit("plot: no boot figures in " + raw)
    names = list(runs)
    pts, meds = [], []
    for i, n in enumerate(names):
        v = sorted(runs[n])
        for k, x in enumerate(v):
            # spread the points of one VMM a little so equal values show
            pts.append("%f %f" % (i + 1 + (k % 7 - 3) * 0.03, x))
        meds.append("%d %f" % (i + 1, v[(len(v) - 1) // 2]))
    tics = ", ".join('"%s" %d' % (n, i + 1) for i, n in enumerate(names))
    script = """set terminal svg size 900,480 dynamic noenhanced font "sans,11"
set output "%s"
set title "time from VMM spawn to the guest's init (ms), each run and the median"
set xtics (%s) rotate by -20
set xrange [0.4:%f]
set yrange [0:*]
set grid ytics
set key below
plot "{0}" using 1:2 with points pt 6 ps 0.6 lc rgb "#4477aa" title "runs", \\
     "{1}" using 1:2 with points pt 9 ps 1.6 lc rgb "#cc3311" title "median"
""" % (out, tics, len(names) + 0.6)
    gnuplot(script, [pts, meds])


def phases(path, out):
    med = json.load(open(path)).get("medians", {}).get("run", {})
    order = [k for k in med if k.startswith("host.") and k != "host.exec"]
    host = sum(med[k] for k in order)
    guest = [(k[6:], med[k]) for k in med if k.startswith("guest.")]
    rows = [("husk: exec", med.get("host.exec", 0.0)), ("husk: to first KVM_RUN", host)]
    for k in ("kernel", "pid1_setup", "connected", "workspace", "net_prepare", "cgroup",
              "job_init", "hello", "job_received", "job_setup", "files_in", "job_started"):
        for n, v in guest:
            if n == k:
                rows.append(("guest: " + ("kernel boot" if n == "kernel" else n), v))
    for k in ("after.job_end", "after.vm_exit", "after.teardown"):
        if k in med:
            rows.append(("host: " + k[6:], med[k]))
    if len(rows) < 3:
        sys.exit("plot: no husk run phases in " + path)
    data, start = [], 0.0
    for i, (n, v) in enumerate(rows):
        data.append('%d %f %f "%s"' % (len(rows) - i, start, v, n))
        start += v
    script = """set terminal svg size 900,%d dynamic noenhanced font "sans,11"
set output "%s"
set title "husk run -- true, cold: median of each phase (ms since husk's exec)"
set yrange [0:%d]
set xrange [0:*]
set grid xtics
unset key
set ytics ("" 0)
plot "{0}" using ($2+$3/2):1:($3/2):(0.35):yticlabels(4) with boxxyerror fs solid 0.6 lc rgb "#4477aa"
""" % (120 + 24 * len(rows), out, len(rows) + 1)
    gnuplot(script, [data])


if __name__ == "__main__":
    if len(sys.argv) != 4 or sys.argv[1] not in ("boot", "phases"):
        sys.exit(__doc__)
    {"boot": boot, "phases": phases}[sys.argv[1]](sys.argv[2], sys.argv[3])
