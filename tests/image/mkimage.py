#!/usr/bin/env python3
"""Build container images for the image tests, in the formats husk imports.

    mkimage.py FORMAT OUT [--busybox PATH] [--evil KIND] [--tag TAG]

FORMAT: oci-dir (an OCI image layout directory), oci-archive (its tar),
docker-archive (`docker save` of today: manifest.json and blobs), docker-legacy
(manifest.json with <id>/layer.tar, checked against the config's diff_ids).

The image has two layers. The first holds files with owners, modes (a setuid
file), a symlink, a hardlink, a device node and a directory d/ with old
entries; the second (gzip'd) overwrites a file, whites out a/x, makes d/
opaque after adding d/new, and adds bin/tool. With --busybox the first layer
also holds a static busybox as bin/busybox and bin/sh, so the image runs.
The config has Entrypoint, Cmd, Env, WorkingDir and User.

--evil KIND makes it hostile: digest (a layer whose bytes do not match its
digest), symlink-blob (a blob that is a symbolic link), zstd (a layer of
media type tar+zstd), escape (a layer entry through a symlink to /),
dotdot (an entry named ../x), two (an index with two images and no ref
names), bigjson (a 5 MiB index.json).
"""
import argparse
import gzip
import hashlib
import io
import json
import os
import shutil
import sys
import tarfile


def tar_bytes(entries):
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as t:
        for e in entries:
            ti = tarfile.TarInfo(e["name"])
            ti.uid, ti.gid = e.get("uid", 0), e.get("gid", 0)
            kind = e.get("type", "file")
            ti.mode = e.get("mode", 0o755 if kind == "dir" else 0o644)
            ti.mtime = e.get("mtime", 1700000000)
            data = None
            if kind == "file":
                data = e.get("data", b"")
                ti.size = len(data)
            elif kind == "dir":
                ti.type = tarfile.DIRTYPE
            elif kind == "symlink":
                ti.type, ti.linkname = tarfile.SYMTYPE, e["target"]
            elif kind == "hardlink":
                ti.type, ti.linkname = tarfile.LNKTYPE, e["target"]
            elif kind == "chr":
                ti.type, ti.devmajor, ti.devminor = tarfile.CHRTYPE, 1, 3
            t.addfile(ti, io.BytesIO(data) if data is not None else None)
    return buf.getvalue()


def sha(b):
    return "sha256:" + hashlib.sha256(b).hexdigest()


def layers(busybox, evil):
    l1 = [
        {"name": "etc", "type": "dir", "mode": 0o755},
        {"name": "etc/hello", "data": b"v1\n", "uid": 1234, "gid": 55, "mode": 0o640},
        {"name": "etc/passwd", "data": b"root:x:0:0:root:/root:/bin/sh\n"},
        {"name": "a", "type": "dir", "mode": 0o750, "uid": 7, "gid": 8},
        {"name": "a/x", "data": b"x\n"},
        {"name": "a/y", "data": b"y\n"},
        {"name": "sbin", "type": "dir"},
        {"name": "sbin/su", "data": b"#!/bin/sh\n", "mode": 0o4755},
        {"name": "lnk", "type": "symlink", "target": "/etc/hello"},
        {"name": "hl", "type": "hardlink", "target": "etc/passwd"},
        {"name": "dev", "type": "dir"},
        {"name": "dev/null", "type": "chr", "mode": 0o666},
        {"name": "d", "type": "dir"},
        {"name": "d/old", "data": b"old\n"},
        {"name": "app", "type": "dir", "mode": 0o755},
        {"name": "app/data.txt", "data": b"image data\n"},
    ]
    if busybox:
        with open(busybox, "rb") as f:
            bb = f.read()
        l1 += [
            {"name": "bin", "type": "dir"},
            {"name": "bin/busybox", "data": bb, "mode": 0o755},
        ]
        for app in ("sh", "cat", "echo", "id", "pwd", "env", "ls", "true"):
            l1.append({"name": "bin/" + app, "type": "hardlink", "target": "bin/busybox"})
    if evil == "escape":
        l1 += [{"name": "up", "type": "symlink", "target": "/"},
               {"name": "up/tmp/husk-image-escape", "data": b"escaped\n"}]
    if evil == "dotdot":
        l1 += [{"name": "../husk-image-dotdot", "data": b"escaped\n"}]
    l2 = [
        {"name": "etc/hello", "data": b"v2\n", "uid": 1234, "gid": 55, "mode": 0o640},
        {"name": "a/.wh.x", "data": b""},
        {"name": "d/new", "data": b"new\n"},
        {"name": "d/.wh..wh..opq", "data": b""},
        {"name": "usr/local/bin/tool", "data": b"tool\n", "mode": 0o755},
    ]
    return [tar_bytes(l1), gzip.compress(tar_bytes(l2), mtime=0)], [tar_bytes(l1), tar_bytes(l2)]


def config(diff_ids):
    return json.dumps({
        "architecture": "amd64", "os": "linux",
        "config": {
            "Entrypoint": ["/bin/sh", "-c"],
            "Cmd": ["echo from-cmd; pwd; echo IMG_VAR=$IMG_VAR; cat data.txt; id -u"],
            "Env": ["PATH=/usr/local/bin:/bin", "IMG_VAR=from-image"],
            "WorkingDir": "/app",
            "User": "nobody",
        },
        "rootfs": {"type": "layers", "diff_ids": diff_ids},
    }).encode()


def put_blob(root, data):
    d = sha(data)
    p = os.path.join(root, "blobs", "sha256", d[7:])
    os.makedirs(os.path.dirname(p), exist_ok=True)
    with open(p, "wb") as f:
        f.write(data)
    return d


def oci_layout(out, blobs, plain, evil, tag):
    os.makedirs(out)
    with open(os.path.join(out, "oci-layout"), "w") as f:
        json.dump({"imageLayoutVersion": "1.0.0"}, f)
    cfg = config([sha(p) for p in plain])
    cdig = put_blob(out, cfg)
    descs = []
    for i, b in enumerate(blobs):
        mt = "application/vnd.oci.image.layer.v1.tar" + ("+gzip" if i else "")
        if evil == "zstd" and i == 1:
            mt = "application/vnd.oci.image.layer.v1.tar+zstd"
        d = put_blob(out, b)
        descs.append({"mediaType": mt, "digest": d, "size": len(b)})
    if evil == "digest":
        p = os.path.join(out, "blobs", "sha256", descs[1]["digest"][7:])
        with open(p, "ab") as f:
            f.write(b"tampered")
    if evil == "symlink-blob":
        p = os.path.join(out, "blobs", "sha256", descs[0]["digest"][7:])
        os.unlink(p)
        os.symlink("/etc/passwd", p)
    man = json.dumps({
        "schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": {"mediaType": "application/vnd.oci.image.config.v1+json",
                   "digest": cdig, "size": len(cfg)},
        "layers": descs}).encode()
    mdig = put_blob(out, man)
    entry = {"mediaType": "application/vnd.oci.image.manifest.v1+json",
             "digest": mdig, "size": len(man),
             "annotations": {"org.opencontainers.image.ref.name": tag}}
    index = {"schemaVersion": 2, "manifests": [entry]}
    if evil == "two":
        e2 = dict(entry)
        del e2["annotations"]
        index["manifests"] = [dict(entry, annotations={}), e2]
    text = json.dumps(index)
    if evil == "bigjson":
        text = text[:-1] + ', "pad": "' + "x" * (5 << 20) + '"}'
    with open(os.path.join(out, "index.json"), "w") as f:
        f.write(text)


def docker(out, blobs, plain, legacy, tag):
    os.makedirs(out)
    cfg = config([sha(p) for p in plain])
    if legacy:
        cname = hashlib.sha256(cfg).hexdigest() + ".json"
        with open(os.path.join(out, cname), "wb") as f:
            f.write(cfg)
        names = []
        for i, p in enumerate(plain):
            d = "%064x" % (i + 1)
            os.makedirs(os.path.join(out, d))
            with open(os.path.join(out, d, "layer.tar"), "wb") as f:
                f.write(p)
            names.append(d + "/layer.tar")
    else:
        cname = "blobs/sha256/" + put_blob(out, cfg)[7:]
        names = ["blobs/sha256/" + put_blob(out, b)[7:] for b in blobs]
    with open(os.path.join(out, "manifest.json"), "w") as f:
        json.dump([{"Config": cname, "RepoTags": [tag], "Layers": names}], f)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("format", choices=["oci-dir", "oci-archive", "docker-archive", "docker-legacy"])
    ap.add_argument("out")
    ap.add_argument("--busybox")
    ap.add_argument("--evil")
    ap.add_argument("--tag", default="test:1")
    a = ap.parse_args()
    blobs, plain = layers(a.busybox, a.evil)
    tmp = a.out + ".d" if a.format in ("oci-archive", "docker-archive", "docker-legacy") else a.out
    if a.format in ("oci-dir", "oci-archive"):
        oci_layout(tmp, blobs, plain, a.evil, a.tag)
    else:
        docker(tmp, blobs, plain, a.format == "docker-legacy", a.tag)
    if tmp != a.out:
        with tarfile.open(a.out, "w") as t:
            for name in sorted(os.listdir(tmp)):
                t.add(os.path.join(tmp, name), arcname=name)
        shutil.rmtree(tmp)
    return 0


if __name__ == "__main__":
    sys.exit(main())
