"""The husk serve protocol without I/O: request lines, answer lines, the
options of a sandbox, and the state of one command's answer (docs/api.md).

The sync client (``husk.client``) and the asyncio one (``husk.aio``) move
bytes; everything they agree on lives here, so both speak the same protocol.
The daemon is a peer like any other: every answer line is bounded and
checked before it is believed.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Iterator, Sequence

from . import _tar, errors

PROTOCOL_VERSION = 1
DEFAULT_SOCKET = "/run/husk/serve.sock"
# An answer line: a record, or base64 of at most 64 KiB of output; far less
# than this. A longer line is a broken daemon, not a reason to use memory.
MAX_LINE = 8 << 20
# What one put request carries (base64 grows it by a third; the daemon
# takes lines of up to 4 MiB).
PUT_CHUNK = 1 << 20


def put_chunks(entries: Any) -> Iterator[tuple[bytes, bool]]:
    """The data of a put stream's requests for entries (as tar_stream takes
    them): PUT_CHUNK pieces, each with whether more follow."""
    pending = b""
    for chunk in _tar.tar_stream(entries):
        pending += chunk
        while len(pending) >= PUT_CHUNK:
            yield pending[:PUT_CHUNK], True
            pending = pending[PUT_CHUNK:]
    yield pending, False


def socket_path(path: str | None) -> str:
    return path or os.environ.get("HUSK_SERVER") or DEFAULT_SOCKET


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def unb64(value: Any) -> bytes:
    if not isinstance(value, str):
        raise errors.ProtocolError("\"data\" is not a base64 string")
    try:
        return base64.b64decode(value, validate=True)
    except ValueError as e:
        raise errors.ProtocolError("\"data\" is not valid base64: %s" % e) from None


def files_data(msg: dict[str, Any], path: str) -> bytes:
    """The archive bytes a get's event carries (b"" for other events)."""
    if msg.get("event") != "files":
        return b""
    if msg.get("path") != path:
        raise errors.ProtocolError("files of %.200r while %.200r was asked for" %
                                   (msg.get("path"), path))
    return unb64(msg.get("data"))


class RequestGuard:
    """A connection whose request may be abandoned half way (an error on
    our side, a cancelled task, a stream not read to its end) leaves
    answers on the wire: it is then ``broken`` and not used again."""

    broken = False

    @contextlib.contextmanager
    def request(self) -> Iterator[None]:
        """Marks the connection broken if the request ends by an exception
        before its final line was read (the daemon's own errors are final
        lines, and leave it whole)."""
        try:
            yield
        except errors.HuskError as e:
            if e.code == "" or e.code in ("timeout", "exit"):
                self.broken = True
            raise
        except BaseException:
            self.broken = True
            raise


def encode(req_id: int, op: str, fields: dict[str, Any]) -> bytes:
    msg = {"v": PROTOCOL_VERSION, "id": req_id, "op": op}
    msg.update({k: v for k, v in fields.items() if v is not None})
    return json.dumps(msg, separators=(",", ":")).encode() + b"\n"


class LineSplitter:
    """Bytes in, whole lines out; a line past MAX_LINE is a protocol error."""

    def __init__(self) -> None:
        self._buf = bytearray()

    def feed(self, data: bytes) -> list[bytes]:
        self._buf += data
        lines = []
        while True:
            i = self._buf.find(b"\n")
            if i < 0:
                break
            lines.append(bytes(self._buf[:i]))
            del self._buf[:i + 1]
        if len(self._buf) > MAX_LINE:
            raise errors.ProtocolError("an answer line longer than %d bytes" % MAX_LINE)
        return lines

    @property
    def pending(self) -> int:
        return len(self._buf)


def decode(line: bytes) -> dict[str, Any]:
    try:
        msg = json.loads(line)
    except ValueError as e:
        raise errors.ProtocolError("an answer that is not JSON: %s" % e) from None
    if not isinstance(msg, dict) or "re" not in msg:
        raise errors.ProtocolError("an answer that is not a protocol object: %.200r" % line)
    if msg.get("v", PROTOCOL_VERSION) != PROTOCOL_VERSION:
        raise errors.ProtocolError("an answer of protocol version %r" % msg.get("v"))
    return msg


def is_final(msg: dict[str, Any]) -> bool:
    return "event" not in msg


def check_final(msg: dict[str, Any], op: str) -> dict[str, Any]:
    if "error" in msg:
        raise errors.from_reply(msg, op)
    if msg.get("ok") is not True:
        raise errors.ProtocolError("a final answer with neither ok nor error: %.200r" % msg)
    return msg


def argv_of(cmd: str | Sequence[str]) -> list[str]:
    """A string is a shell command line (``sh -c``); a list is argv itself."""
    if isinstance(cmd, str):
        return ["sh", "-c", cmd]
    argv = list(cmd)
    if not argv or not all(isinstance(a, str) for a in argv):
        raise TypeError("a command is a string or a non-empty list of strings")
    return argv


# The SDK's names of a sandbox's options, and the API's.
_OPTIONS = {
    "template": "template", "image": "image", "net": "net", "allow": "allow",
    "allow_hosts": "allow_host", "deny": "deny", "timeout": "timeout",
    "idle_timeout": "idle_timeout", "mem": "mem", "vcpus": "vcpus", "cpus": "cpus",
    "env": "env", "cwd": "cwd", "workspace_size": "workspace_size",
    "max_output": "max_output", "conn_rate": "conn_rate", "egress_limit": "egress_limit",
    "egress_rate": "egress_rate", "max_dests": "max_dests",
}


def machine_options(opts: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in opts.items():
        if k not in _OPTIONS:
            raise TypeError("unknown sandbox option %r" % k)
        if v is None:
            continue
        if k in ("allow", "allow_hosts", "deny"):
            if isinstance(v, str):
                v = [v]
            v = list(v)
            if not all(isinstance(x, str) for x in v):
                raise TypeError("%s is a list of strings" % k)
            if v and "net" not in opts:
                out["net"] = "egress"
        out[_OPTIONS[k]] = v
    return out


@dataclass
class Event:
    """One streamed event of a command: ``kind`` is "started", "stdout",
    "stderr" or "exit"; ``data`` the bytes of an output event; ``fields``
    the event's line as the daemon sent it."""
    kind: str
    data: bytes = b""
    fields: dict[str, Any] = field(default_factory=dict)


@dataclass
class CommandResult:
    """What a command did. ``exit_code`` is its status (None if a signal
    ended it: then ``signal``), ``timed_out`` whether its timeout killed it;
    ``started_ms``/``ended_ms`` are measured by the client from the request;
    ``record`` is a run's result record (docs/cli.md), {} for an exec."""
    exit_code: int | None = None
    signal: int | None = None
    timed_out: bool = False
    stdout: bytes = b""
    stderr: bytes = b""
    start: str = ""
    started_ms: float | None = None
    ended_ms: float | None = None
    record: dict[str, Any] = field(default_factory=dict)
    sandbox: str = ""

    @property
    def ok(self) -> bool:
        return self.exit_code == 0 and not self.timed_out

    @property
    def text(self) -> str:
        return self.stdout.decode("utf-8", "replace")


OutputFn = Callable[[bytes], Any]


class Command:
    """The answer to a run or an exec as it arrives: output collected (or
    handed to callbacks), the exit noted, the final line checked."""

    def __init__(self, op: str, on_stdout: OutputFn | None = None,
                 on_stderr: OutputFn | None = None, keep: bool = True) -> None:
        self.op = op
        self.result = CommandResult()
        self._t0 = time.monotonic()
        self._cb = {"stdout": on_stdout, "stderr": on_stderr}
        self._keep = keep
        self._out = {"stdout": bytearray(), "stderr": bytearray()}
        self.done = False

    def _ms(self) -> float:
        return (time.monotonic() - self._t0) * 1000.0

    def take(self, msg: dict[str, Any]) -> Event | None:
        """One line for this request: its event, or None for the final line
        (then ``done``; raises the daemon's error)."""
        r = self.result
        if is_final(msg):
            self.done = True
            check_final(msg, self.op)
            r.stdout, r.stderr = bytes(self._out["stdout"]), bytes(self._out["stderr"])
            if isinstance(msg.get("record"), dict):
                r.record = msg["record"]
            if r.exit_code is None and r.signal is None and isinstance(msg.get("exit_code"), int):
                r.exit_code = msg["exit_code"]
            if r.ended_ms is None:
                r.ended_ms = self._ms()
            return None
        kind = msg.get("event")
        if not isinstance(kind, str):
            raise errors.ProtocolError("an event without a name: %.200r" % msg)
        ev = Event(kind, fields=msg)
        if kind in ("stdout", "stderr"):
            ev.data = unb64(msg.get("data"))
            if self._keep:
                self._out[kind] += ev.data
            cb = self._cb[kind]
            if cb:
                cb(ev.data)
        elif kind == "started":
            r.started_ms = self._ms()
            r.start = str(msg.get("start") or r.start)
        elif kind == "accepted":
            r.sandbox = str(msg.get("sandbox") or "")
        elif kind == "exit":
            r.ended_ms = self._ms()
            code, sig = msg.get("exit_code"), msg.get("signal")
            r.exit_code = code if isinstance(code, int) else None
            r.signal = sig if isinstance(sig, int) else None
            r.timed_out = msg.get("timed_out") is True
        return ev

    def finish(self, check: bool) -> CommandResult:
        r = self.result
        if r.timed_out:
            raise errors.Timeout("the command timed out and was killed", result=r)
        if check and r.exit_code != 0:
            what = ("exited %d" % r.exit_code if r.exit_code is not None else
                    "was killed by signal %s" % r.signal)
            raise errors.CommandFailed("the command %s" % what, result=r)
        return r


def run_code_argv(language: str) -> list[str]:
    """The interpreter a ``run_code`` feeds its source to on stdin."""
    table = {"python": ["python3", "-"], "python3": ["python3", "-"],
             "sh": ["sh", "-s"], "bash": ["bash", "-s"], "node": ["node", "-"],
             "javascript": ["node", "-"], "perl": ["perl", "-"]}
    if language not in table:
        raise ValueError("no interpreter known for %r (known: %s)" %
                         (language, ", ".join(sorted(table))))
    return table[language]


def stdin_chunks(data: bytes | str | Iterable[bytes] | Any, size: int = 48 << 10):
    """Bytes for an exec's stdin, in pieces, from bytes, text, a binary file
    object or an iterable of bytes."""
    if data is None:
        return
    if isinstance(data, str):
        data = data.encode()
    if isinstance(data, (bytes, bytearray, memoryview)):
        mv = memoryview(data)
        for i in range(0, len(mv), size):
            yield bytes(mv[i:i + size])
        return
    if hasattr(data, "read"):
        while True:
            b = data.read(size)
            if not b:
                return
            yield b.encode() if isinstance(b, str) else bytes(b)
    for b in data:
        yield bytes(b)


class StdinFeed:
    """A command's stdin as stdin requests, one open at a time. The ids of
    these requests are the connection's next ones; each answer is matched
    by the id the feed sent last."""

    def __init__(self, op: str, rid: int, data: Any) -> None:
        self.key = "exec" if op == "exec" else "run"
        self.rid = rid
        self.chunks = stdin_chunks(data) if data is not None else None
        self.open_id: int | None = None
        self.eof_sent = data is None

    def _next(self) -> dict[str, Any] | None:
        if self.eof_sent or self.chunks is None:
            return None
        for chunk in self.chunks:
            if chunk:
                return {self.key: self.rid, "data": b64(chunk)}
        self.eof_sent = True
        return {self.key: self.rid, "eof": True}

    def started(self, ev: Event) -> dict[str, Any] | None:
        if ev.kind != "started" or self.open_id is not None or self.eof_sent:
            return None
        return self._next()

    def sent(self, req_id: int) -> None:
        self.open_id = req_id

    def owns(self, msg: dict[str, Any]) -> bool:
        return self.open_id is not None and msg.get("re") == self.open_id

    def answered(self, msg: dict[str, Any]) -> dict[str, Any] | None:
        self.open_id = None
        if "error" in msg:
            # The command ended (or closed its stdin) before reading it all:
            # what is left is not wanted.
            if isinstance(msg["error"], dict) and msg["error"].get("code") in (
                    "not-found", "conflict"):
                self.eof_sent = True
                return None
            raise errors.from_reply(msg, "stdin")
        if not is_final(msg):
            raise errors.ProtocolError("a stdin request answered with an event")
        return self._next()
