#!/usr/bin/env python3
# Inside the test host, for tools/bench-oci: podman run --rm --network none
# IMAGE true with each runtime, and husk run --image on the same root.
#   oci-inner.py ROOT RUNS WORK "NAME=DIR ..." "RUNTIME=PATH ..."
import json
import os
import statistics
import subprocess
import sys
import time

ROOT, RUNS, WORK = sys.argv[1], int(sys.argv[2]), sys.argv[3]
IMAGES = dict(x.split("=", 1) for x in sys.argv[4].split())
RTS = dict(x.split("=", 1) for x in sys.argv[5].split())
W = "/tmp/bench-oci"
os.makedirs(W + "/tmp", exist_ok=True)
os.environ["TMPDIR"] = W + "/tmp"
# The test host's root is an initramfs: runc and crun cannot pivot_root there.
with open(W + "/containers.conf", "w") as f:
    f.write("[engine]\nno_pivot_root = true\n")
os.environ["CONTAINERS_CONF"] = W + "/containers.conf"


def podman(rt, *args):
    return subprocess.run(["podman", "--root", W + "/storage", "--runroot", W + "/run",
                           "--storage-driver", "vfs", "--cgroup-manager", "cgroupfs",
                           "--events-backend", "file", "--runtime", rt] + list(args),
                          stdin=subprocess.DEVNULL, capture_output=True, text=True)


def timed(fn):
    t = time.monotonic()
    ok = fn()
    return time.monotonic() - t if ok else None


def stats(xs):
    xs = sorted(x for x in xs if x is not None)
    if not xs:
        return None, None
    return statistics.median(xs), xs[min(len(xs) - 1, int(0.9 * len(xs)))]


rows = []
for name, src in IMAGES.items():
    tar = W + "/" + name + ".tar"
    subprocess.run(["tar", "-C", src, "-cf", tar, "."], check=True)
    r = podman("runc", "import", tar, "localhost/" + name)
    if r.returncode:
        print("bench-oci: podman import %s: %s" % (name, r.stderr[-500:]), file=sys.stderr)
        continue
    os.unlink(tar)
    for rt, path in RTS.items():
        first = podman(path, "run", "--rm", "--network", "none", "localhost/" + name, "true")
        if first.returncode:
            print("bench-oci: %s on %s fails: %s" % (rt, name, first.stderr.strip()[-300:]),
                  file=sys.stderr, flush=True)
            continue
        def one():
            r = podman(path, "run", "--rm", "--network", "none", "localhost/" + name, "true")
            if r.returncode:
                print("bench-oci: %s on %s failed: %s" % (rt, name, r.stderr.strip()[-300:]),
                      file=sys.stderr, flush=True)
            return r.returncode == 0
        xs = [timed(one) for _ in range(RUNS)]
        rows.append((name, "podman + " + rt, xs))
        print("bench-oci: %s %s done" % (name, rt), file=sys.stderr, flush=True)
    t = time.monotonic()
    key = json.loads(subprocess.run([ROOT + "/husk", "image", "import", src, "--json",
                                     "--image-dir", W + "/images"], capture_output=True,
                                    text=True).stdout or "{}").get("key")
    imp = time.monotonic() - t
    if key:
        xs = [timed(lambda: subprocess.run([ROOT + "/husk", "run", "--image", key, "--image-dir",
                                            W + "/images", "--", "true"],
                                           capture_output=True).returncode == 0)
              for _ in range(RUNS)]
        rows.append((name, "husk run --image", xs))
        print("bench-oci: %s: husk image import of the root %.2f s (first time)" % (name, imp),
              flush=True)

print("\npodman run --rm --network none IMAGE true (s), %d runs each, one test-host run" % RUNS)
print("%-8s %-20s %8s %8s %10s" % ("image", "how", "median", "p90", "vs runc"))
base = {}
for name, how, xs in rows:
    if how == "podman + runc":
        base[name] = stats(xs)[0]
for name, how, xs in rows:
    m, p = stats(xs)
    ratio = ("%.2fx" % (m / base[name])) if m and base.get(name) else "-"
    print("%-8s %-20s %8s %8s %10s" % (name, how, "%.2f" % m if m else "fail",
                                        "%.2f" % p if p else "-", ratio))
