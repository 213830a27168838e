#!/usr/bin/env python3
# Drives husk-init --test-fd through a socketpair, speaking the control
# protocol of docs/protocol.md from the host's side, and checks each
# conversation. Usage: drive.py HUSK_INIT WORKSPACE. Prints one line per
# case ("ok   - ..." / "FAIL - ...") and exits 1 if any case failed.
import io
import os
import socket
import struct
import subprocess
import sys
import tarfile
import time

P_HELLO, P_STARTED, P_STDOUT, P_STDERR, P_EXIT, P_FILES_OUT, P_DONE = 1, 2, 3, 4, 5, 6, 7
P_JOB, P_STDIN, P_FILES_IN, P_ERROR = 16, 17, 18, 32
T_JOB_ARG, T_JOB_ENV, T_JOB_CWD, T_JOB_TIMEOUT_MS = 1, 2, 3, 4
T_JOB_STDIN, T_JOB_FILES_IN, T_JOB_GET = 8, 9, 10
T_JOB_NET_ADDR, T_JOB_NET_GW, T_JOB_NET_PREFIX = 15, 16, 17
T_EXIT_CODE, T_EXIT_SIGNAL, T_EXIT_TIMED_OUT = 32, 33, 34
T_EXIT_USER_US, T_EXIT_SYS_US, T_EXIT_MAXRSS_KIB = 35, 36, 37
T_EXIT_END_NS, T_EXIT_START_NS = 39, 38
T_INIT_VERSION = 48

INIT, WS = sys.argv[1], sys.argv[2]
fails = 0
passes = 0


def tlv(tag, val):
    if isinstance(val, str):
        val = val.encode()
    return struct.pack('<HI', tag, len(val)) + val


def parse_tlv(p):
    out, i = [], 0
    while i < len(p):
        tag, n = struct.unpack_from('<HI', p, i)
        out.append((tag, p[i + 6:i + 6 + n]))
        i += 6 + n
    return out


def u(v):
    return int.from_bytes(v, 'little')


class Conv:
    def __init__(self):
        self.host, guest = socket.socketpair()
        self.host.settimeout(20)
        self.proc = subprocess.Popen([INIT, '--test-fd', str(guest.fileno()),
                                      '--workspace', WS], pass_fds=[guest.fileno()],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        guest.close()

    def send(self, typ, payload=b''):
        self.host.sendall(struct.pack('<IHH', len(payload), typ, 1) + payload)

    def recv_exact(self, n):
        b = b''
        while len(b) < n:
            c = self.host.recv(n - len(b))
            if not c:
                raise EOFError('EOF after %d of %d bytes' % (len(b), n))
            b += c
        return b

    def recv(self):
        n, typ, ver = struct.unpack('<IHH', self.recv_exact(8))
        assert ver == 1, 'version %d' % ver
        return typ, self.recv_exact(n)

    # Collect frames until P_DONE or P_ERROR; returns the list.
    def until_done(self):
        frames = []
        while True:
            typ, p = self.recv()
            frames.append((typ, p))
            if typ in (P_DONE, P_ERROR):
                return frames

    def finish(self):
        try:
            rc = self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            rc = 'hung'
        self.err = self.proc.stderr.read().decode(errors='replace')
        self.host.close()
        return rc


def job(*argv, env=(), extra=b''):
    p = b''.join(tlv(T_JOB_ARG, a) for a in argv)
    p += b''.join(tlv(T_JOB_ENV, e) for e in env)
    return p + extra


def streams(frames):
    out = b''.join(p for t, p in frames if t == P_STDOUT)
    err = b''.join(p for t, p in frames if t == P_STDERR)
    return out, err


def exit_rec(frames):
    ex = [p for t, p in frames if t == P_EXIT]
    return {tag: v for tag, v in parse_tlv(ex[0])} if len(ex) == 1 else {}


def check(name, cond, detail=''):
    global fails, passes
    if cond:
        passes += 1
        print('ok   - ' + name)
    else:
        fails += 1
        print('FAIL - %s %s' % (name, detail))


def run(payload, before=None, after_start=None):
    c = Conv()
    typ, hello = c.recv()
    assert typ == P_HELLO, 'first frame %d' % typ
    c.send(P_JOB, payload)
    if before:
        before(c)
    frames = []
    if after_start:
        typ, p = c.recv()
        frames.append((typ, p))
        after_start(c)
    frames += c.until_done()
    rc = c.finish()
    return frames, rc, c, dict(parse_tlv(hello))


def types(frames):
    return [t for t, _ in frames]


# 1. output on the right streams, exit code, frame order
f, rc, c, hello = run(job('sh', '-c', 'echo out; echo err >&2; exit 3'))
ex = exit_rec(f)
out, err = streams(f)
check('hello carries the init version', hello.get(T_INIT_VERSION, b'').startswith(b'husk-init'))
check('P_STARTED comes first', types(f)[0] == P_STARTED, types(f))
check('stdout and stderr on their streams', out == b'out\n' and err == b'err\n', (out, err))
check('exit code 3, not timed out', u(ex.get(T_EXIT_CODE, b'\0')) == 3 and
      u(ex.get(T_EXIT_TIMED_OUT, b'\1')) == 0 and T_EXIT_SIGNAL not in ex, ex)
check('timestamps ordered', u(ex.get(T_EXIT_START_NS, b'')) <= u(ex.get(T_EXIT_END_NS, b'')))
check('P_EXIT then P_DONE, init exits 0', types(f)[-2:] == [P_EXIT, P_DONE] and rc == 0,
      (types(f), rc, c.err))

# 2. timeout kills the job
t0 = time.time()
f, rc, c, _ = run(job('sh', '-c', 'echo started; sleep 30', extra=tlv(T_JOB_TIMEOUT_MS, struct.pack('<Q', 300))))
ex = exit_rec(f)
check('timeout: SIGKILL and timed_out', u(ex.get(T_EXIT_SIGNAL, b'\0')) == 9 and
      u(ex.get(T_EXIT_TIMED_OUT, b'\0')) == 1, ex)
check('timeout: ends promptly, output kept', time.time() - t0 < 5 and
      streams(f)[0] == b'started\n', (time.time() - t0, streams(f)))


# 3. stdin passes through, EOF closes it
def feed(c):
    c.send(P_STDIN, b'hello ')
    c.send(P_STDIN, b'world\n')
    c.send(P_STDIN, b'')


f, rc, c, _ = run(job('sh', '-c', 'cat; echo done', extra=tlv(T_JOB_STDIN, b'\1')), after_start=feed)
check('stdin reaches the job, EOF ends it', streams(f)[0] == b'hello world\ndone\n' and
      u(exit_rec(f).get(T_EXIT_CODE, b'\1')) == 0, streams(f))

# 4. without T_JOB_STDIN the job reads /dev/null
f, rc, c, _ = run(job('sh', '-c', 'cat; echo eof'))
check('stdin is /dev/null by default', streams(f)[0] == b'eof\n', streams(f))

# 5. exec failures
f, rc, c, _ = run(job('/no/such/cmd'))
check('missing command: exit 127 with a message', u(exit_rec(f).get(T_EXIT_CODE, b'')) == 127 and
      b'cannot execute' in streams(f)[1], (exit_rec(f), streams(f)))
f, rc, c, _ = run(job('/dev/null'))
check('non-executable: exit 126', u(exit_rec(f).get(T_EXIT_CODE, b'')) == 126, exit_rec(f))

# 6. a background process holding stdout does not keep the job alive
t0 = time.time()
f, rc, c, _ = run(job('sh', '-c', 'sleep 60 & echo hi'))
check('leftover processes are killed', time.time() - t0 < 5 and streams(f)[0] == b'hi\n' and
      rc == 0, (time.time() - t0, streams(f), rc))

# 7. environment defaults, overrides and cwd
f, rc, c, _ = run(job('sh', '-c', 'echo "$USER:$HOME:$FOO:$PATH"; pwd', env=['FOO=bar', 'USER=me']))
lines = streams(f)[0].decode().splitlines()
check('environment defaults and overrides', lines[:1] ==
      ['me:%s:bar:/usr/local/bin:/usr/bin:/bin' % WS], lines)
check('cwd defaults to the workspace', lines[1:2] == [os.path.realpath(WS)], lines)

# 8. large output arrives whole, in chunks of at most 64 KiB
f, rc, c, _ = run(job('head', '-c', '300000', '/dev/zero'))
chunks = [p for t, p in f if t == P_STDOUT]
check('300000 bytes of output in <= 64 KiB chunks', sum(map(len, chunks)) == 300000 and
      max(map(len, chunks)) <= 65536, [len(x) for x in chunks])

# 9. invalid job specs end with P_ERROR and status 1
for name, payload in [('no argv', tlv(T_JOB_ENV, 'A=b')),
                      ('NUL in arg', tlv(T_JOB_ARG, b'a\0b')),
                      ('env without =', job('true', env=['NOEQUALS'])),
                      ('absolute --get', job('true', extra=tlv(T_JOB_GET, '/etc/passwd'))),
                      ('.. in --get', job('true', extra=tlv(T_JOB_GET, 'a/../../x'))),
                      ('truncated TLV', job('true')[:-1]),
                      ('unknown tag', job('true', extra=tlv(99, 'x')))]:
    f, rc, c, _ = run(payload)
    check('bad job (%s): P_ERROR, status 1' % name, types(f) == [P_ERROR] and rc == 1,
          (f, rc))

# 10. sandbox state as seen by the job (only as root: the uid switch is real)
if os.geteuid() == 0:
    f, rc, c, _ = run(job('sh', '-c', 'id -u; id -g; grep -E "^(CapBnd|CapEff|CapAmb|NoNewPrivs|Seccomp):" /proc/self/status; ulimit -n'))
    got = streams(f)[0].decode().split('\n')
    want = ['1000', '1000', 'CapEff:\t0000000000000000', 'CapBnd:\t0000000000000000',
            'CapAmb:\t0000000000000000', 'NoNewPrivs:\t1', 'Seccomp:\t2', '1024', '']
    check('job runs as 1000:1000, no caps, no_new_privs, seccomp, nofile', got == want, got)
    probe = ('import socket, os, errno, ctypes\n'
             'libc = ctypes.CDLL(None, use_errno=True)\n'
             'def unshare(fl):\n'
             '    if libc.unshare(fl): raise OSError(ctypes.get_errno(), "unshare")\n'
             'def t(f):\n'
             '    try:\n        f(); return "ok"\n'
             '    except OSError as e: return errno.errorcode[e.errno]\n'
             'print(t(lambda: socket.socket(socket.AF_PACKET, socket.SOCK_RAW)),\n'
             '      t(lambda: socket.socket(socket.AF_INET, socket.SOCK_RAW, 1)),\n'
             '      t(lambda: socket.socket(socket.AF_NETLINK, socket.SOCK_RAW)),\n'
             '      t(lambda: unshare(0x10000000)),\n'
             '      t(lambda: socket.socket(socket.AF_INET, socket.SOCK_STREAM).close()),\n'
             '      t(lambda: socket.socket(socket.AF_INET6, socket.SOCK_DGRAM|socket.SOCK_CLOEXEC).close()))\n')
    py = '/usr/bin/python3'
    if os.access(py, os.X_OK):
        f, rc, c, _ = run(job(py, '-c', probe))
        got = streams(f)[0].decode().strip()
        check('seccomp denies raw/packet/netlink sockets and unshare, allows TCP/UDP',
              got == 'EPERM EPERM EPERM EPERM ok ok', streams(f))
    f, rc, c, _ = run(job('sh', '-c', 'touch /etc/x 2>/dev/null && echo wrote || echo denied; touch ok && ls -n ok | cut -d" " -f3'))
    check('job cannot write outside, owns its files', streams(f)[0] == b'denied\n1000\n', streams(f))

# 11. files in and out through gzip'd tar streams
buf = io.BytesIO()
with tarfile.open(fileobj=buf, mode='w:gz', format=tarfile.USTAR_FORMAT) as tf:
    data = b'payload\n'
    ti = tarfile.TarInfo('in.txt')
    ti.size = len(data)
    tf.addfile(ti, io.BytesIO(data))
blob = buf.getvalue()
buf = io.BytesIO()
with tarfile.open(fileobj=buf, mode='w:gz', format=tarfile.USTAR_FORMAT) as tf:
    ti = tarfile.TarInfo('second.txt')
    ti.size = 3
    tf.addfile(ti, io.BytesIO(b'two'))
blob2 = buf.getvalue()


def put(c):
    # Two streams, as husk sends one per --put; the first in tiny chunks.
    for i in range(0, len(blob), 7):
        c.send(P_FILES_IN, blob[i:i + 7])
    c.send(P_FILES_IN, b'')
    c.send(P_FILES_IN, blob2)
    c.send(P_FILES_IN, b'')


f, rc, c, _ = run(job('sh', '-c', 'tr a-z A-Z < in.txt > out.txt; cat second.txt >> out.txt; rm in.txt second.txt',
                      extra=tlv(T_JOB_FILES_IN, b'\2') + tlv(T_JOB_GET, 'out.txt') +
                      tlv(T_JOB_GET, 'missing')), before=put)
outs, cur = [], []
for t, p in f:
    if t == P_FILES_OUT:
        if p:
            cur.append(p)
        else:
            outs.append(b''.join(cur))
            cur = []
ok = len(outs) == 2
if ok:
    with tarfile.open(fileobj=io.BytesIO(outs[0]), mode='r:gz') as tf:
        m = tf.getmembers()
        ok = [x.name for x in m] == ['out.txt'] and tf.extractfile(m[0]).read() == b'PAYLOAD\ntwo'
    with tarfile.open(fileobj=io.BytesIO(outs[1]), mode='r:gz') as tf:
        ok = ok and tf.getmembers() == []
check('files in (2 streams), job, files out (missing path = empty archive)', ok and rc == 0,
      (types(f), [len(o) for o in outs], rc, c.err[-300:]))

f, rc, c, _ = run(job('true', extra=tlv(T_JOB_FILES_IN, b'\1')),
                  before=lambda c: (c.send(P_FILES_IN, b'not gzip at all'), c.send(P_FILES_IN, b'')))
check('corrupt files-in stream: P_ERROR, status 1', types(f) == [P_ERROR] and rc == 1, (f, rc))

# 12. an unexpected frame while the job runs ends everything, job included
t0 = time.time()
f, rc, c, _ = run(job('sleep', '30', extra=tlv(T_JOB_STDIN, b'\1')),
                  after_start=lambda c: c.send(P_JOB, job('true')))
check('unexpected frame mid-job: P_ERROR, job killed, status 1',
      types(f)[-1] == P_ERROR and rc == 1 and time.time() - t0 < 5, (f, rc))


# 13. the job's own namespaces and its init (as root: without root
# guest-init cannot make them and runs the job beside itself)
NS = ['pid', 'mnt', 'ipc', 'uts', 'net']
PY = '/usr/bin/python3'
if os.geteuid() == 0:
    # guest-init is a plain child of ours: its namespaces are ours.
    ours = {n: os.readlink('/proc/self/ns/' + n) for n in NS}
    f, rc, c, _ = run(job('sh', '-c', 'echo /proc/[0-9]*; tr "\\0" "\\n" </proc/1/cmdline | head -n 1; '
                          'for n in %s; do readlink /proc/self/ns/$n; done' % ' '.join(NS)))
    got = streams(f)[0].decode().split('\n')
    check('namespaces: the job sees only itself and its init in /proc',
          got[:2] == ['/proc/1 /proc/2', 'job-init'], got[:2])
    check('namespaces: pid, mnt, ipc, uts and net differ from guest-init\'s',
          len(got) > 6 and all(got[2 + i] != ours[n] and got[2 + i].startswith(n + ':[')
                               for i, n in enumerate(NS)), (got[2:], ours))
    f, rc, c, _ = run(job('sh', '-c', 'readlink /proc/self/ns/net /proc/self/ns/pid',
                          extra=tlv(T_JOB_NET_ADDR, bytes([10, 0, 0, 2])) +
                          tlv(T_JOB_NET_GW, bytes([10, 0, 0, 1])) + tlv(T_JOB_NET_PREFIX, b'\x18')))
    got = streams(f)[0].decode().split()
    check('namespaces: a job with a network keeps guest-init\'s network namespace only',
          got == [ours['net'], got[1]] and got[1] != ours['pid'], (got, ours))
    f, rc, c, _ = run(job('sh', '-c', 'grep -E "^(Uid|Gid|CapEff|CapPrm|CapBnd|NoNewPrivs|Seccomp):" '
                          '/proc/1/status; kill -0 1 2>/dev/null && echo signalable || echo refused'))
    got = streams(f)[0].decode().split('\n')
    want = ['Uid:\t65533\t65533\t65533\t65533', 'Gid:\t65533\t65533\t65533\t65533',
            'CapPrm:\t0000000000000020', 'CapEff:\t0000000000000020', 'CapBnd:\t0000000000000020',
            'NoNewPrivs:\t1', 'Seccomp:\t2', 'refused', '']
    check('the job\'s init: own uid, CAP_KILL only, no_new_privs, seccomp; the job cannot signal it',
          got == want, got)
    if os.access(PY, os.X_OK):
        f, rc, c, _ = run(job(PY, '-c', 'import socket\n'
                              's = socket.socket(); s.bind(("127.0.0.1", 0)); s.listen()\n'
                              'socket.create_connection(s.getsockname(), 2); print("lo up")\n'
                              'print(*[l.split(":")[0].strip() for l in open("/proc/net/dev")][2:])'))
        check('namespaces: the job\'s own network has lo, up, and nothing else',
              streams(f)[0] == b'lo up\nlo\n', streams(f))
else:
    print('SKIP - the job\'s namespaces and its init\'s uid (not root: guest-init runs '
          'the job without namespaces)')

def children(ppid):
    """The pids whose parent is ppid (processes may vanish while we look)."""
    out = []
    for d in os.listdir('/proc'):
        try:
            if d.isdigit() and open('/proc/%s/stat' % d).read().rsplit(')', 1)[1].split()[1] == str(ppid):
                out.append(int(d))
        except OSError:
            pass
    return out


# 14. the job's init forwards SIGTERM and reports the job's own status and usage
c = Conv()
c.recv()
c.send(P_JOB, job('sh', '-c', 'trap "echo term; exit 7" TERM; echo ready; sleep 30 & wait'))
frames = [c.recv(), c.recv()]
jinit = children(c.proc.pid)
t0 = time.time()
for pid in jinit:
    os.kill(pid, 15)
frames += c.until_done()
rc = c.finish()
check('SIGTERM to the job\'s init reaches the job', len(jinit) == 1 and
      streams(frames)[0] == b'ready\nterm\n' and u(exit_rec(frames).get(T_EXIT_CODE, b'')) == 7 and
      time.time() - t0 < 5, (jinit, streams(frames), exit_rec(frames)))
f, rc, c, _ = run(job('sh', '-c', 'kill -TERM $$'))
ex = exit_rec(f)
check('a job killed by SIGTERM reports signal 15', u(ex.get(T_EXIT_SIGNAL, b'')) == 15 and
      T_EXIT_CODE not in ex, ex)
f, rc, c, _ = run(job('sh', '-c', 'i=0; while [ $i -lt 100000 ]; do i=$((i+1)); done'))
ex = exit_rec(f)
check('CPU time is the job\'s', u(ex.get(T_EXIT_USER_US, b'')) + u(ex.get(T_EXIT_SYS_US, b'')) > 20000, ex)
f, rc, c, _ = run(job('sh', '-c', 'while :; do :; done',
                      extra=tlv(T_JOB_TIMEOUT_MS, struct.pack('<Q', 600))))
ex = exit_rec(f)
check('a timed-out job still reports its CPU time', u(ex.get(T_EXIT_SIGNAL, b'')) == 9 and
      u(ex.get(T_EXIT_USER_US, b'')) + u(ex.get(T_EXIT_SYS_US, b'')) > 20000, ex)
if os.access(PY, os.X_OK):
    f, rc, c, _ = run(job(PY, '-c', 'b = b"x" * 64000000'))
    ex = exit_rec(f)
    check('peak RSS is the job\'s', u(ex.get(T_EXIT_MAXRSS_KIB, b'')) > 60000, ex)

print('guest-init: %d passed, %d failed' % (passes, fails))
sys.exit(1 if fails else 0)
