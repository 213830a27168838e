#!/usr/bin/env python3
"""husk mcp against a fake husk serve: what an MCP client sees on stdio and
what the daemon is asked, for every tool, cancellation, bounds, bad input
and shutdown.   mcp_test.py HUSK FAKE_DAEMON_DIR"""

import base64
import json
import os
import select
import signal
import subprocess
import sys
import time

HUSK, FAKE_DIR = sys.argv[1], sys.argv[2]
sys.path.insert(0, FAKE_DIR)
from fake_daemon import FakeDaemon  # noqa: E402

passes = fails = 0


def check(cond, msg, detail=""):
    global passes, fails
    if cond:
        passes += 1
        print("ok   - " + msg, flush=True)
    else:
        fails += 1
        print("FAIL - " + msg + (": " + str(detail)[:1500] if detail != "" else ""), flush=True)
    return cond


class Mcp:
    def __init__(self, d, *args):
        self.d = d
        self.p = subprocess.Popen([HUSK, "mcp", "--server", d.path] + list(args),
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE)
        self.buf = b""
        self.bad_lines = []

    def send(self, obj):
        data = obj if isinstance(obj, bytes) else json.dumps(obj).encode() + b"\n"
        self.p.stdin.write(data)
        self.p.stdin.flush()

    def recv(self, timeout=10):
        end = time.time() + timeout
        while b"\n" not in self.buf:
            left = end - time.time()
            if left <= 0 or not select.select([self.p.stdout], [], [], left)[0]:
                return None
            chunk = os.read(self.p.stdout.fileno(), 65536)
            if not chunk:
                return None
            self.buf += chunk
        line, self.buf = self.buf.split(b"\n", 1)
        try:
            m = json.loads(line)
        except ValueError:
            self.bad_lines.append(line)
            return {"unparseable": line[:200]}
        if not isinstance(m, dict) or m.get("jsonrpc") != "2.0":
            self.bad_lines.append(line)
        return m

    def call(self, mid, method, params=None):
        msg = {"jsonrpc": "2.0", "id": mid, "method": method}
        if params is not None:
            msg["params"] = params
        self.send(msg)
        return self.recv()

    def tool(self, mid, name, **args):
        return self.call(mid, "tools/call", {"name": name, "arguments": args})

    def close(self):
        self.p.stdin.close()
        try:
            rc = self.p.wait(10)
        except subprocess.TimeoutExpired:
            self.p.kill()
            rc = "hung"
        return rc


def execs(d):
    return [q for q in d.requests if q["op"] == "exec"]


def text(r):
    return "".join(c.get("text", "") for c in r.get("result", {}).get("content", []))


d = FakeDaemon()
m = Mcp(d, "--template", "base", "--allow-host", "api.example.com", "--timeout", "60",
        "--max-output", "100", "--max-file", "64")

# ---- lifecycle
r = m.call(1, "initialize", {"protocolVersion": "2025-06-18", "capabilities": {},
                             "clientInfo": {"name": "test", "version": "1"}})
res = r.get("result", {}) if r else {}
check(res.get("protocolVersion") == "2025-06-18" and "tools" in res.get("capabilities", {}) and
      res.get("serverInfo", {}).get("name") == "husk", "initialize: the client's version, tools", r)
m.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
r = m.call(2, "initialize", {"protocolVersion": "1999-01-01"})
check(r and r["result"]["protocolVersion"] == "2025-11-25", "initialize: an unknown version "
      "gets the newest", r)
check(d.requests == [], "no sandbox before the first tool call", d.requests)
r = m.call(3, "tools/list")
tools = {t["name"]: t for t in (r or {}).get("result", {}).get("tools", [])}
check(sorted(tools) == ["list_files", "read_file", "run_code", "run_command", "write_file"],
      "tools/list: the five tools", sorted(tools))
check(all(t["inputSchema"]["type"] == "object" and t.get("description") for t in tools.values())
      and "outputSchema" in tools.get("run_command", {}), "tools/list: schemas and descriptions")
check(m.call(4, "ping") == {"jsonrpc": "2.0", "id": 4, "result": {}}, "ping")

# ---- run_command
r = m.tool(10, "run_command", command="echo hi", timeout=1000)
sc = r.get("result", {}).get("structuredContent", {})
check(sc.get("stdout") == "ran sh -c echo hi\n" and sc.get("exit_code") == 0 and
      r["result"]["isError"] is False, "run_command: output and exit code", r)
check(json.loads(text(r)) == sc, "run_command: its text is the structured result as JSON", r)
cr = [q for q in d.requests if q["op"] == "create"]
check(len(cr) == 1 and cr[0].get("template") == "base" and cr[0].get("net") == "egress" and
      cr[0].get("allow_host") == ["api.example.com"], "the sandbox made from the flags", cr)
check(execs(d)[-1]["argv"] == ["sh", "-c", "echo hi"] and execs(d)[-1]["timeout"] == 60,
      "run_command: argv, the timeout held to --timeout", execs(d)[-1])
d.mode.update(exit_code=3, stdout=b"x" * 1000)
r = m.tool(11, "run_command", command="false")
sc = r.get("result", {}).get("structuredContent", {})
check(sc.get("exit_code") == 3 and r["result"]["isError"] is False, "a non-zero exit is a result", r)
check(sc.get("stdout", "").startswith("x" * 100) and
      sc.get("stdout", "").endswith("[... 900 more bytes not shown]"),
      "output beyond --max-output is cut and counted", sc.get("stdout"))
d.mode = {"exit_code": None, "signal": 9, "timed_out": True}
r = m.tool(12, "run_command", command="sleep 100")
check(r["result"]["isError"] is True and "timeout" in text(r), "a timeout is a tool error", r)
d.mode = {}

# ---- run_code
r = m.tool(20, "run_code", code="print(6 * 7)\n")
check(execs(d)[-1]["argv"] == ["python3", "-"] and execs(d)[-1].get("stdin") is True and
      r["result"]["structuredContent"]["stdout"] == "print(6 * 7)\n",
      "run_code: python3 reads the code on stdin", (execs(d)[-1], r))
r = m.tool(21, "run_code", code="echo", language="cobol")
check(r.get("error", {}).get("code") == -32602, "run_code: an unknown language", r)

# ---- write_file: the path is an argument, never part of the script
evil = "a b/$(touch pwned);x"
r = m.tool(30, "write_file", path=evil, content="data")
argv = execs(d)[-1]["argv"]
check(argv[:2] == ["sh", "-c"] and argv[-1] == evil and evil not in argv[2] and
      r["result"]["isError"] is False and "4 bytes" in text(r), "write_file: the path as argv", argv)
before = len(d.requests)
r = m.tool(31, "write_file", path="b.bin", content=base64.b64encode(b"\0\1\2").decode(),
           encoding="base64")
stdin = b"".join(base64.b64decode(q["data"]) for q in d.requests[before:]
                 if q["op"] == "stdin" and "data" in q)
check(stdin == b"\0\1\2" and "3 bytes" in text(r), "write_file: base64 content as bytes", stdin)
r = m.tool(32, "write_file", path="c", content="!!notbase64", encoding="base64")
check(r.get("error", {}).get("code") == -32602, "write_file: bad base64 refused", r)
r = m.tool(33, "write_file", path="c", content="x", encoding="latin1")
check(r.get("error", {}).get("code") == -32602, "write_file: unknown encoding refused", r)
r = m.tool(34, "write_file", path="empty", content="")
check(r.get("result", {}).get("isError") is False, "write_file: an empty file", r)

# ---- read_file, list_files
d.mode = {"stdout": b"hello\n"}
r = m.tool(40, "read_file", path="f.txt")
check(text(r) == "hello\n" and execs(d)[-1]["argv"] == ["cat", "--", "f.txt"], "read_file: text", r)
d.mode = {"stdout": b"\xff\xfe\x00"}
r = m.tool(41, "read_file", path="f.bin")
cs = r.get("result", {}).get("content", [])
check(len(cs) == 2 and base64.b64decode(cs[1]["text"]) == b"\xff\xfe\x00",
      "read_file: bytes that are not UTF-8 come back base64", r)
d.mode = {"stdout": b"y" * 65}
r = m.tool(42, "read_file", path="big")
check(r["result"]["isError"] is True and "larger than 64 bytes" in text(r),
      "read_file: more than --max-file is refused", r)
d.mode = {"exit_code": 1, "stderr": b"cat: nope: No such file or directory\n"}
r = m.tool(43, "read_file", path="nope")
check(r["result"]["isError"] is True and "No such file" in text(r), "read_file: a missing file", r)
d.mode = {}
r = m.tool(44, "list_files")
check(execs(d)[-1]["argv"] == ["ls", "-la", "--", "."] and r["result"]["isError"] is False,
      "list_files: the workspace", execs(d)[-1])

# ---- bad arguments
for mid, args in ((50, {"name": "run_command", "arguments": {"command": 5}}),
                  (51, {"name": "run_command", "arguments": {"command": "a\u0000b"}}),
                  (52, {"name": "run_command", "arguments": {"command": "x", "timeout": 0}}),
                  (53, {"name": "run_command", "arguments": []}),
                  (54, {"arguments": {}}), (55, {"name": "rm_rf"})):
    r = m.call(mid, "tools/call", args)
    check(r and r.get("error", {}).get("code") == -32602, "tools/call %s: invalid params" %
          json.dumps(args)[:60], r)

# ---- the sandbox goes away: the next call makes a new one
d.mode = {"error_exec": ("not-found", "no such sandbox")}
r = m.tool(60, "run_command", command="true")
check(r["result"]["isError"] is True and "sandbox ended" in text(r), "a lost sandbox is said", r)
d.mode = {}
r = m.tool(61, "run_command", command="true")
check(r["result"]["isError"] is False and
      len([q for q in d.requests if q["op"] == "create"]) == 2, "... and the next call gets a new one")

# ---- cancellation: pings answered meanwhile, the command killed, no answer
d.mode = {"hang": True}
m.send({"jsonrpc": "2.0", "id": 70, "method": "tools/call",
        "params": {"name": "run_command", "arguments": {"command": "sleep 1000"}}})
time.sleep(0.3)
r = m.call(71, "ping")
check(r == {"jsonrpc": "2.0", "id": 71, "result": {}}, "a ping is answered while a tool runs", r)
m.send({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 70}})
time.sleep(0.5)
sig = [q for q in d.requests if q["op"] == "signal"]
check(sig and sig[-1].get("signal") == "KILL", "cancelled: the command is killed", sig)
d.mode = {}
r = m.call(72, "ping")
check(r == {"jsonrpc": "2.0", "id": 72, "result": {}}, "cancelled: no answer to it, the next one "
      "comes", r)

# ---- what comes in the same read as a call is seen while it runs
d.mode = {"hang": True}
before = len(execs(d))
m.send(json.dumps({"jsonrpc": "2.0", "id": 76, "method": "tools/call",
                   "params": {"name": "run_command", "arguments": {"command": "sleep 1000"}}})
       .encode() + b"\n" + json.dumps({"jsonrpc": "2.0", "method": "notifications/cancelled",
                                       "params": {"requestId": 76}}).encode() + b"\n")
r = m.call(77, "ping")
check(r == {"jsonrpc": "2.0", "id": 77, "result": {}} and len(execs(d)) == before,
      "a call cancelled in the same write never runs and gets no answer", r)

# ---- messages sent while a tool runs wait in a bounded queue
d.mode = {"hang": True}
m.send({"jsonrpc": "2.0", "id": 73, "method": "tools/call",
        "params": {"name": "run_command", "arguments": {"command": "sleep 1000"}}})
for i in range(70):
    m.send({"jsonrpc": "2.0", "id": 1000 + i, "method": "tools/list"})
m.send({"jsonrpc": "2.0", "method": "notifications/whatever"})
r = m.call(74, "ping")
busy = []
while r and r.get("id") != 74:
    busy.append(r)
    r = m.recv()
check([x.get("id") for x in busy] == list(range(1064, 1070)) and
      all(x.get("error", {}).get("code") == -32000 and "at most 64" in x["error"]["message"]
          for x in busy), "past 64 waiting messages a request is refused at once", busy[:2])
check(r == {"jsonrpc": "2.0", "id": 74, "result": {}}, "... a notification dropped, pings "
      "still answered", r)
m.send({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 73}})
got = [m.recv() for _ in range(64)]
check([x and x.get("id") for x in got] == list(range(1000, 1064)) and
      all("tools" in x.get("result", {}) for x in got), "... the 64 that waited are answered "
      "in order once the call ended", [x and x.get("id") for x in got][:5])
d.mode = {"hang": True}
m.send({"jsonrpc": "2.0", "id": 75, "method": "tools/call",
        "params": {"name": "run_command", "arguments": {"command": "sleep 1000"}}})
pad = "p" * (10 << 20)
for i in range(4):
    m.send({"jsonrpc": "2.0", "id": 1100 + i, "method": "tools/list", "params": {"pad": pad}})
r = m.recv(60)
check(r and r.get("id") == 1103 and r.get("error", {}).get("code") == -32000 and
      "32 MiB" in r["error"]["message"], "past 32 MiB of waiting messages a request is "
      "refused", r and str(r)[:300])
m.send({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 75}})
got = [m.recv(60) for _ in range(3)]
check([x and x.get("id") for x in got] == [1100, 1101, 1102], "... the three that fit are "
      "answered", [x and x.get("id") for x in got])
d.mode = {}

# ---- malformed input
for raw, code in ((b"garbage\n", -32700), (b"[1,2]\n", -32600), (b'{"jsonrpc":"1.0","id":1}\n', -32600),
                  (b"[" * 100 + b"]" * 100 + b"\n", -32700),
                  (b'{"jsonrpc":"2.0","id":1,"id":2,"method":"ping"}\n', -32700)):
    m.send(raw)
    r = m.recv()
    check(r and r.get("error", {}).get("code") == code, "malformed %r: %d" % (raw[:30], code), r)
r = m.call(80, "resources/list")
check(r.get("error", {}).get("code") == -32601, "an unknown method", r)
m.send(b'{"jsonrpc":"2.0","method":"notifications/whatever"}\n')
m.send(b'{"jsonrpc":"2.0","id":99,"result":{}}\n')
m.send(b'{"jsonrpc":"2.0","id":81,"method":"ping","params":{"x":' + b'"' + b"a" * (17 << 20) + b'"}}\n')
r = m.recv(30)
check(r and r.get("error", {}).get("code") == -32700 and "16 MiB" in r["error"]["message"],
      "a message over 16 MiB is refused", r)
r = m.call(82, "ping")
check(r == {"jsonrpc": "2.0", "id": 82, "result": {}}, "notifications and responses get no "
      "answer; the server goes on", r)
check(m.bad_lines == [], "stdout carried JSON-RPC only", m.bad_lines[:3])

# ---- the end: stdin closed, the sandbox destroyed
rc = m.close()
check(rc == 0 and d.requests[-1]["op"] == "destroy", "EOF: exit 0, the sandbox destroyed",
      (rc, d.requests[-1]))
d.requests.clear()
m = Mcp(d)
m.tool(1, "run_command", command="true")
m.p.send_signal(signal.SIGTERM)
try:
    rc = m.p.wait(10)
except subprocess.TimeoutExpired:
    rc = "hung"
check(rc == 0 and d.requests[-1]["op"] == "destroy", "SIGTERM: exit 0, the sandbox destroyed",
      (rc, d.requests[-1:]))
m = Mcp(d)
rc = m.close()
check(rc == 0 and not [q for q in d.requests[2:] if q["op"] == "create"],
      "a session without a tool call makes no sandbox", rc)

# ---- usage
for args in (["--net", "all"], ["--template", "a", "--image", "b"], ["--timeout", "0"],
             ["--cpus", "x"], ["extra"]):
    p = subprocess.run([HUSK, "mcp"] + args, capture_output=True, text=True,
                       stdin=subprocess.DEVNULL)
    check(p.returncode == 2 and "husk mcp:" in p.stderr and p.stdout == "",
          "usage error %s: exit 2" % args, (p.returncode, p.stderr[:200]))
d.close()
print("mcp: %d passed, %d failed" % (passes, fails))
sys.exit(1 if fails else 0)
