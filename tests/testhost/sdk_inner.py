#!/usr/bin/env python3
# Inside the test host (real KVM, root): the Python SDK (sdk/python) and
# husk mcp against a real husk serve with a warm pool. The SDK: sessions,
# commands with stdin and streams, files both ways, errors as exceptions,
# one-shot runs, asyncio. husk mcp: driven by the official MCP TypeScript
# SDK's client (tests/testhost/mcp_client.cjs) when node and the SDK were
# brought in. Prints figures: SDK overhead over the raw socket, and a
# scripted 10-call agent session from the pool.
#   sdk_inner.py BUILDDIR SRCDIR IP [NODE NODE_PATH]   (IP: iproute2's ip)
import asyncio
import base64
import hashlib
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time

B, S = sys.argv[1], sys.argv[2]
IP = sys.argv[3]
NODE = sys.argv[4] if len(sys.argv) > 4 else ""
NODE_PATH = sys.argv[5] if len(sys.argv) > 5 else ""
sys.path.insert(0, S + "/sdk/python")
import husk  # noqa: E402
import husk.aio  # noqa: E402

HUSK = B + "/husk"
W = "/tmp/sdk-inner"
D = W + "/templates"
SOCK = W + "/serve.sock"
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


def skip(msg):
    global skips
    skips += 1
    print("skip - " + msg, flush=True)


def raises(exc, fn):
    try:
        fn()
    except exc as e:
        return e
    except Exception as e:  # the wrong one
        return AssertionError("%s instead of %s" % (type(e).__name__, exc.__name__))
    return None


def done():
    print("sdk: %d passed, %d failed, %d skipped" % (passes, fails, skips))
    sys.exit(1 if fails else 0)


subprocess.run(["rm", "-rf", W])
os.makedirs(W)
r = subprocess.run([HUSK, "template", "create", "base", "--template-dir", D, "--mem", "256"],
                   capture_output=True, text=True)
if not check(r.returncode == 0, "template base made", r.stderr):
    done()
# The example agent's sandboxes have egress: their template has a NIC.
r = subprocess.run([HUSK, "template", "create", "net", "--template-dir", D, "--mem", "256",
                    "--net", "egress"], capture_output=True, text=True)
check(r.returncode == 0, "template net (with a NIC) made", r.stderr)
# A fake internet for the example agent: tests/net/fake-internet.py in a
# network namespace behind a veth (HTTP on 8080 of www.allowed.test's and
# evil.test's addresses, their DNS server), forwarded without NAT.
INET = W + "/inet"
os.makedirs(INET)
for c in ("ip netns del huskinet", "ip netns add huskinet",
          "ip link add up0 type veth peer name inet0 netns huskinet",
          "ip addr add 192.0.2.1/24 dev up0", "ip link set up0 up",
          "ip -n huskinet addr add 192.0.2.2/24 dev inet0", "ip -n huskinet link set inet0 up",
          "ip -n huskinet link set lo up", "ip -n huskinet addr add 203.0.113.20/32 dev lo",
          "ip -n huskinet addr add 203.0.113.53/32 dev lo",
          "ip -n huskinet addr add 198.51.100.20/32 dev lo",
          "ip route add 203.0.113.0/24 via 192.0.2.2", "ip route add 198.51.100.20/32 via 192.0.2.2",
          "ip -n huskinet route add 10.200.0.0/16 via 192.0.2.1"):
    subprocess.run([IP] + c.split()[1:], stderr=subprocess.DEVNULL)
with open("/proc/sys/net/ipv4/ip_forward", "w") as f:
    f.write("1\n")
inet = subprocess.Popen([IP, "netns", "exec", "huskinet", "/usr/bin/python3",
                         S + "/tests/net/fake-internet.py", INET, "203.0.113.53", "203.0.113.20",
                         "198.51.100.20"], stderr=open(W + "/inet.err", "w"))
for _ in range(100):
    if os.path.exists(INET + "/ready"):
        break
    time.sleep(0.1)
inet_up = check(os.path.exists(INET + "/ready"), "the fake internet is up",
                open(W + "/inet.err").read())
os.environ["HUSK_DNS_UPSTREAM"] = "203.0.113.53:53"

with open(W + "/serve.conf", "w") as f:
    f.write("max_vms = 6\nmax_mem = 4096\npool.base = 2\npool.net = 1\n")
log = open(W + "/serve.log", "ab")
daemon = subprocess.Popen([HUSK, "serve", "--socket", SOCK, "--template-dir", D,
                           "--config", W + "/serve.conf"], stdout=log, stderr=log)
os.environ["HUSK_SERVER"] = SOCK
h = {}
for _ in range(600):
    try:
        h = husk.health()
        if h["load"].get("pooled_ready") == 3:
            break
    except husk.ConnectionFailed:
        pass
    time.sleep(0.2)
check(h.get("load", {}).get("pooled_ready") == 3, "husk.health(): the daemon is up, its pool warm",
      h)

# ---- a session from the pool
with husk.Sandbox("base") as sb:
    check(sb.start == "pool" and sb.id, "Sandbox: a warm clone from the pool", (sb.id, sb.start))
    r = sb.run("echo out; echo err >&2; id -un; exit 3")
    check(r.exit_code == 3 and r.stdout.startswith(b"out\n") and r.stderr == b"err\n",
          "run: output, stderr and exit code", r)
    check(r.text.split("\n")[1] == "agentuser", "run: as the unprivileged job user", r.text)
    check(r.started_ms is not None and r.ended_ms >= r.started_ms, "run: timings", r)
    e = raises(husk.CommandFailed, lambda: sb.run("false", check=True))
    check(isinstance(e, husk.CommandFailed) and e.result.exit_code == 1, "check=True raises", e)
    r = sb.run_code("echo $((6 * 7))", language="sh")
    check(r.text == "42\n", "run_code: sh reads the code on stdin", r)
    big = os.urandom(1 << 20)
    r = sb.run(["sh", "-c", "wc -c; echo done"], stdin=big)
    check(r.text.split() == ["1048576", "done"], "run: 1 MiB of stdin, streamed", r.text)
    chunks = []
    kinds = []
    for ev in sb.stream("for i in 1 2 3; do echo $i; sleep 0.3; done"):
        kinds.append(ev.kind)
        if ev.kind == "stdout":
            chunks.append(ev.data)
    check(kinds[0] == "started" and kinds[-1] == "exit" and b"".join(chunks) == b"1\n2\n3\n" and
          len(chunks) >= 2, "stream: events as they come", (kinds, chunks))
    e = raises(husk.Timeout, lambda: sb.run("echo begun; sleep 30", timeout=2))
    check(isinstance(e, husk.Timeout) and e.result.stdout == b"begun\n",
          "a command past its timeout raises Timeout with its output", e)
    # files both ways
    data = os.urandom(3 << 20)
    sb.write("data/x.bin", data)
    r = sb.run("sha256sum data/x.bin")
    check(r.text.split()[0] == hashlib.sha256(data).hexdigest(), "write: 3 MiB in, intact", r.text)
    check(sb.read("data/x.bin") == data, "read: the same bytes back")
    sb.write("notes.txt", "hello\n")
    e = raises(husk.HuskError, lambda: sb.write("notes.txt", "again\n"))
    check(isinstance(e, husk.HuskError), "write: an existing file is not replaced", e)
    src = tempfile.mkdtemp()
    os.makedirs(src + "/proj/sub")
    with open(src + "/proj/sub/a.csv", "w") as f:
        f.write("b,2\na,1\n")
    with open(src + "/proj/run.sh", "w") as f:
        f.write("sort sub/a.csv\n")
    os.symlink("/etc/shadow", src + "/proj/leak")
    sb.upload(src + "/proj")
    check(sorted(sb.files("proj")) == ["run.sh", "sub"], "upload: the tree, the link left out",
          sb.files("proj"))
    r = sb.run(["sh", "run.sh"], cwd="proj")
    check(r.text == "a,1\nb,2\n", "run with cwd", r)
    out = tempfile.mkdtemp()
    got = sb.download("proj", out)
    check(sorted(got) == ["proj/run.sh", "proj/sub/a.csv"] and
          open(out + "/proj/sub/a.csv").read() == "b,2\na,1\n", "download: the tree back", got)
    e = raises(husk.HuskError, lambda: sb.read("nope"))
    check(isinstance(e, husk.HuskError), "read: a missing file raises", e)
    sid = sb.id
rec_ok = sb.conn is None
check(rec_ok, "leaving the with block closed it")
lst = json.loads(subprocess.run([HUSK, "ps", "--json"], capture_output=True, text=True).stdout
                 or "[]")
check(not [x for x in lst if x.get("sandbox") == sid], "the session is gone from husk ps", lst)

# a sandbox that ends under the client
sb = husk.Sandbox("base").open()
subprocess.run([HUSK, "kill", sb.id], capture_output=True)
e = raises(husk.SandboxGone, lambda: sb.run("true"))
check(isinstance(e, husk.SandboxGone), "a killed sandbox raises SandboxGone", e)
sb.close()

# egress policy: a refused rule
with husk.Sandbox(net="egress") as sb:
    e = raises(husk.PolicyDenied, lambda: sb.policy(allow=["not a rule"]))
    check(isinstance(e, husk.PolicyDenied), "policy: a bad rule raises PolicyDenied", e)
    p = sb.policy(allow=["192.0.2.1/32:tcp:443"])
    check(p["allow"] == ["192.0.2.1/32:tcp:443"], "policy: a rule set and read back", p)

# A networked pool serves requests for egress only; the rules of one do not
# stay for the next clone.
with husk.Sandbox("net") as sb:
    check(sb.start == "template", "a request without net is not served by the networked pool",
          sb.start)
with husk.Sandbox("net", net="egress", allow=["198.51.100.20/32:tcp:8080"]) as sb:
    check(sb.start == "pool", "net egress with rules: a clone of the networked pool", sb.start)
    r = sb.run("printf 'GET / HTTP/1.0\\r\\n\\r\\n' | busybox nc -w 3 198.51.100.20 8080")
    check(b"husk-it-ok from 198.51.100.20" in r.stdout, "its rule lets it through",
          (r.stdout, r.stderr))
    check(sb.policy()["allow"] == ["198.51.100.20/32:tcp:8080"], "policy reads the rule back")
deadline = time.monotonic() + 120
while time.monotonic() < deadline and husk.health()["load"].get("pooled_ready") != 3:
    time.sleep(0.5)
with husk.Sandbox("net", net="egress") as sb:
    r = sb.run("printf 'GET / HTTP/1.0\\r\\n\\r\\n' | busybox nc -w 3 198.51.100.20 8080; true")
    check(sb.start == "pool" and b"husk-it-ok" not in r.stdout,
          "the next pooled clone starts with no rule: nothing gets through", (sb.start, r.stdout))

e = raises(TypeError, lambda: husk.Sandbox("base", memory=512))
check(isinstance(e, TypeError), "an unknown option is a TypeError before anything is sent", e)
e = raises(husk.ConnectionFailed, lambda: husk.run("true", socket=W + "/none.sock"))
check(isinstance(e, husk.ConnectionFailed), "no daemon: ConnectionFailed", e)

# ---- one-shot
r = husk.run(["sh", "-c", "echo one-shot"], template="base")
check(r.text == "one-shot\n" and r.record.get("start") == "pool" and
      r.record.get("schema") == "husk.run/1", "husk.run: a job from the pool, its record", r)


# ---- asyncio: three sandboxes at once
async def amain():
    async def one(i):
        async with husk.aio.Sandbox("base") as sb:
            await sb.write("f", b"%d" % i)
            r = await sb.run("cat f; echo")
            return r.text
    got = await asyncio.gather(*(one(i) for i in range(3)))
    r = await husk.aio.run("echo aio", template="base")
    return got, r.text


got, one = asyncio.run(amain())
check(got == ["0\n", "1\n", "2\n"] and one == "aio\n", "husk.aio: three sessions at once, a run",
      (got, one))

# ---- figures: the SDK's cost over the raw socket, and an agent session
with husk.Sandbox("base") as sb:
    codes = []	# every exec's exit code: a figure from failed execs is no figure
    for _ in range(3):
        codes.append(sb.run(["true"]).exit_code)		# warm
    # Interleaved, so that the guest's and the host's drift hits both alike.
    s = socket.socket(socket.AF_UNIX)
    s.connect(SOCK)
    f = s.makefile("rwb")
    sdk, raw = [], []
    for i in range(30):
        t = time.monotonic()
        r = sb.run(["true"])
        sdk.append((time.monotonic() - t) * 1000)
        codes.append(r.exit_code)
        t = time.monotonic()
        f.write(json.dumps({"id": i, "op": "exec", "sandbox": sb.id, "argv": ["true"]}).encode()
                + b"\n")
        f.flush()
        m = json.loads(f.readline())
        while "event" in m:
            m = json.loads(f.readline())
        raw.append((time.monotonic() - t) * 1000)
        codes.append(m.get("exit_code"))
    f.close()
    s.close()
check(codes == [0] * 63, "the 63 execs of true behind the figures exited 0", codes)
ps, pr = statistics.median(sdk), statistics.median(raw)
print("# figure: exec of true, p50 over 30 interleaved: SDK %.1f ms, raw socket %.1f ms (SDK "
      "overhead %.1f ms)" % (ps, pr, ps - pr), flush=True)

t0 = time.monotonic()
steps = []
with husk.Sandbox("base") as sb:
    def step(name, fn):
        t = time.monotonic()
        v = fn()
        steps.append((name, (time.monotonic() - t) * 1000))
        return v
    step("write csv", lambda: sb.write("in.csv", "name,n\nb,2\na,1\nc,3\n"))
    step("head", lambda: sb.run("head -1 in.csv"))
    step("count", lambda: sb.run("tail -n +2 in.csv | wc -l"))
    step("sum", lambda: sb.run("awk -F, 'NR>1{s+=$2} END{print s}' in.csv"))
    step("sort", lambda: sb.run("tail -n +2 in.csv | sort > sorted.csv"))
    step("read", lambda: sb.read("sorted.csv"))
    step("code", lambda: sb.run_code("echo $(( $(wc -l < sorted.csv) * 2 ))", language="sh"))
    step("ls", lambda: sb.files())
    step("write report", lambda: sb.write("report.txt", "total 6\n"))
    total = step("check", lambda: sb.run("cat report.txt"))
el = (time.monotonic() - t0) * 1000
print("# figure: scripted 10-call agent session from the pool: %.0f ms end to end (%s)"
      % (el, ", ".join("%s %.0f" % s for s in steps)), flush=True)
check(total.text == "total 6\n" and len(steps) == 10, "the 10-call session did its work", total)

# ---- husk mcp with the official MCP TypeScript SDK's client
if not NODE:
    skip("husk mcp with the MCP TypeScript SDK: node or @modelcontextprotocol/sdk not available")
else:
    env = dict(os.environ, NODE_PATH=NODE_PATH)
    t = time.monotonic()
    p = subprocess.run([NODE, S + "/tests/testhost/mcp_client.cjs", HUSK, SOCK],
                       capture_output=True, text=True, env=env, timeout=600)
    try:
        out = json.loads(p.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        out = {"fatal": p.stdout[-2000:] + p.stderr[-2000:]}
    check("fatal" not in out, "mcp: the TypeScript SDK client connected and ran", out.get("fatal"))
    c = out.get("calls", {})

    def res(k):
        return c.get(k, {}).get("result", {})

    def txt(k):
        return "".join(x.get("text", "") for x in res(k).get("content", []))
    check(out.get("server", {}).get("name") == "husk", "mcp: initialize, server info", out.get("server"))
    check(out.get("tools") == ["list_files", "read_file", "run_code", "run_command", "write_file"],
          "mcp: tools/list", out.get("tools"))
    sc = res("echo").get("structuredContent", {})
    check(sc.get("stdout") == "hello from agentuser\n" and sc.get("exit_code") == 0,
          "mcp: run_command in the sandbox, as agentuser", res("echo"))
    sc = res("fail").get("structuredContent", {})
    check(sc.get("exit_code") == 3 and sc.get("stderr") == "oops\n" and
          res("fail").get("isError") is False, "mcp: a failing command's status and stderr", res("fail"))
    check(res("code").get("structuredContent", {}).get("stdout") == "42\n", "mcp: run_code",
          res("code"))
    check(res("write").get("isError") is False and txt("read") == "line1\nline2\n",
          "mcp: write_file then read_file (a path with a space)", (res("write"), res("read")))
    check("a b.txt" in txt("list"), "mcp: list_files", txt("list"))
    cs = res("readbin").get("content", [])
    check(len(cs) == 2 and base64.b64decode(cs[1].get("text", "")) == b"\0\1\2\xff",
          "mcp: bytes in and out as base64", res("readbin"))
    check(res("missing").get("isError") is True, "mcp: a missing file is a tool error",
          res("missing"))
    check(res("timeout").get("isError") is True and "timeout" in txt("timeout"),
          "mcp: a command past its timeout is a tool error", res("timeout"))
    check(c.get("unknown", {}).get("error", {}).get("code") == -32602,
          "mcp: an unknown tool is a JSON-RPC error", c.get("unknown"))
    check(c.get("badargs", {}).get("error", {}).get("code") == -32602,
          "mcp: wrong arguments are a JSON-RPC error", c.get("badargs"))
    print("# figure: MCP session (TypeScript SDK client): first call %s ms (the sandbox made "
          "from the pool), whole session %s ms" % (out.get("first_call_ms"), out.get("session_ms")),
          flush=True)
    time.sleep(1)
    lst = json.loads(subprocess.run([HUSK, "ps", "--json"], capture_output=True,
                                    text=True).stdout or "[]")
    check(not [x for x in lst if x.get("kind") != "pool"], "mcp: its sandbox was destroyed at "
          "the end", lst)

# ---- examples/agent-tool: the scripted agent, its allowed and refused hosts
if inet_up:
    p = subprocess.run(["/usr/bin/python3", S + "/examples/agent-tool/agent.py", "--template",
                        "net", "--api-url", "http://www.allowed.test:8080/v1/status",
                        "--refused-url", "http://evil.test:8080/upload"],
                       capture_output=True, text=True, timeout=600)
    print("".join("    | " + ln + "\n" for ln in p.stdout.splitlines()), end="", flush=True)
    check(p.returncode == 0 and "all as expected" in p.stdout,
          "example agent: every step as expected", (p.returncode, p.stderr))
    check("Revenue grew 12 percent" in p.stdout and "top region: south" in p.stdout,
          "example agent: the PDF's text and the table's summary", p.stdout[-600:])
    check("husk-it-ok from 203.0.113.20" in p.stdout, "example agent: the allowed API answered")
    check("(pool start)" in p.stdout, "example agent: its networked sandbox came from the pool "
          "(the rules set on the warm clone)")
    asked = open(INET + "/dns.log").read() if os.path.exists(INET + "/dns.log") else ""
    check("www.allowed.test" in asked and "evil.test" not in asked,
          "example agent: the refused name never left the host", asked)
    p = subprocess.run(["/usr/bin/python3", S + "/examples/agent-tool/agent.py", "--pdf",
                        W + "/none.pdf"], capture_output=True, text=True, timeout=60)
    check(p.returncode == 2 and "none.pdf" in p.stderr, "example agent: a missing input is "
          "exit 2 with a message", (p.returncode, p.stderr))
else:
    skip("example agent: no fake internet")

daemon.terminate()
daemon.wait(60)
inet.terminate()
subprocess.run([IP, "netns", "del", "huskinet"], stderr=subprocess.DEVNULL)
done()
