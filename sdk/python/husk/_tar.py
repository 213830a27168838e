"""Files into and out of a sandbox as gzip'd tar streams, as husk writes
and reads them (regular files and directories; GNU 'L' entries for long
names), without holding a file whole in memory.

Writing is a generator of compressed chunks. Reading is fed compressed
chunks as they arrive and treats the archive as hostile, as ``husk run
--get`` does: names stay below the target, only files and directories,
nothing existing is replaced, and the bytes it may inflate are bounded.
"""

from __future__ import annotations

import os
import stat
import tarfile
import tempfile
import time
import zlib
import io
from typing import IO, Any, Iterable, Iterator

from . import errors

BLOCK = 512
CHUNK = 64 << 10
MAX_NAME = 4096


def clean_name(name: str) -> str:
    parts = [p for p in name.replace("\\", "/").split("/") if p not in ("", ".")]
    if not parts or ".." in parts:
        raise ValueError("%r is not a path inside the workspace" % name)
    return "/".join(parts)


def _header(name: str, size: int, mode: int, kind: bytes, mtime: float) -> bytes:
    ti = tarfile.TarInfo(name)
    ti.size, ti.mode, ti.type, ti.mtime = size, mode, kind, int(mtime)
    ti.uid = ti.gid = 0
    ti.uname = ti.gname = ""
    return ti.tobuf(format=tarfile.GNU_FORMAT, encoding="utf-8", errors="strict")


def _sized(src: Any) -> tuple[IO[bytes], int, bool]:
    """A readable binary file of known size for src (bytes, str, path-like
    or a file object), and whether it is ours to close."""
    if isinstance(src, str):
        src = src.encode()
    if isinstance(src, (bytes, bytearray, memoryview)):
        return io.BytesIO(src), len(src), True
    if isinstance(src, os.PathLike):
        f = open(src, "rb")
        return f, os.fstat(f.fileno()).st_size, True
    if hasattr(src, "read"):
        try:
            st = os.fstat(src.fileno())
            if stat.S_ISREG(st.st_mode):
                return src, st.st_size - src.tell(), False
        except (AttributeError, OSError, ValueError):
            pass
        # Of unknown length: spooled to disk, never whole in memory.
        spool = tempfile.TemporaryFile()
        while True:
            b = src.read(CHUNK)
            if not b:
                break
            spool.write(b)
        size = spool.tell()
        spool.seek(0)
        return spool, size, True
    raise TypeError("file data is bytes, str, a path or a binary file object")


class _Gz:
    def __init__(self) -> None:
        self.z = zlib.compressobj(6, zlib.DEFLATED, 31)

    def __call__(self, data: bytes) -> bytes:
        return self.z.compress(data)

    def end(self) -> bytes:
        return self.z.flush()


def entries_of_dir(root: str, dest: str = "") -> Iterator[tuple[str, Any]]:
    """(name, path or None for a directory) for a host tree, sorted; links,
    devices and FIFOs are skipped, as ``husk run --put`` does."""
    top = os.path.abspath(root)
    base = clean_name(dest) if dest else os.path.basename(top.rstrip("/")) or "."
    yield base, None
    for dirpath, dirs, files in os.walk(top):
        dirs.sort()
        rel = os.path.relpath(dirpath, top)
        pre = base if rel == "." else base + "/" + rel.replace(os.sep, "/")
        keep = []
        for d in dirs:
            if not os.path.islink(os.path.join(dirpath, d)):
                keep.append(d)
                yield pre + "/" + d, None
        dirs[:] = keep
        for f in sorted(files):
            p = os.path.join(dirpath, f)
            if stat.S_ISREG(os.lstat(p).st_mode):
                yield pre + "/" + f, _PathSrc(p)


class _PathSrc(os.PathLike):
    def __init__(self, p: str) -> None:
        self.p = p

    def __fspath__(self) -> str:
        return self.p


def tar_stream(entries: Iterable[tuple[str, Any]]) -> Iterator[bytes]:
    """Compressed chunks of a tar of entries: (name, None) is a directory,
    (name, data) a file whose data is bytes, str, a path or a file object."""
    gz = _Gz()
    now = time.time()
    for name, src in entries:
        name = clean_name(name)
        if src is None:
            out = gz(_header(name + "/", 0, 0o755, tarfile.DIRTYPE, now))
            if out:
                yield out
            continue
        f, size, owned = _sized(src)
        try:
            mode = 0o644
            try:
                mode = os.fstat(f.fileno()).st_mode & 0o755 | 0o600
            except (AttributeError, OSError, ValueError):
                pass
            out = gz(_header(name, size, mode, tarfile.REGTYPE, now))
            left = size
            while left:
                b = f.read(min(CHUNK, left))
                if not b:
                    raise errors.HuskError("%s changed size while it was sent" % name)
                left -= len(b)
                out += gz(b)
                if len(out) >= CHUNK:
                    yield out
                    out = b""
            if f.read(1):
                raise errors.HuskError("%s changed size while it was sent" % name)
            pad = -size % BLOCK
            out += gz(b"\0" * pad)
            if out:
                yield out
        finally:
            if owned:
                f.close()
    yield gz(b"\0" * (2 * BLOCK)) + gz.end()


class Sink:
    """Where an extracted archive goes."""

    def directory(self, name: str) -> None: ...
    def begin(self, name: str, size: int, mode: int) -> None: ...
    def data(self, chunk: bytes) -> None: ...
    def end(self) -> None: ...


class TarReader:
    """Feed compressed chunks; entries go to the sink. ``max_bytes`` bounds
    the file bytes, ``max_entries`` the headers."""

    def __init__(self, sink: Sink, max_bytes: int = 1 << 30,
                 max_entries: int = 100000) -> None:
        self.sink = sink
        self.z = zlib.decompressobj(31)
        self.buf = bytearray()
        self.max_bytes, self.max_entries = max_bytes, max_entries
        self.bytes = self.entries = 0
        self.inflated = 0
        self.max_inflated = max_bytes + (max_entries + 2) * 2 * BLOCK + MAX_NAME
        self.left = 0          # data bytes of the current entry still to come
        self.pad = 0
        self.longname: bytearray | None = None
        self.name_next: str | None = None
        self.in_file = False
        self.ended = False

    def feed(self, data: bytes) -> None:
        while data:
            out = self.z.decompress(data, CHUNK)
            data = self.z.unconsumed_tail
            self._take(out)
            if self.z.eof:
                if data or self.z.unused_data:
                    raise errors.ProtocolError("bytes after the end of the archive")
                break

    def finish(self) -> None:
        self._take(self.z.flush())
        if not self.z.eof or not self.ended:
            raise errors.ProtocolError("the archive ended early")

    def _take(self, out: bytes) -> None:
        self.inflated += len(out)
        if self.inflated > self.max_inflated:
            raise errors.ProtocolError("the archive inflates past its bound")
        self.buf += out
        while self._step():
            pass

    def _step(self) -> bool:
        if self.left:
            n = min(self.left, len(self.buf))
            if not n:
                return False
            chunk = bytes(self.buf[:n])
            del self.buf[:n]
            self.left -= n
            if self.longname is not None:
                self.longname += chunk
            else:
                self.sink.data(chunk)
            if not self.left:
                self._entry_done()
            return True
        if self.pad:
            n = min(self.pad, len(self.buf))
            del self.buf[:n]
            self.pad -= n
            return n > 0
        if len(self.buf) < BLOCK:
            return False
        block = bytes(self.buf[:BLOCK])
        del self.buf[:BLOCK]
        if self.ended:
            if block.strip(b"\0"):
                raise errors.ProtocolError("data after the archive's end blocks")
            return True
        if not block.strip(b"\0"):
            self.ended = True
            return True
        self._header(block)
        return True

    def _entry_done(self) -> None:
        self.pad = -self._size % BLOCK
        if self.longname is not None:
            name = bytes(self.longname).split(b"\0", 1)[0]
            self.longname = None
            self.name_next = name.decode("utf-8", "surrogateescape")
        else:
            self.sink.end()

    def _header(self, block: bytes) -> None:
        self.entries += 1
        if self.entries > self.max_entries:
            raise errors.ProtocolError("the archive has more than %d entries" % self.max_entries)
        try:
            ti = tarfile.TarInfo.frombuf(block, "utf-8", "surrogateescape")
        except tarfile.TarError as e:
            raise errors.ProtocolError("a bad tar header: %s" % e) from None
        self._size = ti.size
        if ti.type == tarfile.GNUTYPE_LONGNAME:
            if ti.size > MAX_NAME or self.name_next is not None:
                raise errors.ProtocolError("a bad long name entry")
            self.longname = bytearray()
            self.left = ti.size
            if not ti.size:
                self._entry_done()
            return
        name = self.name_next if self.name_next is not None else ti.name
        self.name_next = None
        if name.startswith("/") or ".." in name.split("/") or not name.strip("/."):
            raise errors.ProtocolError("an archive entry outside the target: %r" % name)
        name = clean_name(name)
        if ti.type == tarfile.DIRTYPE:
            self.sink.directory(name)
            self.pad = -ti.size % BLOCK
            self.left = 0
            return
        if ti.type not in (tarfile.REGTYPE, tarfile.AREGTYPE):
            raise errors.ProtocolError("%s: only files and directories are taken" % name)
        self.bytes += ti.size
        if self.bytes > self.max_bytes:
            raise errors.ProtocolError("the archive holds more than %d bytes" % self.max_bytes)
        self.sink.begin(name, ti.size, ti.mode & 0o755 | 0o600)
        self.left = ti.size
        if not ti.size:
            self._entry_done()


class MemorySink(Sink):
    """The one regular file an archive holds, as bytes."""

    def __init__(self, want: str, max_bytes: int) -> None:
        self.want = clean_name(want)
        self.max_bytes = max_bytes
        self.out = bytearray()
        self.found = False
        self.cur: str | None = None

    def begin(self, name: str, size: int, mode: int) -> None:
        self.cur = name
        if name == self.want:
            if size > self.max_bytes:
                raise errors.HuskError("%s is %d bytes, more than max_bytes (%d)" %
                                       (name, size, self.max_bytes))
            self.found = True

    def data(self, chunk: bytes) -> None:
        if self.cur == self.want:
            self.out += chunk

    def end(self) -> None:
        self.cur = None


class DirSink(Sink):
    """Extract below a host directory: every component opened without
    following links, nothing existing replaced (existing directories are
    entered)."""

    def __init__(self, root: str) -> None:
        os.makedirs(root, exist_ok=True)
        self.root = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
        self.fd = -1
        self.written: list[str] = []

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1
        if self.root >= 0:
            os.close(self.root)
            self.root = -1

    def _parent(self, name: str, make: bool = True) -> tuple[int, str]:
        parts = name.split("/")
        fd = os.dup(self.root)
        try:
            for p in parts[:-1]:
                try:
                    nfd = os.open(p, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=fd)
                except FileNotFoundError:
                    if not make:
                        raise
                    os.mkdir(p, 0o755, dir_fd=fd)
                    nfd = os.open(p, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=fd)
                os.close(fd)
                fd = nfd
        except BaseException:
            os.close(fd)
            raise
        return fd, parts[-1]

    def directory(self, name: str) -> None:
        fd, last = self._parent(name)
        try:
            os.mkdir(last, 0o755, dir_fd=fd)
        except FileExistsError:
            st = os.stat(last, dir_fd=fd, follow_symlinks=False)
            if not stat.S_ISDIR(st.st_mode):
                raise errors.HuskError("%s exists and is not a directory" % name) from None
        finally:
            os.close(fd)

    def begin(self, name: str, size: int, mode: int) -> None:
        fd, last = self._parent(name)
        try:
            self.fd = os.open(last, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW,
                              mode, dir_fd=fd)
        except FileExistsError:
            raise errors.HuskError("%s exists: nothing is replaced" % name) from None
        finally:
            os.close(fd)
        self.written.append(name)

    def data(self, chunk: bytes) -> None:
        mv = memoryview(chunk)
        while mv:
            n = os.write(self.fd, mv)
            mv = mv[n:]

    def end(self) -> None:
        os.close(self.fd)
        self.fd = -1
