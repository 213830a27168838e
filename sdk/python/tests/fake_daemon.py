"""A stand-in for husk serve in the SDK's unit tests: a Unix socket that
speaks the protocol of docs/api.md from a script, and can misbehave on
request (garbage, an over-long line, hostile archives, a hang-up).

Its archives are made and read with the standard library's tarfile, not
with the SDK's own tar code, so the two are checked against each other.
"""

from __future__ import annotations

import base64
import io
import json
import os
import socket
import tarfile
import tempfile
import threading
from typing import Any, Callable


def b64(b: bytes) -> str:
    return base64.b64encode(b).decode()


def targz(members: list[tuple[tarfile.TarInfo, bytes | None]]) -> bytes:
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w:gz", format=tarfile.GNU_FORMAT) as t:
        for ti, data in members:
            t.addfile(ti, io.BytesIO(data) if data is not None else None)
    return out.getvalue()


class FakeDaemon:
    def __init__(self) -> None:
        self.dir = tempfile.mkdtemp()
        self.path = os.path.join(self.dir, "serve.sock")
        self.srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.srv.bind(self.path)
        self.srv.listen(8)
        self.files: dict[str, bytes] = {}
        self.puts: dict[str, bytearray] = {}
        self.requests: list[dict[str, Any]] = []
        self.line_lengths: list[int] = []
        self.mode: dict[str, Any] = {}
        self.gets: list[str] = []
        self.hung = threading.Event()   # set to end a get_hang
        self.sandboxes = 0
        self.alive = True
        threading.Thread(target=self._accept, daemon=True).start()

    def close(self) -> None:
        self.alive = False
        self.hung.set()
        try:
            self.srv.close()
            os.unlink(self.path)
            os.rmdir(self.dir)
        except OSError:
            pass

    def _accept(self) -> None:
        while self.alive:
            try:
                c, _ = self.srv.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(c,), daemon=True).start()

    def _serve(self, c: socket.socket) -> None:
        f = c.makefile("rb")
        self.execs: dict[Any, dict[str, Any]] = {}
        try:
            for line in f:
                self.line_lengths.append(len(line))
                req = json.loads(line)
                self.requests.append(req)
                if not self._handle(c, req):
                    break
        except (OSError, ValueError):
            pass
        finally:
            c.close()

    def _send(self, c: socket.socket, re: Any, **kw: Any) -> None:
        c.sendall(json.dumps(dict({"v": 1, "re": re}, **kw)).encode() + b"\n")

    def _err(self, c: socket.socket, re: Any, code: str, msg: str, **kw: Any) -> None:
        self._send(c, re, error={"code": code, "message": msg}, **kw)

    def _unpack(self, data: bytes) -> None:
        with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as t:
            for ti in t:
                if ti.isfile():
                    self.files[ti.name] = t.extractfile(ti).read()
                elif ti.isdir():
                    self.files.setdefault(ti.name + "/", b"")

    def _command_events(self, c: socket.socket, re: Any, argv: list[str]) -> None:
        m = self.mode
        self._send(c, re, event="started", start="pool")
        if m.get("hangup"):
            c.shutdown(socket.SHUT_RDWR)
            return
        if m.get("garbage"):
            c.sendall(b"this is not json\n")
            return
        if m.get("long_line"):
            c.sendall(b"{" + b" " * (9 << 20))
            return
        if m.get("wrong_re"):
            self._send(c, 999, event="stdout", data=b64(b"x"))
            return
        if m.get("hang"):
            return
        out = m.get("stdout", ("ran " + " ".join(argv) + "\n").encode())
        for i in range(0, len(out), 1000):
            self._send(c, re, event="stdout", data=b64(out[i:i + 1000]))
        self._send(c, re, event="stderr", data=b64(m.get("stderr", b"")))
        code, sig, to = m.get("exit_code", 0), m.get("signal"), m.get("timed_out", False)
        self._send(c, re, event="exit", exit_code=code, signal=sig, timed_out=to)

    def _handle(self, c: socket.socket, req: dict[str, Any]) -> bool:
        op, re = req.get("op"), req.get("id")
        m = self.mode
        if m.get("error_" + str(op)):
            code, msg = m["error_" + str(op)]
            extra = {"load": {"running": 4, "queued": 64}} if code == "busy" else {}
            self._err(c, re, code, msg, **extra)
            return True
        if op == "health":
            self._send(c, re, ok=True, version="test", load={"running": 0})
        elif op == "create":
            self.sandboxes += 1
            self._send(c, re, ok=True, sandbox="sb-%d" % self.sandboxes, start="pool")
        elif op in ("exec", "run"):
            if op == "run":
                self._send(c, re, event="accepted", sandbox="sb-run", queued=False)
            if req.get("stdin"):
                self.execs[re] = {"op": op, "argv": req["argv"], "in": bytearray()}
                self._send(c, re, event="started", start="pool")
                return True
            self._command_events(c, re, req["argv"])
            if m.get("hangup") or m.get("garbage") or m.get("long_line") or m.get("wrong_re"):
                return False
            if m.get("hang"):
                self.execs[re] = {"op": op, "argv": req["argv"], "in": bytearray()}
                return True
            fin = {"ok": True, "exit_code": m.get("exit_code", 0)}
            if op == "run":
                fin["record"] = {"schema": "husk.run/1", "start": "pool"}
            self._send(c, re, **fin)
        elif op == "stdin":
            target = req.get("exec", req.get("run"))
            x = self.execs.get(target)
            if not x:
                self._err(c, re, "not-found", "no running command with that id reads stdin")
                return True
            if "data" in req:
                x["in"] += base64.b64decode(req["data"])
            self._send(c, re, ok=True)
            if req.get("eof"):
                data = bytes(x["in"])
                for i in range(0, len(data), 30000):
                    self._send(c, target, event="stdout", data=b64(data[i:i + 30000]))
                self._send(c, target, event="exit", exit_code=0, signal=None, timed_out=False)
                self._send(c, target, ok=True, exit_code=0)
                del self.execs[target]
        elif op == "put":
            name = req.get("stream") or ""
            if any(k != name for k in self.puts):
                self._err(c, re, "conflict", "another put is open in this sandbox")
                return True
            s = self.puts.setdefault(name, bytearray())
            s += base64.b64decode(req["data"])
            if not req.get("more"):
                del self.puts[name]
                try:
                    self._unpack(bytes(s))
                except (tarfile.TarError, OSError, EOFError) as e:
                    self._err(c, re, "failed", "put: the archive is broken: %s" % e)
                    return True
            self._send(c, re, ok=True)
        elif op == "get":
            path = req["path"]
            self.gets.append(path)
            data = m.get("archive")
            if data is None:
                if path not in self.files:
                    self._err(c, re, "failed", "%s: no such file" % path)
                    return True
                ti = tarfile.TarInfo(path)
                ti.size = len(self.files[path])
                data = targz([(ti, self.files[path])])
            # get_cut: stop after that many bytes, then hang up (or hang).
            cut = m.get("get_cut")
            for i in range(0, len(data) if cut is None else cut, 4096):
                end = i + 4096 if cut is None else min(i + 4096, cut)
                self._send(c, re, event="files", path=m.get("files_path", path),
                           data=b64(data[i:end]))
            if cut is not None:
                if m.get("get_hang"):
                    self.hung.wait(30)
                return False
            self._send(c, re, event="files", path=path, data="")
            if m.get("get_hook"):
                m["get_hook"]()
            if m.get("get_error"):
                self._err(c, re, *m["get_error"])
            else:
                self._send(c, re, ok=True)
        elif op == "policy":
            if any("bad" in x for x in req.get("allow", [])):
                self._err(c, re, "bad-request", "allow: not a rule")
            else:
                self._send(c, re, ok=True, allow=req.get("allow", []),
                           allow_host=req.get("allow_host", []), deny=req.get("deny", []))
        elif op == "signal":
            x = self.execs.pop(req.get("exec"), None)
            if not x:
                self._err(c, re, "not-found", "no running command with that id")
                return True
            self._send(c, re, ok=True)
            target = req.get("exec")
            self._send(c, target, event="exit", exit_code=None, signal=9, timed_out=False)
            self._send(c, target, ok=True, exit_code=None)
        elif op == "destroy":
            self._send(c, re, ok=True, record={"schema": "husk.run/1"})
        elif op == "kill":
            self._send(c, re, ok=True)
        else:
            self._err(c, re, "bad-request", "unknown op")
        return True
