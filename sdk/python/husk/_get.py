"""A download's landing in a host directory, by the rules of ``husk run
--get`` (vmm/run/run_files.c): the archive is extracted into a private
staging directory inside the target, ``.husk-get-<pid>-<random>``, and only
after the daemon's final ``ok`` is its one name (the first component of
the requested path) renamed into the target, with a rename that never
replaces anything. Whatever happens before that (a refused entry, a
stream cut short, an exception, a cancelled task) the staging directory
is removed and the target is as it was.

``overwrite=True`` replaces that one name as a whole: the new tree is
swapped in with one rename and the old file or tree is removed, never
merged into.
"""

from __future__ import annotations

import ctypes
import errno
import os
import shutil
import stat
from typing import Any

from . import _tar, errors

STAGE_PREFIX = ".husk-get-"
RENAME_NOREPLACE = 1
RENAME_EXCHANGE = 2
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def _libc_renameat2() -> Any:
    try:
        fn = ctypes.CDLL(None, use_errno=True).renameat2
    except (OSError, AttributeError):
        return None
    fn.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
    fn.restype = ctypes.c_int
    return fn


_renameat2 = _libc_renameat2()


def renameat2(src_fd: int, src: str, dst_fd: int, dst: str, flags: int) -> bool:
    """renameat2(2). False where the C library or the file system does not
    have it (the caller falls back); OSError for any other failure."""
    if _renameat2 is None:
        return False
    if _renameat2(src_fd, os.fsencode(src), dst_fd, os.fsencode(dst), flags) == 0:
        return True
    e = ctypes.get_errno()
    if e in (errno.ENOSYS, errno.EINVAL, errno.EOPNOTSUPP):
        return False
    raise OSError(e, os.strerror(e), dst)


def _exists(dir_fd: int, name: str) -> bool:
    try:
        os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except FileNotFoundError:
        return False
    return True


def _rm(dir_fd: int, name: str) -> None:
    """Remove name (a tree, a file or a link) below dir_fd, never following
    a link; errors are ignored (what is left is the user's to see)."""
    try:
        st = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except OSError:
        return
    try:
        if stat.S_ISDIR(st.st_mode):
            shutil.rmtree(name, dir_fd=dir_fd, ignore_errors=True)
        else:
            os.unlink(name, dir_fd=dir_fd)
    except OSError:
        pass


def _clean_stale(dir_fd: int) -> None:
    """Staging directories whose process is gone (killed half way)."""
    for name in os.listdir(dir_fd):
        if not name.startswith(STAGE_PREFIX):
            continue
        pid_s, dash, _ = name[len(STAGE_PREFIX):].partition("-")
        if not dash or not pid_s.isdigit() or int(pid_s) in (0, os.getpid()):
            continue
        try:
            os.kill(int(pid_s), 0)
        except ProcessLookupError:
            _rm(dir_fd, name)
        except OSError:
            pass


def _move_noreplace(src_fd: int, dst_fd: int, name: str) -> None:
    """Move name from src_fd to dst_fd; FileExistsError if it is taken."""
    if renameat2(src_fd, name, dst_fd, name, RENAME_NOREPLACE):
        return
    # No renameat2: a file is linked (which never replaces), a directory
    # renamed after a check. rename(2) can then replace only an empty
    # directory made in between, never a file or a link.
    st = os.stat(name, dir_fd=src_fd, follow_symlinks=False)
    if not stat.S_ISDIR(st.st_mode):
        os.link(name, name, src_dir_fd=src_fd, dst_dir_fd=dst_fd, follow_symlinks=False)
        os.unlink(name, dir_fd=src_fd)
        return
    if _exists(dst_fd, name):
        raise FileExistsError(errno.EEXIST, os.strerror(errno.EEXIST), name)
    os.rename(name, name, src_dir_fd=src_fd, dst_dir_fd=dst_fd)


class Download:
    """One download's staging directory: ``with Download(...) as d``, feed
    ``d.sink``, then ``d.commit()`` once the daemon said ``ok``. Leaving
    the block removes the staging directory whatever happened."""

    def __init__(self, local_dir: str, want: str, keep_modes: bool = False,
                 overwrite: bool = False) -> None:
        self.local_dir = local_dir
        self.want = _tar.clean_name(want)
        self.top = self.want.split("/", 1)[0]
        self.overwrite = overwrite
        self.dir_fd = self.stage_fd = -1
        self.stages: list[str] = []
        # Its root is set once the staging directory exists.
        self.sink = _tar.DirSink(-1, keep_modes)

    def __enter__(self) -> "Download":
        try:
            os.makedirs(self.local_dir, exist_ok=True)
            self.dir_fd = os.open(self.local_dir, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
            _clean_stale(self.dir_fd)
            name = self._new_stage()
            self.stage_fd = os.open(name, _DIR_FLAGS, dir_fd=self.dir_fd)
            self.sink.root = self.stage_fd
        except BaseException:
            self.__exit__()
            raise
        return self

    def __exit__(self, *exc: Any) -> None:
        self.sink.close()
        if self.stage_fd >= 0:
            os.close(self.stage_fd)
            self.stage_fd = -1
        if self.dir_fd >= 0:
            for name in self.stages:
                _rm(self.dir_fd, name)
            os.close(self.dir_fd)
            self.dir_fd = -1

    def _new_stage(self) -> str:
        for _ in range(100):
            name = "%s%d-%s" % (STAGE_PREFIX, os.getpid(), os.urandom(6).hex())
            try:
                os.mkdir(name, 0o700, dir_fd=self.dir_fd)
            except FileExistsError:
                continue
            self.stages.append(name)
            return name
        raise FileExistsError(errno.EEXIST, "cannot make a staging directory", self.local_dir)

    def _staged(self) -> str:
        """The one name staged: the requested path's first component, or
        "" when the archive was empty (the path did not exist)."""
        names = os.listdir(self.stage_fd)
        for n in names:
            if n != self.top:
                raise errors.ProtocolError("the staging directory holds %r, which was not "
                                           "asked for; nothing was copied" % n)
        return self.top if names else ""

    def commit(self) -> list[str]:
        """Move the staged name into local_dir; the files written."""
        if not self._staged():
            return []
        try:
            _move_noreplace(self.stage_fd, self.dir_fd, self.top)
        except FileExistsError:
            if not self.overwrite:
                raise errors.TargetExists(
                    "%s exists in %s: nothing was copied (overwrite=True replaces it)" %
                    (self.top, self.local_dir)) from None
            self._replace()
        return list(self.sink.written)

    def _replace(self) -> None:
        """local_dir/top exists: swap the staged one in, then remove the old."""
        try:
            if renameat2(self.stage_fd, self.top, self.dir_fd, self.top, RENAME_EXCHANGE):
                return      # the old one is now in the staging directory
        except FileNotFoundError:
            # Gone meanwhile: nothing to replace any more.
            _move_noreplace(self.stage_fd, self.dir_fd, self.top)
            return
        # No exchange: the old one moves aside into a second private
        # directory, the new one in, and the old one back if that failed.
        aside = os.open(self._new_stage(), _DIR_FLAGS, dir_fd=self.dir_fd)
        try:
            os.rename(self.top, self.top, src_dir_fd=self.dir_fd, dst_dir_fd=aside)
            try:
                _move_noreplace(self.stage_fd, self.dir_fd, self.top)
            except BaseException:
                os.rename(self.top, self.top, src_dir_fd=aside, dst_dir_fd=self.dir_fd)
                raise
        finally:
            os.close(aside)
