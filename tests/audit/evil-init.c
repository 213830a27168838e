/*
 * evil-init: a hostile guest PID 1 for the audit suite. It is installed as
 * /sbin/init of small root images (tools/mkrootfs --minimal --init ...) and
 * speaks husk's control protocol (vmm/job/proto.h, docs/protocol.md) badly on
 * purpose, to show that husk ends such a VM with status 125, a clear
 * reason, no files committed, nothing left behind and in bounded time.
 *
 * The mode comes from /etc/husk-evil-mode in the image when that file
 * exists (the misbehaviours that happen before HELLO):
 *   silent    never connects to the host
 *   mute      connects and then says nothing
 *   garbage   connects and sends bytes that are not a frame
 * Without the file evil-init says HELLO like guest-init, receives the job,
 * and takes the mode from the job's argv[0] (`husk run --rootfs evil.ext4
 * -- MODE`):
 *   ok                behave (STARTED, EXIT 0, an empty tar per --get,
 *                     DONE, power off): the control case
 *   bad-version       a frame with the next protocol version
 *   oversize          a header announcing 1 MiB + 1 bytes
 *   unknown-type      a frame of type 99
 *   truncated         half a header, then power off
 *   hello-twice       HELLO again
 *   output-after-exit EXIT, then STDOUT
 *   bad-exit          an EXIT record with a 3-byte exit code
 *   files-unasked     FILES_OUT without any --get
 *   done-early        DONE right after STARTED
 *   error-inject      P_ERROR whose text carries terminal escapes
 *   poweroff-early    power off in the middle of the job
 *   reset-early       i8042 reset in the middle of the job
 *   panic             PID 1 exits: the guest kernel panics
 *   stall-mid-frame   a header for 1000 bytes, 10 of them, then silence
 *   stall-reading     never read again (husk is sending --put data)
 *   tar-dotdot, tar-abs, tar-symlink, tar-hardlink, tar-device, tar-fifo,
 *   tar-huge          EXIT 0, then a --get archive with a "../" name, an
 *                     absolute name, a symlink and a file through it, a
 *                     hardlink, a device node, a FIFO, a size of 8 GiB
 *   tar-partial       EXIT 0, then one complete file of an archive that
 *                     never ends, then silence
 *   tar-suid          a well-formed archive with a setuid/setgid,
 *                     world-writable file (husk must strip the bits)
 *   tar-names         EXIT 0, then an archive that plants a name full of
 *                     terminal escapes, .bash_profile, .ssh/authorized_keys
 *                     and cron.d/x beside the requested "out" (nothing of
 *                     it may land, no escape may reach husk's stderr)
 *   tar-longnames     EXIT 0, then GNU long-name headers without end, as
 *                     fast as the channel takes them
 *   tar-zeros         EXIT 0, then one file of zeros (a gzip bomb)
 *   tar-endless       EXIT 0, then one file whose data (about 50:1
 *                     compressible) never ends, 64 KiB every 200 ms: no cap
 *                     is reached before husk's deadline
 *   tar-flood         the same as fast as the channel takes it (husk must
 *                     still hear SIGTERM)
 *   spoof             (with --net egress) bring eth0 up, then send from a
 *                     forged source address (raw IP), after changing the
 *                     interface address, and after changing the MAC; then
 *                     finish like `ok`. The host filter must drop and
 *                     count those frames.
 * After a misbehaviour evil-init waits forever: husk has to end the VM.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/vm_sockets.h>
#include <net/if.h>
#include <net/if_arp.h>
#include <net/route.h>
#include <netinet/in.h>
#include <netinet/ip.h>
#include <netinet/udp.h>
#include <poll.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/io.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/reboot.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <zlib.h>

#include "job/proto.h"
#include "machine/husk_ctl.h"

/*
 * The wire contract comes from vmm/job/proto.h, as guest-init's does: a
 * version bump there cannot leave the hostile guest speaking an older
 * protocol (every mode would then fail at HELLO and test nothing).
 */
#define VSOCK_PORT PROTO_VSOCK_PORT
#define VERSION PROTO_VERSION
#define MAX_PAYLOAD PROTO_MAX_PAYLOAD
#define PORT_EVENT (HUSK_CTL_PORT + HUSK_CTL_EVENT)
#define PORT_POWEROFF (HUSK_CTL_PORT + HUSK_CTL_POWEROFF)
#define MODE_FILE "/etc/husk-evil-mode"

static int ctl = -1;
static bool have_ports;

#define say(...) do { fprintf(stderr, "evil-init: " __VA_ARGS__); fputc('\n', stderr); } while (0)

static void wait_forever(void)
{
	say("waiting for husk to end the VM");
	for (;;)
		pause();
}

static void power_off(int status)
{
	sync();
	if (have_ports)
		outl(status, PORT_POWEROFF);
	reboot(RB_AUTOBOOT);
	wait_forever();
}

/* ---- raw frames ---- */

static void put_le(uint8_t *p, uint64_t v, int n)
{
	int i;

	for (i = 0; i < n; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static int write_all(const void *buf, size_t len)
{
	const uint8_t *p = buf;

	while (len) {
		ssize_t n = write(ctl, p, len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return -1;
		p += n;
		len -= n;
	}
	return 0;
}

/* A header with any values (lies included), then the payload. */
static int send_raw(uint32_t len, uint16_t type, uint16_t version, const void *p, size_t plen)
{
	uint8_t h[8];

	put_le(h, len, 4);
	put_le(h + 4, type, 2);
	put_le(h + 6, version, 2);
	if (write_all(h, sizeof(h)))
		return -1;
	return plen ? write_all(p, plen) : 0;
}

static int send_frame(uint16_t type, const void *p, size_t len)
{
	return send_raw((uint32_t)len, type, VERSION, p, len);
}

static int read_all(void *buf, size_t len)
{
	uint8_t *p = buf;

	while (len) {
		ssize_t n = read(ctl, p, len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return -1;
		p += n;
		len -= n;
	}
	return 0;
}

static uint64_t get_le(const uint8_t *p, int n)
{
	uint64_t v = 0;
	int i;

	for (i = 0; i < n; i++)
		v |= (uint64_t)p[i] << (8 * i);
	return v;
}

/* One frame from the host into a malloc'd buffer; type in *type. */
static uint8_t *recv_frame(uint16_t *type, uint32_t *len)
{
	uint8_t h[8], *p;

	if (read_all(h, sizeof(h)))
		return NULL;
	*len = (uint32_t)get_le(h, 4);
	*type = (uint16_t)get_le(h + 4, 2);
	if (*len > MAX_PAYLOAD)
		return NULL;
	p = malloc(*len + 1);
	if (!p || read_all(p, *len))
		return NULL;
	p[*len] = 0;
	return p;
}

/* ---- TLV ---- */

struct etlv {
	uint8_t buf[512];
	size_t len;
};

static void etlv_add(struct etlv *t, uint16_t tag, const void *v, uint32_t len)
{
	if (t->len + 6 + len > sizeof(t->buf))
		return;
	put_le(t->buf + t->len, tag, 2);
	put_le(t->buf + t->len + 2, len, 4);
	memcpy(t->buf + t->len + 6, v, len);
	t->len += 6 + len;
}

static void etlv_u32(struct etlv *t, uint16_t tag, uint32_t v)
{
	uint8_t b[4];

	put_le(b, v, 4);
	etlv_add(t, tag, b, 4);
}

static void etlv_u8(struct etlv *t, uint16_t tag, uint8_t v)
{
	etlv_add(t, tag, &v, 1);
}

/* What evil-init needs from the job spec. */
struct job {
	char mode[64];
	unsigned files_in, gets;
	uint32_t addr, gw;		/* network order; 0 = no network */
	unsigned prefix;
};

static void parse_job(const uint8_t *p, uint32_t len, struct job *j)
{
	size_t off = 0;
	bool first = true;

	memset(j, 0, sizeof(*j));
	while (off + 6 <= len) {
		uint16_t tag = (uint16_t)get_le(p + off, 2);
		uint32_t l = (uint32_t)get_le(p + off + 2, 4);
		const uint8_t *v = p + off + 6;

		if (l > len - off - 6)
			break;
		if (tag == T_JOB_ARG && first) {
			snprintf(j->mode, sizeof(j->mode), "%.*s", (int)l, (const char *)v);
			first = false;
		} else if (tag == T_JOB_FILES_IN && l == 1) {
			j->files_in = v[0];
		} else if (tag == T_JOB_GET) {
			j->gets++;
		} else if (tag == T_JOB_NET_ADDR && l == 4) {
			memcpy(&j->addr, v, 4);
		} else if (tag == T_JOB_NET_GW && l == 4) {
			memcpy(&j->gw, v, 4);
		} else if (tag == T_JOB_NET_PREFIX && l == 1) {
			j->prefix = v[0];
		}
		off += 6 + l;
	}
}

/* ---- tar and gzip ---- */

struct buf {
	uint8_t *p;
	size_t len, cap;
};

static void buf_add(struct buf *b, const void *p, size_t len)
{
	if (b->len + len > b->cap) {
		b->cap = (b->len + len) * 2 + 4096;
		b->p = realloc(b->p, b->cap);
		if (!b->p) {
			say("out of memory");
			wait_forever();
		}
	}
	memcpy(b->p + b->len, p, len);
	b->len += len;
}

/* One ustar header block (and the data, padded) for anything we like. */
static void tar_entry(struct buf *b, const char *name, char type, unsigned mode,
		      const char *link, const void *data, uint64_t size, size_t data_len)
{
	uint8_t h[512], zero[512] = { 0 };
	unsigned sum = 0, i;

	memset(h, 0, sizeof(h));
	snprintf((char *)h, 100, "%s", name);
	snprintf((char *)h + 100, 8, "%07o", mode);
	snprintf((char *)h + 108, 8, "%07o", 0);
	snprintf((char *)h + 116, 8, "%07o", 0);
	snprintf((char *)h + 124, 12, "%011llo", (unsigned long long)size);
	snprintf((char *)h + 136, 12, "%011o", 1700000000u);
	memset(h + 148, ' ', 8);
	h[156] = (uint8_t)type;
	if (link)
		snprintf((char *)h + 157, 100, "%s", link);
	memcpy(h + 257, "ustar", 6);
	memcpy(h + 263, "00", 2);
	snprintf((char *)h + 265, 32, "root");
	snprintf((char *)h + 297, 32, "root");
	if (type == '3' || type == '4') {
		snprintf((char *)h + 329, 8, "%07o", 1);
		snprintf((char *)h + 337, 8, "%07o", 1);
	}
	for (i = 0; i < sizeof(h); i++)
		sum += h[i];
	snprintf((char *)h + 148, 8, "%06o", sum);
	h[155] = ' ';
	buf_add(b, h, sizeof(h));
	if (data_len) {
		buf_add(b, data, data_len);
		if (data_len % 512)
			buf_add(b, zero, 512 - data_len % 512);
	}
}

static void tar_end(struct buf *b)
{
	uint8_t zero[1024] = { 0 };

	buf_add(b, zero, sizeof(zero));
}

/* gzip b; finish = false leaves the stream open (sync flush, no trailer). */
static struct buf gzip_buf(const struct buf *in, bool finish)
{
	struct buf out = { 0 };
	z_stream z;
	uint8_t chunk[16384];
	int r;

	memset(&z, 0, sizeof(z));
	if (deflateInit2(&z, 6, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK) {
		say("deflateInit2 failed");
		wait_forever();
	}
	z.next_in = in->p;
	z.avail_in = (uInt)in->len;
	do {
		z.next_out = chunk;
		z.avail_out = sizeof(chunk);
		r = deflate(&z, finish ? Z_FINISH : Z_SYNC_FLUSH);
		buf_add(&out, chunk, sizeof(chunk) - z.avail_out);
	} while (z.avail_out == 0 || (finish && r != Z_STREAM_END));
	deflateEnd(&z);
	return out;
}

/* Send a gzip'd archive as FILES_OUT chunks (64 KiB at most each). */
static void send_archive(const struct buf *gz)
{
	size_t off = 0;

	while (off < gz->len) {
		size_t n = gz->len - off > 65536 ? 65536 : gz->len - off;

		if (send_frame(P_FILES_OUT, gz->p + off, n))
			return;
		off += n;
	}
}

/* ---- the honest parts ---- */

static void send_hello(void)
{
	struct etlv t = { .len = 0 };

	etlv_add(&t, T_INIT_VERSION, "evil-init 1", 11);
	send_frame(P_HELLO, t.buf, t.len);
}

static void send_exit(uint32_t code)
{
	struct etlv t = { .len = 0 };

	etlv_u32(&t, T_EXIT_CODE, code);
	etlv_u8(&t, T_EXIT_TIMED_OUT, 0);
	send_frame(P_EXIT, t.buf, t.len);
}

/* Read (and drop) the --put streams: each ends with an empty FILES_IN. */
static void drain_files_in(const struct job *j)
{
	unsigned ended = 0;

	while (ended < j->files_in) {
		uint16_t type;
		uint32_t len;
		uint8_t *p = recv_frame(&type, &len);

		if (!p) {
			say("control channel lost while reading files in");
			wait_forever();
		}
		if (type == P_FILES_IN && len == 0)
			ended++;
		free(p);
	}
}

static void empty_archives(const struct job *j)
{
	struct buf tar = { 0 }, gz;
	unsigned i;

	tar_end(&tar);
	gz = gzip_buf(&tar, true);
	for (i = 0; i < j->gets; i++) {
		send_archive(&gz);
		send_frame(P_FILES_OUT, NULL, 0);
	}
	free(gz.p);
	free(tar.p);
}

/* Like guest-init: half-close, wait (bounded) for husk to close, power off. */
static void finish_ok(const struct job *j)
{
	struct pollfd p = { .fd = ctl, .events = POLLIN };
	char b[64];
	int i;

	empty_archives(j);
	send_frame(P_DONE, NULL, 0);
	shutdown(ctl, SHUT_WR);
	for (i = 0; i < 100; i++)
		if (poll(&p, 1, 50) > 0 && read(ctl, b, sizeof(b)) <= 0)
			break;
	power_off(0);
}

/* ---- spoof: the network attacks a root guest can make ---- */

static void set_sin(struct sockaddr *sa, uint32_t addr)
{
	struct sockaddr_in *s = (struct sockaddr_in *)sa;

	memset(s, 0, sizeof(*s));
	s->sin_family = AF_INET;
	s->sin_addr.s_addr = addr;
}

static int if_ioctl(int s, unsigned long req, struct ifreq *ifr, const char *what)
{
	snprintf(ifr->ifr_name, sizeof(ifr->ifr_name), "eth0");
	if (ioctl(s, req, ifr) < 0) {
		say("%s: %s", what, strerror(errno));
		return -1;
	}
	return 0;
}

static void set_addr(int s, uint32_t addr, unsigned prefix)
{
	struct ifreq ifr;

	memset(&ifr, 0, sizeof(ifr));
	set_sin(&ifr.ifr_addr, addr);
	if_ioctl(s, SIOCSIFADDR, &ifr, "SIOCSIFADDR");
	memset(&ifr, 0, sizeof(ifr));
	set_sin(&ifr.ifr_netmask, prefix ? htonl(~0u << (32 - prefix)) : 0);
	if_ioctl(s, SIOCSIFNETMASK, &ifr, "SIOCSIFNETMASK");
}

static void udp_to(uint32_t dst, uint16_t port, const char *msg, int count)
{
	struct sockaddr_in a;
	int s = socket(AF_INET, SOCK_DGRAM, 0), i;

	set_sin((struct sockaddr *)&a, dst);
	a.sin_port = htons(port);
	for (i = 0; i < count; i++)
		if (sendto(s, msg, strlen(msg), 0, (struct sockaddr *)&a, sizeof(a)) < 0)
			say("sendto: %s", strerror(errno));
	close(s);
}

static uint16_t ip_csum(const void *p, size_t len)
{
	const uint8_t *b = p;
	uint32_t sum = 0;
	size_t i;

	for (i = 0; i + 1 < len; i += 2)
		sum += (uint32_t)b[i] << 8 | b[i + 1];
	while (sum >> 16)
		sum = (sum & 0xffff) + (sum >> 16);
	return htons((uint16_t)~sum);
}

/* A raw IPv4/UDP datagram with a source address of our choosing. */
static void raw_udp(uint32_t src, uint32_t dst, uint16_t port, const char *msg, int count)
{
	uint8_t pkt[128];
	struct iphdr *ip = (struct iphdr *)pkt;
	struct udphdr *u = (struct udphdr *)(pkt + sizeof(*ip));
	size_t ml = strlen(msg), tot = sizeof(*ip) + sizeof(*u) + ml;
	struct sockaddr_in a;
	int s = socket(AF_INET, SOCK_RAW, IPPROTO_RAW), i;

	if (s < 0) {
		say("raw socket: %s", strerror(errno));
		return;
	}
	memset(pkt, 0, sizeof(pkt));
	ip->version = 4;
	ip->ihl = 5;
	ip->ttl = 64;
	ip->protocol = IPPROTO_UDP;
	ip->tot_len = htons((uint16_t)tot);
	ip->saddr = src;
	ip->daddr = dst;
	ip->check = ip_csum(ip, sizeof(*ip));
	u->source = htons(40000);
	u->dest = htons(port);
	u->len = htons((uint16_t)(sizeof(*u) + ml));
	memcpy(pkt + sizeof(*ip) + sizeof(*u), msg, ml);
	set_sin((struct sockaddr *)&a, dst);
	for (i = 0; i < count; i++)
		if (sendto(s, pkt, tot, 0, (struct sockaddr *)&a, sizeof(a)) < 0)
			say("raw sendto: %s", strerror(errno));
	close(s);
}

static void spoof(const struct job *j)
{
	struct ifreq ifr;
	uint32_t forged = htonl(0xc6336463);	/* 198.51.100.99 */
	uint32_t neighbour = htonl(ntohl(j->addr) ^ 0x100);	/* another slot's */
	int s;

	if (!j->addr) {
		say("spoof: the job has no network (use --net egress)");
		return;
	}
	s = socket(AF_INET, SOCK_DGRAM, 0);
	memset(&ifr, 0, sizeof(ifr));
	if (!if_ioctl(s, SIOCGIFFLAGS, &ifr, "SIOCGIFFLAGS")) {
		ifr.ifr_flags |= IFF_UP;
		if_ioctl(s, SIOCSIFFLAGS, &ifr, "SIOCSIFFLAGS");
	}
	set_addr(s, j->addr, j->prefix);
	/* Honest first, so the gateway's MAC is resolved (ARP is allowed). */
	udp_to(j->gw, 9999, "evil-legit", 2);
	sleep(1);
	udp_to(j->gw, 9999, "evil-legit", 1);
	/* 1. a forged source address in a raw IP packet */
	raw_udp(forged, j->gw, 9999, "evil-spoof-raw", 5);
	/* 2. the interface address changed to another VM's */
	set_addr(s, neighbour, j->prefix > 16 ? 16 : j->prefix);
	udp_to(j->gw, 9999, "evil-spoof-addr", 5);
	set_addr(s, j->addr, j->prefix);
	/* 3. the MAC address changed */
	memset(&ifr, 0, sizeof(ifr));
	ifr.ifr_hwaddr.sa_family = ARPHRD_ETHER;
	memcpy(ifr.ifr_hwaddr.sa_data, "\x02\xba\xd0\x00\x00\x01", 6);
	if (if_ioctl(s, SIOCSIFHWADDR, &ifr, "SIOCSIFHWADDR")) {
		/* Some drivers want the link down for it. */
		memset(&ifr, 0, sizeof(ifr));
		if_ioctl(s, SIOCGIFFLAGS, &ifr, "SIOCGIFFLAGS");
		ifr.ifr_flags &= ~IFF_UP;
		if_ioctl(s, SIOCSIFFLAGS, &ifr, "SIOCSIFFLAGS down");
		memset(&ifr, 0, sizeof(ifr));
		ifr.ifr_hwaddr.sa_family = ARPHRD_ETHER;
		memcpy(ifr.ifr_hwaddr.sa_data, "\x02\xba\xd0\x00\x00\x01", 6);
		if_ioctl(s, SIOCSIFHWADDR, &ifr, "SIOCSIFHWADDR (down)");
		memset(&ifr, 0, sizeof(ifr));
		if_ioctl(s, SIOCGIFFLAGS, &ifr, "SIOCGIFFLAGS");
		ifr.ifr_flags |= IFF_UP;
		if_ioctl(s, SIOCSIFFLAGS, &ifr, "SIOCSIFFLAGS up");
		set_addr(s, j->addr, j->prefix);
	}
	udp_to(j->gw, 9999, "evil-spoof-mac", 5);
	sleep(1);
	close(s);
	say("spoof: sent forged traffic");
}

/* ---- misbehaviours after HELLO ---- */

/*
 * An archive that never ends: the gzip header and head, then the same
 * deflate segment of unit again and again. Z_FULL_FLUSH on both sides of
 * the segment resets the compressor, so each copy decodes on its own.
 */
static void endless(const struct buf *head, const uint8_t *unit, size_t unit_len,
		    unsigned pause_ms)
{
	static uint8_t head_out[8192], seg[65536 + 4096];
	size_t head_len, seg_len;
	z_stream z;

	memset(&z, 0, sizeof(z));
	if (deflateInit2(&z, 6, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK)
		wait_forever();
	z.next_in = head->p;
	z.avail_in = (uInt)head->len;
	z.next_out = head_out;
	z.avail_out = sizeof(head_out);
	deflate(&z, Z_FULL_FLUSH);
	head_len = sizeof(head_out) - z.avail_out;
	z.next_in = (uint8_t *)unit;
	z.avail_in = (uInt)unit_len;
	z.next_out = seg;
	z.avail_out = sizeof(seg);
	deflate(&z, Z_FULL_FLUSH);
	seg_len = sizeof(seg) - z.avail_out;
	say("endless archive: a %zu-byte segment for %zu bytes, sent without end", seg_len,
	    unit_len);
	if (send_frame(P_FILES_OUT, head_out, head_len))
		wait_forever();
	for (;;) {
		if (send_frame(P_FILES_OUT, seg, seg_len))
			wait_forever();
		if (pause_ms)
			usleep(pause_ms * 1000);
	}
}

/* One file of 1 GiB - 512 announced; its data zeros or a 300-byte pattern. */
static void endless_file(bool zeros, unsigned pause_ms)
{
	static uint8_t plain[65536];
	struct buf head = { 0 };
	uint32_t x = 2463534242u;
	size_t i;

	for (i = 0; !zeros && i < sizeof(plain); i++) {
		if (i < 300) {
			x ^= x << 13;
			x ^= x >> 17;
			x ^= x << 5;
			plain[i] = (uint8_t)x;
		} else {
			plain[i] = plain[i % 300];
		}
	}
	tar_entry(&head, "out", '0', 0644, NULL, NULL, (1ull << 30) - 512, 0);
	endless(&head, plain, sizeof(plain), pause_ms);
}

/* GNU long-name headers, one after another, never a real entry. */
static void endless_longnames(void)
{
	static char name[1000];
	struct buf unit = { 0 }, head = { 0 };
	int i;

	memset(name, 'L', sizeof(name) - 1);
	for (i = 0; i < 32; i++)
		tar_entry(&unit, "././@LongLink", 'L', 0644, NULL, name, sizeof(name),
			  sizeof(name));
	tar_entry(&head, "././@LongLink", 'L', 0644, NULL, name, sizeof(name), sizeof(name));
	endless(&head, unit.p, unit.len, 0);
}

static void evil_tar(const char *mode, const struct job *j)
{
	static const char data[] = "evil-init was here\n";
	struct buf tar = { 0 }, gz;
	bool finish = true;

	send_frame(P_STARTED, NULL, 0);
	send_exit(0);
	if (!j->gets)
		say("%s: no --get was asked for; sending the archive anyway", mode);
	if (!strcmp(mode, "tar-longnames"))
		endless_longnames();
	if (!strcmp(mode, "tar-zeros"))
		endless_file(true, 0);
	if (!strcmp(mode, "tar-endless"))
		endless_file(false, 200);
	if (!strcmp(mode, "tar-flood"))
		endless_file(false, 0);
	/* A harmless first entry: it must not be committed either. */
	tar_entry(&tar, "out/", '5', 0755, NULL, NULL, 0, 0);
	tar_entry(&tar, "out/innocent.txt", '0', 0644, NULL, data, sizeof(data) - 1,
		  sizeof(data) - 1);
	if (!strcmp(mode, "tar-dotdot")) {
		tar_entry(&tar, "out/../../audit-evil-dotdot", '0', 0644, NULL, data,
			  sizeof(data) - 1, sizeof(data) - 1);
	} else if (!strcmp(mode, "tar-abs")) {
		tar_entry(&tar, "/tmp/audit-evil-abs", '0', 0644, NULL, data, sizeof(data) - 1,
			  sizeof(data) - 1);
	} else if (!strcmp(mode, "tar-symlink")) {
		tar_entry(&tar, "out/link", '2', 0777, "/tmp", NULL, 0, 0);
		tar_entry(&tar, "out/link/audit-evil-link", '0', 0644, NULL, data,
			  sizeof(data) - 1, sizeof(data) - 1);
	} else if (!strcmp(mode, "tar-hardlink")) {
		tar_entry(&tar, "out/hard", '1', 0644, "/etc/passwd", NULL, 0, 0);
	} else if (!strcmp(mode, "tar-device")) {
		tar_entry(&tar, "out/mem", '3', 0666, NULL, NULL, 0, 0);
	} else if (!strcmp(mode, "tar-fifo")) {
		tar_entry(&tar, "out/fifo", '6', 0666, NULL, NULL, 0, 0);
	} else if (!strcmp(mode, "tar-huge")) {
		/* 8 GiB - 1 announced, 512 bytes present. */
		tar_entry(&tar, "out/huge", '0', 0644, NULL, data, 077777777777ull,
			  sizeof(data) - 1);
	} else if (!strcmp(mode, "tar-partial")) {
		finish = false;
	} else if (!strcmp(mode, "tar-suid")) {
		tar_entry(&tar, "out/suid", '0', 06777, NULL, data, sizeof(data) - 1,
			  sizeof(data) - 1);
	} else if (!strcmp(mode, "tar-names")) {
		/* First, so husk's error names it: terminal escapes in a name. */
		tar_entry(&tar, "\033]0;pwned\007\033[2J", '0', 0644, NULL, data,
			  sizeof(data) - 1, sizeof(data) - 1);
		tar_entry(&tar, ".bash_profile", '0', 0755, NULL, data, sizeof(data) - 1,
			  sizeof(data) - 1);
		tar_entry(&tar, ".ssh/", '5', 0700, NULL, NULL, 0, 0);
		tar_entry(&tar, ".ssh/authorized_keys", '0', 0600, NULL, data, sizeof(data) - 1,
			  sizeof(data) - 1);
		tar_entry(&tar, "cron.d/x", '0', 0644, NULL, data, sizeof(data) - 1,
			  sizeof(data) - 1);
	}
	if (finish)
		tar_end(&tar);
	gz = gzip_buf(&tar, finish);
	send_archive(&gz);
	if (!finish)
		wait_forever();
	send_frame(P_FILES_OUT, NULL, 0);
	if (!strcmp(mode, "tar-suid")) {
		struct job rest = *j;

		rest.gets = j->gets ? j->gets - 1 : 0;
		finish_ok(&rest);
	}
	send_frame(P_DONE, NULL, 0);
	wait_forever();
}

static void misbehave(const struct job *j)
{
	const char *m = j->mode;
	static const char out[] = "evil output\n";

	say("mode %s", m);
	drain_files_in(j);
	if (!strcmp(m, "ok") || !strcmp(m, "spoof")) {
		if (!strcmp(m, "spoof"))
			spoof(j);
		send_frame(P_STARTED, NULL, 0);
		send_frame(P_STDOUT, "evil-init ok\n", 13);
		send_exit(0);
		finish_ok(j);
	} else if (!strcmp(m, "bad-version")) {
		send_raw(0, P_STARTED, VERSION + 1, NULL, 0);
	} else if (!strcmp(m, "oversize")) {
		send_raw(MAX_PAYLOAD + 1, P_STDOUT, VERSION, out, sizeof(out) - 1);
	} else if (!strcmp(m, "unknown-type")) {
		send_frame(99, out, sizeof(out) - 1);
	} else if (!strcmp(m, "truncated")) {
		uint8_t h[4] = { 12, 0, 0, 0 };

		write_all(h, sizeof(h));
		sleep(1);
		power_off(0);
	} else if (!strcmp(m, "hello-twice")) {
		send_hello();
	} else if (!strcmp(m, "output-after-exit")) {
		send_frame(P_STARTED, NULL, 0);
		send_exit(0);
		send_frame(P_STDOUT, out, sizeof(out) - 1);
	} else if (!strcmp(m, "bad-exit")) {
		struct etlv t = { .len = 0 };

		send_frame(P_STARTED, NULL, 0);
		etlv_add(&t, T_EXIT_CODE, "\0\0\0", 3);
		send_frame(P_EXIT, t.buf, t.len);
	} else if (!strcmp(m, "files-unasked")) {
		struct buf tar = { 0 }, gz;

		send_frame(P_STARTED, NULL, 0);
		send_exit(0);
		tar_entry(&tar, "unasked.txt", '0', 0644, NULL, out, sizeof(out) - 1,
			  sizeof(out) - 1);
		tar_end(&tar);
		gz = gzip_buf(&tar, true);
		send_archive(&gz);
		send_frame(P_FILES_OUT, NULL, 0);
		send_frame(P_DONE, NULL, 0);
	} else if (!strcmp(m, "done-early")) {
		send_frame(P_STARTED, NULL, 0);
		send_frame(P_DONE, NULL, 0);
	} else if (!strcmp(m, "error-inject")) {
		static const char msg[] = "\033[2J\033]0;pwned\007\r\nhusk: job finished OK "
					  "(forged)\033[0m";

		send_frame(P_ERROR, msg, sizeof(msg) - 1);
	} else if (!strcmp(m, "poweroff-early")) {
		send_frame(P_STARTED, NULL, 0);
		send_frame(P_STDOUT, out, sizeof(out) - 1);
		sleep(1);
		power_off(0);
	} else if (!strcmp(m, "reset-early")) {
		send_frame(P_STARTED, NULL, 0);
		sleep(1);
		sync();
		reboot(RB_AUTOBOOT);
	} else if (!strcmp(m, "panic")) {
		send_frame(P_STARTED, NULL, 0);
		sleep(1);
		say("exiting as PID 1");
		exit(3);
	} else if (!strcmp(m, "stall-mid-frame")) {
		send_raw(1000, P_STDOUT, VERSION, "0123456789", 10);
	} else if (!strcmp(m, "stall-reading")) {
		/* Not a byte more is read: husk's --put data has nowhere to go. */
		say("no longer reading the control channel");
	} else if (!strncmp(m, "tar-", 4)) {
		evil_tar(m, j);
	} else {
		say("unknown mode '%s'", m);
		send_frame(P_STARTED, NULL, 0);
		send_exit(99);
		finish_ok(j);
	}
	wait_forever();
}

/* ---- PID 1 ---- */

static int connect_host(void)
{
	struct sockaddr_vm sa = {
		.svm_family = AF_VSOCK,
		.svm_cid = VMADDR_CID_HOST,
		.svm_port = VSOCK_PORT,
	};
	int i, fd;

	for (i = 0; i < 100; i++) {
		fd = socket(AF_VSOCK, SOCK_STREAM | SOCK_CLOEXEC, 0);
		if (fd >= 0 && !connect(fd, (struct sockaddr *)&sa, sizeof(sa)))
			return fd;
		if (fd >= 0)
			close(fd);
		usleep(20000);
	}
	say("cannot connect to the host: %s", strerror(errno));
	wait_forever();
	return -1;
}

static void read_mode_file(char *mode, size_t len)
{
	FILE *f = fopen(MODE_FILE, "r");

	mode[0] = 0;
	if (!f)
		return;
	if (fgets(mode, (int)len, f))
		mode[strcspn(mode, " \t\r\n")] = 0;
	fclose(f);
}

int main(void)
{
	char pre[64];
	uint16_t type;
	uint32_t len;
	uint8_t *p;
	struct job j;
	int fd;

	mount("devtmpfs", "/dev", "devtmpfs", 0, NULL);
	fd = open("/dev/console", O_RDWR);
	if (fd >= 0) {
		dup2(fd, 0);
		dup2(fd, 1);
		dup2(fd, 2);
		if (fd > 2)
			close(fd);
	}
	mount("proc", "/proc", "proc", 0, NULL);
	have_ports = ioperm(PORT_EVENT, 8, 1) == 0;
	if (have_ports)
		outl(HUSK_EV_INIT, PORT_EVENT);
	read_mode_file(pre, sizeof(pre));
	say("up%s%s", pre[0] ? ", mode " : "", pre);
	if (!strcmp(pre, "silent"))
		wait_forever();
	ctl = connect_host();
	if (!strcmp(pre, "mute"))
		wait_forever();
	if (!strcmp(pre, "garbage")) {
		static const char junk[] = "GET / HTTP/1.0\r\n\r\n\xff\xfe\xfd not a frame";

		write_all(junk, sizeof(junk) - 1);
		wait_forever();
	}
	send_hello();
	p = recv_frame(&type, &len);
	if (!p || type != P_JOB) {
		say("no job (frame type %u)", p ? type : 0);
		wait_forever();
	}
	parse_job(p, len, &j);
	free(p);
	misbehave(&j);
	return 0;
}
