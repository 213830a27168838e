/*
 * session: the host's half of the guest protocol (docs/protocol.md), with
 * no VM, socket or process in it. Frames from guest-init go in through
 * session_frame(), frames for it wait in a queue the owner writes out when
 * the socket takes them, time comes in as `now` arguments (session_tick()
 * applies the stall rules and the deadline), and what the guest did goes
 * out through an ops table: the one-shot job's output and --get streams,
 * and a session's events. `husk run`'s VM process drives one; the unit
 * tests drive one against the real guest-init over a socketpair, and
 * fuzz_session feeds it hostile frames.
 *
 * The guest is hostile: every frame is checked against the state it may
 * come in and against the requests the host made; anything else stops the
 * session with a reason (ops->stop), never a crash or an unbounded wait.
 *
 * One-shot: HELLO, JOB (+ FILES_IN streams, stdin), STARTED, output, EXIT,
 * FILES_OUT per get, DONE. Session (job_opts.session): HELLO, JOB, STARTED,
 * then the owner's requests (session_exec() ...) and their answers, END,
 * DONE.
 */
#ifndef HUSK_SESSION_H
#define HUSK_SESSION_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "job/job.h"
#include "job/proto.h"

/* The guest's network, network byte order (husk run --net egress). */
struct session_net {
	uint32_t addr, gw;
	uint8_t prefix;
	uint8_t mac[6];
};

/* Deadlines and stall bounds, microseconds on the owner's clock. */
struct session_timing {
	uint64_t connect_by;		/* guest-init must have connected by then */
	uint64_t deadline;		/* everything must be over by then */
	uint64_t stall_us;		/* silence that is a stall where the guest must talk */
	uint64_t write_stall_us;	/* before the job starts it must take frames this fast */
	uint64_t done_grace_us;		/* after DONE, the VM must be gone within this */
	unsigned allowance_s;		/* connect_by's distance from the start, for messages */
};

/* An exit record (P_EXIT, P_XEXIT), as the guest claims it. */
struct session_exit {
	bool exited;			/* code is valid, else signal */
	uint32_t code;			/* 0..255 */
	uint32_t signal;		/* 1..64 */
	bool timed_out;
	uint64_t user_us, sys_us, maxrss_kib;
};

/* How the conversation went. Times are the owner's clock; 0: not reached. */
struct session_result {
	bool job_started, job_exited;
	struct session_exit exit;
	uint64_t stdout_bytes, stderr_bytes;	/* everything the job wrote */
	uint64_t stdout_dropped, stderr_dropped;	/* beyond max_output */
	bool stdout_open_line;		/* its last stdout byte was not '\n' */
	uint64_t t_connected, t_started, t_exited, t_done;
	int64_t guest_steps[IS_NR];	/* guest-init's marks, guest us; -1 none */
	char error[512];		/* why the session failed, "" if it did not */
};

enum session_stop {
	SESSION_FAILED,			/* the guest broke the protocol or a rule */
	SESSION_TIMEOUT,		/* the deadline passed while the job ran */
	SESSION_NO_POWEROFF,		/* DONE, but the VM did not go away */
};

enum session_xkind { SX_STARTED, SX_OUT, SX_EXIT, SX_FILES, SX_DONE, SX_ERROR };

/* What a session's guest reported about one of the owner's requests. */
struct session_xevent {
	enum session_xkind kind;
	uint32_t id;
	int stream;			/* SX_OUT: 1 stdout, 2 stderr */
	const uint8_t *data;		/* SX_OUT, SX_FILES (len 0: the end), SX_ERROR text */
	size_t len;
	struct session_exit exit;	/* SX_EXIT */
};

enum session_hello {
	SH_GO,				/* send the job now */
	SH_END,				/* hold the job back for good (a template is saved now) */
	SH_WAIT,			/* send it at session_release() (husk oci: create, then start) */
};

struct session_ops {
	void *arg;
	/* The one-shot job's output, within max_output (markers included). */
	void (*output)(void *arg, int stream, const uint8_t *p, size_t n);
	/*
	 * A chunk of --get stream idx; the payload moves to the callee (*pp
	 * is NULL after). n == 0 ends the stream. The owner stops reading
	 * frames while it cannot take more.
	 */
	void (*get_data)(void *arg, unsigned idx, uint8_t **pp, size_t n);
	/*
	 * The next bytes of --put stream idx into buf: returns how many (0:
	 * that stream is complete) or -errno.
	 */
	ssize_t (*put_read)(void *arg, unsigned idx, void *buf, size_t cap);
	/* The job (or the session) started: set-up is over. */
	void (*started)(void *arg);
	/* guest-init said HELLO: go on, end here, or wait for session_release(). */
	enum session_hello (*hello)(void *arg);
	/* A session's answer to a request. */
	void (*xevent)(void *arg, const struct session_xevent *ev);
	/* The session must end the VM: why, and the message (result.error). */
	void (*stop)(void *arg, enum session_stop why, const char *msg);
};

enum session_state { SS_CONNECT, SS_HELLO, SS_RUNNING, SS_FILES_OUT, SS_DONE, SS_OVER };

#define SESSION_MAX_IDS (PROTO_MAX_EXECS + 2 * JOB_MAX_GETS + 1)

struct session_id {
	uint32_t id;
	uint8_t kind;			/* 0 free, 'x' exec, 'p' put, 'd' refused put draining, 'g' get */
	bool started;			/* an exec: P_XSTARTED seen */
};

struct session {
	const struct job_opts *job;
	struct session_net net;
	bool have_net;
	uint64_t mem_limit;
	struct session_ops ops;
	struct session_timing tm;
	enum session_state state;
	struct proto_outq q;		/* frames for guest-init */
	unsigned get_idx;		/* one-shot: --get stream being received */
	unsigned put_idx;		/* one-shot: --put stream being queued */
	bool put_open, puts_queued;
	bool stdin_open;		/* one-shot: stdin frames still wanted */
	uint32_t winsz;			/* one-shot: a window to send at STARTED, 0 none */
	bool held;			/* HELLO held back (template) */
	bool waiting;			/* HELLO answered by session_release() only */
	uint64_t last_rx, last_tx;
	bool mid_frame;			/* the owner's reader holds part of a frame */
	bool stopped;			/* ops->stop was called */
	struct session_id ids[SESSION_MAX_IDS];
	unsigned nr_execs;
	bool put_live;			/* a session put is open */
	struct session_result r;
};

void session_init(struct session *s, const struct job_opts *job, const struct session_net *net,
		  uint64_t mem_limit, const struct session_timing *tm,
		  const struct session_ops *ops);
void session_free(struct session *s);

/* guest-init's connection was accepted. */
void session_connected(struct session *s, uint64_t now);
/*
 * One frame from guest-init (the owner keeps *pp unless a callee took it).
 * 0 go on, 1 the conversation is over (close the connection), -EPROTO the
 * session failed (ops->stop was called).
 */
int session_frame(struct session *s, const struct proto_hdr *h, uint8_t **pp, uint64_t now);
/* The owner's reader: bytes arrived (progress, even inside a frame). */
void session_rx(struct session *s, bool mid_frame, uint64_t now);
/* The connection ended: -EPIPE at EOF, -EPROTO for a malformed frame. */
void session_closed(struct session *s, int err);

/* Frames for guest-init, and after the owner wrote some: how much (or -errno). */
struct proto_outq *session_outq(struct session *s);
void session_wrote(struct session *s, ssize_t n, uint64_t now);
/* Top the queue up with --put data while it is short. */
void session_pump(struct session *s, uint64_t now);
#define SESSION_OUTQ_LOW (256 * 1024)

/* One-shot stdin: whether it is wanted now, and a chunk (n == 0: EOF). */
bool session_wants_stdin(const struct session *s);
int session_stdin(struct session *s, const void *p, size_t n, uint64_t now);
/*
 * A one-shot job's terminal has a new window (P_RESIZE): sent once the job
 * runs, the last one only if it changed before; ignored without a terminal.
 */
int session_resize(struct session *s, uint16_t rows, uint16_t cols, uint64_t now);

/*
 * Stall rules and the deadline (neither applies while the job waits).
 * Returns when the next of them falls due (UINT64_MAX: none): nothing but
 * the time passing can make one fire earlier, so a caller may sleep until
 * then unless a frame, a write or a release comes first.
 */
uint64_t session_tick(struct session *s, uint64_t now);

/* Send the job held by SH_WAIT: 0, or -errno (nothing waits, or it failed). */
int session_release(struct session *s, uint64_t now);
/* Whether the job waits for session_release(). */
bool session_waiting(const struct session *s);

/*
 * Session requests (job_opts.session, after SS_RUNNING): 0, or -errno
 * with the reason in husk_lasterr() (a bad request; the session goes on).
 */
int session_exec(struct session *s, uint32_t id, const struct exec_opts *x, uint64_t now);
int session_xstdin(struct session *s, uint32_t id, const void *p, size_t n, uint64_t now);
int session_signal(struct session *s, uint32_t id, uint32_t sig, uint64_t now);
int session_put(struct session *s, uint32_t id, const void *p, size_t n, uint64_t now);
int session_get(struct session *s, uint32_t id, const char *path, uint64_t now);
int session_end(struct session *s, uint64_t now);
/* Whether requests are taken now (started, not ending, not failed). */
bool session_ready(const struct session *s);

/* Parse an exit record (P_EXIT / P_XEXIT payload): 0 or -EINVAL. */
int session_parse_exit(const uint8_t *p, size_t len, struct session_exit *e);

#endif
