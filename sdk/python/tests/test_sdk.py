"""Unit tests of the husk SDK against a fake daemon (tests/fake_daemon.py):
framing, errors, commands with stdin and callbacks, files both ways
(streamed, and hostile archives refused), and the asyncio flavour.

Run: python3 -m unittest discover -s sdk/python/tests
"""

from __future__ import annotations

import asyncio
import io
import os
import pathlib
import sys
import tarfile
import tempfile
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

import husk  # noqa: E402
import husk.aio  # noqa: E402
from husk import _tar, _wire  # noqa: E402

from fake_daemon import FakeDaemon, targz  # noqa: E402


class Base(unittest.TestCase):
    def setUp(self) -> None:
        self.d = FakeDaemon()
        self.tmp = tempfile.mkdtemp()

    def tearDown(self) -> None:
        self.d.close()

    def sandbox(self, **kw):
        return husk.Sandbox("base", socket=self.d.path, **kw)


class Framing(unittest.TestCase):
    def test_lines_split_across_reads(self) -> None:
        s = _wire.LineSplitter()
        self.assertEqual(s.feed(b'{"re":1}\n{"re"'), [b'{"re":1}'])
        self.assertEqual(s.feed(b':2}\n'), [b'{"re":2}'])
        self.assertEqual(s.pending, 0)

    def test_overlong_line_refused(self) -> None:
        s = _wire.LineSplitter()
        with self.assertRaises(husk.ProtocolError):
            s.feed(b"x" * (_wire.MAX_LINE + 1))

    def test_decode_checks(self) -> None:
        for bad in (b"[1]", b"nope", b'{"v":2,"re":1}', b'{"ok":true}'):
            with self.assertRaises(husk.ProtocolError):
                _wire.decode(bad)
        self.assertEqual(_wire.decode(b'{"re":3,"ok":true}')["re"], 3)

    def test_request_encoding_drops_unset_fields(self) -> None:
        line = _wire.encode(7, "exec", {"argv": ["a"], "cwd": None})
        self.assertEqual(line, b'{"v":1,"id":7,"op":"exec","argv":["a"]}\n')

    def test_options(self) -> None:
        o = _wire.machine_options({"template": "t", "allow_hosts": "api.example.com",
                                   "timeout": None})
        self.assertEqual(o, {"template": "t", "allow_host": ["api.example.com"],
                             "net": "egress"})
        with self.assertRaises(TypeError):
            _wire.machine_options({"tempalte": "t"})
        with self.assertRaises(TypeError):
            _wire.argv_of([])
        self.assertEqual(_wire.argv_of("echo hi"), ["sh", "-c", "echo hi"])


class Commands(Base):
    def test_run_in_a_sandbox(self) -> None:
        seen = []
        with self.sandbox(allow=["198.51.100.1/32:tcp:443"]) as sb:
            self.assertEqual(sb.id, "sb-1")
            self.assertEqual(sb.start, "pool")
            r = sb.run(["echo", "hi"], env={"A": "1"}, on_stdout=seen.append)
        self.assertEqual(r.exit_code, 0)
        self.assertTrue(r.ok)
        self.assertEqual(r.text, "ran echo hi\n")
        self.assertEqual(b"".join(seen), b"ran echo hi\n")
        self.assertEqual(r.start, "pool")
        self.assertIsNotNone(r.started_ms)
        ops = [q["op"] for q in self.d.requests]
        self.assertEqual(ops, ["create", "exec", "destroy"])
        self.assertEqual(self.d.requests[0]["net"], "egress")
        self.assertEqual(self.d.requests[1]["env"], {"A": "1"})

    def test_nonzero_exit_and_check(self) -> None:
        self.d.mode.update(exit_code=3, stderr=b"bad\n")
        with self.sandbox() as sb:
            r = sb.run("false")
            self.assertEqual((r.exit_code, r.stderr), (3, b"bad\n"))
            with self.assertRaises(husk.CommandFailed) as e:
                sb.run("false", check=True)
            self.assertEqual(e.exception.result.exit_code, 3)

    def test_timeout_raises_with_the_output(self) -> None:
        self.d.mode.update(exit_code=None, signal=9, timed_out=True)
        with self.sandbox() as sb:
            with self.assertRaises(husk.Timeout) as e:
                sb.run("sleep 100", timeout=1)
        self.assertEqual(e.exception.result.signal, 9)
        self.assertIn(b"ran", e.exception.result.stdout)

    def test_stdin_is_streamed_a_chunk_at_a_time(self) -> None:
        data = os.urandom(300 << 10)
        with self.sandbox() as sb:
            r = sb.run(["cat"], stdin=io.BytesIO(data))
            # The connection is clean for the next request.
            r2 = sb.run_code("print(1)")
        self.assertEqual(r.stdout, data)
        self.assertEqual(r2.stdout, b"print(1)")
        stdins = [q for q in self.d.requests if q["op"] == "stdin"]
        self.assertGreater(len(stdins), 6)
        self.assertTrue(stdins[-1].get("eof"))
        execs = [q for q in self.d.requests if q["op"] == "exec"]
        self.assertEqual(execs[1]["argv"], ["python3", "-"])

    def test_stream_yields_events(self) -> None:
        with self.sandbox() as sb:
            kinds = [e.kind for e in sb.stream(["x"])]
        self.assertEqual(kinds, ["started", "stdout", "stderr", "exit"])

    def test_one_shot_run(self) -> None:
        r = husk.run("uname", socket=self.d.path, template="base")
        self.assertEqual(r.exit_code, 0)
        self.assertEqual(r.sandbox, "sb-run")
        self.assertEqual(r.record.get("schema"), "husk.run/1")
        self.assertEqual(self.d.requests[0]["op"], "run")

    def test_health(self) -> None:
        self.assertEqual(husk.health(self.d.path)["version"], "test")


class Errors(Base):
    def test_busy_carries_load(self) -> None:
        self.d.mode["error_create"] = ("busy", "the queue is full")
        with self.assertRaises(husk.Busy) as e:
            self.sandbox().open()
        self.assertEqual(e.exception.load["queued"], 64)
        self.assertEqual(e.exception.code, "busy")

    def test_gone_sandbox(self) -> None:
        self.d.mode["error_exec"] = ("not-found", "no such sandbox")
        with self.sandbox() as sb:
            with self.assertRaises(husk.SandboxGone):
                sb.run("true")

    def test_ended_sandbox(self) -> None:
        # An ended sandbox the daemon still remembers: "gone", for every op.
        for op in ("exec", "put", "get", "policy"):
            self.d.mode.clear()
            self.d.mode["error_" + op] = ("gone", "the sandbox has ended")
            with self.sandbox(net="egress") as sb:
                with self.assertRaises(husk.SandboxGone) as e:
                    {"exec": lambda: sb.run("true"), "put": lambda: sb.write("f", b"x"),
                     "get": lambda: sb.read("f"),
                     "policy": lambda: sb.policy(allow=["198.51.100.1/32"])}[op]()
                self.assertEqual(e.exception.code, "gone")

    def test_policy_denied(self) -> None:
        with self.sandbox(net="egress") as sb:
            self.assertEqual(sb.policy(allow=["198.51.100.1/32"])["allow"],
                             ["198.51.100.1/32"])
            with self.assertRaises(husk.PolicyDenied):
                sb.policy(allow=["bad"])

    def test_forbidden_rule_is_policy_denied(self) -> None:
        # A rule closed to this client, in create, run or policy.
        msg = "allow 169.254.169.254/32: a cloud platform endpoint"
        self.d.mode["error_create"] = ("forbidden", msg)
        with self.assertRaises(husk.PolicyDenied) as e:
            self.sandbox(net="egress", allow=["169.254.169.254/32"]).open()
        self.assertEqual(e.exception.code, "forbidden")
        self.assertIn(msg, str(e.exception))
        self.d.mode.clear()
        self.d.mode["error_policy"] = ("forbidden", msg)
        with self.sandbox(net="egress") as sb:
            with self.assertRaises(husk.PolicyDenied):
                sb.policy(allow=["169.254.169.254/32"])

    def test_no_daemon(self) -> None:
        with self.assertRaises(husk.ConnectionFailed):
            husk.Sandbox(socket=os.path.join(self.tmp, "none.sock")).open()

    def test_unopened_sandbox(self) -> None:
        with self.assertRaises(husk.SandboxGone):
            self.sandbox().run("true")

    def test_daemon_misbehaving(self) -> None:
        for mode, exc in (("hangup", husk.ConnectionFailed), ("garbage", husk.ProtocolError),
                          ("long_line", husk.ProtocolError), ("wrong_re", husk.ProtocolError)):
            self.d.mode = {mode: True}
            sb = self.sandbox().open()
            with self.assertRaises(exc, msg=mode):
                sb.run("true")
            sb.conn.close()


class Files(Base):
    def test_write_and_read_back(self) -> None:
        with self.sandbox() as sb:
            sb.write("a/b.txt", "hello")
            sb.write("bin.dat", b"\0\1\2")
            sb.write("from_path", pathlib.Path(__file__))
            self.assertEqual(sb.read("a/b.txt"), b"hello")
            self.assertEqual(sb.read("bin.dat"), b"\0\1\2")
        self.assertEqual(self.d.files["from_path"], pathlib.Path(__file__).read_bytes())

    def test_large_file_streams_in_bounded_requests(self) -> None:
        data = os.urandom(5 << 20)		# random: gzip cannot shrink it
        with self.sandbox() as sb:
            sb.write("big", io.BytesIO(data))
            got = sb.read("big")
        self.assertEqual(got, data)
        puts = [q for q in self.d.requests if q["op"] == "put"]
        self.assertGreater(len(puts), 4)
        self.assertTrue(all(q.get("more") for q in puts[:-1]))
        self.assertFalse(puts[-1].get("more"))
        self.assertLess(max(self.d.line_lengths), 2 << 20)

    def test_long_names(self) -> None:
        name = "d/" + "n" * 180
        with self.sandbox() as sb:
            sb.write(name, b"x")
            self.assertEqual(sb.read(name), b"x")

    def test_upload_and_download_a_tree(self) -> None:
        src = os.path.join(self.tmp, "src")
        os.makedirs(os.path.join(src, "sub"))
        pathlib.Path(src, "sub", "f").write_bytes(b"F")
        pathlib.Path(src, "g").write_bytes(b"G")
        os.symlink("/etc/passwd", os.path.join(src, "link"))
        with self.sandbox() as sb:
            sb.upload(src, "proj")
        self.assertEqual(self.d.files["proj/sub/f"], b"F")
        self.assertEqual(self.d.files["proj/g"], b"G")
        self.assertNotIn("proj/link", self.d.files)
        out = os.path.join(self.tmp, "out")
        with self.sandbox() as sb:
            written = sb.download("proj/g", out)
            self.assertEqual(written, ["proj/g"])
            self.assertEqual(pathlib.Path(out, "proj", "g").read_bytes(), b"G")
            with self.assertRaises(husk.HuskError):
                sb.download("proj/g", out)		# nothing is replaced

    def test_bad_paths_refused_before_sending(self) -> None:
        with self.sandbox() as sb:
            for bad in ("../x", "a/../../x", "", "/"):
                with self.assertRaises(ValueError):
                    sb.write(bad, b"x")

    def hostile(self, members, **kw) -> Exception:
        self.d.mode["archive"] = targz(members) if isinstance(members, list) else members
        out = os.path.join(self.tmp, "hostile")
        with self.sandbox() as sb:
            with self.assertRaises(husk.HuskError) as e:
                sb.download("x", out, **kw)
        return e.exception

    def test_hostile_archives(self) -> None:
        def ti(name, kind=tarfile.REGTYPE, size=0, link=""):
            t = tarfile.TarInfo(name)
            t.type, t.size, t.linkname = kind, size, link
            return t
        cases = [
            [(ti("/etc/evil", size=1), b"x")],
            [(ti("../evil", size=1), b"x")],
            [(ti("a/../../evil", size=1), b"x")],
            [(ti("link", tarfile.SYMTYPE, link="/etc"), None)],
            [(ti("hard", tarfile.LNKTYPE, link="/etc/passwd"), None)],
            [(ti("dev", tarfile.CHRTYPE), None)],
            [(ti("fifo", tarfile.FIFOTYPE), None)],
        ]
        for members in cases:
            self.assertIsInstance(self.hostile(members), husk.ProtocolError, members)
        e = self.hostile([(ti("x", size=1000), b"y" * 1000)], max_bytes=10)
        self.assertIn("more than", str(e))
        whole = targz([(ti("x", size=5), b"12345")])
        self.assertIsInstance(self.hostile(whole[:len(whole) // 2]), husk.ProtocolError)
        self.assertIsInstance(self.hostile(whole + b"junk"), husk.ProtocolError)
        # Nothing escaped the target, and nothing is left of the refused files.
        self.assertFalse(os.path.exists(os.path.join(self.tmp, "evil")))
        self.assertEqual(os.listdir(os.path.join(self.tmp, "hostile")), [])

    def test_download_does_not_follow_links_in_the_target(self) -> None:
        out = os.path.join(self.tmp, "t")
        os.makedirs(out)
        outside = os.path.join(self.tmp, "outside")
        os.makedirs(outside)
        os.symlink(outside, os.path.join(out, "d"))
        t = tarfile.TarInfo("d/f")
        t.size = 1
        self.d.mode["archive"] = targz([(t, b"x")])
        with self.sandbox() as sb:
            with self.assertRaises(husk.TargetExists):
                sb.download("d", out)
        self.assertEqual(os.listdir(outside), [])
        self.assertTrue(os.path.islink(os.path.join(out, "d")))


class TarRoundTrip(unittest.TestCase):
    def test_stream_is_read_by_tarfile_and_by_the_reader(self) -> None:
        data = bytes(range(256)) * 700
        z = b"".join(_tar.tar_stream([("d", None), ("d/f", data), ("e", b"")]))
        with tarfile.open(fileobj=io.BytesIO(z), mode="r:gz") as t:
            self.assertEqual([m.name for m in t], ["d", "d/f", "e"])
        out = tempfile.mkdtemp()
        fd = os.open(out, os.O_RDONLY | os.O_DIRECTORY)
        try:
            r = _tar.TarReader(_tar.DirSink(fd))
            for i in range(0, len(z), 333):
                r.feed(z[i:i + 333])
            r.finish()
        finally:
            os.close(fd)
        self.assertEqual(pathlib.Path(out, "d", "f").read_bytes(), data)
        self.assertEqual(pathlib.Path(out, "e").read_bytes(), b"")
        one = b"".join(_tar.tar_stream([("f", data)]))
        sink = _tar.MemorySink("f", 1 << 20)
        r = _tar.TarReader(sink, only="f")
        r.feed(one)
        r.finish()
        self.assertEqual(bytes(sink.out), data)

    def test_inflation_bound(self) -> None:
        z = b"".join(_tar.tar_stream([("zeros", b"\0" * (4 << 20))]))
        r = _tar.TarReader(_tar.MemorySink("zeros", 1 << 30), max_bytes=1 << 20,
                           max_entries=4)
        with self.assertRaises(husk.ProtocolError):
            r.feed(z)


class Packaging(unittest.TestCase):
    def test_wheel_holds_the_package_and_a_true_record(self) -> None:
        import base64
        import hashlib
        import zipfile
        sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "_build"))
        import husk_build
        out = tempfile.mkdtemp()
        name = husk_build.build_wheel(out)
        self.assertEqual(name, "husk-%s-py3-none-any.whl" % husk.__version__)
        with zipfile.ZipFile(os.path.join(out, name)) as z:
            names = set(z.namelist())
            pkg = os.path.join(os.path.dirname(__file__), "..", "husk")
            for f in os.listdir(pkg):
                if f.endswith(".py") or f == "py.typed":
                    self.assertIn("husk/" + f, names)
            dist = "husk-%s.dist-info/" % husk.__version__
            for line in z.read(dist + "RECORD").decode().splitlines():
                arc, digest, size = line.split(",")
                if arc == dist + "RECORD":
                    continue
                data = z.read(arc)
                want = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=")
                self.assertEqual((digest, int(size)), ("sha256=" + want.decode(), len(data)))
            self.assertIn("Name: husk", z.read(dist + "METADATA").decode())


class Async(Base):
    def test_the_same_surface(self) -> None:
        async def main():
            async with husk.aio.Sandbox("base", socket=self.d.path) as sb:
                r = await sb.run(["echo", "a"])
                kinds = [e.kind async for e in sb.stream("x")]
                await sb.write("f", b"abc")
                got = await sb.read("f")
                echoed = await sb.run(["cat"], stdin=b"z" * 100000)
            one = await husk.aio.run("true", socket=self.d.path)
            return r, kinds, got, echoed, one
        r, kinds, got, echoed, one = asyncio.run(main())
        self.assertEqual(r.text, "ran echo a\n")
        self.assertEqual(kinds, ["started", "stdout", "stderr", "exit"])
        self.assertEqual(got, b"abc")
        self.assertEqual(echoed.stdout, b"z" * 100000)
        self.assertEqual(one.exit_code, 0)

    def test_a_broken_request_does_not_break_the_sandbox(self) -> None:
        # An answer that is not the protocol ends that request; the
        # sandbox goes on over a new connection, and is destroyed at the end.
        async def main():
            async with husk.aio.Sandbox("base", socket=self.d.path) as sb:
                self.d.mode = {"wrong_re": True}
                with self.assertRaises(husk.ProtocolError):
                    await sb.run("true")
                self.d.mode = {}
                return (await sb.run(["echo", "b"])).text
        self.assertEqual(asyncio.run(main()), "ran echo b\n")
        self.assertEqual([q["op"] for q in self.d.requests], ["create", "exec", "exec", "destroy"])

    def test_errors(self) -> None:
        self.d.mode["error_create"] = ("shutting-down", "draining")

        async def main():
            await husk.aio.Sandbox(socket=self.d.path).open()
        with self.assertRaises(husk.ShuttingDown):
            asyncio.run(main())


if __name__ == "__main__":
    unittest.main()
