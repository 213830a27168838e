#!/usr/bin/env python3
# Inside the test host (real KVM, root): husk-runc driven as an engine
# drives runc (conmon, containerd's shim): create with a pid file and the
# engine's stdio, state, start, the container's process reaped by the
# engine (a child subreaper here) for its exit status, kill, delete, a
# terminal's master taken over --console-socket, and configs that must be
# refused. The bundle's config.json is `runc spec`'s
# when Debian's runc was brought in. Then Debian's podman (with conmon) runs
# containers with --runtime husk-runc, and Debian's containerd with its runc
# shim runs them through `ctr run --runc-binary husk-runc`, and a one-node
# Slurm (munge, slurmctld, slurmd) runs `srun --container` through oci.conf,
# when they were brought in.
#   oci_inner.py BUILDDIR BUNDLE_ROOTFS RUNC|- PODMAN|- ROOTFS_TAR CONTAINERD|- SLURM|-
#                CRUN|- IPROUTE2_IP|-
import ctypes
import fcntl
import json
import select
import socket
import struct
import os
import shutil
import signal
import subprocess
import sys
import termios
import time

B, ROOTFS = sys.argv[1], sys.argv[2]
RUNC = sys.argv[3] if sys.argv[3] != "-" else ""
PODMAN = sys.argv[4] if sys.argv[4] != "-" else ""
TAR = sys.argv[5]
CONTAINERD = sys.argv[6] if len(sys.argv) > 6 and sys.argv[6] != "-" else ""
SLURM = len(sys.argv) > 7 and sys.argv[7] != "-"
CRUN = sys.argv[8] if len(sys.argv) > 8 and sys.argv[8] != "-" else ""
IPR = sys.argv[9] if len(sys.argv) > 9 and sys.argv[9] != "-" else ""
HUSK = B + "/husk-runc"
W = "/tmp/oci-inner"
ROOT = W + "/state"
IMG = W + "/images"
passes = fails = skips = 0

# The engine is the reaper of its containers (conmon is a subreaper).
PR_SET_CHILD_SUBREAPER = 36
ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)


def check(cond, msg, detail=""):
    global passes, fails
    if cond:
        passes += 1
        print("ok   - " + msg, flush=True)
    else:
        fails += 1
        print("FAIL - " + msg + (": " + str(detail)[:1500] if detail != "" else ""), flush=True)
    return cond


def skip(msg):
    """A part that did not run: counted and said with its reason."""
    global skips
    skips += 1
    print("skip - " + msg, flush=True)


def summary(note=""):
    print("oci: %d passed, %d failed, %d skipped%s" % (passes, fails, skips, note), flush=True)


def runtime(*args, stdout=None, stderr=None, stdin=subprocess.DEVNULL, input=None):
    """husk-runc with the global flags an engine passes."""
    cmd = [HUSK, "--root", ROOT, "--log", W + "/runtime.log", "--log-format", "json",
           "--image-dir", IMG] + list(args)
    return subprocess.run(cmd, stdin=None if input is not None else stdin, input=input,
                          stdout=stdout or subprocess.PIPE, stderr=stderr or subprocess.PIPE,
                          text=True, timeout=300)


def spec(bundle, args, env=None, cwd="/", mounts=(), annotations=None, terminal=False,
         memory=None, rlimits=None):
    """A bundle: runc spec's config.json (or an equivalent), edited as an engine would."""
    os.makedirs(bundle)
    os.symlink(ROOTFS, bundle + "/rootfs")
    if RUNC:
        subprocess.run([RUNC, "spec", "--bundle", bundle], check=True)
        with open(bundle + "/config.json") as f:
            c = json.load(f)
    else:
        c = {"ociVersion": "1.0.2", "root": {"path": "rootfs", "readonly": True},
             "process": {"user": {"uid": 0, "gid": 0}},
             "mounts": [{"destination": "/proc", "type": "proc", "source": "proc"}],
             "linux": {"namespaces": [{"type": "pid"}, {"type": "network"}]}}
    c["process"]["args"] = args
    c["process"]["terminal"] = terminal
    c["process"]["cwd"] = cwd
    c["process"]["env"] = ["PATH=/bin"] + (env or [])
    c["mounts"] += list(mounts)
    if annotations:
        c["annotations"] = annotations
    if memory:
        c["linux"].setdefault("resources", {})["memory"] = {"limit": memory}
    if rlimits is not None:
        c["process"]["rlimits"] = rlimits
    with open(bundle + "/config.json", "w") as f:
        json.dump(c, f)


def reap(pid, timeout=300):
    """The exit status of the container's process, as the engine sees it."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        p, st = os.waitpid(pid, os.WNOHANG)
        if p == pid:
            return os.waitstatus_to_exitcode(st)
        time.sleep(0.05)
    return None


def state(cid):
    r = runtime("state", cid)
    try:
        return json.loads(r.stdout)
    except ValueError:
        return {"error": r.stderr}


def create(cid, bundle, out_name, extra=()):
    """create with the engine's stdout/stderr files; returns (result, pid, out path)."""
    out = open(W + "/" + out_name + ".out", "w")
    err = open(W + "/" + out_name + ".err", "w")
    r = runtime("create", "--bundle", bundle, "--pid-file", W + "/" + cid + ".pid", *extra, cid,
                stdout=out, stderr=err)
    out.close()
    err.close()
    pid = 0
    if os.path.exists(W + "/" + cid + ".pid"):
        pid = int(open(W + "/" + cid + ".pid").read())
    return r, pid, W + "/" + out_name


def run_bundle(name):
    """runtime run of bundle W/b<name> as container r<name>: (result, stdout, stderr)."""
    o = W + "/r" + name
    with open(o + ".out", "w") as out, open(o + ".err", "w") as err:
        r = runtime("run", "--bundle", W + "/b" + name, "r" + name, stdout=out, stderr=err)
    return r, open(o + ".out").read(), open(o + ".err").read()


shutil.rmtree(W, ignore_errors=True)
os.makedirs(W)
r = runtime("--version")
check(r.returncode == 0 and "spec: 1.0" in r.stdout, "--version names the spec", r.stdout)
r = runtime("features")
check(r.returncode == 0 and json.loads(r.stdout).get("ociVersionMax", "").startswith("1."),
      "features: JSON", r.stdout[:300])

# ---- a container's life: create, state, start, its output and exit status
os.makedirs(W + "/host-in")
with open(W + "/host-in/f.txt", "w") as f:
    f.write("from the host\n")
spec(W + "/b1", ["sh", "-c", "echo out; echo err >&2; echo $FOO; pwd; id -u; "
                 "cat /tmp/workspace/in/f.txt; exit 3"], env=["FOO=bar"], cwd="/tmp/workspace/in",
     mounts=[{"destination": "/tmp/workspace/in", "type": "bind", "source": W + "/host-in",
              "options": ["rbind", "ro"]}], memory=256 << 20)
t0 = time.monotonic()
r, pid, o = create("c1", W + "/b1", "c1")
t_create = time.monotonic() - t0
if not check(r.returncode == 0 and pid > 0, "create: 0 and the pid file", (r.returncode,
             open(o + ".err").read())):
    summary(" (stopped after create)")
    sys.exit(1)
s = state("c1")
check(s.get("status") == "created" and s.get("pid") == pid and s.get("id") == "c1" and
      s.get("bundle") == W + "/b1", "state: created, its pid and bundle", s)
r = runtime("start", "c1")
check(r.returncode == 0, "start: 0", r.stderr)
s = state("c1")
check(s.get("status") in ("running", "stopped"), "state after start: running", s)
code = reap(pid)
t_all = time.monotonic() - t0
out, err = open(o + ".out").read(), open(o + ".err").read()
check(code == 3, "the process exits with the job's status (3)", (code, err[-800:]))
check(out == "out\nbar\n/tmp/workspace/in\n1000\nfrom the host\n",
      "stdout: output, env, cwd, the unprivileged job user, a read-only bind", out)
check(err.startswith("err\n"), "stderr: the job's", err[:300])
s = state("c1")
check(s.get("status") == "stopped" and s.get("pid") == 0, "state: stopped", s)
r = runtime("start", "c1")
check(r.returncode != 0 and "stopped" in r.stderr, "start of a stopped container: refused",
      r.stderr)
r = runtime("delete", "c1")
check(r.returncode == 0 and not os.path.exists(ROOT + "/c1"), "delete: its state is gone",
      r.stderr)
r = runtime("state", "c1")
check(r.returncode != 0 and "does not exist" in r.stderr, "state of a deleted container", r.stderr)
print("# figure: create %.2f s, create to exit %.2f s (QEMU-TCG test host)" % (t_create, t_all),
      flush=True)

# ---- run: create, start, wait and delete in one
r, out1, err1 = run_bundle("1")
check(r.returncode == 3 and out1.startswith("out\n") and
      not os.path.exists(ROOT + "/r1"), "run: the job's status and output, then deleted",
      (r.returncode, err1[-500:]))

# ---- process.rlimits and a tmpfs mount: the container's process has them
spec(W + "/b8", ["sh", "-c", "ulimit -Sn; ulimit -Hn; ulimit -Hc; echo t >/tmp/data/x; "
                 "cat /tmp/data/x /proc/mounts"],
     rlimits=[{"type": "RLIMIT_NOFILE", "soft": 512, "hard": 4096},
              {"type": "RLIMIT_CORE", "soft": 0, "hard": 1 << 20}],
     mounts=[{"destination": "/tmp/data", "type": "tmpfs", "source": "tmpfs",
              "options": ["nosuid", "noexec", "size=1m", "tmpcopyup"]}])
r, out8, err8 = run_bundle("8")
check(r.returncode == 0 and out8.startswith("512\n4096\n2048\n"),
      "process.rlimits: the process's soft and hard limits (ulimit -Hc in 512-byte blocks)",
      (r.returncode, out8[:300], err8[-500:]))
check(r.returncode == 0 and "\nt\n" in out8 and
      " /tmp/data tmpfs rw,nosuid,nodev,noexec,relatime,size=1024k" in out8,
      "a tmpfs mount of the bundle's: its size and flags, writable", out8[-1500:])

# ---- root in the guest only on the bundle's request (io.husk.user)
spec(W + "/b11", ["sh", "-c", "id -u"], annotations={"io.husk.user": "root"})
r, out11, err11 = run_bundle("11")
check(r.returncode == 0 and out11 == "0\n",
      "io.husk.user=root: the process is root in the guest; uid 0 alone maps to agentuser",
      (r.returncode, out11[-200:], err11[-500:]))

# ---- io.husk.template: the VM starts from a template made on the bundle's image
# (in the default template directory, where husk-runc's runs look)
key = json.loads(subprocess.run([B + "/husk", "image", "import", ROOTFS, "--json", "--image-dir",
                                 IMG], capture_output=True, text=True).stdout or "{}").get("key", "")
r = subprocess.run([B + "/husk", "template", "create", "tbb", "--image", key, "--image-dir", IMG],
                   capture_output=True, text=True, timeout=600)
r2 = subprocess.run([B + "/husk", "template", "create", "tdef"], capture_output=True, text=True,
                    timeout=600)
check(key and r.returncode == 0 and r2.returncode == 0,
      "husk template create on the imported image (and one on the default root)",
      (key, r.stderr[-600:], r2.stderr[-600:]))
spec(W + "/b12", ["sh", "-c", "echo from-template; id -u"], annotations={"io.husk.template": "tbb"})
r, out12, err12 = run_bundle("12")
check(r.returncode == 0 and out12 == "from-template\n1000\n",
      "io.husk.template: the container's process runs in a clone of the template",
      (r.returncode, out12[-200:], err12[-800:]))
spec(W + "/b13", ["true"], annotations={"io.husk.template": "tdef"})
r, out13, err13 = run_bundle("13")
e = err13
check(r.returncode != 0 and "not the one the template was made from" in e,
      "io.husk.template of a template made on another root: refused, saying so",
      (r.returncode, e[-800:]))

# ---- kill: SIGTERM stops a running container; delete needs --force while it runs
spec(W + "/b2", ["sh", "-c", "echo up; i=0; while [ $i -lt 600 ]; do echo t$i; i=$((i+1)); "
                 "sleep 0.2; done"])
r, pid, o = create("c2", W + "/b2", "c2")
runtime("start", "c2")
end = time.monotonic() + 120
while time.monotonic() < end and "t3" not in open(o + ".out").read():
    time.sleep(0.1)
check("up" in open(o + ".out").read(), "a long job runs", open(o + ".err").read()[-500:])

# ---- pause and resume: the VM stands still, then goes on
r = runtime("pause", "c2")
time.sleep(1)       # what was already on its way
n1 = open(o + ".out").read().count("\n")
time.sleep(3)
n2 = open(o + ".out").read().count("\n")
check(r.returncode == 0 and state("c2").get("status") == "paused" and n1 == n2,
      "pause: the state is paused and the job makes no progress", (r.stderr, state("c2"), n1, n2))
r2 = runtime("pause", "c2")
check(r2.returncode != 0 and "paused" in r2.stderr, "pause of a paused container: refused",
      r2.stderr)
r = runtime("resume", "c2")
end = time.monotonic() + 60
while time.monotonic() < end and open(o + ".out").read().count("\n") < n2 + 3:
    time.sleep(0.1)
check(r.returncode == 0 and state("c2").get("status") == "running" and
      open(o + ".out").read().count("\n") >= n2 + 3, "resume: running again, the job goes on",
      (r.stderr, state("c2")))
r = runtime("resume", "c2")
check(r.returncode != 0 and "not paused" in r.stderr, "resume of a running container: refused",
      r.stderr)


# ---- update: the CPU quota reaches the VM's cgroup; its memory is fixed
def vm_cpu_max(pid):
    for line in open("/proc/mounts"):
        f = line.split()
        if f[2] == "cgroup2":
            for d in os.listdir(f[1] + "/husk"):
                if d.startswith("vm-%d-" % pid):
                    return open(f[1] + "/husk/" + d + "/cpu.max").read().strip()
    return None


r = runtime("update", "--cpu-quota", "25000", "--cpu-period", "100000", "c2")
check(r.returncode == 0 and vm_cpu_max(pid) == "25000 100000",
      "update --cpu-quota: the VM's cpu.max", (r.stderr, vm_cpu_max(pid)))
r = runtime("update", "--resources", "-", "c2", input=json.dumps(
    {"cpu": {"quota": 30000, "period": 100000}, "memory": {"limit": 512 << 20},
     "pids": {"limit": 100}}))
check(r.returncode == 0 and vm_cpu_max(pid) == "30000 100000",
      "update --resources - (as containerd sends it): the quota; the VM's own memory accepted",
      (r.stderr, vm_cpu_max(pid)))
r = runtime("update", "--memory", "1g", "c2")
check(r.returncode != 0 and "fixed" in r.stderr and vm_cpu_max(pid) == "30000 100000",
      "update --memory to another size: refused, nothing changed", r.stderr)
r = runtime("delete", "c2")
check(r.returncode != 0 and "running" in r.stderr and state("c2").get("status") == "running",
      "delete of a running container: refused, it runs on", r.stderr)
rp = runtime("pause", "c2")
r = runtime("kill", "c2", "SIGTERM")
t0 = time.monotonic()
code = reap(pid, 60)
check(rp.returncode == 0 and r.returncode == 0 and code == 128 + signal.SIGTERM,
      "kill SIGTERM: the container stops, paused as it was (exit 143)", (rp.stderr, r.stderr, code))
check(time.monotonic() - t0 < 30, "... promptly")
r = runtime("kill", "c2", "KILL")
check(r.returncode != 0 and "not running" in r.stderr, "kill of a stopped container: refused",
      r.stderr)
runtime("delete", "c2")

# ---- a created container deleted before it starts; delete --force of a running one
spec(W + "/b3", ["sh", "-c", "sleep 120"])
r, pid3, _ = create("c3", W + "/b3", "c3")
r = runtime("delete", "c3")
code = reap(pid3, 30)
check(r.returncode == 0 and code is not None and not os.path.exists(ROOT + "/c3"),
      "delete of a created container: its process ends, its state goes", (r.stderr, code))
r, pid4, _ = create("c4", W + "/b3", "c4")
runtime("start", "c4")
r = runtime("delete", "--force", "c4")
code = reap(pid4, 30)
check(r.returncode == 0 and code == -signal.SIGKILL and not os.path.exists(ROOT + "/c4"),
      "delete --force of a running container", (r.stderr, code))

# ---- what must be refused
r, _, _ = create("c4", W + "/b3", "c4b")
r2, _, _ = create("c4", W + "/b3", "c4c")
check(r.returncode == 0 and r2.returncode != 0 and "exists" in open(W + "/c4c.err").read(),
      "create: an ID in use is refused", open(W + "/c4c.err").read())
runtime("delete", "--force", "c4")
spec(W + "/b5", ["true"], terminal=True)
r, pid, _ = create("c5", W + "/b5", "c5")
e = open(W + "/c5.err").read()
check(r.returncode != 0 and "console-socket" in e and not os.path.exists(ROOT + "/c5"),
      "a terminal without --console-socket: refused, nothing left", e)
log = open(W + "/runtime.log").read().splitlines()
check(any(json.loads(x).get("level") == "error" and "terminal" in json.loads(x).get("msg", "")
          for x in log), "the error is in --log as JSON", log[-3:])

# ---- a terminal: the master over --console-socket, as conmon takes it
# After the line, the window the engine set meanwhile must reach the guest.
spec(W + "/b7", ["sh", "-c", "if [ -t 0 ] && [ -t 1 ] && [ -t 2 ]; then echo all-tty; fi; "
                 "ls -l /proc/self/fd/0; read line; echo got-$line; i=0; "
                 "while [ \"$(stty size)\" != '33 111' ] && [ $i -lt 100 ]; do "
                 "sleep 0.2; i=$((i+1)); done; echo \"size-$(stty size)\"; exit 4"],
     terminal=True)
srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
srv.bind(W + "/console.sock")
srv.listen(1)
srv.settimeout(120)
r, pid, _ = create("c7", W + "/b7", "c7", extra=("--console-socket", W + "/console.sock"))
master = -1
try:
    conn, _ = srv.accept()
    _, fds, _, _ = socket.recv_fds(conn, 256, 1)
    master = fds[0] if fds else -1
    conn.close()
except OSError as ex:
    print("# console socket: %s" % ex, flush=True)
check(r.returncode == 0 and master >= 0 and os.isatty(master),
      "create --console-socket: the engine gets a terminal's master",
      (r.returncode, open(W + "/c7.err").read()[-500:]))
if master >= 0:
    runtime("start", "c7")
    seen = b""
    end = time.monotonic() + 120
    sent = False
    while time.monotonic() < end and b"size-" not in seen:
        rd, _, _ = select.select([master], [], [], 1)
        if rd:
            try:
                chunk = os.read(master, 4096)
            except OSError:
                break
            if not chunk:
                break
            seen += chunk
        # The guest's line discipline turns the terminal's CR into a newline.
        if not sent and b"/dev/pts/" in seen:
            # As conmon does when its user's terminal changes.
            fcntl.ioctl(master, termios.TIOCSWINSZ, struct.pack("HHHH", 33, 111, 0, 0))
            os.write(master, b"hello\r")
            sent = True
    code = reap(pid)
    check(b"all-tty" in seen and b"/dev/pts/" in seen,
          "the process's stdin, stdout and stderr are a terminal in the guest", seen[-400:])
    check(b"got-hello" in seen, "what the engine types reaches the process, echoed", seen[-400:])
    check(b"size-33 111" in seen, "the engine's resize of its master reaches the guest's pty",
          seen[-400:])
    check(code == 4, "the terminal's container exits 4", code)
    os.close(master)
srv.close()
runtime("delete", "--force", "c7")
spec(W + "/b6", ["true"], mounts=[{"destination": "/tmp/workspace/rw", "type": "bind",
                                   "source": W, "options": ["rbind"]}])
r, _, _ = create("c6", W + "/b6", "c6")
check(r.returncode != 0 and "writable" in open(W + "/c6.err").read(),
      "a writable bind: refused", open(W + "/c6.err").read())
for bad_id in ("../x", "a/b", ""):
    r = runtime("create", "--bundle", W + "/b3", bad_id)
    check(r.returncode != 0 and "container ID" in r.stderr, "create %r: a bad ID" % bad_id,
          r.stderr)
r = runtime("start", "nope")
check(r.returncode != 0 and "does not exist" in r.stderr, "start of no container", r.stderr)

# ---- the engine's network namespace: the guest's NIC lives there, filtered
# The namespace as an engine makes one: a veth to the test host, its own
# address and default route; a server on the test host logs who reaches it.
NS_SRV = "198.51.100.9"
NSGET = ("printf 'GET /f HTTP/1.0\\r\\n\\r\\n' | busybox nc -w 5 %s 8083 | grep -q hello && "
         "echo got-it" % NS_SRV)
httpd = None
if IPR:
    def ip(*a):
        return subprocess.run([IPR] + list(a), capture_output=True, text=True)
    for a in (("netns", "add", "on"), ("link", "add", "ov0", "type", "veth", "peer", "name", "ov1"),
              ("link", "set", "ov1", "netns", "on"), ("addr", "add", "10.78.0.1/24", "dev", "ov0"),
              ("link", "set", "ov0", "up"), ("-n", "on", "link", "set", "lo", "up"),
              ("-n", "on", "addr", "add", "10.78.0.2/24", "dev", "ov1"),
              ("-n", "on", "link", "set", "ov1", "up"),
              ("-n", "on", "route", "add", "default", "via", "10.78.0.1"),
              ("addr", "add", NS_SRV + "/32", "dev", "lo")):
        r = ip(*a)
        check(r.returncode == 0, "netns set-up: ip " + " ".join(a), r.stderr)
    os.makedirs(W + "/www")
    with open(W + "/www/f", "w") as f:
        f.write("hello\n")
    httpd = subprocess.Popen(["busybox", "httpd", "-f", "-vv", "-p", NS_SRV + ":8083", "-h",
                              W + "/www"], stderr=open(W + "/httpd-ns.log", "w"))
    time.sleep(1)
    def in_netns(bundle):
        """The bundle's network namespace: the engine's, by path."""
        with open(bundle + "/config.json") as f:
            c = json.load(f)
        c["linux"]["namespaces"] = [n for n in c["linux"]["namespaces"]
                                    if n["type"] != "network"]
        c["linux"]["namespaces"].append({"type": "network", "path": "/run/netns/on"})
        with open(bundle + "/config.json", "w") as f:
            json.dump(c, f)
    spec(W + "/b9", ["sh", "-c", NSGET],
         annotations={"io.husk.allow": NS_SRV + "/32:tcp:8083"})
    in_netns(W + "/b9")
    r, out9, err9 = run_bundle("9")
    check(r.returncode == 0 and "got-it" in out9,
          "linux.namespaces network path: the allowed server is reached from the VM",
          (r.returncode, out9[-300:], err9[-800:]))
    log = open(W + "/httpd-ns.log").read()
    check("10.78.0.2" in log and "10.200." not in log,
          "... through the engine's namespace, with its address", log[-400:])
    spec(W + "/b10", ["sh", "-c", NSGET])
    in_netns(W + "/b10")
    r, out10, err10 = run_bundle("10")
    check(r.returncode == 1 and "got-it" not in out10,
          "... and without an allow rule the filter drops it (the job's status 1)",
          (r.returncode, out10[-300:], err10[-800:]))
    r = ip("netns", "exec", "on", "/usr/sbin/nft", "list", "tables")
    check(r.returncode == 0 and "husk_" not in r.stdout and
          "husk" not in ip("-n", "on", "link", "show").stdout,
          "nothing of the VMs is left in the engine's namespace", (r.stdout, r.stderr))
else:
    skip("the engine's network namespace: iproute2 or nft not brought in")

# ---- podman --runtime husk-runc (conmon drives the runtime)
# podman's temporary files (the test host has no /var/tmp)
os.makedirs(W + "/tmp", exist_ok=True)
os.environ["TMPDIR"] = W + "/tmp"
# The test host's root is an initramfs, where runc cannot pivot_root (husk-runc
# ignores the flag: its containers are VMs).
with open(W + "/containers.conf", "w") as f:
    f.write("[engine]\nno_pivot_root = true\n")
os.environ["CONTAINERS_CONF"] = W + "/containers.conf"


def podman(*args, timeout=600):
    cmd = [PODMAN, "--root", W + "/pd-storage", "--runroot", W + "/pd-run", "--storage-driver",
           "vfs", "--cgroup-manager", "cgroupfs", "--events-backend", "file",
           "--runtime", HUSK] + list(args)
    return subprocess.run(cmd, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                          timeout=timeout)


cmd_peer = [PODMAN, "--root", W + "/pd-storage", "--runroot", W + "/pd-run", "--storage-driver",
            "vfs", "--cgroup-manager", "cgroupfs", "--events-backend", "file", "--runtime"]
if not PODMAN:
    skip("podman with husk-runc: podman or conmon not brought in")
else:
    r = podman("import", TAR, "localhost/bb")
    if check(r.returncode == 0, "podman import of a busybox root", r.stderr[-1500:]):
        t0 = time.monotonic()
        r = podman("run", "--rm", "--network", "none", "-e", "FOO=bar", "localhost/bb", "sh",
                   "-c", "echo hi $FOO; echo oops >&2; id -u; exit 3")
        el = time.monotonic() - t0
        check(r.returncode == 3 and r.stdout == "hi bar\n1000\n" and "oops" in r.stderr,
              "podman run --runtime husk-runc: output, env, the job user, exit status 3",
              (r.returncode, r.stdout, r.stderr[-1500:]))
        print("# figure: podman run --rm --runtime husk-runc: %.2f s" % el, flush=True)
        if IPR:
            # podman joins a namespace it was given (ns:PATH), as with its own networks.
            r = podman("run", "--rm", "--network", "ns:/run/netns/on", "--annotation",
                       "io.husk.allow=%s/32:tcp:8083" % NS_SRV, "localhost/bb", "sh", "-c",
                       NSGET)
            check(r.returncode == 0 and "got-it" in r.stdout,
                  "podman run --network ns:PATH: the VM's traffic leaves through it",
                  (r.returncode, r.stdout[-300:], r.stderr[-1500:]))
        # A read-only bind (copied in), the working directory, and users: -u maps
        # to agentuser, root in the guest only on io.husk.user=root.
        os.makedirs(W + "/vol")
        with open(W + "/vol/f", "w") as f:
            f.write("from the host\n")
        r = podman("run", "--rm", "--network", "none", "-v", W + "/vol:/tmp/workspace/data:ro",
                   "-w", "/tmp/workspace/data", "-u", "1234", "localhost/bb", "sh", "-c",
                   "cat f; pwd; id -u")
        check(r.returncode == 0 and r.stdout == "from the host\n/tmp/workspace/data\n1000\n",
              "podman run -v DIR:DST:ro -w DST -u 1234: the file, the directory, agentuser",
              (r.returncode, r.stdout, r.stderr[-1500:]))
        r = podman("run", "--rm", "--network", "none", "--annotation", "io.husk.user=root",
                   "localhost/bb", "id", "-u")
        check(r.returncode == 0 and r.stdout == "0\n",
              "podman run --annotation io.husk.user=root: root in the guest",
              (r.returncode, r.stdout, r.stderr[-1500:]))
        r = podman("run", "-d", "--network", "none", "--name", "k", "localhost/bb", "sleep",
                   "300")
        rk = podman("kill", "k")
        podman("wait", "k", timeout=120)
        ri = podman("inspect", "--format", "{{.State.Status}} {{.State.ExitCode}}", "k")
        check(r.returncode == 0 and rk.returncode == 0 and ri.stdout.split() == ["exited", "137"],
              "podman kill: SIGKILL ends the container, exit code 137",
              (r.stderr[-500:], rk.stderr[-500:], ri.stdout, ri.stderr[-500:]))
        podman("rm", "-f", "k")
        r = podman("run", "-d", "--network", "none", "--name", "long", "localhost/bb", "sleep",
                   "300")
        check(r.returncode == 0, "podman run -d", r.stderr[-1500:])
        r = podman("ps", "--format", "{{.Names}} {{.Status}}")
        check("long Up" in r.stdout, "podman ps: it is up", (r.stdout, r.stderr[-500:]))
        r = podman("pause", "long")
        ri = podman("inspect", "--format", "{{.State.Status}}", "long")
        check(r.returncode == 0 and ri.stdout.strip() == "paused",
              "podman pause: the container is paused", (r.stderr[-800:], ri.stdout))
        r = podman("unpause", "long")
        ri = podman("inspect", "--format", "{{.State.Status}}", "long")
        check(r.returncode == 0 and ri.stdout.strip() == "running",
              "podman unpause: running again", (r.stderr[-800:], ri.stdout))
        t0 = time.monotonic()
        r = podman("stop", "-t", "5", "long", timeout=120)
        check(r.returncode == 0 and time.monotonic() - t0 < 60, "podman stop", r.stderr[-1500:])
        r = podman("inspect", "--format", "{{.State.Status}} {{.State.ExitCode}}", "long")
        check(r.stdout.split()[:1] == ["exited"], "podman inspect: exited", r.stdout)
        r = podman("rm", "long")
        check(r.returncode == 0, "podman rm", r.stderr[-500:])
        r = podman("run", "--rm", "--network", "none", "-t", "localhost/bb", "sh", "-c",
                   "if [ -t 0 ] && [ -t 1 ]; then echo all-tty; fi; ls -l /proc/self/fd/1; "
                   "exit 3")
        check(r.returncode == 3 and "all-tty" in r.stdout and "/dev/pts/" in r.stdout,
              "podman run -t: the process has a terminal, its output and status",
              (r.returncode, r.stdout[-400:], r.stderr[-800:]))
        # Figures, side by side in this run: podman with husk-runc and with runc
        # and crun (containers, not VMs), and husk run --image on the same root.
        def median_s(fn, n=3):
            ts = []
            for _ in range(n):
                t = time.monotonic()
                ok_ = fn()
                ts.append(time.monotonic() - t if ok_ else float("nan"))
            return sorted(ts)[n // 2]
        fig = {"husk-runc": median_s(lambda: podman("run", "--rm", "--network", "none",
                                                    "localhost/bb", "true").returncode == 0)}
        for name, peer in (("runc", RUNC), ("crun", CRUN)):
            if not peer:
                continue
            cmd = cmd_peer + [peer, "run", "--rm", "--network", "none", "localhost/bb", "true"]
            r = subprocess.run(cmd, capture_output=True, text=True)
            if r.returncode:
                print("# podman with %s fails here: %s" % (name, r.stderr.strip()[-400:]),
                      flush=True)
            else:
                fig[name] = median_s(lambda: subprocess.run(
                    cmd, capture_output=True).returncode == 0)
        key = json.loads(subprocess.run([B + "/husk", "image", "import", ROOTFS, "--json",
                                         "--image-dir", IMG], capture_output=True,
                                        text=True).stdout or "{}").get("key", "")
        fig["husk run --image"] = median_s(lambda: subprocess.run(
            [B + "/husk", "run", "--image", key, "--image-dir", IMG, "--", "true"],
            capture_output=True).returncode == 0)
        print("# figure: median of 3, podman run --rm ... true: " + ", ".join(
            "%s %.2f s" % kv for kv in fig.items()), flush=True)

for store in (IMG, "/var/lib/husk/images"):	# the driver's, and the engines' default
    imgs = subprocess.run([B + "/husk", "image", "ls", "--json", "--image-dir", store],
                          capture_output=True, text=True).stdout
    check([n for i in json.loads(imgs or "[]") for n in i.get("names", [])
           if n.startswith("oci-")] == [],
          "every container's root left the image store %s with it" % store, imgs[-800:])
left = [x for x in os.listdir(ROOT) if not x.startswith(".")] if os.path.isdir(ROOT) else []
check(left == [], "no container state left", left)
# ---- containerd: ctr run through the runc shim, BinaryName = husk-runc
if not (CONTAINERD and PODMAN):
    skip("containerd with husk-runc: containerd (and podman, to make the image) not brought in")
else:
    CS = W + "/ctd.sock"
    with open(W + "/ctd.toml", "w") as f:
        f.write('version = 2\ndisabled_plugins = ["io.containerd.grpc.v1.cri"]\n')
    ctd = subprocess.Popen([CONTAINERD, "--config", W + "/ctd.toml", "--root", W + "/ctd-root",
                            "--state", W + "/ctd-state", "--address", CS],
                           stdout=subprocess.DEVNULL, stderr=open(W + "/ctd.log", "w"))

    def ctr(*args, timeout=300):
        return subprocess.run(["ctr", "--address", CS] + list(args), stdin=subprocess.DEVNULL,
                              capture_output=True, text=True, timeout=timeout)
    for _ in range(100):
        if ctr("version").returncode == 0:
            break
        time.sleep(0.2)
    r = podman("save", "--format", "docker-archive", "-o", W + "/bb-docker.tar", "localhost/bb")
    r2 = ctr("image", "import", "--snapshotter", "native", "--all-platforms",
             W + "/bb-docker.tar")
    if check(r.returncode == 0 and r2.returncode == 0, "containerd: the image imported",
             (r.stderr[-500:], r2.stderr[-800:], open(W + "/ctd.log").read()[-800:])):
        t0 = time.monotonic()
        r = ctr("run", "--rm", "--snapshotter", "native", "--runc-binary", HUSK,
                "--env", "FOO=bar", "localhost/bb:latest", "k1", "sh", "-c",
                "echo hi $FOO; echo oops >&2; id -u; exit 3")
        el = time.monotonic() - t0
        check(r.returncode == 3 and r.stdout == "hi bar\n1000\n" and "oops" in r.stderr,
              "ctr run --runc-binary husk-runc: output, env, the job user, exit status 3",
              (r.returncode, r.stdout, r.stderr[-1500:], open(W + "/ctd.log").read()[-1500:]))
        print("# figure: ctr run --rm --runc-binary husk-runc: %.2f s" % el, flush=True)
        r = ctr("run", "-d", "--snapshotter", "native", "--runc-binary", HUSK,
                "localhost/bb:latest", "k2", "sleep", "300")
        time.sleep(1)
        r2 = ctr("task", "ls")
        check(r.returncode == 0 and "k2" in r2.stdout and "RUNNING" in r2.stdout,
              "ctr run -d: the task runs", (r.stderr[-800:], r2.stdout))
        r = ctr("task", "kill", "-s", "SIGTERM", "k2")
        for _ in range(300):
            if "STOPPED" in ctr("task", "ls").stdout:
                break
            time.sleep(0.1)
        check("STOPPED" in ctr("task", "ls").stdout, "ctr task kill: it stops",
              ctr("task", "ls").stdout)
        r = ctr("task", "rm", "k2")
        r2 = ctr("container", "rm", "k2")
        check(r.returncode == 0 and r2.returncode == 0, "ctr task rm, container rm",
              (r.stderr, r2.stderr))
    ctd.terminate()
    ctd.wait(30)

# ---- Slurm: srun --container through oci.conf
def slurm_test():
    sl = W + "/slurm"
    for d in ("etc", "spool", "state", "log", "run"):
        os.makedirs(sl + "/" + d, exist_ok=True)
    with open(sl + "/munge.key", "wb") as f:
        f.write(os.urandom(1024))
    os.chmod(sl + "/munge.key", 0o400)
    # The test host has no name, no users and only lo; Slurm needs a name
    # that resolves to an address of a non-loopback interface (getaddrinfo's
    # AI_ADDRCONFIG), root in /etc/passwd, and slurmd a cgroup v2 scope.
    subprocess.run(["hostname", "huskth"])
    for c in ("link add hs0 type veth peer name hs1", "addr add 10.99.0.1/24 dev hs0",
              "link set hs0 up", "link set hs1 up"):
        subprocess.run(["ip"] + c.split(), stderr=subprocess.DEVNULL)
    for path, text in (("/etc/passwd", "root:x:0:0:root:/root:/bin/sh\n"),
                       ("/etc/group", "root:x:0:\n"),
                       ("/etc/hosts", "10.99.0.1 huskth\n127.0.0.1 localhost\n"),
                       ("/etc/nsswitch.conf", "hosts: files\npasswd: files\ngroup: files\n")):
        if not os.path.exists(path):
            with open(path, "w") as f:
                f.write(text)
    os.makedirs("/sys/fs/cgroup/system.slice", exist_ok=True)
    with open(sl + "/etc/cgroup.conf", "w") as f:
        f.write("CgroupPlugin=cgroup/v2\nIgnoreSystemd=yes\n")
    host = subprocess.run(["hostname", "-s"], capture_output=True, text=True).stdout.strip()
    with open(sl + "/etc/slurm.conf", "w") as f:
        f.write("""ClusterName=husk
SlurmctldHost={h}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket={s}/run/munge.sock
CredType=cred/munge
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/linear
SchedulerType=sched/builtin
MpiDefault=none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SlurmctldPidFile={s}/run/slurmctld.pid
SlurmdPidFile={s}/run/slurmd.pid
SlurmdSpoolDir={s}/spool
StateSaveLocation={s}/state
SlurmctldLogFile={s}/log/ctld.log
SlurmdLogFile={s}/log/slurmd.log
ReturnToService=2
NodeName={h} CPUs=1 RealMemory=500 State=UNKNOWN
PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP
""".format(h=host, s=sl))
    # The runtime through a script that logs each call, for the report.
    rt = sl + "/rt"
    with open(rt, "w") as f:
        f.write('#!/bin/sh\necho "$*" >> %s/rt.log\nexec %s --root %s/oci --image-dir %s "$@"\n'
                % (sl, HUSK, sl, IMG))
    os.chmod(rt, 0o755)
    with open(sl + "/etc/oci.conf", "w") as f:
        # run, not create and start: slurmstepd waits for the end of the
        # output of RunTimeCreate, which the container's process holds.
        f.write('RunTimeQuery="%s state %%n.%%u.%%j.%%s.%%t"\n' % rt)
        f.write('RunTimeRun="%s run --bundle %%b %%n.%%u.%%j.%%s.%%t"\n' % rt)
        f.write('RunTimeKill="%s kill --all %%n.%%u.%%j.%%s.%%t"\n' % rt)
        f.write('RunTimeDelete="%s delete --force %%n.%%u.%%j.%%s.%%t"\n' % rt)
    env = dict(os.environ, SLURM_CONF=sl + "/etc/slurm.conf")
    daemons = [subprocess.Popen(["munged", "--key-file", sl + "/munge.key", "--socket",
                                 sl + "/run/munge.sock", "--pid-file", sl + "/run/munged.pid",
                                 "--log-file", sl + "/log/munged.log", "--seed-file",
                                 sl + "/run/munge.seed", "-F", "--force"],
                                stdout=subprocess.DEVNULL,
                                stderr=open(sl + "/log/munged.err", "w"))]
    time.sleep(1)
    daemons.append(subprocess.Popen(["slurmctld", "-D", "-i"], env=env,
                                    stdout=subprocess.DEVNULL,
                                    stderr=open(sl + "/log/ctld.err", "w")))
    daemons.append(subprocess.Popen(["slurmd", "-D"], env=env, stdout=subprocess.DEVNULL,
                                    stderr=open(sl + "/log/slurmd.err", "w")))
    try:
        idle = ""
        for _ in range(60):
            try:
                idle = subprocess.run(["sinfo", "-h", "-o", "%t"], env=env, capture_output=True,
                                      text=True, timeout=15).stdout.strip()
            except subprocess.TimeoutExpired:
                idle = "no answer"
            if idle == "idle":
                break
            time.sleep(0.5)
        logs = lambda: "".join(x + ": " + open(sl + "/log/" + x).read()[-700:] + "\n" for x in
                               ("munged.err", "ctld.err", "slurmd.err", "ctld.log",
                                "slurmd.log") if os.path.exists(sl + "/log/" + x))
        if not check(idle == "idle", "slurm: one node up (munge, slurmctld, slurmd)",
                     (idle, logs())):
            return
        spec(W + "/b-slurm", ["true"])
        t0 = time.monotonic()
        try:
            r = subprocess.run(["srun", "--container=" + W + "/b-slurm", "sh", "-c",
                                "echo in container; id -u; exit 3"], env=env,
                               capture_output=True, text=True, timeout=300)
        except subprocess.TimeoutExpired as e:
            r = subprocess.CompletedProcess(e.cmd, -1, e.stdout or "", e.stderr or "")
            if isinstance(r.stdout, bytes):
                r.stdout, r.stderr = r.stdout.decode(), r.stderr.decode()
            print("# srun timed out; runtime calls:\n" + (open(sl + "/rt.log").read()
                  if os.path.exists(sl + "/rt.log") else "(none)") + logs()[-3000:], flush=True)
        el = time.monotonic() - t0
        check("in container\n1000\n" in r.stdout,
              "srun --container: the job ran in a husk VM, as the job user",
              (r.returncode, r.stdout, r.stderr[-800:], logs()))
        check(r.returncode == 3, "srun --container: the job's exit status (3)",
              (r.returncode, r.stderr[-500:]))
        print("# figure: srun --container ... (husk-runc): %.2f s" % el, flush=True)
    finally:
        for d in reversed(daemons):
            d.terminate()
            try:
                d.wait(20)
            except subprocess.TimeoutExpired:
                d.kill()


if not SLURM:
    skip("slurm with husk-runc: slurmctld, slurmd, srun or munged not brought in")
else:
    slurm_test()

if httpd:
    httpd.kill()
    httpd.wait()
time.sleep(1)
# The engine reaps its containers: the ones this test did not wait for are reaped here.
while True:
    try:
        if os.waitpid(-1, os.WNOHANG)[0] == 0:
            break
    except ChildProcessError:
        break
vms = [x for x in subprocess.run(["ps", "-o", "pid,stat,comm,args"], capture_output=True,
                                 text=True).stdout.splitlines() if " husk" in x]
check(vms == [], "no husk process left", vms)
summary()
sys.exit(1 if fails else 0)
