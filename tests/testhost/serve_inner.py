#!/usr/bin/env python3
# Inside the test host (real KVM, root): husk serve end to end, spoken to
# over its socket the way any client speaks (docs/api.md). Every request
# type (policy on a networked session: rules opened, closed, hosts
# allowed); a client that leaves mid-run; the queue full; the pool drained and
# refilled; four clients with 25 pooled jobs each, a third of them on a
# networked template, and nothing leaked; malformed,
# oversized and unauthorised requests; SIGHUP; Prometheus scraping the
# metrics; SIGKILL and a restart; SIGTERM's drain.
#   serve_inner.py BUILDDIR PROMETHEUS DNS_STUB IMAGE_STORE
import base64
import io
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tarfile
import threading
import time
import urllib.parse
import urllib.request

B, PROM, DNS_STUB, STORE = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4]
HUSK = B + "/husk"
W = "/tmp/serve-inner"
D = W + "/templates"
SOCK = W + "/serve.sock"
CONF = W + "/serve.conf"
TPL_MIB = 256		# the pool's template: not husk's default size, to see it counted
passes = fails = 0


def ok(msg):
    global passes
    passes += 1
    print("ok   - " + msg, flush=True)


def bad(msg):
    global fails
    fails += 1
    print("FAIL - " + msg, flush=True)


def check(cond, msg, detail=""):
    if cond:
        ok(msg)
    else:
        bad(msg + (": " + str(detail)[:2000] if detail != "" else ""))
    return cond


class Client:
    def __init__(self, path=SOCK):
        self.s = socket.socket(socket.AF_UNIX)
        self.s.settimeout(120)
        self.s.connect(path)
        self.f = self.s.makefile("rwb")
        self.n = 0

    def send(self, op, **kw):
        self.n += 1
        rid = kw.pop("id", "r%d" % self.n)
        kw.update(id=rid, op=op)
        self.f.write((json.dumps(kw) + "\n").encode())
        self.f.flush()
        return rid

    def raw(self, b):
        self.f.write(b)
        self.f.flush()

    def line(self):
        l = self.f.readline()
        if not l:
            raise EOFError("the daemon closed the connection")
        return json.loads(l)

    def until_final(self, rid):
        """Events of request rid up to its final line: (events, final)."""
        evs = []
        while True:
            m = self.line()
            if m.get("re") != rid:
                continue
            if "event" in m:
                evs.append(m)
            else:
                return evs, m

    def call(self, op, **kw):
        return self.until_final(self.send(op, **kw))

    def close(self):
        # The file object holds the socket open too: both go.
        self.f.close()
        self.s.close()


def out_of(evs, kind):
    return b"".join(base64.b64decode(e["data"]) for e in evs if e["event"] == kind)


def tar_of(files):
    bio = io.BytesIO()
    with tarfile.open(fileobj=bio, mode="w:gz") as tf:
        for name, data in files.items():
            ti = tarfile.TarInfo(name)
            ti.size = len(data)
            ti.mode = 0o644
            tf.addfile(ti, io.BytesIO(data))
    return base64.b64encode(bio.getvalue()).decode()


def untar(b):
    with tarfile.open(fileobj=io.BytesIO(b), mode="r:gz") as tf:
        return {m.name: (tf.extractfile(m).read() if m.isfile() else None) for m in tf}


def husk_procs():
    out = []
    for p in os.listdir("/proc"):
        if p.isdigit():
            try:
                if open("/proc/%s/comm" % p).read().strip() == "husk":
                    out.append(int(p))
            except OSError:
                pass
    return out


def leftovers():
    """What sandboxes may leave on the host: taps, cgroups, runtime dirs."""
    taps = [n for n in os.listdir("/sys/class/net") if n.startswith("husk")]
    cgs = []
    for root, dirs, _ in os.walk("/sys/fs/cgroup"):
        cgs += [os.path.join(root, d) for d in dirs if "/husk/" in os.path.join(root, d) + "/"
                and d.startswith("vm-")]
    runs = [d for d in os.listdir("/tmp") if d.startswith("husk-run-")]
    return taps, cgs, runs


def descendants(pid):
    """The live processes below pid."""
    kids = {}
    for p in os.listdir("/proc"):
        if p.isdigit():
            try:
                with open("/proc/%s/stat" % p) as f:
                    ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            kids.setdefault(ppid, []).append(int(p))
    out, todo = [], [pid]
    while todo:
        for k in kids.get(todo.pop(), []):
            out.append(k)
            todo.append(k)
    return out


def held_by(pids):
    """What live processes hold, by name: the taps their tun descriptors
    are attached to, the vm- cgroups they are in, and the runtime
    directories their descriptors are in (a worker keeps its lock there)."""
    taps, cgs, runs = set(), set(), set()
    for p in pids:
        try:
            with open("/proc/%d/cgroup" % p) as f:
                for l in f:
                    cgs.update(x for x in l.rstrip("\n").split(":", 2)[-1].split("/")
                               if x.startswith("vm-"))
            fds = os.listdir("/proc/%d/fd" % p)
        except OSError:
            continue
        for fd in fds:
            try:
                t = os.readlink("/proc/%d/fd/%s" % (p, fd))
                if t.startswith("/tmp/husk-run-"):
                    runs.add(t.split("/")[2])
                with open("/proc/%d/fdinfo/%s" % (p, fd)) as f:
                    taps.update(l.split()[1] for l in f if l.startswith("iff:"))
            except (OSError, IndexError):
                pass
    return taps, cgs, runs


def not_held(held):
    """leftovers() but what `held` (held_by's answer) names."""
    taps, cgs, runs = leftovers()
    return (sorted(set(taps) - held[0]), sorted(c for c in cgs if os.path.basename(c) not in held[1]),
            sorted(set(runs) - held[2]))


def start_daemon(*extra):
    log = open(W + "/serve.log", "ab")
    p = subprocess.Popen([HUSK, "serve", "--socket", SOCK, "--template-dir", D,
                          "--config", CONF, "--metrics", "127.0.0.1:9464", "--grace", "20",
                          "--group", "1234"]
                         + list(extra), stdout=log, stderr=log)
    for _ in range(200):
        if os.path.exists(SOCK):
            try:
                Client().close()
                return p
            except OSError:
                pass
        time.sleep(0.05)
    return p


def pool_full(h, n):
    """Whether health answer h shows n pooled clones, all ready, and nothing else."""
    load = h.get("load", {})
    return (load.get("pooled") == n and load.get("pooled_ready") == n and load.get("running") == 0
            and load.get("mem_mib") == TPL_MIB * n)


def wait_pool(c, n, secs=120):
    """The first health answer with pool_full(n), else the last one."""
    end = time.time() + secs
    while time.time() < end:
        _, h = c.call("health")
        if pool_full(h, n):
            return h
        time.sleep(0.2)
    return h


def conf(text):
    with open(CONF, "w") as f:
        f.write(text)


subprocess.run(["rm", "-rf", W])
os.makedirs(W)
# ---- a template for the pool
r = subprocess.run([HUSK, "template", "create", "base", "--template-dir", D, "--mem", str(TPL_MIB)],
                   capture_output=True, text=True)
if not check(r.returncode == 0, "template base made", r.stderr):
    print("serve: %d passed, %d failed" % (passes, fails))
    sys.exit(1)
# and one with a NIC, for a networked pool
r = subprocess.run([HUSK, "template", "create", "net", "--template-dir", D, "--mem", str(TPL_MIB),
                    "--net", "egress"], capture_output=True, text=True)
check(r.returncode == 0, "template net (with a NIC) made", r.stderr)
conf("max_vms = 4\nmax_mem = 4096\nmax_queue = 2\npool.base = 2\n")
before = leftovers()
# A path that holds something else is not the daemon's to take.
with open(W + "/precious", "w") as f:
    f.write("data\n")
r = subprocess.run([HUSK, "serve", "--socket", W + "/precious", "--template-dir", D],
                   capture_output=True, text=True, timeout=30)
check(r.returncode != 0 and "not a socket" in r.stderr and open(W + "/precious").read() == "data\n",
      "serve: a file at --socket is refused and kept", (r.returncode, r.stderr))
# A networked session's "internet": an HTTP server on a documentation
# address of the test host's own (the egress filter denies it until a
# rule opens it) and a stub upstream resolver for husk's DNS proxy.
SRV = "198.51.100.1"
subprocess.run(["ip", "addr", "add", SRV + "/32", "dev", "lo"], stderr=subprocess.DEVNULL)
os.makedirs(W + "/www")
with open(W + "/www/f", "w") as f:
    f.write("hello from the net\n")
www = subprocess.Popen(["/usr/bin/python3", "-m", "http.server", "--bind", SRV, "--directory",
                        W + "/www", "8080"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
dns = subprocess.Popen([DNS_STUB, "127.0.0.1", "5353", W + "/dns.log", "web.test=" + SRV])
os.environ["HUSK_DNS_UPSTREAM"] = "127.0.0.1:5353"
d = start_daemon()
c = Client()
h = wait_pool(c, 2)
check(h.get("ok") and h["load"]["pooled"] == 2 and h["load"]["pooled_ready"] == 2 and
      h["load"]["mem_mib"] == 2 * TPL_MIB,
      "health: the pool of two is up and warm, counted with its template's RAM", h)

# ---- run: a cold job, its streams and status
evs, fin = c.call("run", argv=["sh", "-c", "echo out; echo err >&2; exit 3"])
kinds = [e["event"] for e in evs]
check(kinds[:2] == ["accepted", "started"] and "exit" in kinds, "run: accepted, started, exit", kinds)
check(out_of(evs, "stdout") == b"out\n" and out_of(evs, "stderr") == b"err\n",
      "run: stdout and stderr", (out_of(evs, "stdout"), out_of(evs, "stderr")))
check(fin.get("ok") and fin.get("exit_code") == 3, "run: exit code 3", fin)
rec = fin.get("record", {})
check(rec.get("schema") == "husk.run/1" and rec.get("start") == "cold" and
      rec.get("job", {}).get("exit") == 3, "run: its record (cold, the job's exit)", rec)

# ---- run from the pool, with files in and out
evs, fin = c.call("run", template="base", argv=["sh", "-c", "mkdir out; tr a-z A-Z <in/f >out/g"],
                  put=[tar_of({"in/f": b"payload"})], get=["out"])
started = [e for e in evs if e["event"] == "started"]
check(started and started[0].get("start") == "pool", "run: a pooled clone", started)
files = b"".join(base64.b64decode(e["data"]) for e in evs if e["event"] == "files")
got = untar(files) if files else {}
check(got.get("out/g") == b"PAYLOAD", "run: --put in, --get back", list(got))
check(fin.get("record", {}).get("pool") is True, "run: the record says pool", fin.get("record"))

# ---- run with stdin
rid = c.send("run", template="base", argv=["cat"], stdin=True)
c.send("stdin", run=rid, data=base64.b64encode(b"from stdin\n").decode(), eof=True)
evs, fin = c.until_final(rid)
check(out_of(evs, "stdout") == b"from stdin\n" and fin.get("exit_code") == 0,
      "run: stdin reaches the job", out_of(evs, "stdout"))
evs, fin = c.call("run", template="base", argv=["sh", "-c", "sleep 30"], timeout=2)
check(fin.get("exit_code") == 124, "run: timeout gives 124", fin)

# ---- a session: create, exec, stdin, signal, put, get, list, inspect, destroy
_, fin = c.call("create", template="base", env={"GREETING": "hi"})
sb = fin.get("sandbox")
check(fin.get("ok") and sb and fin.get("start") == "pool", "create: a session from the pool", fin)
evs, fin = c.call("exec", sandbox=sb, argv=["sh", "-c", "echo $GREETING; pwd; echo x >shared"])
check(out_of(evs, "stdout") == b"hi\n/tmp/workspace\n" and fin.get("exit_code") == 0,
      "exec: session env and workspace", out_of(evs, "stdout"))
evs, fin = c.call("exec", sandbox=sb, argv=["cat", "shared"], env={"GREETING": "x"})
check(out_of(evs, "stdout") == b"x\n", "exec: a second exec sees the first one's files",
      out_of(evs, "stdout"))
# two at once: the slow one started first ends last
a = c.send("exec", sandbox=sb, argv=["sh", "-c", "sleep 1; echo slow"])
b = c.send("exec", sandbox=sb, argv=["sh", "-c", "echo fast"])
order, outs = [], {}
while len(order) < 2:
    m = c.line()
    if m.get("event") == "stdout":
        outs[m["re"]] = outs.get(m["re"], b"") + base64.b64decode(m["data"])
    if "ok" in m or "error" in m:
        order.append(m["re"])
check(order == [b, a] and outs.get(a) == b"slow\n" and outs.get(b) == b"fast\n",
      "exec: two at once, each its own output", (order, outs))
x = c.send("exec", sandbox=sb, argv=["sh", "-c", "read l; echo got $l"], stdin=True)
c.send("stdin", exec=x, data=base64.b64encode(b"line\n").decode(), eof=True)
evs, fin = c.until_final(x)
check(out_of(evs, "stdout") == b"got line\n", "exec: stdin", out_of(evs, "stdout"))
x = c.send("exec", sandbox=sb, argv=["sleep", "60"])
m = c.line()
while m.get("re") != x or m.get("event") != "started":
    m = c.line()
c.send("signal", exec=x, signal="TERM")
evs, fin = c.until_final(x)
ex = [e for e in evs if e["event"] == "exit"]
check(ex and ex[0].get("signal") == 15 and fin.get("exit_code") == 143, "signal: TERM ends an exec",
      (ex, fin))
evs, fin = c.call("exec", sandbox=sb, argv=["sleep", "60"], timeout=1)
check(fin.get("exit_code") == 124, "exec: its own timeout", fin)
_, fin = c.call("put", sandbox=sb, data=tar_of({"p/q": b"put data"}))
check(fin.get("ok"), "put: files into the workspace", fin)
evs, fin = c.call("exec", sandbox=sb, argv=["cat", "p/q"])
check(out_of(evs, "stdout") == b"put data", "put: the exec reads them", out_of(evs, "stdout"))
evs, fin = c.call("get", sandbox=sb, path="p")
got = untar(b"".join(base64.b64decode(e["data"]) for e in evs if e["event"] == "files"))
check(fin.get("ok") and got.get("p/q") == b"put data", "get: a workspace path back", got)
evs, fin = c.call("exec", sandbox=sb, argv=["/no/such"])
check(fin.get("exit_code") == 127, "exec: command not found is 127", fin)
_, fin = c.call("list")
names = [s["sandbox"] for s in fin.get("sandboxes", [])]
check(sb in names, "list: the session is there", names)
_, fin = c.call("inspect", sandbox=sb)
check(fin.get("sandbox", {}).get("kind") == "session", "inspect: a session", fin)
_, fin = c.call("policy", sandbox=sb, allow=["198.51.100.0/24"])
check("error" in fin, "policy: refused for a session without a network", fin)
_, fin = c.call("destroy", sandbox=sb)
check(fin.get("ok") and fin.get("record", {}).get("schema") == "husk.run/1", "destroy: the record",
      fin)
_, fin = c.call("exec", sandbox=sb, argv=["true"])
check(fin.get("error", {}).get("code") == "not-found", "exec after destroy: not-found", fin)

# ---- policy: a networked session's rules change while it runs
GET = ("printf 'GET /f HTTP/1.0\\r\\n\\r\\n' | busybox nc -w 3 %s 8080 | "
       "grep -q 'hello from the net' && echo got-it; true" % SRV)
_, fin = c.call("create", net="egress")
sbn = fin.get("sandbox")
check(fin.get("ok") and fin.get("start") == "cold", "create: a session with a network", fin)
evs, fin = c.call("exec", sandbox=sbn, argv=["sh", "-c", GET])
check(out_of(evs, "stdout") == b"", "policy: no rule, no way to the server", out_of(evs, "stdout"))
_, fin = c.call("policy", sandbox=sbn, allow=[SRV + "/32:tcp:8080"])
check(fin.get("ok") and fin.get("allow") == [SRV + "/32:tcp:8080"] and fin.get("allow_host") == []
      and fin.get("deny") == [], "policy: allow answers the rules in force", fin)
evs, fin = c.call("exec", sandbox=sbn, argv=["sh", "-c", GET])
check(out_of(evs, "stdout") == b"got-it\n", "policy: the new rule lets a new connection through",
      out_of(evs, "stdout"))
evs, fin = c.call("exec", sandbox=sbn, argv=["sh", "-c", "busybox nslookup web.test; true"])
check(SRV.encode() not in out_of(evs, "stdout"), "policy: no allowed host, no name resolved",
      out_of(evs, "stdout"))
_, fin = c.call("policy", sandbox=sbn, allow_host=["web.test"])
check(fin.get("ok") and fin.get("allow_host") == ["web.test"] and
      fin.get("allow") == [SRV + "/32:tcp:8080"], "policy: allow_host alone keeps the rules", fin)
evs, fin = c.call("exec", sandbox=sbn, argv=["sh", "-c", "busybox nslookup web.test; "
                                             "busybox nslookup other.test; true"])
check(SRV.encode() in out_of(evs, "stdout"), "policy: the allowed host resolves",
      out_of(evs, "stdout"))
_, fin = c.call("policy", sandbox=sbn, allow=[])
check(fin.get("ok") and fin.get("allow") == [], "policy: allow [] removes the rule", fin)
evs, fin = c.call("exec", sandbox=sbn, argv=["sh", "-c", GET])
check(out_of(evs, "stdout") == b"", "policy: the removed rule lets nothing through",
      out_of(evs, "stdout"))
_, fin = c.call("policy", sandbox=sbn, allow=["198.51.100.1/33"])
check(fin.get("error", {}).get("code") == "bad-request", "policy: a bad rule is bad-request", fin)
_, fin = c.call("policy", sandbox=sbn, allow_host=["10.0.0.1"])
check(fin.get("error", {}).get("code") == "bad-request", "policy: an address as host: bad-request",
      fin)
_, fin = c.call("destroy", sandbox=sbn)
pol = fin.get("record", {}).get("network", {}).get("policy", {})
check(pol.get("changes") == 3 and [sorted(e) for e in pol.get("log", [])] ==
      [["allow", "at_ms"], ["allow_host", "at_ms"], ["allow", "at_ms"]],
      "policy: the record lists every change", pol)
try:
    with open(W + "/dns.log") as f:
        asked = f.read()
except OSError:
    asked = ""
check("web.test" in asked and "other.test" not in asked,
      "policy: only the allowed name reached the upstream", asked)

# ---- a container image as the root (imported outside, into the daemon's store here)
shutil.copytree(STORE, "/var/lib/husk/images", dirs_exist_ok=True)
r = subprocess.run([HUSK, "image", "ls"], capture_output=True)
check(r.returncode == 0 and b"sv " in r.stdout, "image sv is in the daemon's store", r)
evs, fin = c.call("run", image="sv", argv=["/bin/sh", "-c", "echo $IMG_VAR; pwd; cat data.txt"])
check(fin.get("exit_code") == 0 and out_of(evs, "stdout") == b"from-image\n/app\nimage data\n",
      "run on an image: its Env, WorkingDir and files", (fin, out_of(evs, "stdout")))
started = [e for e in evs if e["event"] == "started"]
check(started and started[0].get("start") == "cold", "run on an image: booted, not from the pool",
      started)
_, fin = c.call("create", image="sv")
sbi = fin.get("sandbox")
evs, fin = c.call("exec", sandbox=sbi, argv=["/bin/sh", "-c", "pwd; cat /app/data.txt"])
check(out_of(evs, "stdout") == b"/app\nimage data\n", "a session on an image", out_of(evs, "stdout"))
c.call("destroy", sandbox=sbi)
_, fin = c.call("run", image="../x", argv=["true"])
check(fin.get("error", {}).get("code") == "bad-request", "a bad image name is a bad request", fin)
r = subprocess.run([HUSK, "run", "--server", SOCK, "--image", "sv", "--", "/bin/sh", "-c",
                    "echo $IMG_VAR"], capture_output=True)
check(r.returncode == 0 and r.stdout == b"from-image\n", "husk run --server --image", r)

# ---- kill, detach and wait
_, fin = c.call("create")
sb2 = fin.get("sandbox")
_, fin = c.call("kill", sandbox=sb2)
check(fin.get("ok"), "kill: ok", fin)
time.sleep(2)
_, fin = c.call("list")
check(sb2 not in [s["sandbox"] for s in fin.get("sandboxes", [])], "kill: the sandbox is gone", fin)
c2 = Client()
rid = c2.send("run", template="base", argv=["sh", "-c", "sleep 1; echo done"], detach=True)
m = c2.line()
sbd = m.get("sandbox")
c2.close()
c3 = Client()
_, fin = c3.call("wait", sandbox=sbd)
final = fin.get("final", {})
check(fin.get("ok") and final.get("exit_code") == 0, "detach: wait collects the run", fin)
c3.close()

# ---- a client that goes away mid-run takes its job with it
c4 = Client()
c4.send("run", argv=["sleep", "300"])
m = c4.line()
sbk = m.get("sandbox")
time.sleep(1)
c4.close()
gone = False
for _ in range(100):
    _, fin = c.call("list")
    if sbk not in [s["sandbox"] for s in fin.get("sandboxes", [])]:
        gone = True
        break
    time.sleep(0.2)
check(gone, "a run whose client left is killed and destroyed",
      [s for s in fin.get("sandboxes", []) if s["sandbox"] == sbk])

# ---- malformed, oversized, unauthorised
c.raw(b"this is not json\n")
check(c.line().get("error", {}).get("code") == "bad-request", "not JSON: bad-request")
c.raw(b'{"id":"big","op":"health","pad":"' + b"x" * (5 << 20) + b'"}\n')
check(c.line().get("error", {}).get("code") == "bad-request", "a 5 MiB line: bad-request")
c.raw(b"[" * 1000 + b"]" * 1000 + b"\n")
check(c.line().get("error", {}).get("code") == "bad-request", "1000 levels deep: bad-request")
_, fin = c.call("run", argv=["true"], mem=1)
check(fin.get("error", {}).get("code") == "bad-request", "--mem 1: bad-request", fin)
_, fin = c.call("create", template="base")
sbo = fin.get("sandbox")
pid = os.fork()
if pid == 0:
    os.setgid(1234)
    os.setuid(1234)
    try:
        o = Client()
        _, f1 = o.call("list")
        _, f2 = o.call("exec", sandbox=sbo, argv=["true"])
        _, f3 = o.call("kill", sandbox=sbo)
        good = (f1.get("sandboxes") == [] and f2.get("error", {}).get("code") == "not-found" and
                f3.get("error", {}).get("code") == "not-found")
    except Exception as e:
        print("    unauthorised client: %r" % e)
        good = False
    os._exit(0 if good else 1)
_, st = os.waitpid(pid, 0)
check(os.WEXITSTATUS(st) == 0, "another uid sees and touches nothing of root's sandboxes")
_, fin = c.call("health")
check(fin.get("ok"), "the daemon serves on after all that")
c.call("destroy", sandbox=sbo)

# ---- the queue: 4 VMs at most, 2 may wait, the rest is busy
conf("max_vms = 2\nmax_mem = 4096\nmax_queue = 2\npool.base = 0\n")
d.send_signal(signal.SIGHUP)
wait_pool(c, 0)
clients = [Client() for _ in range(5)]
for k in clients:
    k.send("run", argv=["sleep", "4"])
firsts = [k.line() for k in clients]
kinds = sorted((f.get("event") or f.get("error", {}).get("code")) for f in firsts)
check(kinds == ["accepted", "accepted", "busy", "queued", "queued"],
      "two run, two wait, the fifth is busy", kinds)
busy = [f for f in firsts if f.get("error")]
check(busy and busy[0].get("load", {}).get("max_queue") == 2, "busy says the load", busy)
codes = []
for k, f in zip(clients, firsts):
    if f.get("error"):
        continue
    _, fin = k.until_final(f["re"])
    codes.append(fin.get("exit_code"))
check(codes == [0, 0, 0, 0], "the queued runs ran after all", codes)
for k in clients:
    k.close()

# ---- the pool: refilled by SIGHUP, drained by use, refilled again
conf("max_vms = 6\nmax_mem = 4096\nmax_queue = 8\npool.base = 2\n")
d.send_signal(signal.SIGHUP)
h = wait_pool(c, 2)
check(h["load"]["pooled"] == 2, "SIGHUP: the pool is back to two", h["load"])
held = []
for _ in range(3):
    _, fin = c.call("create", template="base")
    held.append(fin)
check([f.get("start") for f in held][:2] == ["pool", "pool"] and all(f.get("ok") for f in held),
      "three creates: two from the pool at once, the third as well", [f.get("start") for f in held])
for f in held:
    c.call("destroy", sandbox=f["sandbox"])
h = wait_pool(c, 2)
check(h["load"]["pooled"] == 2, "the pool refilled", h["load"])

# ---- four clients, JOBS each, every result right, nothing leaked
# Two pools: base (no NIC) and net (a NIC): every third job asks for a
# network, so taps come and go with the jobs and the tap check means
# something. What the pools hold afterwards is named by the processes that
# hold it (held_by); anything else left is a leak.
conf("max_vms = 8\nmax_mem = 4096\nmax_queue = 8\npool.base = 2\npool.net = 2\n")
d.send_signal(signal.SIGHUP)
h = wait_pool(c, 4)
check(pool_full(h, 4), "SIGHUP: two pools of two, all ready", h.get("load"))
JOBS = 25
fds_before = len(os.listdir("/proc/%d/fd" % d.pid))
results = {}
starts = {}	# "TEMPLATE START-KIND": jobs, under starts_lock
starts_lock = threading.Lock()
wrong = []	# what a job that was not right got back: the log says why
NET_JOB = "busybox ifconfig eth0 | grep -q 'inet addr' && echo %d-%d"


def worker(n):
    k = Client()
    good = 0
    for j in range(JOBS):
        net = (n + j) % 3 == 0
        if net:
            evs, fin = k.call("run", template="net", net="egress", argv=["sh", "-c", NET_JOB % (n, j)])
        else:
            evs, fin = k.call("run", template="base", argv=["sh", "-c", "echo %d-%d" % (n, j)])
        st = [e.get("start") for e in evs if e["event"] == "started"]
        key = ("net " if net else "base ") + str(st[0] if st else None)
        with starts_lock:
            starts[key] = starts.get(key, 0) + 1
        if fin.get("exit_code") == 0 and out_of(evs, "stdout") == b"%d-%d\n" % (n, j):
            good += 1
        else:
            wrong.append({"job": "%d-%d%s" % (n, j, " (net)" if net else ""), "final": fin,
                          "events": [e.get("event") for e in evs],
                          "stdout": out_of(evs, "stdout"), "stderr": out_of(evs, "stderr")})
    k.close()
    results[n] = good


t0 = time.time()
ts = [threading.Thread(target=worker, args=(n,)) for n in range(4)]
for t in ts:
    t.start()
for t in ts:
    t.join()
el = time.time() - t0
nets = sum(v for k, v in starts.items() if k.startswith("net "))
check(sum(results.values()) == 4 * JOBS,
      "4 clients x %d jobs: all %d right, %d of them with a network (%.0f s)" % (JOBS, 4 * JOBS, nets, el),
      (results, wrong))
print("# figure: the load's starts: %s" % ", ".join("%s %d" % kv for kv in sorted(starts.items())))
check(starts.get("base pool", 0) > 0 and starts.get("net pool", 0) > 0,
      "both pools served jobs of the load", starts)
# A guest that died says how in its console's tail, in full.
for w in wrong:
    rec = w["final"].get("record") if isinstance(w["final"], dict) else None
    if isinstance(rec, dict) and rec.get("console_tail"):
        print("# job %s: the guest console's last output:" % w["job"])
        for line in rec["console_tail"].splitlines():
            print("#   " + line)
h = wait_pool(c, 4)
check(pool_full(h, 4), "after the load, the pools are full again", h.get("load"))
# The daemon closes a client's socket when it reads that client's EOF,
# which may come just after its last answer to us: a close in flight
# settles within moments, a leaked descriptor stays.
fds_dir = "/proc/%d/fd" % d.pid
fds_after = len(os.listdir(fds_dir))
settle = time.time() + 10
while fds_after > fds_before and time.time() < settle:
    time.sleep(0.2)
    fds_after = len(os.listdir(fds_dir))
if fds_after > fds_before:
    for fd in sorted(os.listdir(fds_dir), key=int):
        try:
            print("# daemon fd %s -> %s" % (fd, os.readlink(fds_dir + "/" + fd)))
        except OSError:
            pass
check(fds_after <= fds_before, "no daemon fd leaked (%d, then %d)" % (fds_before, fds_after))
pool_own = held_by(descendants(d.pid))
check(len(pool_own[0]) == 2 and len(pool_own[1]) == 4 and len(pool_own[2]) == 4,
      "the pools' own, by name: 4 clones' cgroups and runtime dirs, the 2 networked ones' taps",
      pool_own)
left = not_held(pool_own)
check(not any(left), "no tap, cgroup or runtime dir left but the pools' own", left)

# ---- Prometheus scrapes the metrics
with open(W + "/prom.yml", "w") as f:
    f.write("global:\n  scrape_interval: 1s\nscrape_configs:\n  - job_name: husk\n"
            "    static_configs:\n      - targets: ['127.0.0.1:9464']\n")
prom = subprocess.Popen([PROM, "--config.file=" + W + "/prom.yml", "--storage.tsdb.path=" + W + "/tsdb",
                         "--web.listen-address=127.0.0.1:9090"], stdout=subprocess.DEVNULL,
                        stderr=open(W + "/prom.log", "wb"))
value = None
q = urllib.parse.quote('sum(husk_starts_total{kind="pool"})')
for _ in range(120):
    try:
        with urllib.request.urlopen("http://127.0.0.1:9090/api/v1/query?query=" + q, timeout=5) as r:
            res = json.load(r)["data"]["result"]
            if res:
                value = float(res[0]["value"][1])
                break
    except Exception:
        pass
    time.sleep(1)
check(value is not None and value >= 4 * JOBS, "Prometheus reads husk_starts_total{kind=pool} (%s)" % value)
q = urllib.parse.quote('husk_jobs_total{outcome="ok"}')
with urllib.request.urlopen("http://127.0.0.1:9090/api/v1/query?query=" + q, timeout=5) as r:
    res = json.load(r)["data"]["result"]
check(res and float(res[0]["value"][1]) >= 4 * JOBS, "Prometheus reads husk_jobs_total{outcome=ok}", res)
prom.terminate()
prom.wait()


def procs_named(name):
    out = []
    for p in os.listdir("/proc"):
        if p.isdigit():
            try:
                if open("/proc/%s/comm" % p).read().strip() == name:
                    out.append(int(p))
            except OSError:
                pass
    return out


def http_status(method, path):
    req = urllib.request.Request("http://127.0.0.1:9464" + path, method=method)
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status
    except urllib.error.HTTPError as e:
        return e.code


# ---- the HTTP side is husk-metrics, under a uid of its own; other paths and methods refused
helpers = procs_named("husk-metrics")
uids = [int(open("/proc/%d/status" % h).read().split("Uid:")[1].split()[0]) for h in helpers]
check(len(helpers) == 1 and uids[0] not in (0, 65534),
      "husk-metrics serves /metrics under a uid of its own (not root, not nobody)", (helpers, uids))
check(http_status("GET", "/nope") == 404, "GET /nope: 404")
check(http_status("POST", "/metrics") == 405, "POST /metrics: 405")
busy = subprocess.run([HUSK, "serve", "--socket", W + "/busy.sock", "--template-dir", D,
                       "--metrics", "127.0.0.1:9464"], capture_output=True, timeout=60)
check(busy.returncode == 1 and b"cannot listen there" in busy.stderr,
      "a second daemon on the same metrics port stops at start", (busy.returncode, busy.stderr))
# A helper that dies takes /metrics with it, not the daemon.
for h in helpers:
    os.kill(h, signal.SIGKILL)
time.sleep(1)
_, h = c.call("health")
check(h.get("ok") is not False and "load" in h, "the daemon answers after husk-metrics died", h)
check("husk-metrics stopped" in open(W + "/serve.log", errors="replace").read(),
      "the daemon said husk-metrics stopped")
check(not procs_named("husk-metrics"), "the dead helper was reaped", procs_named("husk-metrics"))

# ---- SIGKILL, and a restart cleans up
# The two pools are up when the daemon dies: their cgroups and runtime
# dirs stay behind (their taps go with their processes). The new daemon
# runs no pool, so after its start nothing at all may be left.
c.close()
d.send_signal(signal.SIGKILL)
d.wait()
time.sleep(1)
check(not husk_procs(), "SIGKILL: the workers went with the daemon", husk_procs())
check(not procs_named("husk-metrics"), "SIGKILL: husk-metrics went with the daemon",
      procs_named("husk-metrics"))
killed = leftovers()
check(len(killed[1]) > 0 and len(killed[2]) > 0,
      "SIGKILL: the pools' cgroups and runtime dirs are left to clean up", killed)
conf("max_vms = 4\nmax_mem = 4096\nmax_queue = 2\n")
d = start_daemon()
c = Client()
taps, cgs, runs = leftovers()
check(not taps and not cgs and not runs, "restart: nothing of the killed daemon is left",
      (taps, cgs, runs))
evs, fin = c.call("run", argv=["sh", "-c", "echo again"])
check(out_of(evs, "stdout") == b"again\n", "restart: jobs run again", fin)

# ---- SIGTERM drains: running work finishes, new work is refused
rid = c.send("run", argv=["sh", "-c", "sleep 3; echo finished"])
m = c.line()
d.send_signal(signal.SIGTERM)
time.sleep(0.5)
_, fin = c.call("run", argv=["true"])
check(fin.get("error", {}).get("code") == "shutting-down", "draining: new work refused", fin)
evs, fin = c.until_final(rid)
check(out_of(evs, "stdout") == b"finished\n", "draining: the running job finished", fin)
try:
    d.wait(timeout=60)
except subprocess.TimeoutExpired:
    d.kill()
check(d.returncode == 0, "the daemon exited 0 after the drain", d.returncode)
time.sleep(1)
check(not husk_procs(), "nothing of husk left running", husk_procs())
taps, cgs, runs = leftovers()
check(not taps and not cgs and not runs, "nothing left on the host", (taps, cgs, runs))
www.terminate()
dns.terminate()
print("serve: %d passed, %d failed" % (passes, fails))
sys.exit(1 if fails else 0)
