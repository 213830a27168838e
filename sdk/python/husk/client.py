"""The synchronous SDK: a connection to ``husk serve`` and the sandbox
object agents use (docs/python.md).

A ``Sandbox`` is one session (``create`` ... ``destroy``) on a connection
of its own; requests on it go one at a time. ``run()`` is one job in a
fresh sandbox of its own (the daemon's ``run``).
"""

from __future__ import annotations

import contextlib
import itertools
import os
import socket as _socket
from typing import Any, Iterator, Sequence

from . import _tar, _wire, errors
from ._get import Download
from ._wire import CommandResult, Event, OutputFn


class Connection(_wire.RequestGuard):
    """One Unix-socket connection to the daemon; one request at a time."""

    def __init__(self, path: str | None = None, timeout: float | None = None) -> None:
        self.path = _wire.socket_path(path)
        self._ids = itertools.count(1)
        self._lines = _wire.LineSplitter()
        self._queue: list[bytes] = []
        self.sock = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
        try:
            self.sock.settimeout(timeout)
            self.sock.connect(self.path)
        except OSError as e:
            self.sock.close()
            raise errors.ConnectionFailed("cannot reach husk serve at %s: %s" %
                                          (self.path, e.strerror or e)) from None

    def close(self) -> None:
        try:
            self.sock.close()
        except OSError:
            pass

    def send(self, op: str, fields: dict[str, Any]) -> int:
        rid = next(self._ids)
        try:
            self.sock.sendall(_wire.encode(rid, op, fields))
        except OSError as e:
            raise errors.ConnectionFailed("husk serve went away: %s" % (e.strerror or e)) from None
        return rid

    def recv_any(self) -> dict[str, Any]:
        while not self._queue:
            try:
                data = self.sock.recv(1 << 16)
            except OSError as e:
                raise errors.ConnectionFailed("husk serve went away: %s" %
                                              (e.strerror or e)) from None
            if not data:
                raise errors.ConnectionFailed("husk serve closed the connection")
            self._queue.extend(self._lines.feed(data))
        return _wire.decode(self._queue.pop(0))

    def recv(self, rid: int) -> dict[str, Any]:
        """The next line, which must answer rid."""
        msg = self.recv_any()
        if msg.get("re") != rid:
            raise errors.ProtocolError("an answer to request %r while %d was open" %
                                       (msg.get("re"), rid))
        return msg

    def call(self, op: str, **fields: Any) -> dict[str, Any]:
        """A request whose answer is one final line (events are skipped)."""
        rid = self.send(op, fields)
        with self.request():
            while True:
                msg = self.recv(rid)
                if _wire.is_final(msg):
                    return _wire.check_final(msg, op)

    def command(self, op: str, fields: dict[str, Any], cmd: _wire.Command,
                stdin: Any = None) -> Iterator[Event]:
        """Events of a run or exec as they come. Its stdin is fed once it
        started, a chunk at a time: the next goes when the daemon took the
        last, so a command that does not read holds the sender back."""
        rid = self.send(op, fields)
        with self.request():
            yield from self._command(op, rid, cmd, stdin)

    def _command(self, op: str, rid: int, cmd: _wire.Command, stdin: Any) -> Iterator[Event]:
        feed = _wire.StdinFeed(op, rid, stdin)
        while not cmd.done:
            msg = self.recv_any()
            if feed.owns(msg):
                nxt = feed.answered(msg)
                if nxt:
                    feed.sent(self.send("stdin", nxt))
                continue
            if msg.get("re") != rid:
                raise errors.ProtocolError("an answer to request %r while %d was open" %
                                           (msg.get("re"), rid))
            ev = cmd.take(msg)
            if ev is None:
                break
            nxt = feed.started(ev)
            if nxt:
                feed.sent(self.send("stdin", nxt))
            yield ev
        # A stdin request still open is answered on this connection: read it
        # so the next request does not meet it.
        while feed.open_id is not None:
            msg = self.recv_any()
            if not feed.owns(msg):
                raise errors.ProtocolError("an answer to request %r after the command "
                                           "ended" % (msg.get("re"),))
            feed.eof_sent = True
            feed.answered(msg)


class Sandbox:
    """A sandbox that stays up for many commands: ``with Sandbox(...) as sb``.

    Options are those of ``husk run`` (docs/api.md): ``template``, ``image``,
    ``net`` ("egress"), ``allow``, ``allow_hosts``, ``deny``, ``timeout`` (the
    sandbox's lifetime), ``idle_timeout``, ``mem``, ``vcpus``, ``cpus``, ``env``,
    ``cwd``, ``workspace_size``, ``max_output`` and the egress thresholds.
    """

    def __init__(self, template: str | None = None, *, socket: str | None = None,
                 **options: Any) -> None:
        self._fields = _wire.machine_options(dict(options, template=template))
        self._path = socket
        self.conn: Connection | None = None
        self.id = ""
        self.start = ""

    # -- life

    def open(self) -> "Sandbox":
        """Create the sandbox (``with`` does this)."""
        if self.conn is not None:
            return self
        self.conn = Connection(self._path)
        try:
            fin = self.conn.call("create", **self._fields)
        except BaseException:
            self.conn.close()
            self.conn = None
            raise
        self.id = str(fin.get("sandbox", ""))
        self.start = str(fin.get("start", ""))
        if not self.id:
            raise errors.ProtocolError("create answered without a sandbox name")
        return self

    def __enter__(self) -> "Sandbox":
        return self.open()

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def close(self) -> dict[str, Any]:
        """Destroy the sandbox; returns its record ({} if it was gone)."""
        if self.conn is None:
            return {}
        conn = self._c()
        self.conn = None
        try:
            return conn.call("destroy", sandbox=self.id).get("record") or {}
        except (errors.NotFound, errors.ConnectionFailed):
            return {}
        finally:
            conn.close()

    def kill(self) -> None:
        """End the sandbox now; its commands are killed."""
        if self.conn is None:
            return
        conn = self._c()
        self.conn = None
        try:
            conn.call("kill", sandbox=self.id)
        except errors.NotFound:
            pass
        finally:
            conn.close()

    def _c(self) -> Connection:
        if self.conn is None:
            raise errors.SandboxGone("the sandbox is not open (use it in a with block)",
                                     code="not-found")
        if self.conn.broken:
            # The session outlives its connection: go on with a new one.
            self.conn.close()
            self.conn = Connection(self._path)
        return self.conn

    # -- commands

    def _exec_fields(self, cmd: str | Sequence[str], env: dict[str, str] | None,
                     cwd: str | None, timeout: float | None, stdin: Any) -> dict[str, Any]:
        return {"sandbox": self.id, "argv": _wire.argv_of(cmd), "env": env, "cwd": cwd,
                "timeout": timeout, "stdin": True if stdin is not None else None}

    def stream(self, cmd: str | Sequence[str], *, env: dict[str, str] | None = None,
               cwd: str | None = None, timeout: float | None = None,
               stdin: Any = None) -> Iterator[Event]:
        """The events of a command as they come: "started", "stdout",
        "stderr" (``data``), "exit". Output is not kept."""
        c = _wire.Command("exec", keep=False)
        yield from self._c().command("exec", self._exec_fields(cmd, env, cwd, timeout, stdin),
                                     c, stdin)

    def run(self, cmd: str | Sequence[str], *, env: dict[str, str] | None = None,
            cwd: str | None = None, timeout: float | None = None, stdin: Any = None,
            on_stdout: OutputFn | None = None, on_stderr: OutputFn | None = None,
            check: bool = False) -> CommandResult:
        """Run a command (a string goes to ``sh -c``) and wait for it.
        Raises ``Timeout`` if it timed out, ``CommandFailed`` if ``check``
        and it did not exit 0."""
        c = _wire.Command("exec", on_stdout, on_stderr)
        for _ in self._c().command("exec", self._exec_fields(cmd, env, cwd, timeout, stdin),
                                   c, stdin):
            pass
        c.result.sandbox = self.id
        return c.finish(check)

    def run_code(self, source: str | bytes, language: str = "python", **kw: Any) -> CommandResult:
        """Run source code with the image's interpreter for language (fed on
        stdin: python3, sh, bash, node, perl)."""
        return self.run(_wire.run_code_argv(language), stdin=source, **kw)

    # -- files

    def _put(self, entries: Any) -> None:
        conn = self._c()
        name = "sdk-%d" % id(entries)
        chunks = _wire.put_chunks(entries)
        sent = False
        while True:
            try:
                data, more = next(chunks)
            except StopIteration:
                return
            except BaseException:
                # The host side failed half way (a file that changed, an
                # interrupt): end the stream with the broken archive it is,
                # which the daemon refuses, so the sandbox takes the next put.
                if sent and not conn.broken:
                    with contextlib.suppress(errors.HuskError):
                        conn.call("put", sandbox=self.id, stream=name, data="")
                raise
            conn.call("put", sandbox=self.id, stream=name, more=more or None,
                      data=_wire.b64(data))
            sent = True

    def write(self, path: str, data: bytes | str | Any) -> None:
        """Write a file into the workspace (path relative to it): bytes, text,
        a host path (``pathlib.Path``) or a binary file object, streamed.
        Parent directories are made; an existing file is not replaced."""
        _tar.clean_name(path)
        self._put([(path, data)])

    def upload(self, local_dir: str, dest: str = "") -> None:
        """Copy a host directory into the workspace (as ``dest``, default its
        own name). Symbolic links and special files are skipped; nothing is
        followed, and an entry that changes while it is walked is an error."""
        if not os.path.isdir(local_dir):
            raise NotADirectoryError(local_dir)
        self._put(_tar.entries_of_dir(local_dir, dest))

    def _get(self, path: str, sink: _tar.Sink, max_bytes: int) -> None:
        """The archive of the workspace path (a clean name) into sink:
        only that path and what lies below it is taken."""
        conn = self._c()
        reader = _tar.TarReader(sink, max_bytes=max_bytes, only=path)
        rid = conn.send("get", {"sandbox": self.id, "path": path})
        with conn.request():
            while True:
                msg = conn.recv(rid)
                if _wire.is_final(msg):
                    _wire.check_final(msg, "get")
                    break
                data = _wire.files_data(msg, path)
                if data:
                    reader.feed(data)
            reader.finish()

    def read(self, path: str, max_bytes: int = 256 << 20) -> bytes:
        """A workspace file's bytes (at most max_bytes)."""
        want = _tar.clean_name(path)
        sink = _tar.MemorySink(want, max_bytes)
        self._get(want, sink, max_bytes)
        if not sink.found:
            raise errors.HuskError("%s does not exist in the workspace" % want)
        return bytes(sink.out)

    def download(self, path: str, local_dir: str, max_bytes: int = 1 << 30, *,
                 keep_modes: bool = False, overwrite: bool = False) -> list[str]:
        """Copy a workspace path (file or directory) into a host directory as
        ``local_dir/path``, all or nothing, by the rules of ``husk run --get``
        (docs/python.md). Returns the files written."""
        want = _tar.clean_name(path)
        with Download(local_dir, want, keep_modes, overwrite) as d:
            self._get(want, d.sink, max_bytes)
            return d.commit()

    def files(self, path: str = ".") -> list[str]:
        """Names in a workspace directory (``ls -A``)."""
        r = self.run(["ls", "-A", path], check=True)
        return [x for x in r.stdout.decode("utf-8", "replace").split("\n") if x]

    # -- network

    def policy(self, allow: Sequence[str] | None = None, allow_hosts: Sequence[str] | None = None,
               deny: Sequence[str] | None = None) -> dict[str, list[str]]:
        """Change (or, with no argument, read) the egress rules while it runs."""
        fin = self._c().call("policy", sandbox=self.id,
                             allow=list(allow) if allow is not None else None,
                             allow_host=list(allow_hosts) if allow_hosts is not None else None,
                             deny=list(deny) if deny is not None else None)
        return {"allow": fin.get("allow", []), "allow_hosts": fin.get("allow_host", []),
                "deny": fin.get("deny", [])}


def run(cmd: str | Sequence[str], *, socket: str | None = None, stdin: Any = None,
        on_stdout: OutputFn | None = None, on_stderr: OutputFn | None = None,
        check: bool = False, **options: Any) -> CommandResult:
    """One job in a fresh sandbox, destroyed after it: the daemon's ``run``.
    Options as for ``Sandbox``; ``timeout`` is the job's."""
    fields = _wire.machine_options(options)
    fields["argv"] = _wire.argv_of(cmd)
    if stdin is not None:
        fields["stdin"] = True
    conn = Connection(socket)
    try:
        c = _wire.Command("run", on_stdout, on_stderr)
        for _ in conn.command("run", fields, c, stdin):
            pass
        return c.finish(check)
    finally:
        conn.close()


def health(socket: str | None = None) -> dict[str, Any]:
    """The daemon's version and load."""
    conn = Connection(socket)
    try:
        return conn.call("health")
    finally:
        conn.close()
