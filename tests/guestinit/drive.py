#!/usr/bin/env python3
# Drives husk-init --test-fd through a socketpair, speaking the control
# protocol of docs/protocol.md from the host's side, and checks each
# conversation. Usage: drive.py HUSK_INIT WORKSPACE. Prints one line per
# case ("ok   - ..." / "FAIL - ...") and exits 1 if any case failed.
import io
import os
import re
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
T_JOB_VERBOSE = 25

INIT, WS = sys.argv[1], sys.argv[2]
# The protocol version is vmm/job/proto.h's, so a bump cannot leave this behind.
_PROTO_H = os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '..', 'vmm', 'job', 'proto.h')
VERSION = int(re.search(r'#define PROTO_VERSION (\d+)', open(_PROTO_H).read()).group(1))
fails = 0
passes = 0
skips = 0


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
        self.host.sendall(struct.pack('<IHH', len(payload), typ, VERSION) + payload)

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
        assert ver == VERSION, 'version %d' % ver
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


def skip(why):
    """A part that did not run: counted and said with its reason."""
    global skips
    skips += 1
    print('skip - ' + why)


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

# 3b. a terminal: its window at the start, P_RESIZE changes it before the next line
T_JOB_TERMINAL, P_RESIZE = 21, 25


early = []


def resize(c):
    # Only once the job has printed its first window.
    while b'ready' not in b''.join(p for t, p in early if t == P_STDOUT):
        early.append(c.recv())
    c.send(P_RESIZE, struct.pack('<I', 33 << 16 | 111))
    c.send(P_STDIN, b'go\r')
    c.send(P_STDIN, b'')


f, rc, c, _ = run(job('sh', '-c', 'stty size; echo ready; read x; stty size',
                      extra=tlv(T_JOB_STDIN, b'\1') +
                      tlv(T_JOB_TERMINAL, struct.pack('<I', 24 << 16 | 80))),
                  after_start=resize)
f[1:1] = early
out = streams(f)[0].decode(errors='replace').replace('\r', '')
check('a terminal job starts with its window, P_RESIZE sets a new one',
      re.search(r'^24 80$.*^ready$.*^33 111$', out, re.M | re.S) is not None and
      u(exit_rec(f).get(T_EXIT_CODE, b'\1')) == 0, (out, exit_rec(f), c.err[-300:]))
f, rc, c, _ = run(job('sh', '-c', 'cat', extra=tlv(T_JOB_STDIN, b'\1')),
                  after_start=lambda c: c.send(P_RESIZE, struct.pack('<I', 1 << 16 | 1)))
check('P_RESIZE to a job without a terminal: a protocol error',
      P_ERROR in types(f) and P_EXIT not in types(f), (types(f), c.err[-300:]))

# 3c. resource limits over husk's defaults, soft and hard apart
T_JOB_RLIMIT, RLIMIT_NOFILE, RLIMIT_CORE = 22, 7, 4


def rlimit(res, soft, hard):
    return tlv(T_JOB_RLIMIT, struct.pack('<IQQ', res, soft, hard))


f, rc, c, _ = run(job('sh', '-c', 'ulimit -Sn; ulimit -Hn; ulimit -Hc',
                      extra=rlimit(RLIMIT_NOFILE, 50, 100) + rlimit(RLIMIT_CORE, 0, 2**64 - 1)))
check('T_JOB_RLIMIT: the job has its soft and hard limits',
      streams(f)[0] == b'50\n100\nunlimited\n', (streams(f), c.err[-300:]))
for name, bad in [('soft over hard', rlimit(RLIMIT_NOFILE, 10, 5)),
                  ('RLIMIT_RSS', rlimit(5, 1, 1)), ('unknown resource', rlimit(99, 1, 1)),
                  ('short value', tlv(T_JOB_RLIMIT, b'\0' * 8))]:
    f, rc, c, _ = run(job('true', extra=bad))
    check('T_JOB_RLIMIT refused: ' + name, P_ERROR in types(f) and P_EXIT not in types(f),
          (types(f), c.err[-200:]))

# 3d. tmpfs mounts in the job's own mount namespace (needs root: namespaces)
T_JOB_TMPFS = 23


def tmpfs(path, size=0, mode=0o1777, flags=0):
    return tlv(T_JOB_TMPFS, struct.pack('<QII', size, mode, flags) + path.encode())


if os.geteuid() == 0:
    mnt = '/tmp/husk-drive-tmpfs-%d' % os.getpid()
    f, rc, c, _ = run(job('sh', '-c', 'grep " %s " /proc/self/mounts | cut -d" " -f3,4; '
                          'stat -c %%a %s; stat -c %%a %s/sub; echo x >%s/f && cat %s/f'
                          % (mnt, mnt, mnt, mnt, mnt),
                          extra=tmpfs(mnt, size=1 << 20, mode=0o1777, flags=1) +
                          tmpfs(mnt + '/sub', mode=0o750)))
    out = streams(f)[0].decode(errors='replace')
    check('T_JOB_TMPFS: tmpfs mounts of their size and mode, noexec, made where missing, '
          'the job writes to one, none left outside its namespace',
          out.startswith('tmpfs rw,nosuid,nodev,noexec') and 'size=1024k' in out and
          out.endswith('1777\n750\nx\n') and not os.path.ismount(mnt),
          (out, c.err[-300:]))
    try:
        os.rmdir(mnt)
    except OSError:
        pass
else:
    skip('T_JOB_TMPFS: tmpfs mounts need root (the job\'s namespaces)')
for name, bad in [('/proc', tmpfs('/proc/x')), ('the workspace', tmpfs(WS)),
                  ('above the workspace', tmpfs(os.path.dirname(WS))),
                  ('relative', tmpfs('x')), ('..', tmpfs('/a/../b')),
                  ('mode', tmpfs('/d', mode=0o17777)), ('flags', tmpfs('/d', flags=2)),
                  ('no path', tlv(T_JOB_TMPFS, struct.pack('<QII', 0, 0o755, 0)))]:
    f, rc, c, _ = run(job('true', extra=bad))
    check('T_JOB_TMPFS refused: ' + name, P_ERROR in types(f) and P_EXIT not in types(f),
          (types(f), c.err[-200:]))

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
                      ('T_JOB_VERBOSE not 1', job('true', extra=tlv(T_JOB_VERBOSE, b'\x02'))),
                      ('unknown tag', job('true', extra=tlv(99, 'x')))]:
    f, rc, c, _ = run(payload)
    check('bad job (%s): P_ERROR, status 1' % name, types(f) == [P_ERROR] and rc == 1,
          (f, rc))
f, rc, c, _ = run(job('sh', '-c', 'exit 5', extra=tlv(T_JOB_VERBOSE, b'\x01')))
check('T_JOB_VERBOSE 1 is taken: the job runs, exit code 5',
      u(exit_rec(f).get(T_EXIT_CODE, b'\0')) == 5 and rc == 0, (types(f), rc))

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
    else:
        skip('the job\'s seccomp probe: no /usr/bin/python3 for the job to run')
    f, rc, c, _ = run(job('sh', '-c', 'touch /etc/x 2>/dev/null && echo wrote || echo denied; touch ok && ls -n ok | cut -d" " -f3'))
    check('job cannot write outside, owns its files', streams(f)[0] == b'denied\n1000\n', streams(f))
else:
    skip('the job\'s uid, capabilities, seccomp and rlimits (not root: guest-init cannot '
         'switch the uid)')

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
        skip('the job\'s own network: no /usr/bin/python3 for the job to run')
else:
    skip('the job\'s namespaces and its init\'s uid (not root: guest-init runs '
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
else:
    skip('the job\'s peak RSS: no /usr/bin/python3 for the job to run')


# ---- sessions (docs/protocol.md, "Sessions") ----
P_XSTARTED, P_XOUT, P_XEXIT, P_XFILES, P_XDONE, P_XERROR = 8, 9, 10, 11, 12, 13
P_EXEC, P_XSTDIN, P_XSIGNAL, P_PUT, P_GET, P_END = 19, 20, 21, 22, 23, 24
T_JOB_SESSION = 19
SESSION = tlv(T_JOB_SESSION, b'\1')


def xid(i):
    return struct.pack('<I', i)


def u64(v):
    return struct.pack('<Q', v)


class Session(Conv):
    """A session: P_JOB with T_JOB_SESSION, then frames by id."""

    def __init__(self, extra=b''):
        super().__init__()
        typ, self.hello = self.recv()
        assert typ == P_HELLO, 'first frame %d' % typ
        self.send(P_JOB, SESSION + extra)
        self.frames = []
        self.first = self.recv()

    def x(self, typ, i, payload=b''):
        self.send(typ, xid(i) + payload)

    def exec(self, i, *argv, env=(), extra=b''):
        self.x(P_EXEC, i, job(*argv, env=env, extra=extra))

    def pump(self, until, limit=15):
        """Frames into self.frames until until(self) holds; False on P_DONE/P_ERROR/timeout."""
        end = time.time() + limit
        while not until(self):
            if time.time() > end:
                return False
            self.host.settimeout(max(0.1, end - time.time()))
            try:
                typ, p = self.recv()
            except (socket.timeout, EOFError):
                return False
            self.frames.append((typ, p))
            if typ in (P_DONE, P_ERROR):
                return until(self)
        return True

    def has(self, typ, i):
        return any(t == typ and p[:4] == xid(i) for t, p in self.frames)

    def ended(self, *ids):
        return lambda s: all(s.has(P_XEXIT, i) or s.has(P_XERROR, i) for i in ids)

    def out(self, i, stream=1):
        return b''.join(p[5:] for t, p in self.frames
                        if t == P_XOUT and p[:4] == xid(i) and p[4] == stream)

    def exit(self, i):
        ex = [p[4:] for t, p in self.frames if t == P_XEXIT and p[:4] == xid(i)]
        return {tag: v for tag, v in parse_tlv(ex[0])} if len(ex) == 1 else {}

    def errors(self, i):
        return [p[4:] for t, p in self.frames if t == P_XERROR and p[:4] == xid(i)]

    def of(self, i):
        """The types of the frames for id i, in order."""
        return [t for t, p in self.frames if t in range(P_XSTARTED, P_XERROR + 1) and p[:4] == xid(i)]

    def files(self, i):
        """A get's archive: the bytes of its chunks, or None before its end."""
        chunks = [p[4:] for t, p in self.frames if t == P_XFILES and p[:4] == xid(i)]
        return b''.join(chunks) if chunks and chunks[-1] == b'' else None

    def end(self):
        self.send(P_END)
        self.pump(lambda s: bool(s.frames) and s.frames[-1][0] in (P_DONE, P_ERROR))
        return self.finish()


def code(ex):
    return u(ex[T_EXIT_CODE]) if T_EXIT_CODE in ex else None


def signal_of(ex):
    return u(ex[T_EXIT_SIGNAL]) if T_EXIT_SIGNAL in ex else None


def procs_of(*argv):
    """Pids whose command line is exactly argv (a leftover check)."""
    want = b''.join(a.encode() + b'\0' for a in argv)
    out = []
    for d in os.listdir('/proc'):
        try:
            if d.isdigit() and open('/proc/%s/cmdline' % d, 'rb').read() == want:
                out.append(int(d))
        except OSError:
            pass
    return out


# 15. a session starts with P_STARTED (steps included) and needs no command
s = Session()
check('session: P_STARTED after the spec, with the init steps',
      s.first[0] == P_STARTED and any(t == 49 for t, _ in parse_tlv(s.first[1])), s.first)

# 16. two execs at once: their output interleaves, each has its exit code
s.exec(1, 'sh', '-c', 'for i in 1 2 3 4; do echo a$i; sleep 0.3; done; exit 3')
s.exec(2, 'sh', '-c', 'sleep 0.15; for i in 1 2 3 4; do echo b$i; sleep 0.3; done; exit 4')
ok = s.pump(s.ended(1, 2))
seq = [p[:4] for t, p in s.frames if t == P_XOUT]
switches = sum(1 for a, b in zip(seq, seq[1:]) if a != b)
check('session: two execs run at once, outputs interleave', ok and switches >= 3 and
      s.out(1) == b'a1\na2\na3\na4\n' and s.out(2) == b'b1\nb2\nb3\nb4\n', (switches, s.out(1), s.out(2)))
check('session: both exit codes arrive (3 and 4), not timed out',
      code(s.exit(1)) == 3 and code(s.exit(2)) == 4 and u(s.exit(1).get(T_EXIT_TIMED_OUT, b'\1')) == 0,
      (s.exit(1), s.exit(2)))
check('session: per id, XSTARTED first and XEXIT last',
      all(s.of(i)[0] == P_XSTARTED and s.of(i)[-1] == P_XEXIT and s.of(i).count(P_XEXIT) == 1
          for i in (1, 2)), (s.of(1), s.of(2)))
ex = s.exit(1)
check('session: the exit record has CPU time, RSS and ordered timestamps',
      all(k in ex for k in (T_EXIT_USER_US, T_EXIT_SYS_US, T_EXIT_MAXRSS_KIB)) and
      0 < u(ex.get(T_EXIT_START_NS, b'')) <= u(ex.get(T_EXIT_END_NS, b'')), ex)

# 17. an id is free again after its P_XEXIT; large output comes in <= 64 KiB chunks
s.frames = []
s.exec(1, 'head', '-c', '300000', '/dev/zero')
ok = s.pump(s.ended(1))
chunks = [len(p) - 5 for t, p in s.frames if t == P_XOUT]
check('session: an id is reused after its exit; 300000 bytes in 1..64 KiB chunks, all before XEXIT',
      ok and code(s.exit(1)) == 0 and sum(chunks) == 300000 and max(chunks) <= 65536 and
      min(chunks) >= 1 and s.of(1)[-1] == P_XEXIT, (ok, chunks[:5], s.of(1)[-3:]))

# 18. stdin for one exec; stdin frames for others are dropped, not errors
s.frames = []
s.exec(3, 'sh', '-c', 'cat; echo done', extra=tlv(T_JOB_STDIN, b'\1'))
s.exec(4, 'sh', '-c', 'cat; echo eof')
s.x(P_XSTDIN, 3, b'hello ')
s.x(P_XSTDIN, 4, b'not for you')
s.x(P_XSTDIN, 99, b'nobody')
s.x(P_XSTDIN, 3, b'world\n')
s.x(P_XSTDIN, 3)
ok = s.pump(s.ended(3, 4))
check('session: stdin reaches the exec that asked for it, EOF ends it',
      ok and s.out(3) == b'hello world\ndone\n' and code(s.exit(3)) == 0, (s.out(3), s.exit(3)))
check('session: an exec without stdin reads /dev/null; stray stdin frames are dropped',
      s.out(4) == b'eof\n' and not [f for f in s.frames if f[0] == P_XERROR], (s.out(4), s.frames[-3:]))

# 18b. back-pressure: while an exec does not read its stdin, guest-init
# stops reading the socket once about 1 MiB is queued for it
s.frames = []
s.exec(11, 'sh', '-c', 'sleep 2.5; wc -c', extra=tlv(T_JOB_STDIN, b'\1'))
s.pump(lambda s: s.has(P_XSTARTED, 11))
chunk = b'y' * (256 << 10)
frame = struct.pack('<IHH', 4 + len(chunk), P_XSTDIN, VERSION) + xid(11) + chunk
s.host.setblocking(False)
taken, t0 = 0, time.time()
while time.time() - t0 < 1.5 and taken < (16 << 20):
    try:
        taken += s.host.send(frame[taken % len(frame):])
    except BlockingIOError:
        time.sleep(0.05)
s.host.settimeout(20)
if taken % len(frame):
    s.host.sendall(frame[taken % len(frame):])
sent = -(-taken // len(frame)) * len(chunk)
s.x(P_XSTDIN, 11)
ok = s.pump(s.ended(11))
check('session: stdin back-pressure: the socket is not read past ~1 MiB queued, nothing is lost',
      ok and taken < (4 << 20) and s.out(11).strip() == str(sent).encode(),
      (taken, sent, s.out(11)))

# 19. signals: SIGTERM to a running exec, SIGKILL to one that ignores it
s.frames = []
s.exec(5, 'sleep', '30')
s.exec(6, 'sh', '-c', 'trap "" TERM; echo ready; while :; do sleep 0.1; done')
s.pump(lambda s: s.has(P_XSTARTED, 5) and s.out(6) == b'ready\n')
t0 = time.time()
s.x(P_XSIGNAL, 5, struct.pack('<I', 15))
s.x(P_XSIGNAL, 6, struct.pack('<I', 15))
ok5 = s.pump(s.ended(5), limit=5)
ok6 = not s.pump(s.ended(6), limit=0.7)
s.x(P_XSIGNAL, 6, struct.pack('<I', 9))
ok6 = s.pump(s.ended(6), limit=5) and ok6
check('session: SIGTERM ends an exec (signal 15)', ok5 and signal_of(s.exit(5)) == 15 and
      time.time() - t0 < 5, s.exit(5))
check('session: SIGTERM ignored, SIGKILL ends it (signal 9, not timed out)',
      ok6 and signal_of(s.exit(6)) == 9 and u(s.exit(6).get(T_EXIT_TIMED_OUT, b'\1')) == 0, s.exit(6))
s.x(P_XSIGNAL, 6, struct.pack('<I', 15))
s.x(P_XSIGNAL, 1234, struct.pack('<I', 9))

# 20. a per-exec timeout kills that exec only
s.frames = []
t0 = time.time()
s.exec(7, 'sh', '-c', 'echo started; sleep 30', extra=tlv(T_JOB_TIMEOUT_MS, u64(300)))
s.exec(8, 'sh', '-c', 'sleep 1; echo survived')
ok = s.pump(s.ended(7, 8))
check('session: timeout: SIGKILL and timed_out, output kept, promptly',
      ok and signal_of(s.exit(7)) == 9 and u(s.exit(7).get(T_EXIT_TIMED_OUT, b'')) == 1 and
      s.out(7) == b'started\n' and time.time() - t0 < 5, (s.exit(7), s.out(7), time.time() - t0))
check('session: another exec outlives that timeout', code(s.exit(8)) == 0 and
      s.out(8) == b'survived\n', (s.exit(8), s.out(8)))

# 21. exec failures are exit codes, as for a one-shot job
s.frames = []
s.exec(9, '/no/such/cmd')
s.exec(10, '/dev/null')
ok = s.pump(s.ended(9, 10))
check('session: command not found: XSTARTED, a husk-init line on stderr, exit 127',
      ok and code(s.exit(9)) == 127 and b'cannot execute' in s.out(9, 2) and
      s.of(9)[0] == P_XSTARTED and s.out(9) == b'', (s.of(9), s.exit(9), s.out(9, 2)))
check('session: not executable: exit 126', code(s.exit(10)) == 126, s.exit(10))

# 22. environment: the exec's own, then the session's, then the defaults; cwd
s.end()
s = Session(tlv(T_JOB_ENV, 'FOO=session') + tlv(T_JOB_ENV, 'BAR=kept'))
s.exec(1, 'sh', '-c', 'mkdir -p d/e')
s.pump(s.ended(1))
s.exec(2, 'sh', '-c', 'echo "$FOO:$BAR:$USER:$HOME"; pwd', env=['FOO=exec'],
       extra=tlv(T_JOB_CWD, 'd/e'))
ok = s.pump(s.ended(2))
check('session: exec env overrides the session\'s, which the defaults fill; cwd in the workspace',
      ok and s.out(2).decode().splitlines() == ['exec:kept:agentuser:%s' % WS,
                                                 os.path.realpath(WS) + '/d/e'], s.out(2))

# 23. put: a tar into the workspace, then an exec that reads it
buf = io.BytesIO()
with tarfile.open(fileobj=buf, mode='w:gz', format=tarfile.USTAR_FORMAT) as tf:
    for name, data in (('put/in.txt', b'payload\n'), ('put/two.txt', b'two')):
        ti = tarfile.TarInfo(name)
        ti.size = len(data)
        tf.addfile(ti, io.BytesIO(data))
blob = buf.getvalue()
s.frames = []
s.exec(3, 'sleep', '30')
for i in range(0, len(blob), 50):
    s.x(P_PUT, 4, blob[i:i + 50])
s.x(P_PUT, 4)
ok = s.pump(lambda s: s.has(P_XDONE, 4) or s.has(P_XERROR, 4))
check('session: put in chunks, answered by XDONE while an exec runs', ok and s.has(P_XDONE, 4) and
      s.of(4) == [P_XDONE] and not s.has(P_XEXIT, 3), (s.of(4), s.errors(4)))
# An open put (half its archive sent) does not hold up an exec's output.
buf = io.BytesIO()
with tarfile.open(fileobj=buf, mode='w:gz', format=tarfile.USTAR_FORMAT) as tf:
    ti = tarfile.TarInfo('put/three.txt')
    ti.size = 5
    tf.addfile(ti, io.BytesIO(b'three'))
blob3 = buf.getvalue()
s.exec(12, 'sh', '-c', 'for i in 1 2 3 4 5 6; do echo tick; sleep 0.1; done')
s.x(P_PUT, 13, blob3[:len(blob3) // 2])
ok = s.pump(lambda s: s.has(P_XEXIT, 12))
s.x(P_PUT, 13, blob3[len(blob3) // 2:])
s.x(P_PUT, 13)
ok = s.pump(lambda s: s.has(P_XDONE, 13) or s.has(P_XERROR, 13)) and ok
check('session: an exec runs to its end while a put is open, then the put completes',
      ok and s.out(12) == b'tick\n' * 6 and s.of(13) == [P_XDONE], (s.out(12), s.of(13)))
s.exec(5, 'sh', '-c', 'cat put/in.txt put/two.txt; stat -c %u put/in.txt')
ok = s.pump(s.ended(5))
owner = '1000' if os.geteuid() == 0 else str(os.geteuid())
s.exec(14, 'cat', 'put/three.txt')
ok = s.pump(s.ended(14)) and ok
check('session: an exec reads the put files (owned by the agent user)', ok and
      s.out(5) == b'payload\ntwo' + owner.encode() + b'\n' and s.out(14) == b'three', (s.out(5), s.out(14)))

# 24. get: a directory comes back as a tar; a missing path as an empty one
s.exec(6, 'sh', '-c', 'mkdir -p out/sub && echo one > out/a.txt && echo two > out/sub/b.txt && '
       'head -c 200000 /dev/urandom > out/big.bin && sha256sum out/big.bin')
s.pump(s.ended(6))
s.x(P_GET, 7, b'out')
s.x(P_GET, 8, b'missing')
ok = s.pump(lambda s: s.files(7) is not None and s.files(8) is not None)
members = {}
if ok:
    with tarfile.open(fileobj=io.BytesIO(s.files(7)), mode='r:gz') as tf:
        for m in tf.getmembers():
            members[m.name] = tf.extractfile(m).read() if m.isfile() else None
import hashlib
chunks = [len(p) - 4 for t, p in s.frames if t == P_XFILES and p[:4] == xid(7)]
check('session: get of a directory: its tree in chunks of <= 64 KiB, then the id alone',
      ok and sorted(members) == ['out', 'out/a.txt', 'out/big.bin', 'out/sub', 'out/sub/b.txt'] and
      members['out/a.txt'] == b'one\n' and members['out/sub/b.txt'] == b'two\n' and
      hashlib.sha256(members['out/big.bin']).hexdigest().encode() == s.out(6).split()[0] and
      max(chunks) <= 65536 and chunks[-1] == 0 and len(chunks) > 2, (ok, sorted(members), chunks))
empty = None
if ok:
    with tarfile.open(fileobj=io.BytesIO(s.files(8)), mode='r:gz') as tf:
        empty = tf.getmembers()
check('session: get of a missing path: an empty archive', empty == [], (empty, s.of(8)))
s.x(P_XSIGNAL, 3, struct.pack('<I', 9))
s.pump(s.ended(3))
check('session: the exec that ran through put and get was untouched by them',
      signal_of(s.exit(3)) == 9 and s.of(3)[0] == P_XSTARTED, s.of(3))
rc = s.end()
check('session: P_END: P_DONE, status 0', s.frames[-1][0] == P_DONE and rc == 0, (s.frames[-1:], rc))

# 25. requests that fail with P_XERROR keep the session going
buf = io.BytesIO()
with tarfile.open(fileobj=buf, mode='w:gz', format=tarfile.USTAR_FORMAT) as tf:
    ti = tarfile.TarInfo('second.txt')
    ti.size = 6
    tf.addfile(ti, io.BytesIO(b'second'))
blob = buf.getvalue()
s = Session()
s.exec(1, 'sleep', '30')
s.pump(lambda s: s.has(P_XSTARTED, 1))
s.exec(1, 'true')
s.x(P_EXEC, 2, tlv(T_JOB_ENV, 'A=b'))
s.x(P_EXEC, 3, job('true', extra=tlv(T_JOB_GET, 'x')))
s.x(P_EXEC, 4, job('true')[:-1])
s.exec(5, 'true', extra=tlv(T_JOB_CWD, 'no/such/dir'))
s.x(P_PUT, 6, b'not gzip at all')
s.x(P_PUT, 6)
s.x(P_GET, 7, b'../x')
s.x(P_GET, 8, b'/etc/passwd')
s.x(P_GET, 1, b'out')
s.pump(lambda s: s.errors(6))
s.x(P_PUT, 9, blob[:20])
s.x(P_PUT, 10, blob[:20])
s.x(P_PUT, 9, blob[20:])
s.x(P_PUT, 9)
ok = s.pump(lambda s: all(s.errors(i) for i in (2, 3, 4, 5, 6, 7, 8, 10)) and
            (s.has(P_XDONE, 9) or s.has(P_XERROR, 9)) and len(s.errors(1)) == 2)
check('session: duplicate id, bad exec specs, bad cwd: XERROR each',
      ok and all(len(s.errors(i)) == 1 for i in (2, 3, 4, 5)) and len(s.errors(1)) == 2 and
      b'cwd' not in s.errors(5)[0] and b'no/such/dir' in s.errors(5)[0],
      [(i, s.errors(i)) for i in (1, 2, 3, 4, 5)])
check('session: put of garbage, get of ../x and /etc/passwd, a second put: XERROR each',
      all(len(s.errors(i)) == 1 for i in (6, 7, 8, 10)) and s.of(9) == [P_XDONE],
      [(i, s.errors(i)) for i in (6, 7, 8, 9, 10)])
check('session: the duplicate id did not touch the running exec', not s.has(P_XEXIT, 1) and
      s.of(1) == [P_XSTARTED, P_XERROR, P_XERROR], s.of(1))
s.frames = []
for i in range(100, 100 + 63):
    s.exec(i, 'sleep', '30')
s.exec(200, 'true')
ok = s.pump(lambda s: all(s.has(P_XSTARTED, i) for i in range(100, 163)) and s.errors(200))
check('session: at most 64 live execs, the 65th is an XERROR', ok and len(s.errors(200)) == 1 and
      not s.has(P_XERROR, 162), (ok, s.errors(200)))
s.x(P_XSIGNAL, 100, struct.pack('<I', 9))
s.pump(s.ended(100))
s.frames = []
s.exec(201, 'echo', 'alive')
ok = s.pump(s.ended(201))
check('session: after errors and a freed slot, an exec still runs', ok and s.out(201) == b'alive\n' and
      code(s.exit(201)) == 0, (s.of(201), s.errors(201)))
t0 = time.time()
rc = s.end()
check('session: P_END with 63 execs running: P_DONE promptly, status 0',
      s.frames[-1][0] == P_DONE and rc == 0 and time.time() - t0 < 5, (s.frames[-1:], rc, time.time() - t0))

# 26. P_END kills what runs, background processes of ended execs included
s = Session()
s.exec(1, 'sh', '-c', 'sleep 97.25 & echo bg')
s.exec(2, 'sh', '-c', 'sleep 97.5 & sleep 97.75')
s.pump(lambda s: s.has(P_XEXIT, 1) and s.has(P_XSTARTED, 2))
time.sleep(0.2)
before = procs_of('sleep', '97.5') + procs_of('sleep', '97.75')
leftover = procs_of('sleep', '97.25')
rc = s.end()
time.sleep(0.2)
check('session: an exec\'s leftovers die with it', code(s.exit(1)) == 0 and s.out(1) == b'bg\n' and
      leftover == [], leftover)
check('session: P_END: running execs killed, no XEXIT for them, P_DONE, status 0',
      len(before) == 2 and procs_of('sleep', '97.5') == [] and procs_of('sleep', '97.75') == [] and
      not s.has(P_XEXIT, 2) and [t for t, _ in s.frames][-1] == P_DONE and rc == 0,
      (before, procs_of('sleep', '97.5'), s.frames[-2:], rc))

# 27. the session's lifetime (T_JOB_TIMEOUT_MS) ends it like P_END
t0 = time.time()
s = Session(tlv(T_JOB_TIMEOUT_MS, u64(600)))
s.exec(1, 'sleep', '30')
ok = s.pump(lambda s: bool(s.frames) and s.frames[-1][0] in (P_DONE, P_ERROR))
rc = s.finish()
check('session: its lifetime ends it: P_DONE, status 0, running exec killed',
      ok and s.frames[-1][0] == P_DONE and rc == 0 and 0.5 < time.time() - t0 < 5 and
      s.has(P_XSTARTED, 1) and not s.has(P_XEXIT, 1), (s.frames[-2:], rc, time.time() - t0))


# 28. protocol errors end the session: P_ERROR, status 1, everything killed
def proto_error(name, frames, extra=b''):
    s = Session(extra)
    s.exec(1, 'sleep', '96.5')
    s.pump(lambda s: s.has(P_XSTARTED, 1))
    t0 = time.time()
    for typ, p in frames:
        s.send(typ, p)
    ok = s.pump(lambda s: bool(s.frames) and s.frames[-1][0] in (P_DONE, P_ERROR))
    rc = s.finish()
    time.sleep(0.1)
    check('session: %s: P_ERROR, status 1, execs killed' % name,
          ok and s.frames[-1][0] == P_ERROR and rc == 1 and time.time() - t0 < 5 and
          procs_of('sleep', '96.5') == [], (s.frames[-2:], rc, procs_of('sleep', '96.5')))


proto_error('short payload', [(P_XSIGNAL, b'\1\0')])
proto_error('empty P_EXEC', [(P_EXEC, b'')])
proto_error('id 0', [(P_EXEC, xid(0) + job('true'))])
proto_error('P_JOB again', [(P_JOB, SESSION)])
proto_error('P_STDIN in a session', [(P_STDIN, b'x')])
proto_error('signal 0', [(P_XSIGNAL, xid(1) + struct.pack('<I', 0))])
proto_error('signal 65', [(P_XSIGNAL, xid(1) + struct.pack('<I', 65))])
proto_error('P_END with a payload', [(P_END, b'x')])

s = Session()
s.exec(1, 'sleep', '96.5')
s.pump(lambda s: s.has(P_XSTARTED, 1))
s.frames = []
s.send(P_ERROR, b'host gives up')
s.pump(lambda s: False, limit=3)
rc = s.finish()
time.sleep(0.1)
check('session: a host P_ERROR ends it without a reply, status 1, execs killed',
      rc == 1 and s.frames == [] and procs_of('sleep', '96.5') == [] and
      'host gives up' in s.err, (s.frames, rc, s.err[-200:]))

# 29. session frames outside a session and session-only rules for the spec
f, rc, c, _ = run(job('sleep', '30', extra=tlv(T_JOB_STDIN, b'\1')),
                  after_start=lambda c: c.send(P_EXEC, xid(1) + job('true')))
check('P_EXEC during a one-shot job: P_ERROR, status 1', types(f)[-1] == P_ERROR and rc == 1,
      (types(f), rc))
c = Conv()
c.recv()
c.send(P_EXEC, xid(1) + job('true'))
f = c.until_done()
rc = c.finish()
check('P_EXEC instead of P_JOB: P_ERROR, status 1', types(f) == [P_ERROR] and rc == 1, (f, rc))
for name, payload in [('argv', SESSION + tlv(T_JOB_ARG, 'true')),
                      ('--get', SESSION + tlv(T_JOB_GET, 'x')),
                      ('stdin', SESSION + tlv(T_JOB_STDIN, b'\0')),
                      ('session flag 2', tlv(T_JOB_SESSION, b'\2')),
                      ('session flag twice', SESSION + SESSION)]:
    f, rc, c, _ = run(payload)
    check('session spec with %s: P_ERROR, status 1' % name, types(f) == [P_ERROR] and rc == 1,
          (f, rc))
f, rc, c, _ = run(job('sh', '-c', 'echo one-shot', extra=tlv(T_JOB_SESSION, b'\0')))
check('T_JOB_SESSION 0 is a one-shot job', streams(f)[0] == b'one-shot\n' and rc == 0, (f, rc))

# 30. nothing piles up: guest-init's descriptors and children are as before
s = Session()
time.sleep(0.2)
fds0 = sorted(os.listdir('/proc/%d/fd' % s.proc.pid))
kids0 = children(s.proc.pid)
for i in range(1, 41):
    s.exec(i, 'sh', '-c', 'echo $0; exec sleep 0.$0', str(i % 10),
           extra=tlv(T_JOB_STDIN, b'\1') if i % 2 else b'')
s.x(P_GET, 50, b'out')
s.x(P_PUT, 51, b'garbage')
s.x(P_PUT, 51)
s.x(P_GET, 52, b'missing')
ok = s.pump(lambda s: s.ended(*range(1, 41))(s) and s.files(50) is not None and
            s.files(52) is not None and s.errors(51))
time.sleep(0.5)
fds1 = sorted(os.listdir('/proc/%d/fd' % s.proc.pid))
kids1 = children(s.proc.pid)
check('session: after 40 execs, 2 gets and a put, no descriptor or child is left over',
      ok and fds1 == fds0 and kids1 == kids0 and len(kids0) == 1 and
      all(s.out(i) == str(i % 10).encode() + b'\n' for i in range(1, 41)),
      (ok, fds0, fds1, kids0, kids1))
s.end()

# 31. as root: execs in the job's namespaces, as the agent user, sharing the workspace
if os.geteuid() == 0:
    ours = {n: os.readlink('/proc/self/ns/' + n) for n in NS}
    s = Session()
    s.exec(1, 'sh', '-c', 'echo shared > shared.txt; exec sleep 95.5')
    s.pump(lambda s: s.has(P_XSTARTED, 1))
    time.sleep(0.2)
    s.exec(2, 'sh', '-c', 'cat shared.txt; tr "\\0" "\\n" </proc/1/cmdline | head -n 1; '
           'for p in /proc/[0-9]*; do tr "\\0" " " <$p/cmdline; echo; done; '
           'for n in %s; do readlink /proc/self/ns/$n; done' % ' '.join(NS))
    s.exec(3, 'sh', '-c', 'for n in %s; do readlink /proc/self/ns/$n; done; id -u; id -g; '
           'grep -E "^(CapEff|CapBnd|NoNewPrivs|Seccomp):" /proc/self/status' % ' '.join(NS))
    ok = s.pump(s.ended(2, 3))
    out2 = s.out(2).decode().split('\n')
    cmds = [l.strip() for l in out2[2:] if l.strip() and ':[' not in l]
    ns2 = [l for l in out2 if ':[' in l]
    out3 = s.out(3).decode().split('\n')
    check('session (root): execs share the workspace', ok and out2[0] == 'shared', out2[:1])
    check('session (root): an exec sees job-init as PID 1, the other exec, never guest-init',
          out2[1:2] == ['job-init'] and 'job-init' in cmds and 'sleep 95.5' in cmds and
          not any('--test-fd' in l or 'husk-init' in l for l in cmds), (out2[:2], cmds))
    check('session (root): execs share pid, mnt, ipc, uts and net namespaces, not guest-init\'s',
          len(ns2) == 5 and ns2 == out3[:5] and
          all(ns2[i] != ours[n] and ns2[i].startswith(n + ':[') for i, n in enumerate(NS)),
          (ns2, out3[:5], ours))
    check('session (root): an exec runs as 1000:1000, no caps, no_new_privs, seccomp',
          out3[5:] == ['1000', '1000', 'CapEff:\t0000000000000000', 'CapBnd:\t0000000000000000',
                       'NoNewPrivs:\t1', 'Seccomp:\t2', ''], out3[5:])
    rc = s.end()
    time.sleep(0.1)
    check('session (root): P_END ends the namespace\'s processes', rc == 0 and
          procs_of('sleep', '95.5') == [], (rc, procs_of('sleep', '95.5')))
else:
    skip('session namespaces and agent user (not root)')

print('guest-init: %d passed, %d failed, %d skipped' % (passes, fails, skips))
sys.exit(1 if fails else 0)
