/*
 * oci/state: where husk's OCI runtime keeps its containers, one directory
 * per container under the root (--root, default OCI_DEFAULT_ROOT, 0700):
 * state.json (written whole and renamed into place) and exec.fifo, the
 * FIFO whose first byte starts a created container's job. A container's
 * process is known by its pid and its start time, so a pid used again by
 * another process is never taken for the container.
 */
#ifndef HUSK_OCI_STATE_H
#define HUSK_OCI_STATE_H

#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#define OCI_DEFAULT_ROOT "/run/husk/oci"
#define OCI_ID_MAX 128
#define OCI_VERSION "1.0.2"

/* PAUSED: running (or created) with its VM's group frozen (husk oci pause). */
enum oci_status { OCI_CREATING, OCI_CREATED, OCI_RUNNING, OCI_STOPPED, OCI_PAUSED };

struct oci_state {
	char id[OCI_ID_MAX + 1];
	char bundle[PATH_MAX];
	pid_t pid;
	uint64_t starttime;		/* /proc/PID/stat's, clock ticks after boot */
	bool started;			/* `start` was given */
	char created[40];		/* RFC 3339, UTC */
	char *annotations;		/* a JSON object's text, or NULL */
};

/* An ID runc would take: 1-128 of [A-Za-z0-9_+.-], not "." or "..". */
int oci_id_check(const char *id);

/* root/id into out; 0 or -errno (too long). */
int oci_dir(const char *root, const char *id, char *out, size_t len);

int oci_state_write(const char *dir, const struct oci_state *st);
int oci_state_read(const char *dir, struct oci_state *st);
void oci_state_free(struct oci_state *st);

/* The start time of pid (0 if it is gone or a zombie). */
uint64_t oci_proc_starttime(pid_t pid);
/* Whether the container's process is gone (one /proc read, no cgroup lookup). */
bool oci_stopped(const struct oci_state *st);
/* What the container is now. */
enum oci_status oci_status(const struct oci_state *st);
const char *oci_status_name(enum oci_status s);

#endif
