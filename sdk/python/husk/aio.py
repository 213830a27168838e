"""The asyncio SDK: ``husk.Sandbox`` and ``husk.run`` with ``await``.

    async with husk.aio.Sandbox(template="base") as sb:
        r = await sb.run("echo hello")
        async for ev in sb.stream("make"):
            ...

The protocol (lines, options, a command's events, stdin feeding, tar
streams) is the sync client's, from ``husk._wire`` and ``husk._tar``; only
the moving of bytes differs.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import os
from typing import Any, AsyncIterator, Sequence

from . import _tar, _wire, errors
from ._get import Download
from ._wire import CommandResult, Event, OutputFn


class Connection(_wire.RequestGuard):
    """One connection to the daemon (``await Connection.open()``)."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                 path: str) -> None:
        self.reader, self.writer, self.path = reader, writer, path
        self._ids = itertools.count(1)
        self._lines = _wire.LineSplitter()
        self._queue: list[bytes] = []

    @classmethod
    async def open(cls, path: str | None = None) -> "Connection":
        p = _wire.socket_path(path)
        try:
            r, w = await asyncio.open_unix_connection(p)
        except OSError as e:
            raise errors.ConnectionFailed("cannot reach husk serve at %s: %s" %
                                          (p, e.strerror or e)) from None
        return cls(r, w, p)

    async def close(self) -> None:
        self.writer.close()
        try:
            await self.writer.wait_closed()
        except OSError:
            pass

    async def send(self, op: str, fields: dict[str, Any]) -> int:
        rid = next(self._ids)
        try:
            self.writer.write(_wire.encode(rid, op, fields))
            await self.writer.drain()
        except OSError as e:
            raise errors.ConnectionFailed("husk serve went away: %s" % (e.strerror or e)) from None
        return rid

    async def recv_any(self) -> dict[str, Any]:
        while not self._queue:
            try:
                data = await self.reader.read(1 << 16)
            except OSError as e:
                raise errors.ConnectionFailed("husk serve went away: %s" %
                                              (e.strerror or e)) from None
            if not data:
                raise errors.ConnectionFailed("husk serve closed the connection")
            self._queue.extend(self._lines.feed(data))
        return _wire.decode(self._queue.pop(0))

    async def recv(self, rid: int) -> dict[str, Any]:
        msg = await self.recv_any()
        if msg.get("re") != rid:
            raise errors.ProtocolError("an answer to request %r while %d was open" %
                                       (msg.get("re"), rid))
        return msg

    async def call(self, op: str, **fields: Any) -> dict[str, Any]:
        rid = await self.send(op, fields)
        with self.request():
            while True:
                msg = await self.recv(rid)
                if _wire.is_final(msg):
                    return _wire.check_final(msg, op)

    async def command(self, op: str, fields: dict[str, Any], cmd: _wire.Command,
                      stdin: Any = None) -> AsyncIterator[Event]:
        rid = await self.send(op, fields)
        with self.request():
            async for ev in self._command(op, rid, cmd, stdin):
                yield ev

    async def _command(self, op: str, rid: int, cmd: _wire.Command,
                       stdin: Any) -> AsyncIterator[Event]:
        feed = _wire.StdinFeed(op, rid, stdin)
        while not cmd.done:
            msg = await self.recv_any()
            if feed.owns(msg):
                nxt = feed.answered(msg)
                if nxt:
                    feed.sent(await self.send("stdin", nxt))
                continue
            if msg.get("re") != rid:
                raise errors.ProtocolError("an answer to request %r while %d was open" %
                                           (msg.get("re"), rid))
            ev = cmd.take(msg)
            if ev is None:
                break
            nxt = feed.started(ev)
            if nxt:
                feed.sent(await self.send("stdin", nxt))
            yield ev
        while feed.open_id is not None:
            msg = await self.recv_any()
            if not feed.owns(msg):
                raise errors.ProtocolError("an answer to request %r after the command "
                                           "ended" % (msg.get("re"),))
            feed.eof_sent = True
            feed.answered(msg)


class Sandbox:
    """``husk.Sandbox`` for asyncio: ``async with Sandbox(...) as sb``."""

    def __init__(self, template: str | None = None, *, socket: str | None = None,
                 **options: Any) -> None:
        self._fields = _wire.machine_options(dict(options, template=template))
        self._path = socket
        self.conn: Connection | None = None
        self.id = ""
        self.start = ""

    async def open(self) -> "Sandbox":
        if self.conn is not None:
            return self
        self.conn = await Connection.open(self._path)
        try:
            fin = await self.conn.call("create", **self._fields)
        except BaseException:
            await self.conn.close()
            self.conn = None
            raise
        self.id, self.start = str(fin.get("sandbox", "")), str(fin.get("start", ""))
        if not self.id:
            raise errors.ProtocolError("create answered without a sandbox name")
        return self

    async def __aenter__(self) -> "Sandbox":
        return await self.open()

    async def __aexit__(self, *exc: Any) -> None:
        await self.close()

    async def close(self) -> dict[str, Any]:
        if self.conn is None:
            return {}
        conn = await self._c()
        self.conn = None
        try:
            return (await conn.call("destroy", sandbox=self.id)).get("record") or {}
        except (errors.NotFound, errors.ConnectionFailed):
            return {}
        finally:
            await conn.close()

    async def kill(self) -> None:
        if self.conn is None:
            return
        conn = await self._c()
        self.conn = None
        try:
            await conn.call("kill", sandbox=self.id)
        except errors.NotFound:
            pass
        finally:
            await conn.close()

    async def _c(self) -> Connection:
        if self.conn is None:
            raise errors.SandboxGone("the sandbox is not open (use it in an async with block)",
                                     code="not-found")
        if self.conn.broken:
            # The session outlives its connection: go on with a new one.
            await self.conn.close()
            self.conn = await Connection.open(self._path)
        return self.conn

    def _exec_fields(self, cmd: str | Sequence[str], env: dict[str, str] | None,
                     cwd: str | None, timeout: float | None, stdin: Any) -> dict[str, Any]:
        return {"sandbox": self.id, "argv": _wire.argv_of(cmd), "env": env, "cwd": cwd,
                "timeout": timeout, "stdin": True if stdin is not None else None}

    async def stream(self, cmd: str | Sequence[str], *, env: dict[str, str] | None = None,
                     cwd: str | None = None, timeout: float | None = None,
                     stdin: Any = None) -> AsyncIterator[Event]:
        c = _wire.Command("exec", keep=False)
        conn = await self._c()
        async for ev in conn.command("exec", self._exec_fields(cmd, env, cwd, timeout, stdin),
                                     c, stdin):
            yield ev

    async def run(self, cmd: str | Sequence[str], *, env: dict[str, str] | None = None,
                  cwd: str | None = None, timeout: float | None = None, stdin: Any = None,
                  on_stdout: OutputFn | None = None, on_stderr: OutputFn | None = None,
                  check: bool = False) -> CommandResult:
        c = _wire.Command("exec", on_stdout, on_stderr)
        conn = await self._c()
        async for _ in conn.command("exec", self._exec_fields(cmd, env, cwd, timeout, stdin),
                                    c, stdin):
            pass
        c.result.sandbox = self.id
        return c.finish(check)

    async def run_code(self, source: str | bytes, language: str = "python",
                       **kw: Any) -> CommandResult:
        return await self.run(_wire.run_code_argv(language), stdin=source, **kw)

    async def _put(self, entries: Any) -> None:
        conn = await self._c()
        name = "sdk-%d" % id(entries)
        chunks = _wire.put_chunks(entries)
        sent = False
        while True:
            try:
                data, more = next(chunks)
            except StopIteration:
                return
            except BaseException:
                # As in the sync client: end the stream the daemon holds.
                if sent and not conn.broken:
                    with contextlib.suppress(errors.HuskError):
                        await conn.call("put", sandbox=self.id, stream=name, data="")
                raise
            await conn.call("put", sandbox=self.id, stream=name, more=more or None,
                            data=_wire.b64(data))
            sent = True

    async def write(self, path: str, data: bytes | str | Any) -> None:
        _tar.clean_name(path)
        await self._put([(path, data)])

    async def upload(self, local_dir: str, dest: str = "") -> None:
        if not os.path.isdir(local_dir):
            raise NotADirectoryError(local_dir)
        await self._put(_tar.entries_of_dir(local_dir, dest))

    async def _get(self, path: str, sink: _tar.Sink, max_bytes: int) -> None:
        conn = await self._c()
        reader = _tar.TarReader(sink, max_bytes=max_bytes, only=path)
        rid = await conn.send("get", {"sandbox": self.id, "path": path})
        with conn.request():
            while True:
                msg = await conn.recv(rid)
                if _wire.is_final(msg):
                    _wire.check_final(msg, "get")
                    break
                data = _wire.files_data(msg, path)
                if data:
                    reader.feed(data)
            reader.finish()

    async def read(self, path: str, max_bytes: int = 256 << 20) -> bytes:
        want = _tar.clean_name(path)
        sink = _tar.MemorySink(want, max_bytes)
        await self._get(want, sink, max_bytes)
        if not sink.found:
            raise errors.HuskError("%s does not exist in the workspace" % want)
        return bytes(sink.out)

    async def download(self, path: str, local_dir: str, max_bytes: int = 1 << 30, *,
                       keep_modes: bool = False, overwrite: bool = False) -> list[str]:
        want = _tar.clean_name(path)
        with Download(local_dir, want, keep_modes, overwrite) as d:
            await self._get(want, d.sink, max_bytes)
            return d.commit()

    async def files(self, path: str = ".") -> list[str]:
        r = await self.run(["ls", "-A", path], check=True)
        return [x for x in r.stdout.decode("utf-8", "replace").split("\n") if x]

    async def policy(self, allow: Sequence[str] | None = None,
                     allow_hosts: Sequence[str] | None = None,
                     deny: Sequence[str] | None = None) -> dict[str, list[str]]:
        fin = await (await self._c()).call(
            "policy", sandbox=self.id, allow=list(allow) if allow is not None else None,
            allow_host=list(allow_hosts) if allow_hosts is not None else None,
            deny=list(deny) if deny is not None else None)
        return {"allow": fin.get("allow", []), "allow_hosts": fin.get("allow_host", []),
                "deny": fin.get("deny", [])}


async def run(cmd: str | Sequence[str], *, socket: str | None = None, stdin: Any = None,
              on_stdout: OutputFn | None = None, on_stderr: OutputFn | None = None,
              check: bool = False, **options: Any) -> CommandResult:
    fields = _wire.machine_options(options)
    fields["argv"] = _wire.argv_of(cmd)
    if stdin is not None:
        fields["stdin"] = True
    conn = await Connection.open(socket)
    try:
        c = _wire.Command("run", on_stdout, on_stderr)
        async for _ in conn.command("run", fields, c, stdin):
            pass
        return c.finish(check)
    finally:
        await conn.close()


async def health(socket: str | None = None) -> dict[str, Any]:
    conn = await Connection.open(socket)
    try:
        return await conn.call("health")
    finally:
        await conn.close()
