"""A PEP 517 build backend for the husk SDK, standard library only.

The SDK is a handful of pure-Python files; building its wheel needs no
setuptools, so ``pip install sdk/python`` works on a machine without
network access to a package index (pip's isolated build environment
installs nothing: ``requires = []``).
"""

import base64
import hashlib
import io
import os
import tarfile
import zipfile

NAME = "husk"
HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _version():
    with open(os.path.join(HERE, "husk", "__init__.py")) as f:
        for line in f:
            if line.startswith("__version__"):
                return line.split("=", 1)[1].strip().strip("\"'")
    raise RuntimeError("husk/__init__.py has no __version__")


def _metadata():
    with open(os.path.join(HERE, "README.md")) as f:
        readme = f.read()
    return ("Metadata-Version: 2.1\nName: %s\nVersion: %s\n"
            "Summary: Python client for husk serve: microVM sandboxes for jobs and "
            "agents' tool calls\nRequires-Python: >=3.11\n"
            "Description-Content-Type: text/markdown\n\n%s" % (NAME, _version(), readme))


def _package_files():
    pkg = os.path.join(HERE, "husk")
    return sorted(f for f in os.listdir(pkg) if f.endswith(".py") or f == "py.typed")


def get_requires_for_build_wheel(config_settings=None):
    return []


def get_requires_for_build_sdist(config_settings=None):
    return []


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    ver = _version()
    dist = "%s-%s.dist-info" % (NAME, ver)
    name = "%s-%s-py3-none-any.whl" % (NAME, ver)
    records = []

    def add(z, arc, data):
        z.writestr(zipfile.ZipInfo(arc, date_time=(2026, 1, 1, 0, 0, 0)), data)
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=")
        records.append("%s,sha256=%s,%d" % (arc, digest.decode(), len(data)))

    with zipfile.ZipFile(os.path.join(wheel_directory, name), "w", zipfile.ZIP_DEFLATED) as z:
        for f in _package_files():
            with open(os.path.join(HERE, "husk", f), "rb") as fh:
                add(z, "husk/" + f, fh.read())
        add(z, dist + "/METADATA", _metadata().encode())
        add(z, dist + "/WHEEL", b"Wheel-Version: 1.0\nGenerator: husk_build\n"
                                b"Root-Is-Purelib: true\nTag: py3-none-any\n")
        records.append(dist + "/RECORD,,")
        z.writestr(zipfile.ZipInfo(dist + "/RECORD", date_time=(2026, 1, 1, 0, 0, 0)),
                   "\n".join(records) + "\n")
    return name


def build_sdist(sdist_directory, config_settings=None):
    base = "%s-%s" % (NAME, _version())
    name = base + ".tar.gz"
    with tarfile.open(os.path.join(sdist_directory, name), "w:gz",
                      format=tarfile.PAX_FORMAT) as t:
        for rel in (["pyproject.toml", "README.md", "_build/husk_build.py"] +
                    ["husk/" + f for f in _package_files()]):
            t.add(os.path.join(HERE, rel), base + "/" + rel)
        pkg = _metadata().encode()
        ti = tarfile.TarInfo(base + "/PKG-INFO")
        ti.size = len(pkg)
        t.addfile(ti, io.BytesIO(pkg))
    return name
