#!/usr/bin/env python3
"""husk serve on this host, no VM: the daemon's limits against hostile
members of its socket's group. Each part starts its own daemon on a scratch
socket and TMPDIR (workers find no kernel and end at once) and talks to it
as root and as other uids (fork + setuid).   daemon_test.py HUSK

Bounds are hang bounds with slack, not speed targets; the figures measured
are printed as '# figure' lines."""

import json
import os
import resource
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

HUSK = os.path.abspath(sys.argv[1])
GROUP = 60000          # the socket's group: a number no account needs
ADMIN_GROUP = 60100    # --admin-group: nobody is listed in it
A, B = 60001, 60002    # two tenants
MIB = 1 << 20

passes = fails = skips = 0


def check(cond, msg, detail=""):
    global passes, fails
    if cond:
        passes += 1
        print("ok   - " + msg, flush=True)
    else:
        fails += 1
        print("FAIL - " + msg + (": " + str(detail)[:1500] if detail != "" else ""), flush=True)
    return cond


def fail(msg, detail=""):
    """A part that stopped on an exception: one failure, with what stopped it."""
    global fails
    fails += 1
    print("FAIL - " + msg + ": " + str(detail)[:1500], flush=True)


def skip(msg, why):
    global skips
    skips += 1
    print("skip - %s: %s" % (msg, why), flush=True)


def figure(text):
    print("# figure: " + text, flush=True)


# ---- the daemon ----

class Daemon:
    def __init__(self, conf="", args=(), nofile=8192):
        self.dir = tempfile.mkdtemp(prefix="husk-serve-test-")
        os.chmod(self.dir, 0o755)
        self.sock = self.dir + "/serve.sock"
        os.mkdir(self.dir + "/tmp")
        with open(self.dir + "/serve.conf", "w") as f:
            f.write(conf)
        env = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "TMPDIR": self.dir + "/tmp",
               "HUSK_KERNEL": self.dir + "/no-kernel", "HUSK_ROOTFS": self.dir + "/no-rootfs"}
        self.log = open(self.dir + "/serve.log", "wb")

        def limits():
            resource.setrlimit(resource.RLIMIT_NOFILE, (nofile, nofile))

        self.p = subprocess.Popen(
            [HUSK, "serve", "--socket", self.sock, "--group", str(GROUP),
             "--admin-group", str(ADMIN_GROUP), "--template-dir", self.dir + "/templates",
             "--config", self.dir + "/serve.conf"] + list(args),
            stdout=self.log, stderr=subprocess.STDOUT, env=env, preexec_fn=limits)
        end = time.time() + 10
        while time.time() < end and self.p.poll() is None:
            try:
                c = Conn(self.sock)
                if c.call({"id": "up", "op": "health"})[1].get("ok"):
                    c.close()
                    return
                c.close()
            except OSError:
                time.sleep(0.05)
        why = self.logtext()
        self.stop()
        raise RuntimeError("husk serve did not start: " + why)

    def logtext(self):
        self.log.flush()
        with open(self.dir + "/serve.log", "rb") as f:
            return f.read().decode(errors="replace")[-2000:]

    def status(self, field):
        with open("/proc/%d/status" % self.p.pid) as f:
            for line in f:
                if line.startswith(field + ":"):
                    return line.split(":", 1)[1].strip()
        return None

    def rss_mib(self):
        v = self.status("VmRSS")
        return int(v.split()[0]) / 1024 if v else 0

    def nfds(self):
        return len(os.listdir("/proc/%d/fd" % self.p.pid))

    def children(self):
        """(pid, state, comm) of the daemon's children."""
        out = []
        for d in os.listdir("/proc"):
            if not d.isdigit():
                continue
            try:
                with open("/proc/%s/stat" % d) as f:
                    st = f.read()
            except OSError:
                continue
            comm = st[st.index("(") + 1:st.rindex(")")]
            rest = st[st.rindex(")") + 2:].split()
            if int(rest[1]) == self.p.pid:
                out.append((int(d), rest[0], comm))
        return out

    def stop(self):
        if self.p.poll() is None:
            self.p.send_signal(signal.SIGTERM)
            try:
                self.p.wait(20)
            except subprocess.TimeoutExpired:
                self.p.kill()
                self.p.wait()
        self.log.close()
        shutil.rmtree(self.dir, ignore_errors=True)


# ---- a client ----

def readable(fd, timeout):
    """fd (an int or a socket) can be read within timeout seconds (poll: fds
    above 1023 too)."""
    p = select.poll()
    p.register(fd, select.POLLIN)
    return bool(p.poll(max(0, timeout) * 1000))


class Conn:
    def __init__(self, path, timeout=5):
        self.s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.s.settimeout(timeout)
        end = time.time() + timeout
        while True:
            try:
                self.s.connect(path)
                break
            except BlockingIOError:
                # The listen backlog is full: wait for the daemon to take some.
                if time.time() > end:
                    self.s.close()
                    raise
                time.sleep(0.005)
        self.buf = b""

    def send(self, obj):
        self.s.sendall(obj if isinstance(obj, bytes) else json.dumps(obj).encode() + b"\n")

    def recv(self, timeout=5):
        """The next line as an object; None at EOF or after timeout seconds."""
        end = time.time() + timeout
        while b"\n" not in self.buf:
            left = end - time.time()
            if left <= 0 or not readable(self.s, left):
                return None
            try:
                chunk = self.s.recv(65536)
            except OSError:
                return None
            if not chunk:
                return None
            self.buf += chunk
        line, self.buf = self.buf.split(b"\n", 1)
        return json.loads(line)

    def eof(self, timeout=5):
        """True once the daemon closed the connection (lines before are read)."""
        end = time.time() + timeout
        while time.time() < end:
            if not readable(self.s, end - time.time()):
                return False
            try:
                chunk = self.s.recv(65536)
            except OSError:
                return True
            if not chunk:
                return True
            self.buf += chunk
        return False

    def call(self, req, timeout=5):
        """(events, final line or {}) of one request."""
        self.send(req)
        events = []
        while True:
            m = self.recv(timeout)
            if m is None:
                return events, {}
            if "ok" in m or "error" in m:
                return events, m
            events.append(m)

    def close(self):
        self.s.close()


def code(m):
    return (m.get("error") or {}).get("code")


def message(m):
    return (m.get("error") or {}).get("message", "")


# ---- other uids ----

def drop(uid, gid=GROUP):
    os.setgroups([GROUP])
    os.setresgid(gid, gid, gid)
    os.setresuid(uid, uid, uid)


def as_uid(uid, fn, *args, gid=GROUP, timeout=60):
    """fn(*args) in a child running as uid; its JSON result, or {"error": why}."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (4096, 4096))
            drop(uid, gid)
            out = fn(*args)
        except Exception as e:  # noqa: BLE001 - reported to the parent
            out = {"error": "%s: %s" % (type(e).__name__, e)}
        os.write(w, json.dumps(out).encode())
        os._exit(0)
    os.close(w)
    data = b""
    end = time.time() + timeout
    while time.time() < end:
        if not readable(r, end - time.time()):
            break
        chunk = os.read(r, 65536)
        if not chunk:
            break
        data += chunk
    os.close(r)
    if os.waitpid(pid, os.WNOHANG) == (0, 0):
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
    try:
        return json.loads(data)
    except ValueError:
        return {"error": "no answer from the uid %d child within %d s" % (uid, timeout)}


class Holder:
    """A child running as uid that runs fn(*args), reports its result, then
    holds everything it opened until release()."""

    def __init__(self, uid, fn, *args):
        r, w = os.pipe()
        hr, hw = os.pipe()
        self.pid = os.fork()
        if self.pid == 0:
            os.close(r)
            os.close(hw)
            keep = []
            try:
                resource.setrlimit(resource.RLIMIT_NOFILE, (4096, 4096))
                drop(uid)
                out = fn(keep, *args)
            except Exception as e:  # noqa: BLE001
                out = {"error": "%s: %s" % (type(e).__name__, e)}
            os.write(w, json.dumps(out).encode() + b"\n")
            os.close(w)
            os.read(hr, 1)     # until release()
            os._exit(0)
        os.close(w)
        os.close(hr)
        self.r, self.hold = r, hw

    def result(self, timeout=60):
        data = b""
        end = time.time() + timeout
        while not data.endswith(b"\n") and time.time() < end:
            if not readable(self.r, end - time.time()):
                break
            chunk = os.read(self.r, 65536)
            if not chunk:
                break
            data += chunk
        try:
            return json.loads(data)
        except ValueError:
            return {"error": "no result within %d s" % timeout}

    def release(self):
        os.close(self.hold)
        os.close(self.r)
        try:
            os.waitpid(self.pid, 0)
        except ChildProcessError:
            pass


# ---- 1. answers nobody reads ----

def part_unread_answers():
    d = Daemon()
    try:
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        s.connect(d.sock)
        s.setblocking(False)
        chunk = b'{"op":"health"}\n' * 4096
        sent, peak, stalled, t0, last = 0, d.rss_mib(), None, time.time(), 0
        while sent < 100 * 1000 * 1000 and time.time() - t0 < 40:
            try:
                sent += s.send(chunk)
                stalled = None
            except BlockingIOError:
                stalled = stalled or time.time()
                if time.time() - stalled > 3:
                    break
                select.select([], [s], [], 0.05)
            if time.time() - last > 0.1:
                last = time.time()
                peak = max(peak, d.rss_mib())
                if peak > 64:
                    break
        peak = max(peak, d.rss_mib())
        figure("a client sending %.1f MB of health requests and reading nothing: daemon "
               "VmRSS peak %.1f MiB" % (sent / 1e6, peak))
        check(peak < 64, "a client that never reads its answers: the daemon's RSS stays "
              "under 64 MiB", "%.1f MiB after %.1f MB sent" % (peak, sent / 1e6))
        check(sent < 100 * 1000 * 1000, "... because its requests are no longer read",
              "%.1f MB taken" % (sent / 1e6))
        other = Conn(d.sock)
        t = time.time()
        fin = other.call({"id": 1, "op": "health"})[1]
        figure("another client's health meanwhile: %.1f ms" % ((time.time() - t) * 1000))
        check(fin.get("ok"), "another client is served meanwhile", fin)
        other.close()
        s.close()
        check(d.p.poll() is None, "the daemon lives on", d.logtext())
    finally:
        d.stop()


# ---- 2. requests that can never fit ----

def ask(sock, reqs, timeout=5, first=False):
    """Each request on its own connection: [(events, final)]; with first,
    only up to its first line."""
    out = []
    for req in reqs:
        c = Conn(sock)
        c.send(req)
        evs, fin, end = [], {}, time.time() + timeout
        while time.time() < end:
            m = c.recv(max(0.01, end - time.time()))
            if m is None:
                break
            if "ok" in m or "error" in m:
                fin = m
                break
            evs.append(m)
            if first:
                break
        out.append((evs, fin))
        c.close()
    return out


def part_never_fits():
    d = Daemon("max_vms = 4\nmax_mem = 4096\nmax_queue = 3\n")
    try:
        t = time.time()
        # The large request's connection stays open: a queued request would stay too.
        a = Holder(A, lambda keep, p: (keep.append(Conn(p)), keep[0].call(
            {"id": 1, "op": "run", "argv": ["true"], "mem": 65536}))[1], d.sock)
        big = a.result(30)
        evs, fin = big if isinstance(big, list) else ([], big)
        figure("a request over max_mem refused in %.1f ms" % ((time.time() - t) * 1000))
        check(code(fin) == "bad-request" and "max_mem 4096" in message(fin) and not evs,
              "a run with more memory than max_mem is refused at once, with the reason",
              (evs, fin))
        small = as_uid(B, lambda p: ask(p, [{"id": 2, "op": "run", "argv": ["true"],
                                             "mem": 64}], first=True), d.sock)
        evs = small[0][0] if isinstance(small, list) else small
        check(isinstance(small, list) and evs and evs[0].get("event") == "accepted",
              "the request after it that fits starts at once (not queued)", small)
        a.release()
        c = Conn(d.sock)
        load = c.call({"id": 7, "op": "health"})[1].get("load", {})
        c.close()
        check(load.get("queued") == 0, "nothing was left in the queue", load)
    finally:
        d.stop()


def part_caps():
    d = Daemon("max_vcpus = 2\nmax_lifetime = 600\nmax_idle = 60\n")
    try:
        res = as_uid(A, ask, d.sock, [
            {"id": 3, "op": "run", "argv": ["true"], "vcpus": 4},
            {"id": 4, "op": "create", "timeout": 601},
            {"id": 5, "op": "create", "idle_timeout": 61},
            {"id": 6, "op": "run", "argv": ["true"], "timeout": 0}])
        want = ["max_vcpus 2", "max_lifetime 600", "max_idle 60", "max_lifetime 600"]
        ok = isinstance(res, list) and all(
            code(fin) == "bad-request" and w in message(fin) and not evs
            for (evs, fin), w in zip(res, want))
        check(ok, "more vCPUs than max_vcpus, a lifetime or idle timeout beyond the daemon's "
              "(or none) are refused at once", res)
    finally:
        d.stop()


# ---- 3. connections: all of them kept, a share per uid ----

def open_many(keep, path, n, serial=False):
    """Open n connections (back to back, or each once the one before is
    served), and ask each for health: how many answered, how many were
    refused (and one refusal's message)."""
    conns, lines = [], []
    for i in range(n):
        c = Conn(path, timeout=10)
        conns.append(c)
        keep.append(c)
        if serial:
            try:
                c.send({"id": i, "op": "health"})
            except OSError:
                pass
            lines.append(c.recv(10))
    answered, refused, why = 0, 0, ""
    for i, c in enumerate(conns):
        if serial:
            continue
        try:
            c.send({"id": i, "op": "health"})
        except OSError:
            pass
    for i, c in enumerate(conns):
        m = lines[i] if serial else c.recv(10)
        if m and m.get("ok"):
            answered += 1
        elif m and code(m) == "busy":
            refused += 1
            why = message(m)
    return {"answered": answered, "refused": refused, "why": why}


def part_connections():
    d = Daemon()
    try:
        t = time.time()
        keep = []
        r = open_many(keep, d.sock, 1024)
        figure("1024 connections opened back to back and each asked for health: %.2f s" %
               (time.time() - t))
        check(r["answered"] == 1024, "1024 connections opened back to back are all kept "
              "(each answers health)", r)
        for c in keep:
            c.close()
        a = Holder(A, open_many, d.sock, 1030, True)
        ra = a.result()
        check(ra.get("answered") == 64 and ra.get("refused") == 1030 - 64 and
              "uid_max_conns" in ra.get("why", ""),
              "one uid keeps its share of connections (64); the rest are refused with the "
              "reason", ra)
        rb = as_uid(B, lambda p: open_many([], p, 1), d.sock)
        check(rb.get("answered") == 1, "with that uid at its share, another uid connects "
              "and is served", rb)
        c = Conn(d.sock)
        h = c.call({"id": 1, "op": "health"})[1]
        c.close()
        rows = {u.get("uid"): u for u in h.get("uids", [])}
        check(rows.get(A, {}).get("connections") == 64 and h.get("uid", {}).get("share") is None,
              "health, for root: every uid's connections, and root has no share", h)
        a.release()
        health = lambda p: Conn(p).call({"id": 1, "op": "health"})[1]  # noqa: E731
        mine = as_uid(A, health, d.sock)
        u = mine.get("uid", {})
        check(u.get("uid") == A and u.get("connections") == 1 and
              u.get("share", {}).get("connections") == 64 and "uids" not in mine,
              "health, for a uid: its own use and share, no other uid's", mine)
        egid = as_uid(B, health, d.sock, gid=ADMIN_GROUP)
        check(egid.get("ok") and "uids" not in egid, "a client running with the admin "
              "group's gid, but not listed in it, is no admin", egid)
    finally:
        d.stop()


def flood(keep, path, seconds, runs):
    """As many connections as the daemon keeps, each sending bad lines as fast
    as the daemon reads them (and its answers read), plus run requests."""
    conns = []
    for _ in range(1000):
        try:
            c = Conn(path, timeout=10)
        except OSError:
            continue
        c.s.setblocking(False)
        conns.append(c)
        keep.append(c)
    time.sleep(0.2)
    live = []
    for c in conns:
        try:
            if not c.s.recv(65536):
                continue    # closed
            continue        # a line before any request: refused, its share is full
        except BlockingIOError:
            live.append(c)
        except OSError:
            continue
    for i in range(runs):
        c = live[i % len(live)]
        try:
            c.s.send(json.dumps({"id": "r%d" % i, "op": "run", "argv": ["true"],
                                 "mem": 64}).encode() + b"\n")
        except OSError:
            pass
    junk = b"x\n" * 8192
    sent, end = 0, time.time() + seconds
    p = select.poll()
    for c in live:
        p.register(c.s, select.POLLOUT)
    while time.time() < end:
        for fd, _ in p.poll(100):
            try:
                sent += os.write(fd, junk)
            except OSError:
                pass
        for c in live:
            try:
                while c.s.recv(1 << 20):
                    pass
            except OSError:
                pass
    return {"kept": len(live), "sent": sent}


def latencies(path, n):
    c = Conn(path, timeout=20)
    out = []
    for i in range(n):
        t = time.time()
        fin = c.call({"id": i, "op": "health"}, timeout=20)[1]
        out.append(time.time() - t if fin.get("ok") else 99.0)
        time.sleep(0.1)
    t = time.time()
    c.send({"id": "run", "op": "run", "argv": ["true"], "mem": 64})
    first = time.time() - t if c.recv(20) else 99.0
    c.close()
    return {"health": out, "run_first": first}


BOUND_S = 2.0   # docs/api.md: another uid's request under a flood (a hang bound)


def part_flood():
    d = Daemon()
    try:
        a = Holder(A, flood, d.sock, 6, 100)
        time.sleep(1.5)
        rb = as_uid(B, latencies, d.sock, 15, timeout=60)
        ra = a.result(60)
        a.release()
        hs = rb.get("health", [99.0])
        figure("uid A: %s connections kept, %.1f MB of lines sent in 6 s" %
               (ra.get("kept"), ra.get("sent", 0) / 1e6))
        figure("uid B's health under that flood: median %.1f ms, max %.1f ms; its run "
               "answered in %.1f ms" % (sorted(hs)[len(hs) // 2] * 1000, max(hs) * 1000,
                                       rb.get("run_first", 99) * 1000))
        check(max(hs) < BOUND_S and rb.get("run_first", 99) < BOUND_S,
              "one uid flooding 1000 connections and 100 runs delays another uid's health "
              "and run by less than %.0f s" % BOUND_S, (rb, ra))
        check(d.p.poll() is None and d.rss_mib() < 64, "the daemon lives on, small",
              d.logtext())
    finally:
        d.stop()


# ---- 4. connections that hold a slot without using it ----

def part_deadlines():
    d = Daemon("conn_idle = 2\nline_timeout = 1\n")
    try:
        partial, idle, busy = Conn(d.sock), Conn(d.sock), Conn(d.sock)
        partial.send(b'{"id":1,"op":"heal')
        m = partial.recv(6)
        check(m is not None and code(m) == "bad-request" and "did not end within 1 s" in
              message(m) and partial.eof(3),
              "a partial request line held past line_timeout: told why, closed", m)
        alive = True
        for i in range(8):
            alive = alive and busy.call({"id": i, "op": "health"})[1].get("ok")
            time.sleep(0.5)
        check(alive, "a connection that keeps asking stays open past conn_idle")
        check(idle.eof(6), "a silent connection with nothing open is closed after conn_idle")
        for c in (partial, idle, busy):
            c.close()
    finally:
        d.stop()


# ---- 5. husk-metrics ----

def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def part_metrics():
    helper = os.path.join(os.path.dirname(HUSK), "husk-metrics")
    if not os.access(helper, os.X_OK):
        skip("husk-metrics", "not built beside husk (%s)" % helper)
        return
    port = free_port()
    d = Daemon(args=["--metrics", "127.0.0.1:%d" % port])
    try:
        a = Holder(A, lambda keep, p: keep.append(Conn(p)) or {}, d.sock)
        a.result()
        try:
            with urllib.request.urlopen("http://127.0.0.1:%d/metrics" % port, timeout=10) as r:
                body, status = r.read().decode(), r.status
        except (urllib.error.URLError, OSError) as e:
            body, status = str(e), 0
        check(status == 200 and 'husk_uid_connections{uid="%d"} 1' % A in body and
              "husk_vms{" in body, "GET /metrics: 200, with each uid's connections", body[-800:])
        a.release()
        kids = [k for k in d.children() if k[2] == "husk-metrics"]
        if not check(len(kids) == 1, "one husk-metrics", d.children()):
            return
        pid = kids[0][0]
        st = {}
        with open("/proc/%d/status" % pid) as f:
            for line in f:
                k, _, v = line.partition(":")
                st[k] = v.split()
        uid = int(st["Uid"][0])
        check(uid not in (0, 65534) and set(st["Uid"]) == {str(uid)} and
              st["Groups"] == [], "husk-metrics runs under a uid of its own (not root, not "
              "nobody), no groups", st.get("Uid"))
        check(st.get("Seccomp") == ["2"] and st.get("NoNewPrivs") == ["1"] and
              st.get("CapEff") == ["0000000000000000"],
              "husk-metrics: a seccomp filter, no_new_privs, no capabilities",
              (st.get("Seccomp"), st.get("NoNewPrivs"), st.get("CapEff")))
        with open("/proc/%d/environ" % pid, "rb") as f:
            env = f.read()
        check(env == b"" and os.stat("/proc/%d/environ" % pid).st_uid == 0,
              "husk-metrics: an empty environment, not dumpable (its /proc files are root's)",
              env[:200])
        check(os.readlink("/proc/%d/ns/net" % pid) != os.readlink("/proc/%d/ns/net" %
                                                                  d.p.pid) and
              os.listdir("/proc/%d/root/" % pid) == [],
              "husk-metrics: its own network namespace, an empty root")
    finally:
        d.stop()


# ---- 6. a worker that cannot be started ----

def part_no_worker():
    d = Daemon(nofile=64)
    try:
        conns, answered = [], 0
        while d.nfds() < 64 and len(conns) < 64:
            conns.append(Conn(d.sock))
            answered += bool(conns[-1].call({"id": 0, "op": "health"})[1].get("ok"))
        check(answered == len(conns) and d.nfds() == 64,
              "the daemon's descriptors are all used", (answered, len(conns), d.nfds()))
        t = time.time()
        evs, fin = conns[-1].call({"id": 1, "op": "run", "argv": ["true"]}, timeout=5)
        figure("a run with no descriptor left for its worker answered in %.1f ms" %
               ((time.time() - t) * 1000))
        check(code(fin) == "internal" and "cannot start the sandbox's worker" in message(fin)
              and not evs, "a worker that cannot be started: the request is answered at "
              "once, with why", (evs, fin))
        time.sleep(0.3)
        zombies = [k for k in d.children() if k[1] == "Z"]
        check(not zombies, "no zombie is left", zombies)
        for c in conns[:4]:
            c.close()
        try:
            c = Conn(d.sock)
            fin = c.call({"id": 2, "op": "health"})[1]
            c.close()
        except OSError as e:
            fin = {"error": str(e)}
        check(fin.get("ok"), "with descriptors free again, new connections are served", fin)
        for c in conns[4:]:
            c.close()
    finally:
        d.stop()


def main():
    if os.geteuid() != 0:
        print("SKIP: the daemon tier connects as other uids (setuid) and binds ports: "
              "run it as root")
        sys.exit(77)
    resource.setrlimit(resource.RLIMIT_NOFILE, (8192, 8192))
    for part in (part_unread_answers, part_never_fits, part_caps, part_connections, part_flood,
                 part_deadlines, part_metrics, part_no_worker):
        print("# " + part.__name__[5:], flush=True)
        try:
            part()
        except Exception as e:  # noqa: BLE001 - one part failing is reported, the rest run
            fail(part.__name__ + " ran to its end", "%s: %s" % (type(e).__name__, e))
    print("serve-daemon: %d passed, %d failed, %d skipped" % (passes, fails, skips))
    sys.exit(1 if fails else 0)


if __name__ == "__main__":
    main()
