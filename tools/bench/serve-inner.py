#!/usr/bin/env python3
# Inside the test host (real nested KVM, root): `true` as a job, N times per
# mode, sequentially and from C clients at once: a loop of `husk run`
# processes (cold, and --template base), then the same jobs through one
# `husk serve` (run cold, run with the template and no pool, run from a warm
# pool of K clones), and execs in a pooled session. Every sample goes to
# stdout as one "BENCH-SERVE-JSON" line for tools/bench/serve-report.py;
# progress lines start with "bench-serve:".
#   serve-inner.py BUILDDIR N C K
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time

B = sys.argv[1]
N, C, K = int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
HUSK = B + "/husk"
W = "/tmp/bench-serve"
D = W + "/templates"
SOCK = W + "/serve.sock"
CONF = W + "/serve.conf"
T0 = time.monotonic()


def say(msg):
    print("bench-serve: [%5.0f s] %s" % (time.monotonic() - T0, msg), flush=True)


def rec_marks(rec, t_wall):
    """The record's host timings as ms after t_wall (the client's spawn or
    request, wall clock): when the husk process (supervisor or worker)
    started, its first KVM_RUN, guest-init's HELLO, the job's start and end."""
    if not isinstance(rec, dict) or not rec.get("start_epoch_us"):
        return {}
    base = rec["start_epoch_us"] / 1e3 - t_wall * 1e3
    out = {"husk_start": base}
    for k, v in (rec.get("timings_us") or {}).items():
        if k in ("first_kvm_run", "vm_restored", "init", "job_start", "job_end") and \
           isinstance(v, int) and v >= 0:
            out[k] = base + v / 1e3
    return out


# ---- a loop of husk run processes

def proc_job(extra):
    """One `husk run [extra] --json -- true`: a sample (ms after the spawn)."""
    tw, t = time.time(), time.monotonic()
    p = subprocess.run([HUSK, "run", "--json"] + extra + ["--", "true"],
                       stdin=subprocess.DEVNULL, capture_output=True)
    done = (time.monotonic() - t) * 1e3
    rec = None
    for line in reversed(p.stdout.decode(errors="replace").splitlines()):
        if line.startswith("{"):
            try:
                rec = json.loads(line)
            except ValueError:
                pass
            break
    m = rec_marks(rec, tw)
    s = {"t0": t - T0, "done": done, "start": m.get("job_start"), "exit": m.get("job_end"),
         "marks": m, "kind": (rec or {}).get("start"),
         "ok": p.returncode == 0 and (rec or {}).get("exit_code") == 0}
    if not s["ok"]:
        s["error"] = ((rec or {}).get("error") or p.stderr.decode(errors="replace")[-300:])
    return s


# ---- husk serve

class Client:
    def __init__(self):
        self.s = socket.socket(socket.AF_UNIX)
        self.s.settimeout(600)
        self.s.connect(SOCK)
        self.f = self.s.makefile("rwb")
        self.n = 0

    def send(self, op, **kw):
        self.n += 1
        rid = "r%d" % self.n
        kw.update(id=rid, op=op)
        self.f.write((json.dumps(kw) + "\n").encode())
        self.f.flush()
        return rid

    def line(self):
        b = self.f.readline()
        if not b:
            raise EOFError("the daemon closed the connection")
        return json.loads(b)

    def until_final(self, rid, times=None, t=0):
        """Events of rid up to its final line; the first time of each event
        (ms after t, monotonic) into times."""
        while True:
            m = self.line()
            if m.get("re") != rid:
                continue
            ev = m.get("event") or ("final" if "ok" in m or "error" in m else None)
            if times is not None and ev and ev not in times:
                times[ev] = (time.monotonic() - t) * 1e3
            if "event" in m:
                if m["event"] == "started" and times is not None:
                    times["start_kind"] = m.get("start")
                continue
            return m

    def call(self, op, **kw):
        return self.until_final(self.send(op, **kw))

    def close(self):
        self.f.close()
        self.s.close()


def serve_job(c, req):
    """One `run` of `true` on connection c: a sample (ms after the request)."""
    times = {}
    tw, t = time.time(), time.monotonic()
    rid = c.send("run", argv=["true"], **req)
    fin = c.until_final(rid, times, t)
    rec = fin.get("record") or {}
    pooled = rec.get("pool") is True
    s = {"t0": t - T0, "accepted": times.get("accepted"), "queued": times.get("queued"),
         "start": times.get("started"), "exit": times.get("exit"), "done": times.get("final"),
         "kind": times.get("start_kind") or rec.get("start"),
         # a pooled clone's worker started before the request: its marks say nothing
         "marks": {} if pooled else rec_marks(rec, tw),
         "ok": fin.get("ok") is True and fin.get("exit_code") == 0}
    if not s["ok"]:
        s["error"] = json.dumps(fin.get("error") or fin)[:300]
    return s


def health(c):
    return c.call("health").get("load", {})


def wait_pool(c, secs=300):
    """Until the pool holds K ready clones (restored and warmed up:
    health's pooled_ready) and nothing else runs."""
    end = time.time() + secs
    while time.time() < end:
        load = health(c)
        if (load.get("pooled_ready") == K and load.get("running") == 0 and
                load.get("queued") == 0):
            return True
        time.sleep(0.05)
    return False


# ---- modes

def timed(fn, n, conc):
    """fn(i, ctx) n times from conc threads (ctx: per-thread state from
    fn.ctx()); the samples, the wall time from the first job's start to
    the last one's end."""
    samples = [None] * n
    nxt = [0]
    lock = threading.Lock()

    def worker():
        ctx = fn.ctx() if hasattr(fn, "ctx") else None
        while True:
            with lock:
                i = nxt[0]
                nxt[0] += 1
            if i >= n:
                break
            try:
                samples[i] = fn(i, ctx)
            except Exception as e:  # a broken connection: count it, go on
                samples[i] = {"ok": False, "error": repr(e)[:300]}
                if ctx is not None:
                    try:
                        ctx.close()
                    except Exception:
                        pass
                    ctx = fn.ctx()
        if ctx is not None:
            ctx.close()

    t = time.monotonic()
    ts = [threading.Thread(target=worker) for _ in range(conc)]
    for th in ts:
        th.start()
    for th in ts:
        th.join()
    return samples, time.monotonic() - t


def mode(res, name, fn, conc):
    say("%s, %d jobs, %d at once" % (name, N, conc))
    samples, wall = timed(fn, N, conc)
    ok = sum(1 for s in samples if s and s.get("ok"))
    res.append({"mode": name, "concurrency": conc, "n": N, "ok": ok, "wall_s": wall,
                "jobs_per_s": N / wall if wall > 0 else None, "samples": samples})
    bad = [s.get("error") for s in samples if s and not s.get("ok")]
    say("%s: %.2f jobs/s, %d of %d ok%s" % (name, N / wall, ok, N,
                                            (": " + str(bad[0])[:200]) if bad else ""))


def proc_fn(extra):
    return lambda i, ctx: proc_job(extra)


class ServeFn:
    def __init__(self, req, warm=False):
        self.req, self.warm = req, warm

    def ctx(self):
        return Client()

    def __call__(self, i, c):
        if self.warm and not wait_pool(c):
            say("the pool did not fill up in 300 s")
        return serve_job(c, self.req)


def conf(k):
    with open(CONF, "w") as f:
        f.write("max_vms = %d\nmax_mem = %d\nmax_queue = 256\npool.base = %d\n" %
                (C + K + 2, 512 * (C + K + 2), k))


def main():
    subprocess.run(["rm", "-rf", W])
    os.makedirs(W)
    info = {"n": N, "concurrency": C, "pool": K, "uname": os.uname().release,
            "cpus": os.cpu_count()}
    try:
        info["mem_mib"] = int(open("/proc/meminfo").readline().split()[1]) // 1024
    except (OSError, ValueError, IndexError):
        pass
    t = time.monotonic()
    r = subprocess.run([HUSK, "template", "create", "base", "--template-dir", D],
                       capture_output=True, text=True)
    if r.returncode:
        print("bench-serve: template create failed: " + r.stderr[-600:], flush=True)
        sys.exit(1)
    info["template_create_s"] = time.monotonic() - t
    say("template base made in %.1f s" % info["template_create_s"])
    res = []
    tpl = ["--template", "base", "--template-dir", D]
    for conc in (1, C):
        mode(res, "husk run", proc_fn([]), conc)
        mode(res, "husk run --template", proc_fn(tpl), conc)

    conf(0)
    log = open(W + "/serve.log", "ab")
    d = subprocess.Popen([HUSK, "serve", "--socket", SOCK, "--template-dir", D, "--config", CONF],
                         stdout=log, stderr=log)
    for _ in range(400):
        try:
            Client().close()
            break
        except OSError:
            time.sleep(0.05)
    try:
        for conc in (1, C):
            mode(res, "serve run cold", ServeFn({}), conc)
            mode(res, "serve run template", ServeFn({"template": "base"}), conc)
        conf(K)
        d.send_signal(signal.SIGHUP)
        c = Client()
        if not wait_pool(c):
            say("the pool did not fill up in 300 s: %s" % health(c))
        # each request once the pool is full again and nothing else runs
        mode(res, "serve run pool warm", ServeFn({"template": "base"}, warm=True), 1)
        for conc in (1, C):
            wait_pool(c)
            mode(res, "serve run pool", ServeFn({"template": "base"}), conc)
        # execs in one pooled session: exec -> "started" is guest-init's
        # XSTARTED (the job's process exists and is about to exec)
        wait_pool(c)
        fin = c.call("create", template="base")
        sb = fin.get("sandbox")
        if sb:
            def ex(i, _):
                times = {}
                t = time.monotonic()
                f = c.until_final(c.send("exec", sandbox=sb, argv=["true"]), times, t)
                return {"t0": t - T0, "start": times.get("started"), "exit": times.get("exit"),
                        "done": times.get("final"), "kind": "session",
                        "ok": f.get("ok") is True and f.get("exit_code") == 0,
                        "error": None if f.get("ok") else json.dumps(f)[:300]}
            mode(res, "serve exec in a pooled session", ex, 1)
            c.call("destroy", sandbox=sb)
        else:
            say("create from the pool failed: %s" % fin)
        info["daemon_load_end"] = health(c)
        c.close()
    finally:
        d.send_signal(signal.SIGTERM)
        try:
            d.wait(timeout=60)
        except subprocess.TimeoutExpired:
            d.kill()
    info["daemon_exit"] = d.returncode
    tail = open(W + "/serve.log", errors="replace").read()[-2000:]
    if tail.strip():
        info["daemon_log_tail"] = tail
    print("BENCH-SERVE-JSON " + json.dumps({"info": info, "modes": res}), flush=True)


main()
