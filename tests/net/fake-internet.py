#!/usr/bin/env python3
"""The "internet" of tests/net/egress.test, run inside its own network
namespace: an HTTP server on port 8080 of every address (the page names the
address it was fetched from), UDP sinks on port 9999 of the given addresses
that log what arrives, and a tiny authoritative DNS server.

    fake-internet.py WORKDIR DNS_ADDR SINK_ADDR...

Logs (one line each, flushed): WORKDIR/sink.log "DST SRC PAYLOAD",
WORKDIR/dns.log "NAME TYPE", WORKDIR/dns-hdr.log "NAME FLAGS QD AN NS AR
LENGTH ID" (flags in hex: what the query looked like on the wire).
WORKDIR/ready appears when all listen.
Zone: www.allowed.test A 203.0.113.20 (TTL 60), evil.test A 198.51.100.20;
other names NXDOMAIN.
"""
import http.server
import os
import socket
import socketserver
import struct
import sys
import threading

ZONE = {"www.allowed.test": "203.0.113.20", "evil.test": "198.51.100.20"}
lock = threading.Lock()


def log(path, line):
    with lock, open(path, "a") as f:
        f.write(line + "\n")


class Page(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        body = ("husk-it-ok from %s\n" % self.connection.getsockname()[0]).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, fmt, *args):
        pass


class Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True
    allow_reuse_address = True


def udp(addr, port):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind((addr, port))
    return s


def sink(s, path):
    addr = s.getsockname()[0]
    while True:
        data, src = s.recvfrom(2048)
        log(path, "%s %s %s" % (addr, src[0], data.decode(errors="replace")))


def read_name(msg, off):
    labels = []
    while True:
        n = msg[off]
        if n == 0:
            return ".".join(labels).lower(), off + 1
        if n & 0xC0:
            raise ValueError("no compression in queries")
        labels.append(msg[off + 1:off + 1 + n].decode())
        off += 1 + n


def dns(s, path):
    while True:
        q, src = s.recvfrom(512)
        try:
            qid, flags, qd, an, ns, ar = struct.unpack("!HHHHHH", q[:12])
            name, end = read_name(q, 12)
            qtype, qclass = struct.unpack("!HH", q[end:end + 4])
        except (ValueError, struct.error, IndexError):
            continue
        log(path, "%s %d" % (name, qtype))
        log(path.replace("dns.log", "dns-hdr.log"), "%s %04x %d %d %d %d %d %d" %
            (name, flags, qd, an, ns, ar, len(q), qid))
        question = q[12:end + 4]
        rd = flags & 0x0100
        if name in ZONE and qtype == 1:
            ans = struct.pack("!HHHLH", 0xC00C, 1, 1, 60, 4) + \
                socket.inet_aton(ZONE[name])
            hdr = struct.pack("!HHHHHH", qid, 0x8400 | rd, 1, 1, 0, 0)
        elif name in ZONE:
            ans = b""
            hdr = struct.pack("!HHHHHH", qid, 0x8400 | rd, 1, 0, 0, 0)
        else:
            ans = b""
            hdr = struct.pack("!HHHHHH", qid, 0x8403 | rd, 1, 0, 0, 0)
        s.sendto(hdr + question + ans, src)


def main():
    work, dns_addr, sinks = sys.argv[1], sys.argv[2], sys.argv[3:]
    http_srv = Server(("0.0.0.0", 8080), Page)
    # Every socket is bound here, before "ready": datagrams that arrive
    # before a thread reaches recvfrom wait in the socket's queue.
    threads = [threading.Thread(target=http_srv.serve_forever)]
    threads.append(threading.Thread(target=dns, args=(udp(dns_addr, 53),
                                                      work + "/dns.log")))
    for a in sinks:
        threads.append(threading.Thread(target=sink, args=(udp(a, 9999),
                                                           work + "/sink.log")))
    for t in threads:
        t.daemon = True
        t.start()
    open(work + "/ready", "w").close()
    threading.Event().wait()


if __name__ == "__main__":
    main()
