#!/usr/bin/env python3
"""Name the samples of `husk boot --profile FILE`: where vCPU 0 was.

profile.py FILE VMLINUX [--from MS] [--to MS] [--top N]

Prints the functions vCPU 0 was found in most often, with their share of
the samples in the window (ms since husk started), and a timeline of the
most frequent function in each 100 ms, so a slow or stuck stretch of a
boot shows what the guest was doing there.
"""
import bisect
import subprocess
import sys


def symbols(vmlinux):
    out = subprocess.run(["nm", "-n", vmlinux], capture_output=True, text=True).stdout
    addrs, names = [], []
    for line in out.splitlines():
        f = line.split()
        if len(f) == 3 and f[1] in "tTwW":
            addrs.append(int(f[0], 16))
            names.append(f[2])
    return addrs, names


def name(addrs, names, rip):
    i = bisect.bisect_right(addrs, rip) - 1
    if i < 0 or rip < 0xffffffff80000000:
        return "user" if rip < 0x800000000000 else "?"
    return names[i]


def main(argv):
    if len(argv) < 3:
        sys.exit(__doc__)
    path, vmlinux = argv[1], argv[2]
    lo, hi, top = 0.0, float("inf"), 25
    i = 3
    while i < len(argv):
        if argv[i] == "--from":
            lo = float(argv[i + 1])
        elif argv[i] == "--to":
            hi = float(argv[i + 1])
        elif argv[i] == "--top":
            top = int(argv[i + 1])
        else:
            sys.exit(__doc__)
        i += 2
    addrs, names = symbols(vmlinux)
    samples = []
    for line in open(path):
        f = line.split()
        if len(f) == 2:
            t = int(f[0]) / 1000.0
            if lo <= t <= hi:
                samples.append((t, name(addrs, names, int(f[1], 16))))
    if not samples:
        sys.exit("profile: no samples in the window")
    count = {}
    for _, n in samples:
        count[n] = count.get(n, 0) + 1
    print("%d samples from %.0f to %.0f ms" % (len(samples), samples[0][0], samples[-1][0]))
    for n, c in sorted(count.items(), key=lambda x: -x[1])[:top]:
        print("%6.1f%%  %6d  %s" % (100.0 * c / len(samples), c, n))
    print("\nmost frequent function per 100 ms")
    bucket = {}
    for t, n in samples:
        b = bucket.setdefault(int(t // 100), {})
        b[n] = b.get(n, 0) + 1
    for b in sorted(bucket):
        n, c = max(bucket[b].items(), key=lambda x: x[1])
        tot = sum(bucket[b].values())
        print("%6d ms  %3d%% of %3d  %s" % (b * 100, 100 * c // tot, tot, n))


if __name__ == "__main__":
    main(sys.argv)
