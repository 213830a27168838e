#!/usr/bin/env python3
"""A scripted agent whose tools run in a husk sandbox.

No model is needed: the "plan" below is the sequence of tool calls an agent
would make to answer "what does this report say, what is in this table, and
is the pricing API up?". Each call goes to one sandbox of a running
``husk serve`` through the Python SDK (sdk/python), and each step is printed
with what came back and how long it took.

The sandbox has egress on, and may resolve (and then reach) exactly one host:
the API's. A second URL stands for a host the untrusted inputs try to send
data to; the sandbox is refused it.

    agent.py [--template NAME] [--socket PATH] [--pdf FILE] [--csv FILE]
             [--api-url URL] [--refused-url URL]

Without --pdf/--csv it writes a small report PDF and a CSV of its own. The
tools in the sandbox are those of its root image: pdftotext and python3 where
the image has them (e.g. a Debian image), else busybox (sed, awk, nslookup,
nc). Exit status: 0 if every step did what it should, 1 if one did not, 2
for bad arguments.
"""

import argparse
import os
import sys
import time
import urllib.parse

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                "sdk", "python"))
import husk  # noqa: E402


def make_pdf() -> bytes:
    """A one-page PDF 1.4 with an uncompressed text stream and a correct xref."""
    lines = ["Quarterly report: widgets", "Revenue grew 12 percent over the quarter.",
             "Costs fell in every region but the north; north revenue held.",
             "Outlook: steady demand in every region, two new suppliers."]
    text = "BT /F1 12 Tf 72 720 Td 16 TL\n" + "".join(
        "(%s) Tj T*\n" % ln.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)")
        for ln in lines) + "ET\n"
    objs = [
        "<< /Type /Catalog /Pages 2 0 R >>",
        "<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        "<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] "
        "/Resources << /Font << /F1 4 0 R >> >> /Contents 5 0 R >>",
        "<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
        "<< /Length %d >>\nstream\n%sendstream" % (len(text), text),
    ]
    out = b"%PDF-1.4\n"
    offs = []
    for i, o in enumerate(objs, 1):
        offs.append(len(out))
        out += ("%d 0 obj\n%s\nendobj\n" % (i, o)).encode()
    xref = len(out)
    out += ("xref\n0 %d\n0000000000 65535 f \n" % (len(objs) + 1)).encode()
    out += "".join("%010d 00000 n \n" % o for o in offs).encode()
    out += ("trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n"
            % (len(objs) + 1, xref)).encode()
    return out


def make_csv() -> bytes:
    rows = [("region", "units", "price"), ("north", 120, 9.5), ("south", 340, 9.0),
            ("east", 210, 10.25), ("west", 95, 11.0)]
    return "".join(",".join(str(c) for c in r) + "\n" for r in rows).encode()


# In the sandbox: the PDF's text with pdftotext if the image has it, else the
# strings of its (uncompressed) text operators.
EXTRACT = r"""
if command -v pdftotext >/dev/null; then
	pdftotext -layout in/report.pdf - ; echo "(extracted with pdftotext)" >&2
else
	sed -n 's/^(\(.*\)) Tj.*/\1/p' in/report.pdf | sed 's/\\\([()\\]\)/\1/g'
	echo "(extracted from the text operators with sed)" >&2
fi
"""

# A summary of the report (awk, on stdin) and of the table.
SUMMARY = r"""
mkdir -p out
awk '{ w += NF; if (NR == 1) title = $0 }
     END { printf "title: %s\nlines: %d, words: %d\n", title, NR, w }' report.txt > out/summary.txt
awk -F, 'NR > 1 { n++; u += $2; r += $2 * $3; if ($2 > max) { max = $2; top = $1 } }
	 END { printf "rows: %d, units: %d, revenue: %.2f, top region: %s\n", n, u, r, top }' \
	in/data.csv >> out/summary.txt
cat out/summary.txt
"""

# GET a URL from inside the sandbox: python3's urllib where the image has it,
# else busybox: the name through husk's DNS proxy, then HTTP/1.0 over nc.
FETCH = r"""
url=$1 host=$2 port=$3 path=$4
if command -v python3 >/dev/null; then
	exec python3 -c 'import sys, urllib.request
try:
	r = urllib.request.urlopen(sys.argv[1], timeout=5)
	print("HTTP", r.status); sys.stdout.write(r.read(4096).decode(errors="replace"))
except Exception as e:
	print("refused:", e); sys.exit(1)' "$url"
fi
addr=$(busybox nslookup "$host" 2>/dev/null |
	awk '/^Name:/ { n = 1 } n && /^Address/ { a = $NF } END { print a }')
case $addr in
*.*.*.*) ;;
*) echo "refused: $host does not resolve"; exit 1 ;;
esac
printf 'GET %s HTTP/1.0\r\nHost: %s\r\n\r\n' "$path" "$host" |
	busybox nc -w 5 "$addr" "$port" > resp.txt
if [ -s resp.txt ]; then head -c 4096 resp.txt | sed 's/\r$//'
else echo "refused: no answer from $addr:$port"; exit 1; fi
"""


class Agent:
    def __init__(self) -> None:
        self.n = 0
        self.bad = 0

    def step(self, tool: str, what: str, fn, expect=None):
        """One tool call: run it, print what came back, check it."""
        self.n += 1
        t = time.monotonic()
        try:
            v = fn()
            err = None
        except husk.HuskError as e:
            v, err = None, e
        ms = (time.monotonic() - t) * 1000
        ok = err is None and (expect is None or expect(v))
        if not ok:
            self.bad += 1
        print("[%2d] %-11s %-56s %6.0f ms  %s" % (self.n, tool, what, ms, "ok" if ok else "NOT OK"),
              flush=True)
        shown = str(err) if err is not None else show(v)
        for line in shown.splitlines()[:12]:
            print("       | " + line)
        return v


def show(v) -> str:
    if isinstance(v, husk.CommandResult):
        s = v.stdout.decode(errors="replace")
        if v.stderr:
            s += v.stderr.decode(errors="replace")
        return s + "(exit %s)" % v.exit_code
    if isinstance(v, bytes):
        return v.decode(errors="replace")
    if isinstance(v, list):
        return "  ".join(v)
    return "" if v is None or isinstance(v, husk.Sandbox) else str(v)


def url_parts(url: str):
    u = urllib.parse.urlsplit(url)
    if u.scheme != "http" or not u.hostname:
        raise ValueError("%s: only http:// URLs with a host name" % url)
    return u.hostname, str(u.port or 80), (u.path or "/") + ("?" + u.query if u.query else "")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--template", help="start the sandbox from this template (a warm pool)")
    ap.add_argument("--socket", help="husk serve's socket (default $HUSK_SERVER)")
    ap.add_argument("--pdf", help="a PDF to read (default: a sample report)")
    ap.add_argument("--csv", help="a CSV to summarise (default: a sample table)")
    ap.add_argument("--api-url", default="http://example.com/",
                    help="the API the agent may call (its host is the only one allowed)")
    ap.add_argument("--refused-url", default="http://example.org/",
                    help="a URL the sandbox must not reach")
    a = ap.parse_args()
    try:
        api = url_parts(a.api_url)
        refused = url_parts(a.refused_url)
        pdf = open(a.pdf, "rb").read() if a.pdf else make_pdf()
        csv = open(a.csv, "rb").read() if a.csv else make_csv()
    except (OSError, ValueError) as e:
        print("agent: %s" % e, file=sys.stderr)
        return 2

    ag = Agent()
    t0 = time.monotonic()
    sb = husk.Sandbox(a.template, socket=a.socket, net="egress", allow_hosts=[api[0]],
                      timeout=600)
    ag.step("create", "a sandbox, egress to %s only" % api[0], sb.open)
    if sb.conn is None:
        print("agent: no sandbox, nothing more to do", file=sys.stderr)
        return 1
    with sb:
        print("       | sandbox %s (%s start)" % (sb.id, sb.start))
        ag.step("write_file", "in/report.pdf (%d bytes)" % len(pdf),
                lambda: sb.write("in/report.pdf", pdf))
        ag.step("write_file", "in/data.csv (%d bytes)" % len(csv),
                lambda: sb.write("in/data.csv", csv))
        text = ag.step("run_command", "extract the report's text", lambda: sb.run(EXTRACT),
                       lambda r: r.exit_code == 0 and r.stdout.strip() != b"")
        ag.step("write_file", "report.txt (the text, for the next tools)",
                lambda: sb.write("report.txt", text.stdout if text else b""))
        ag.step("run_command", "summarise the report and the table", lambda: sb.run(SUMMARY),
                lambda r: r.exit_code == 0 and b"rows:" in r.stdout)
        ag.step("run_code", "word frequencies (awk program)",
                lambda: sb.run_code("tr -cs 'A-Za-z' '\\n' < report.txt | tr A-Z a-z | "
                                    "awk 'length > 4' | sort | uniq -c | sort -rn | head -3",
                                    language="sh"),
                lambda r: r.exit_code == 0)
        ag.step("run_command", "GET %s (allowed)" % a.api_url,
                lambda: sb.run(["sh", "-c", FETCH, "fetch", a.api_url, *api], timeout=60),
                lambda r: r.exit_code == 0 and not r.stdout.startswith(b"refused"))
        ag.step("run_command", "GET %s (must be refused)" % a.refused_url,
                lambda: sb.run(["sh", "-c", FETCH, "fetch", a.refused_url, *refused],
                               timeout=60),
                lambda r: r.exit_code != 0 and r.stdout.startswith(b"refused"))
        ag.step("list_files", "the workspace", lambda: sb.files("."),
                lambda v: "in" in v and "out" in v)
        ag.step("read_file", "out/summary.txt", lambda: sb.read("out/summary.txt"),
                lambda v: v.startswith(b"title: "))
    print("agent: %d tool calls in %.0f ms, %s" % (ag.n, (time.monotonic() - t0) * 1000,
          "all as expected" if not ag.bad else "%d not as expected" % ag.bad))
    return 1 if ag.bad else 0


if __name__ == "__main__":
    sys.exit(main())
