#!/usr/bin/env python3
"""
make-seeds.py: generate the seed corpora for the husk libFuzzer targets in
tests/fuzz/corpus/<target>/. Deterministic: rerunning rewrites the same files.
The input layouts mirror the harnesses (see the header comment of each
tests/fuzz/fuzz_<target>.c).
"""
import gzip
import io
import os
import re
import struct
import sys
import tarfile

HERE = os.path.dirname(os.path.abspath(__file__))
CORPUS = os.path.join(HERE, "corpus")


def put(target, name, data):
    d = os.path.join(CORPUS, target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "seed-" + name), "wb") as f:
        f.write(data)


# ---- virtqueue -------------------------------------------------------------
# header: size sel (1<<(b%9)), desc/avail/used (mode byte + u16), last_avail,
# used_idx, script_len, script, then guest RAM from offset 0.
DESC, AVAIL, USED, ITAB, BUF = 0x100, 0x300, 0x340, 0x400, 0x500
F_NEXT, F_WRITE, F_INDIRECT = 1, 2, 4


def vq_seed(qsize_log, descs, heads, itab=(), last_avail=0, script=b"\x00\x01\x02\x03"):
    ram = bytearray(0x700)
    for i, (addr, ln, fl, nx) in descs:
        struct.pack_into("<QIHH", ram, DESC + 16 * i, addr, ln, fl, nx)
    for i, (addr, ln, fl, nx) in itab:
        struct.pack_into("<QIHH", ram, ITAB + 16 * i, addr, ln, fl, nx)
    qs = 1 << qsize_log
    for k, h in enumerate(heads):
        struct.pack_into("<H", ram, AVAIL + 4 + 2 * ((last_avail + k) % qs), h)
    struct.pack_into("<HH", ram, AVAIL, 0, (last_avail + len(heads)) & 0xffff)
    hdr = bytes([qsize_log]) + bytes([0]) + struct.pack("<H", DESC) + bytes([0]) + \
        struct.pack("<H", AVAIL) + bytes([0]) + struct.pack("<H", USED) + \
        struct.pack("<HH", last_avail, last_avail) + bytes([len(script)]) + script
    return hdr + bytes(ram)


def virtqueue():
    put("virtqueue", "simple", vq_seed(4, [(0, (BUF, 16, F_NEXT, 1)), (1, (BUF + 0x40, 32, F_WRITE, 0))], [0]))
    put("virtqueue", "two-chains", vq_seed(3, [(3, (BUF, 8, 0, 0)), (7, (BUF + 8, 8, F_WRITE, 0))], [3, 7]))
    put("virtqueue", "indirect", vq_seed(4, [(4, (ITAB, 48, F_INDIRECT, 0))], [4],
        itab=[(0, (BUF, 16, F_NEXT, 2)), (2, (BUF + 0x40, 64, F_NEXT | F_WRITE, 1)),
              (1, (BUF + 0x100, 1, F_WRITE, 0))]))
    put("virtqueue", "direct-indirect", vq_seed(4, [(0, (BUF, 16, F_NEXT, 1)), (1, (ITAB, 16, F_INDIRECT, 0))], [0],
        itab=[(0, (BUF + 0x80, 4, F_WRITE, 0))]))
    put("virtqueue", "wrap", vq_seed(2, [(0, (BUF, 4, 0, 0)), (1, (BUF + 4, 4, F_WRITE, 0))], [0, 1], last_avail=65535))
    put("virtqueue", "loop", vq_seed(4, [(0, (BUF, 4, F_NEXT, 1)), (1, (BUF, 4, F_NEXT, 0))], [0]))


# ---- vsock -----------------------------------------------------------------
# op byte: low nibble action, 0x10 force cids/type valid, 0x20 address an
# existing connection, 0x40 len %= 4097, 0x80 payload_avail = len.
CID, HOST = 3, 2
OP_REQ, OP_RESP, OP_RST, OP_SHUT, OP_RW, OP_CUPD, OP_CREQ = 1, 2, 3, 4, 5, 6, 7


def vhdr(op, sport=1234, dport=5000, ln=0, flags=0, buf_alloc=262144, fwd=0, src=CID, dst=HOST):
    return struct.pack("<QQIIIHHIII", src, dst, sport, dport, ln, 1, op, flags, buf_alloc, fwd)


def gpkt(op, how=1, **kw):
    return bytes([0x90]) + vhdr(op, **kw) + bytes([how])


def vsock():
    # guest connects, host accepts, data both ways, shutdown, RST
    s = gpkt(OP_REQ) + b"\x08\x04" + gpkt(OP_RW, ln=100) + gpkt(OP_RW, ln=4000, how=3) + \
        b"\x04\x00\xff\xff\x00\x00" + b"\x06\x00\x10\x00\x00\x00" + gpkt(OP_CREQ) + b"\x08\x08" + \
        gpkt(OP_SHUT, flags=3) + b"\x05\x00" + b"\x08\x08" + gpkt(OP_RST)
    put("vsock", "guest-conn", s)
    # host connects, guest responds, host sends until out of credit
    s = b"\x03\xd2\x04\x00\x00" + b"\x08\x02" + \
        gpkt(OP_RESP, sport=1234, dport=0x40000000, buf_alloc=8192) + \
        b"\x04\x00\x00\x20\x00\x00" + b"\x04\x00\x00\x20\x00\x00" + b"\x08\x04" + \
        gpkt(OP_CUPD, sport=1234, dport=0x40000000, buf_alloc=8192, fwd=8192) + b"\x07\x00"
    put("vsock", "host-conn", s)
    # host connects, guest refuses, retry
    s = b"\x03\x10\x00\x00\x00" + b"\x08\x02" + gpkt(OP_RST, sport=16, dport=0x40000000, how=1) + \
        b"\x08\x02" + gpkt(OP_RST, sport=16, dport=0x40000000, how=0)
    put("vsock", "refused", s)
    # garbage: wrong cid, bad op, overlong, orphan
    s = bytes([0x00]) + vhdr(OP_REQ, src=7) + b"\x00\x00\x00\x00\x01" + \
        bytes([0x10]) + vhdr(9) + b"\x00\x00\x00\x00\x01" + \
        bytes([0x10]) + vhdr(OP_RW, ln=70000) + b"\x00\x00\x01\x00\x01" + \
        gpkt(OP_RW, sport=99) + b"\x08\x0f"
    put("vsock", "malformed", s)
    # overrun credit on an established connection
    s = gpkt(OP_REQ) + b"\x08\x04" + b"".join(gpkt(OP_RW, ln=65536, how=1) for _ in range(5)) + b"\x08\x0f"
    put("vsock", "overrun", s)


# ---- proto -----------------------------------------------------------------
def proto_version():
    h = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "vmm", "job", "proto.h")
    return int(re.search(r"#define PROTO_VERSION (\d+)", open(h).read()).group(1))


def frame(t, payload=b""):
    return struct.pack("<IHH", len(payload), t, proto_version()) + payload


def tlv(tag, val):
    return struct.pack("<HI", tag, len(val)) + val


def proto():
    hello = frame(1, tlv(48, b"husk-init 0.1"))
    job = frame(16, tlv(1, b"/bin/sh") + tlv(1, b"-c") + tlv(1, b"echo hi") + tlv(2, b"A=B") +
                tlv(3, b"/tmp/workspace") + tlv(4, struct.pack("<Q", 5000)) +
                tlv(5, struct.pack("<I", 256)) + tlv(8, b"\x01") + tlv(10, b"out"))
    exitr = frame(5, tlv(32, struct.pack("<I", 0)) + tlv(35, struct.pack("<Q", 1234)) +
                  tlv(38, struct.pack("<Q", 1)) + tlv(39, struct.pack("<Q", 2)))
    put("proto", "hello", hello)
    put("proto", "job", job)
    put("proto", "conversation", hello + frame(2) + frame(3, b"hi\n") + frame(4, b"err") + exitr +
        frame(6, b"\x1f\x8b") + frame(6) + frame(7))
    put("proto", "stdin", frame(17, b"data") + frame(17) + frame(18, b"x" * 32) + frame(18))
    put("proto", "error", frame(32, b"no such file"))
    put("proto", "truncated", frame(16, tlv(1, b"abc"))[:-2])
    put("proto", "bad-tlv", frame(16, struct.pack("<HI", 1, 1000) + b"abc"))


# ---- session ---------------------------------------------------------------
# byte 0: bit 0 a session, bit 1 host requests; then guest frames whose
# header's version field is the clock's step in ms.
def gframe(t, payload=b"", ms=1):
    return struct.pack("<IHH", len(payload), t, ms) + payload


def session():
    exitr = tlv(32, struct.pack("<I", 3)) + tlv(35, struct.pack("<Q", 10))
    step = tlv(49, b"\x07" + struct.pack("<Q", 5000))
    put("session", "one-shot", b"\x00" + gframe(1, step) + gframe(2, step) + gframe(3, b"out\n") +
        gframe(4, b"err\n") + gframe(5, exitr) + gframe(6, b"\x1f\x8b") + gframe(6) +
        gframe(6, b"z") + gframe(6) + gframe(7))
    put("session", "one-shot-stall", b"\x00" + gframe(1) + gframe(2, ms=60000) + gframe(3, b"x" * 200))
    idb = lambda i: struct.pack("<I", i)
    put("session", "session", b"\x03" + gframe(1) + gframe(2) + gframe(8, idb(1)) +
        gframe(9, idb(1) + b"\x01hello") + gframe(10, idb(1) + exitr) + gframe(11, idb(3) + b"tz") +
        gframe(11, idb(3)) + gframe(12, idb(4)) + gframe(13, idb(5) + b"no") + gframe(7))
    put("session", "session-foreign-id", b"\x01" + gframe(1) + gframe(2) + gframe(10, idb(9) + exitr))


# ---- tar -------------------------------------------------------------------
# byte 0: bit 0 = rest is raw tar (harness gzips it), bits 1-3 pick a chunk size.
def mktar(entries, fmt=tarfile.USTAR_FORMAT):
    bio = io.BytesIO()
    with tarfile.open(fileobj=bio, mode="w", format=fmt) as tf:
        for name, kind, data in entries:
            ti = tarfile.TarInfo(name)
            ti.mtime = 1700000000
            if kind == "dir":
                ti.type = tarfile.DIRTYPE
                ti.mode = 0o755
                tf.addfile(ti)
            elif kind == "sym":
                ti.type = tarfile.SYMTYPE
                ti.linkname = data
                tf.addfile(ti)
            elif kind == "lnk":
                ti.type = tarfile.LNKTYPE
                ti.linkname = data
                tf.addfile(ti)
            else:
                ti.size = len(data)
                ti.mode = 0o644
                tf.addfile(ti, io.BytesIO(data))
    # Drop tarfile's record padding: the data, then exactly two zero blocks.
    raw = bio.getvalue().rstrip(b"\0")
    raw += bytes(-len(raw) % 512)
    return raw + bytes(1024)


def gz(raw):
    return gzip.compress(raw, mtime=0)


def tar():
    good = mktar([("dir", "dir", None), ("dir/a.txt", "file", b"hello\n"),
                  ("dir/sub", "dir", None), ("dir/sub/b", "file", b"x" * 700)])
    put("tar", "good-gz", b"\x06" + gz(good))
    put("tar", "good-gz-bytewise", b"\x00" + gz(good))
    put("tar", "good-raw", b"\x07" + good)
    put("tar", "dotdot-raw", b"\x07" + mktar([("../escape", "file", b"x")]))
    put("tar", "abs-raw", b"\x07" + mktar([("/tmp/abs", "file", b"x")]))
    put("tar", "symlink-raw", b"\x07" + mktar([("l", "sym", "/etc"), ("l/passwd", "file", b"x")]))
    put("tar", "hardlink-raw", b"\x07" + mktar([("f", "file", b"x"), ("h", "lnk", "f")]))
    put("tar", "dup-raw", b"\x07" + mktar([("f", "file", b"x"), ("f", "file", b"y")]))
    put("tar", "longname-gnu-raw", b"\x07" + mktar([("d/" + "n" * 150, "file", b"z")], tarfile.GNU_FORMAT))
    put("tar", "truncated-gz", b"\x02" + gz(good)[:-20])


# ---- loader ----------------------------------------------------------------
def elf(paddr=0x1000000, filesz=64, memsz=4096, entry=None, phnum=1, extra=b""):
    entry = paddr if entry is None else entry
    ehdr = bytearray(64)
    ehdr[0:16] = b"\x7fELF" + bytes([2, 1, 1]) + bytes(9)
    struct.pack_into("<HHIQQQIHHHHHH", ehdr, 16, 2, 62, 1, entry, 64, 0, 0, 64, 56, phnum, 64, 0, 0)
    ph = b""
    off = 64 + 56 * phnum
    for i in range(phnum):
        ph += struct.pack("<IIQQQQQQ", 1, 7, off, 0xffffffff80000000 + paddr + i * memsz,
                          paddr + i * memsz, filesz, memsz, 0x200000)
    return bytes(ehdr) + ph + bytes(range(filesz % 256)) + bytes(max(0, filesz - filesz % 256)) + extra


def bzimage(setup_sects=1, syssize_bytes=2048, version=0x020f, init_size=0x100000, pref=0x1000000):
    setup = bytearray(((setup_sects or 4) + 1) * 512)
    struct.pack_into("<B", setup, 0x1f1, setup_sects)
    struct.pack_into("<I", setup, 0x1f4, syssize_bytes // 16)
    struct.pack_into("<H", setup, 0x1fe, 0xaa55)
    setup[0x200] = 0xeb
    setup[0x201] = 0x6a
    setup[0x202:0x206] = b"HdrS"
    struct.pack_into("<H", setup, 0x206, version)
    setup[0x211] = 0x01                      # LOADED_HIGH
    struct.pack_into("<I", setup, 0x22c, 0x7fffffff)
    struct.pack_into("<I", setup, 0x230, 0x200000)
    setup[0x234] = 1
    struct.pack_into("<H", setup, 0x236, 0x1 | 0x2)  # XLF_KERNEL_64 | CAN_BE_LOADED_ABOVE_4G
    struct.pack_into("<I", setup, 0x238, 2047)
    struct.pack_into("<Q", setup, 0x258, pref)
    struct.pack_into("<I", setup, 0x260, init_size)
    return bytes(setup) + bytes(syssize_bytes)


def loader():
    put("loader", "vmlinux", elf())
    put("loader", "vmlinux-2seg", elf(phnum=2))
    put("loader", "vmlinux-bss", elf(filesz=16, memsz=0x100000))
    put("loader", "bzimage", bzimage())
    put("loader", "bzimage-nosetup", bzimage(setup_sects=0))
    put("loader", "bzimage-old", bzimage(version=0x020a))
    put("loader", "bzimage-big-init", bzimage(init_size=0x3000000))


# ---- cli -------------------------------------------------------------------
def cli():
    lines = {
        "boot-min": ["--kernel", "vmlinux"],
        "boot-full": ["--kernel=bzImage", "--initrd", "initrd.img", "--cmdline", "quiet panic=-1",
                      "--mem", "512", "--vcpus", "2", "--console", "-", "--timeout", "30",
                      "--json", "--no-stdin", "--disk", "disk.img", "--rng", "--verbose"],
        "boot-bad": ["--kernel", "k", "--mem", "99999999999999999999", "--vcpus", "0"],
        "boot-help": ["--help"],
        "run-min": ["--", "/bin/true"],
        "run-full": ["--kernel", "vmlinux", "--rootfs", "root.ext4", "--mem", "1024", "--vcpus", "4",
                     "--timeout", "60", "--workspace-size", "512", "--env", "A=B", "--env", "C=D",
                     "--put", "src:dst", "--get", "out:./res", "--stdin", "--json", "--",
                     "sh", "-c", "echo hi"],
        "run-dotdot": ["--get", "../x:/tmp", "--", "ls"],
        "run-workspace": ["--put", "a:/tmp/workspace/b", "--", "cat", "b"],
    }
    for name, argv in lines.items():
        put("cli", name, b"\0".join(a.encode() for a in argv))


# ---- snapshot --------------------------------------------------------------
# A template state file as vmm/template/snapshot.c writes it (see snapshot.h),
# sealed with fuzz_snapshot.c's test key, and the sections a restore reads.
SNAP_KEY = b"husk fuzz_snapshot's test key!!\0"


def snap_file(sections, version=2):
    import hashlib
    import hmac
    import zlib
    body = b""
    for typ, idx, elems in sections:
        payload = b"".join(struct.pack("<HI", tag, len(v)) + v for tag, v in elems)
        body += struct.pack("<IIII", typ, idx, len(payload), zlib.crc32(payload))
        body += payload + b"\0" * (-len(payload) % 8)
    head = b"HUSKSNAP" + struct.pack("<IIQ", version, 96, len(body))
    head += hashlib.sha256(body).digest() + struct.pack("<I", len(sections))
    head += hmac.new(SNAP_KEY, head + body, hashlib.sha256).digest()
    return head + struct.pack("<I", zlib.crc32(head)) + body


u64 = lambda v: struct.pack("<Q", v)
META, HOST, VM, VCPU, DEVICE, MEMORY = range(1, 7)


def tpl_meta(devices):
    ident = b"".join(u64(v) for v in (2049, 1234, 4096, 10**18, 10**18))
    return [
        (META, 0, [(1, b"base"), (2, u64(1700000000000000)), (3, b"0.1"),
                   (4, b"\x11" * 32), (5, b"\x22" * 32), (6, b"/images/vmlinux"),
                   (7, b"/images/rootfs.ext4"), (8, ident), (9, ident), (10, u64(64 << 10)),
                   (11, u64(1)), (12, u64(0)), (14, b"".join(struct.pack("<I", d) for d in devices))]),
        (HOST, 0, [(1, b"\x33" * 32), (2, u64(2500000))]),
        (MEMORY, 0, [(1, u64(64 << 10)), (2, u64(4096)), (3, b"\x44" * 32),
                     (4, u64(0) + u64(0x1234))]),
    ]


def dev_section(slot, dev_id, queues):
    regs = struct.pack("<IIIIIIBBBB", 0xf, 0, 0, 0, 0, 1, 0, 1, 0, 0)
    el = [(1, u64(dev_id)), (2, regs), (3, u64(1 << 32))]
    for i, (size, desc, avail, used, last) in enumerate(queues):
        el.append((4, struct.pack("<IHHHBBIQQQ", i, size, last, last, 1, 0, 0, desc, avail, used)))
    return (DEVICE, slot, el)


def x86_vcpu(i):
    cpuid = b"".join(struct.pack("<IIIIIII", fn, idx, fl, a, b, c, d) + b"\0" * 12
                     for fn, idx, fl, a, b, c, d in (
                         (0, 0, 0, 0xd, 0x756e6547, 0x6c65746e, 0x49656e69),
                         (1, 0, 0, 0x806f8, 0x00010800, 0xf6fab223, 0x0f8bfbff),
                         (7, 0, 1, 0, 0xf1bf07ab, 0x1b405f6e, 0xbc000410),
                         (0xd, 0, 1, 0x2e7, 0x2a88, 0x2a88, 0),
                         (0x40000001, 0, 0, 0x01007afb, 0, 0, 0)))
    lapic = bytearray(1024)
    lapic[0x20:0x24] = struct.pack("<I", i << 24)
    return (VCPU, i, [(10, cpuid), (6, bytes(lapic)), (8, struct.pack("<I", 0)),
                      (9, bytes(64))])


def x86_vm():
    pic = lambda chip, mask: struct.pack("<II", chip, 0) + bytes(14) + bytes([0, mask]) + bytes(512 - 16)
    ioapic = struct.pack("<II", 2, 0) + u64(0xfec00000) + bytes(512 - 8)
    ch = lambda mode: struct.pack("<IHBBBBBBBBBBq", 0x10000, 0, 0, 0, 0, 3, 3, 0, 3, mode, 0, 1, 0)
    pit = ch(2) + ch(0xff) + ch(0xff) + struct.pack("<I", 1) + bytes(36)
    return (VM, 0, [(2, pic(0, 0xf8)), (3, pic(1, 0xde)), (4, ioapic), (5, pit)])


def a64_vcpu(i):
    core = lambda n: 0x6030000000100000 | 2 * n
    sysreg = lambda enc: 0x6030000000130000 | enc
    regs = b"".join(u64(r) + u64(0x1000 + n) for n, r in enumerate(
        [core(0), core(32), core(33), sysreg(0xc080), sysreg(0xdf1a), 0x6030000000140000]))
    gic = struct.pack("<IIII", 0x10100, 0xffff, 0, 1)
    icc = struct.pack("<IQ", 0xc230, 0xf0)
    return (VCPU, i, [(1, regs), (2, struct.pack("<I", 0)), (3, gic), (4, icc)])


def snapshot():
    meta = (1, 0, [(1, b"0" * 64), (2, u64(512 << 20)), (3, u64(1))])
    vcpu = lambda i: (4, i, [(1, b"\0" * 144), (2, b"\0" * 312), (7, u64(i))])
    put("snapshot", "minimal", snap_file([meta]))
    put("snapshot", "two-vcpus", snap_file([meta, vcpu(0), vcpu(1), (5, 0, [])]))
    put("snapshot", "empty", snap_file([]))
    put("snapshot", "version-1", snap_file([meta], version=1))
    uart = bytes([1, 3, 8, 0, 0, 1, 0, 2]) + b"abc" + bytes(61) + bytes([3, 0])
    # Queues at 0x1000.. in the 64 KiB of guest RAM the harness makes of the input.
    vsock = dev_section(0, 19, [(16, 0x1000, 0x1200, 0x1400, 0), (16, 0x2000, 0x2200, 0x2400, 0),
                                (8, 0x3000, 0x3200, 0x3400, 0)])
    blk = dev_section(1, 2, [(64, 0x4000, 0x4800, 0x5000, 3)])
    put("snapshot", "x86-template", snap_file(tpl_meta([19, 2]) + [
        x86_vm(), x86_vcpu(0), vsock, blk, (DEVICE, 100, [(1, uart)])]))
    put("snapshot", "arm64-template", snap_file(tpl_meta([19]) + [
        (VM, 0, [(5, struct.pack("<IIII", 8, 0x43b, 0x6000 + 8 * 40, 0))]), a64_vcpu(0), vsock]))


# ---- dns -------------------------------------------------------------------
# u16 length L, L bytes of a guest query, then an upstream response.
def dname(name):
    out = b""
    for label in name.split(".") if name else []:
        out += bytes([len(label)]) + label.encode()
    return out + b"\0"


def dquery(qid, name, qtype=1, flags=0x0100, extra=b"", ar=0):
    return struct.pack("!HHHHHH", qid, flags, 1, 0, 0, ar) + dname(name) + \
        struct.pack("!HH", qtype, 1) + extra


OPT = b"\0" + struct.pack("!HHLH", 41, 1232, 0x8000, 0)


def drr(owner, rtype, ttl, rdata):
    return owner + struct.pack("!HHLH", rtype, 1, ttl, len(rdata)) + rdata


def dresp(qid, name, qtype, answers, rcode=0, ns=b"", nns=0):
    hdr = struct.pack("!HHHHHH", qid, 0x8180 | rcode, 1, len(answers), nns, 0)
    return hdr + dname(name) + struct.pack("!HH", qtype, 1) + b"".join(answers) + ns


def dpair(query, resp):
    return struct.pack("!H", len(query)) + query + resp


def dns():
    ptr = b"\xc0\x0c"
    q = dquery(0x1111, "www.example.com")
    a = drr(ptr, 1, 300, bytes([93, 184, 216, 34]))
    put("dns", "a", dpair(q, dresp(0x1111, "www.example.com", 1, [a])))
    put("dns", "edns-mixed-case", dpair(
        dquery(0x2222, "WwW.ExAmple.COM", flags=0x0130, extra=OPT, ar=1),
        dresp(0x9999, "www.example.com", 1, [a])))
    # CNAME chain: www -> cdn.example.net (compressed after the first) -> A, AAAA
    cname = drr(ptr, 5, 60, dname("cdn.example.net"))
    cdn = b"\xc0\x2d"  # the CNAME's rdata, right after its fixed part
    v6 = bytes([0x20, 0x01, 0x0d, 0xb8] + [0] * 11 + [1])
    put("dns", "cname-chain", dpair(q, dresp(0x1111, "www.example.com", 1, [
        cname, drr(cdn, 1, 5, bytes([10, 0, 0, 1])), drr(cdn, 28, 0x80000001, v6)])))
    # A compression loop and a forward pointer.
    put("dns", "ptr-loop", dpair(q, dresp(0x1111, "www.example.com", 1, [
        drr(b"\xc0\x21", 1, 5, bytes(4))])))
    put("dns", "nxdomain-soa", dpair(q, dresp(
        0x1111, "www.example.com", 1, [], rcode=3,
        ns=drr(b"\xc0\x10", 6, 60, dname("ns.example.com") + b"\xc0\x10" + bytes(20)),
        nns=1)))
    # Escaped bytes in a label, the root name, an overlong label.
    put("dns", "escapes", dpair(dquery(3, "a\\.b.example.com").replace(b"\\", b"\xff"), b""))
    put("dns", "root", dpair(dquery(4, "", qtype=2), dresp(4, "", 2, [])))
    put("dns", "long-label", dpair(dquery(5, "a" * 63 + ".b"), b""))
    put("dns", "bad-counts", dpair(struct.pack("!HHHHHH", 6, 0, 2, 1, 1, 9) + dname("x"), b""))



# ---- layer -----------------------------------------------------------------
# byte 0: bit 0 = each layer is a raw tar (harness gzips it); the layers are
# separated by "HUSKLAYR" (four at most).
def mklayer(entries, fmt=tarfile.PAX_FORMAT):
    bio = io.BytesIO()
    with tarfile.open(fileobj=bio, mode="w", format=fmt) as tf:
        for e in entries:
            name, kind = e[0], e[1]
            ti = tarfile.TarInfo(name)
            ti.mtime = 1700000000
            ti.uid = ti.gid = 0
            if kind == "dir":
                ti.type, ti.mode = tarfile.DIRTYPE, e[2] if len(e) > 2 else 0o755
                tf.addfile(ti)
            elif kind in ("sym", "lnk"):
                ti.type = tarfile.SYMTYPE if kind == "sym" else tarfile.LNKTYPE
                ti.linkname = e[2]
                tf.addfile(ti)
            elif kind in ("chr", "fifo"):
                ti.type = tarfile.CHRTYPE if kind == "chr" else tarfile.FIFOTYPE
                tf.addfile(ti)
            else:
                data = e[2]
                ti.size, ti.mode = len(data), e[3] if len(e) > 3 else 0o644
                if len(e) > 4:
                    ti.pax_headers = e[4]
                tf.addfile(ti, io.BytesIO(data))
    raw = bio.getvalue().rstrip(b"\0")
    raw += bytes(-len(raw) % 512)
    return raw + bytes(1024)


def layers(flag, *ls):
    return bytes([flag]) + b"HUSKLAYR".join(ls)


def layer():
    base = mklayer([("etc", "dir"), ("etc/passwd", "file", b"root:x:0:0\n"),
                    ("bin", "dir"), ("bin/su", "file", b"su", 0o4755),
                    ("bin/sh", "sym", "busybox"), ("bin/su2", "lnk", "bin/su"),
                    ("tmp", "dir", 0o1777), ("d", "dir"), ("d/old", "file", b"old"),
                    ("d/sub", "dir"), ("d/sub/x", "file", b"x")])
    upper = mklayer([(".wh.tmp", "file", b""), ("d", "dir", 0o700), ("d/new", "file", b"n"),
                     ("d/.wh..wh..opq", "file", b""), ("etc/passwd", "dir"),
                     ("bin/.wh.sh", "file", b""), ("dev/null", "chr"), ("run/f", "fifo")])
    put("layer", "two-raw", layers(1, base, upper))
    put("layer", "two-gz", layers(0, gz(base), gz(upper)))
    put("layer", "pax-raw", layers(1, mklayer([
        ("p/" + "n" * 120 + "/" + "m" * 120, "file", b"pax", 0o644,
         {"SCHILY.xattr.user.a": "1", "mtime": "1.5", "uid": "4000000000"})])))
    put("layer", "gnu-raw", layers(1, mklayer([("g/" + "l" * 150, "file", b"gnu"),
                                               ("g/s", "sym", "t" * 200)], tarfile.GNU_FORMAT)))
    put("layer", "escape-raw", layers(1, mklayer([("up", "sym", ".."), ("up/t/x", "file", b"x")]),
                                      mklayer([("/abs/x", "file", b"x"), ("a/../../x", "file", b"x")])))
    put("layer", "link-later-raw", layers(1, mklayer([("l", "sym", "/")]),
                                          mklayer([("l/tmp/x", "file", b"x")])))
    put("layer", "hardlinks-raw", layers(1, mklayer([("f", "file", b"f"), ("d", "dir"),
                                                     ("h1", "lnk", "f"), ("h2", "lnk", "d"),
                                                     ("h3", "lnk", "../f")])))
    put("layer", "replace-raw", layers(1, mklayer([("x", "file", b"1"), ("y", "dir"), ("y/z", "file", b"z")]),
                                       mklayer([("x", "dir"), ("x/in", "file", b"i"), ("y", "file", b"f")]),
                                       mklayer([(".wh.x", "file", b""), (".wh..wh..opq", "file", b"")])))
    put("layer", "zstd", b"\x00\x28\xb5\x2f\xfd" + bytes(16))
    put("layer", "truncated-gz", layers(0, gz(base)[:-20]))


def main():
    for fn in (virtqueue, vsock, proto, session, tar, loader, cli, snapshot, dns, layer):
        fn()
    for t in sorted(os.listdir(CORPUS)):
        d = os.path.join(CORPUS, t)
        total = sum(os.path.getsize(os.path.join(d, f)) for f in os.listdir(d))
        if total > 100 * 1024:
            sys.exit("corpus %s is %d bytes (limit 100 KiB)" % (t, total))


if __name__ == "__main__":
    main()
