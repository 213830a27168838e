"""Files into and out of a sandbox as gzip'd tar streams, as husk writes
and reads them (regular files and directories; GNU 'L' entries for long
names), without holding a file whole in memory.

Writing is a generator of compressed chunks; a host tree is walked as
``husk run --put`` walks it (nothing followed, links and special files
skipped). Reading is fed compressed chunks as they arrive and treats the
archive as hostile, with the rules of husk's own extractor
(vmm/job/tar.c): ustar headers only, checked names (no absolute names, no
"." or ".." or empty components), only the requested path and what lies
below it, only files and directories, modes masked, and the bytes,
entries and inflate ratio bounded. Where the files land is _get.py's.
"""

from __future__ import annotations

import errno
import io
import os
import stat
import tarfile
import tempfile
import time
import zlib
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
    if isinstance(src, _Opened):
        return src.f, src.size, True
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
    """(name, open file or None for a directory) for a host tree, sorted,
    as ``husk run --put`` walks it: every entry opened relative to its
    directory without following a link, and checked to be what was listed
    (a tree changed under the walk is an error); links, devices, FIFOs and
    sockets are skipped."""
    top = os.path.abspath(root)
    base = clean_name(dest) if dest else os.path.basename(top.rstrip("/")) or "."
    fd = os.open(top, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        yield base, None
        yield from _walk(fd, base)
    finally:
        os.close(fd)


class _Opened:
    """A host file opened by the walk; tar_stream reads and closes it."""

    def __init__(self, f: IO[bytes], size: int) -> None:
        self.f, self.size = f, size


def _open_entry(dfd: int, name: str, path: str, pre: os.stat_result) -> int:
    """name below dfd, opened without following a link or blocking (it
    may have become a FIFO), and still the entry that was listed."""
    try:
        fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY |
                     os.O_CLOEXEC, dir_fd=dfd)
    except OSError as e:
        if e.errno in (errno.ELOOP, errno.ENOENT, errno.ENOTDIR, errno.ENXIO):
            raise errors.HuskError("%s changed while it was uploaded (%s)" %
                                   (path, e.strerror)) from None
        raise OSError(e.errno, e.strerror, path) from None
    st = os.fstat(fd)
    if (st.st_dev, st.st_ino, stat.S_IFMT(st.st_mode)) != \
            (pre.st_dev, pre.st_ino, stat.S_IFMT(pre.st_mode)):
        os.close(fd)
        raise errors.HuskError("%s changed while it was uploaded" % path)
    return fd


def _walk(dfd: int, pre: str) -> Iterator[tuple[str, Any]]:
    for n in sorted(os.listdir(dfd)):
        name = pre + "/" + n
        st = os.stat(n, dir_fd=dfd, follow_symlinks=False)
        if stat.S_ISDIR(st.st_mode):
            sub = _open_entry(dfd, n, name, st)
            try:
                yield name, None
                yield from _walk(sub, name)
            finally:
                os.close(sub)
        elif stat.S_ISREG(st.st_mode):
            fd = _open_entry(dfd, n, name, st)
            os.set_blocking(fd, True)
            yield name, _Opened(os.fdopen(fd, "rb"), os.fstat(fd).st_size)


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


# -- reading: the rules of ``husk run --get`` (vmm/job/tar.c), so both
# -- sides refuse the same streams.

NAME_MAX_LEN = 1024        # bytes in an entry's name
MAX_DEPTH = 64             # components in an entry's name
RATIO_GRACE = 64 << 20     # inflated bytes before the ratio applies
MAX_RATIO = 256            # inflated:compressed past the grace
END_PAD_MAX = 64 << 10     # zeros allowed after the end blocks

_TYPES = {b"1": "hard links are", b"2": "symbolic links are",
          b"3": "character devices are", b"4": "block devices are", b"6": "FIFOs are",
          b"7": "contiguous files are", b"x": "pax headers are", b"g": "pax headers are",
          b"K": "GNU long link names are"}


def file_mode(mode: int, keep_exec: bool = True) -> int:
    """What an extracted file gets: rwx bits only, never group/world write,
    setuid, setgid or sticky; the owner can read and write it."""
    m = (mode & 0o755) | 0o600
    return m if keep_exec else m & ~0o111


def dir_mode(mode: int) -> int:
    return (mode & 0o755) | 0o700


def _octal(field: bytes) -> int:
    """An octal header field, as tar.c parses it: no base-256, digits
    between optional leading spaces and trailing spaces or NULs."""
    if field[0] & 0x80:
        raise errors.ProtocolError("a tar header with a base-256 number")
    s = field.lstrip(b" ")
    digits = len(s) - len(s.lstrip(b"01234567"))
    if not digits or s[digits:].strip(b" \0"):
        raise errors.ProtocolError("a tar header with a bad number %r" % field)
    return int(s[:digits], 8)


def _nts(field: bytes) -> bytes:
    return field.split(b"\0", 1)[0]


def _check_name(raw: bytes) -> str:
    """The entry's name without its one trailing '/', or ProtocolError."""
    shown = raw[:200].decode("utf-8", "replace")
    why = ""
    if not raw:
        why = "an empty name"
    elif len(raw) > NAME_MAX_LEN:
        why = "a name longer than %d bytes" % NAME_MAX_LEN
    elif raw.startswith(b"/"):
        why = "an absolute name"
    else:
        if raw.endswith(b"/") and len(raw) > 1:
            raw = raw[:-1]
        parts = raw.split(b"/")
        if b"" in parts:
            why = "an empty path component"
        elif b"." in parts:
            why = "a \".\" component"
        elif b".." in parts:
            why = "a \"..\" component"
        elif max(len(p) for p in parts) > 255:
            why = "a path component longer than 255 bytes"
        elif len(parts) > MAX_DEPTH:
            why = "more than %d path components" % MAX_DEPTH
    if why:
        raise errors.ProtocolError("archive entry %r: %s" % (shown, why))
    return raw.decode("utf-8", "surrogateescape")


def _checksum_ok(block: bytes) -> bool:
    want = _octal(block[148:156])
    rest = block[:148] + b" " * 8 + block[156:]
    return want in (sum(rest), sum(b - 256 if b > 127 else b for b in rest))


class Sink:
    """Where an extracted archive goes. Names are checked and come without
    a trailing '/'; modes are the header's 0o7777 bits, for the sink to
    mask (``file_mode``, ``dir_mode``)."""

    def directory(self, name: str, mode: int) -> None: ...
    def begin(self, name: str, size: int, mode: int, mtime: int) -> None: ...
    def data(self, chunk: bytes) -> None: ...
    def end(self) -> None: ...


class TarReader:
    """Feed compressed chunks; entries go to the sink. ``only`` is the one
    name every entry must be or lie below; ``max_bytes`` bounds the file
    bytes, ``max_entries`` the headers (long names included), and the
    inflated stream is bounded by what those need and, past its first
    64 MiB, by a 256:1 ratio. Only regular files and directories pass."""

    def __init__(self, sink: Sink, max_bytes: int = 1 << 30,
                 max_entries: int = 100000, only: str | None = None) -> None:
        self.sink = sink
        self.only = only.encode("utf-8", "surrogateescape") if only is not None else None
        self.z = zlib.decompressobj(31)
        self.buf = bytearray()
        self.max_bytes, self.max_entries = max_bytes, max_entries
        self.bytes = self.entries = 0
        self.inflated = self.consumed = 0
        per = 3 * BLOCK + NAME_MAX_LEN + BLOCK
        self.max_inflated = max_bytes + max_entries * per + 2 * BLOCK + END_PAD_MAX
        self.left = 0          # data bytes of the current entry still to come
        self.pad = 0
        self.longname: bytearray | None = None
        self.name_next: bytes | None = None
        self.zero_block = False
        self.ended = False
        self.end_pad = 0
        self.cur = ""

    def feed(self, data: bytes) -> None:
        while data:
            before = len(data)
            out = self.z.decompress(data, CHUNK)
            data = self.z.unconsumed_tail
            self.consumed += before - len(data)
            self._take(out)
            if self.z.eof:
                if data or self.z.unused_data:
                    raise errors.ProtocolError("bytes after the end of the archive")
                break

    def finish(self) -> None:
        self._take(self.z.flush())
        if not self.z.eof:
            raise errors.ProtocolError("the archive ended early (gzip not finished)")
        if not self.ended:
            raise errors.ProtocolError("the archive ended early%s" %
                                       (" in %s" % self.cur if self.left else ""))

    def _take(self, out: bytes) -> None:
        self.inflated += len(out)
        if self.inflated > self.max_inflated:
            raise errors.ProtocolError("the archive inflates past %d bytes" % self.max_inflated)
        if self.inflated > RATIO_GRACE and self.inflated // MAX_RATIO > self.consumed:
            raise errors.ProtocolError("the archive inflates more than %d:1 (%d bytes from %d)"
                                       % (MAX_RATIO, self.inflated, self.consumed))
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
        if self.ended:
            if self.buf.strip(b"\0"):
                raise errors.ProtocolError("data after the end of the archive")
            self.end_pad += len(self.buf)
            self.buf.clear()
            if self.end_pad > END_PAD_MAX:
                raise errors.ProtocolError("too much padding after the end of the archive")
            return False
        if len(self.buf) < BLOCK:
            return False
        block = bytes(self.buf[:BLOCK])
        del self.buf[:BLOCK]
        self._header(block)
        return True

    def _entry_done(self) -> None:
        if self.longname is not None:
            name = bytes(self.longname)
            self.longname = None
            if b"\0" not in name:
                raise errors.ProtocolError("an unterminated long name")
            self.name_next = _nts(name)
        else:
            self.sink.end()

    def _header(self, block: bytes) -> None:
        if not block.strip(b"\0"):
            if self.name_next is not None:
                raise errors.ProtocolError("a long name not followed by an entry")
            self.ended = self.zero_block
            self.zero_block = True
            return
        if self.zero_block:
            raise errors.ProtocolError("an entry after a zero block")
        if not _checksum_ok(block):
            raise errors.ProtocolError("a bad tar header checksum after %d entries" %
                                       self.entries)
        if block[257:262] != b"ustar":
            raise errors.ProtocolError("not a ustar header after %d entries" % self.entries)
        kind = block[156:157]
        size, mode, mtime = _octal(block[124:136]), _octal(block[100:108]), \
            _octal(block[136:148])
        self.entries += 1
        if self.entries > self.max_entries:
            raise errors.ProtocolError("the archive has more than %d entries" % self.max_entries)
        if kind == b"L":
            if not 0 < size <= NAME_MAX_LEN + 1 or self.name_next is not None:
                raise errors.ProtocolError("a bad long name entry")
            self.longname = bytearray()
            self.left = size
            self.pad = -size % BLOCK
            return
        if self.name_next is not None:
            raw, self.name_next = self.name_next, None
        elif block[257:263] == b"ustar\0" and block[345]:
            raw = _nts(block[345:500]) + b"/" + _nts(block[:100])
        else:
            raw = _nts(block[:100])
        shown = raw[:200].decode("utf-8", "replace")
        if kind not in (b"0", b"\0", b"5"):
            what = _TYPES.get(kind, "this entry type (%r) is" % kind)
            raise errors.ProtocolError("%s: %s not taken (only files and directories)" %
                                       (shown, what))
        name = _check_name(raw)
        self._only(name, shown)
        self.cur = name
        if kind == b"5":
            if size:
                raise errors.ProtocolError("directory %s has data" % shown)
            self.sink.directory(name, mode & 0o7777)
            return
        if raw.endswith(b"/"):
            raise errors.ProtocolError("file entry %s ends in '/'" % shown)
        if size > self.max_bytes - self.bytes:
            raise errors.ProtocolError("the archive holds more than %d bytes (max_bytes)" %
                                       self.max_bytes)
        self.bytes += size
        self.sink.begin(name, size, mode & 0o7777, mtime)
        self.left = size
        self.pad = -size % BLOCK
        if not size:
            self.sink.end()

    def _only(self, name: str, shown: str) -> None:
        if self.only is None:
            return
        b = name.encode("utf-8", "surrogateescape")
        if b != self.only and not b.startswith(self.only + b"/"):
            raise errors.ProtocolError("archive entry %r is not %r or inside it: only what "
                                       "was asked for is taken" %
                                       (shown, self.only.decode("utf-8", "replace")))


class MemorySink(Sink):
    """The one regular file an archive holds, as bytes: the archive must
    hold exactly that name, once."""

    def __init__(self, want: str, max_bytes: int) -> None:
        self.want = clean_name(want)
        self.max_bytes = max_bytes
        self.out = bytearray()
        self.found = False

    def _other(self, name: str) -> errors.HuskError:
        if name.startswith(self.want + "/") or name == self.want:
            return errors.HuskError("%s is a directory, not a file" % self.want)
        return errors.ProtocolError("the archive holds %r, which was not asked for" % name)

    def directory(self, name: str, mode: int) -> None:
        raise self._other(name)

    def begin(self, name: str, size: int, mode: int, mtime: int) -> None:
        if name != self.want:
            raise self._other(name)
        if self.found:
            raise errors.ProtocolError("the archive holds %s twice" % name)
        if size > self.max_bytes:
            raise errors.HuskError("%s is %d bytes, more than max_bytes (%d)" %
                                   (name, size, self.max_bytes))
        self.found = True

    def data(self, chunk: bytes) -> None:
        self.out += chunk

    def end(self) -> None:
        pass


class DirSink(Sink):
    """Extract into a directory that is this extraction's own (a staging
    directory): every component opened without following links, nothing
    there replaced (a name the archive gives twice is refused), modes
    masked, execute bits dropped unless ``keep_modes``."""

    def __init__(self, root_fd: int, keep_modes: bool = False) -> None:
        self.root = root_fd
        self.keep_modes = keep_modes
        self.fd = -1
        self.name = ""
        self.mode = self.mtime = 0
        self.written: list[str] = []

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def _subdir(self, fd: int, comp: str, name: str) -> int:
        flags = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
        try:
            return os.open(comp, flags, dir_fd=fd)
        except FileNotFoundError:
            pass
        except OSError:
            raise errors.ProtocolError("%s: its parent %s is not a directory" %
                                       (name, comp)) from None
        os.mkdir(comp, 0o700, dir_fd=fd)
        nfd = os.open(comp, flags, dir_fd=fd)
        # Explicit modes: the caller's umask does not decide.
        os.fchmod(nfd, 0o755)
        return nfd

    def _parent(self, name: str) -> tuple[int, str]:
        parts = name.split("/")
        fd = self.root
        try:
            for p in parts[:-1]:
                nfd = self._subdir(fd, p, name)
                if fd != self.root:
                    os.close(fd)
                fd = nfd
        except BaseException:
            if fd != self.root:
                os.close(fd)
            raise
        return fd, parts[-1]

    def _named_twice(self, name: str) -> errors.ProtocolError:
        return errors.ProtocolError("the archive names %s twice (or inside a file)" % name)

    def directory(self, name: str, mode: int) -> None:
        fd, last = self._parent(name)
        try:
            try:
                os.mkdir(last, 0o700, dir_fd=fd)
            except FileExistsError:
                raise self._named_twice(name) from None
            dfd = os.open(last, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC,
                          dir_fd=fd)
            try:
                os.fchmod(dfd, dir_mode(mode))
            finally:
                os.close(dfd)
        finally:
            if fd != self.root:
                os.close(fd)

    def begin(self, name: str, size: int, mode: int, mtime: int) -> None:
        fd, last = self._parent(name)
        try:
            self.fd = os.open(last, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW |
                              os.O_CLOEXEC, 0o600, dir_fd=fd)
        except FileExistsError:
            raise self._named_twice(name) from None
        finally:
            if fd != self.root:
                os.close(fd)
        self.name, self.mode, self.mtime = name, mode, mtime
        self.written.append(name)

    def data(self, chunk: bytes) -> None:
        mv = memoryview(chunk)
        while mv:
            n = os.write(self.fd, mv)
            mv = mv[n:]

    def end(self) -> None:
        fd, self.fd = self.fd, -1
        try:
            os.fchmod(fd, file_mode(self.mode, self.keep_modes))
            st = os.fstat(fd)
            os.utime(fd, ns=(st.st_atime_ns, self.mtime * 1000000000))
        finally:
            os.close(fd)
