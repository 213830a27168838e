/*
 * dns-stub: a tiny authoritative DNS server for the test host, which has no
 * resolver of its own. It plays the host's upstream resolver for husk's DNS
 * proxy: A queries for the names given on the command line get their
 * address (TTL 60), everything else NXDOMAIN. Every question it receives is
 * appended to a log file, so a test can prove that names husk refused never
 * reached the upstream.
 *
 *   dns-stub ADDR PORT LOGFILE NAME=IPV4...
 */
#include <arpa/inet.h>
#include <ctype.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define MAX_NAMES 16

static char names[MAX_NAMES][256];
static struct in_addr addrs[MAX_NAMES];
static int nnames;

/* The question's name in dotted lower case; returns the offset past it or -1. */
static int read_qname(const uint8_t *m, int len, char *out, size_t cap)
{
	int off = 12;
	size_t o = 0;

	while (off < len && m[off]) {
		int l = m[off++];

		if (l > 63 || off + l > len || o + l + 2 > cap)
			return -1;
		if (o)
			out[o++] = '.';
		while (l--)
			out[o++] = tolower(m[off++]);
	}
	if (off >= len)
		return -1;
	out[o] = '\0';
	return off + 1;
}

int main(int argc, char **argv)
{
	struct sockaddr_in sa = { .sin_family = AF_INET };
	FILE *log;
	int fd, i;

	if (argc < 4) {
		fprintf(stderr, "usage: dns-stub ADDR PORT LOGFILE NAME=IPV4...\n");
		return 2;
	}
	for (i = 4; i < argc && nnames < MAX_NAMES; i++) {
		char *eq = strchr(argv[i], '=');

		if (!eq || eq - argv[i] >= 255 || inet_pton(AF_INET, eq + 1, &addrs[nnames]) != 1) {
			fprintf(stderr, "dns-stub: bad NAME=IPV4 '%s'\n", argv[i]);
			return 2;
		}
		memcpy(names[nnames], argv[i], eq - argv[i]);
		nnames++;
	}
	log = fopen(argv[3], "a");
	fd = socket(AF_INET, SOCK_DGRAM, 0);
	sa.sin_port = htons(atoi(argv[2]));
	if (!log || fd < 0 || inet_pton(AF_INET, argv[1], &sa.sin_addr) != 1 ||
	    bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		perror("dns-stub");
		return 1;
	}
	setvbuf(log, NULL, _IOLBF, 0);
	for (;;) {
		uint8_t m[512];
		struct sockaddr_in from;
		socklen_t fl = sizeof(from);
		char q[256];
		int n = recvfrom(fd, m, sizeof(m), 0, (struct sockaddr *)&from, &fl);
		int end, hit = -1;
		uint16_t qtype;

		if (n < 12 || (m[2] & 0x80))
			continue;
		end = read_qname(m, n, q, sizeof(q));
		if (end < 0 || end + 4 > n)
			continue;
		qtype = m[end] << 8 | m[end + 1];
		fprintf(log, "%s %u\n", q, qtype);
		for (i = 0; i < nnames; i++)
			if (!strcmp(q, names[i]))
				hit = i;
		end += 4;			/* answer right after the question */
		m[2] = 0x84 | (m[2] & 0x01);	/* QR, AA, keep RD */
		m[3] = 0x80;			/* RA, rcode 0 */
		m[6] = m[7] = m[8] = m[9] = m[10] = m[11] = 0;
		if (hit < 0)
			m[3] |= 3;		/* NXDOMAIN */
		else if (qtype == 1 && end + 16 <= (int)sizeof(m)) {
			static const uint8_t rr[] = { 0xc0, 12, 0, 1, 0, 1, 0, 0, 0, 60, 0, 4 };

			m[7] = 1;
			memcpy(m + end, rr, sizeof(rr));
			memcpy(m + end + sizeof(rr), &addrs[hit], 4);
			end += sizeof(rr) + 4;
		}
		sendto(fd, m, end, 0, (struct sockaddr *)&from, fl);
	}
}
