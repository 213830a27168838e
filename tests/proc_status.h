/*
 * proc_status: one field of /proc/PID/status for the tests that check how a
 * process of husk's is confined (its uid, capabilities, no_new_privs,
 * seccomp mode). Header-only: unit and network tests are separate programs.
 */
#ifndef HUSK_TEST_PROC_STATUS_H
#define HUSK_TEST_PROC_STATUS_H

#include <stdio.h>
#include <string.h>
#include <sys/types.h>

/* The value of "key:" (leading blanks dropped), or "" if there is none. */
static inline void proc_status_field(pid_t pid, const char *key, char *out, size_t cap)
{
	char path[64], line[256];
	size_t kl = strlen(key);
	FILE *f;

	out[0] = '\0';
	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	f = fopen(path, "re");
	if (!f)
		return;
	while (fgets(line, sizeof(line), f)) {
		if (!strncmp(line, key, kl) && line[kl] == ':') {
			snprintf(out, cap, "%s", line + kl + 1 + strspn(line + kl + 1, " \t"));
			out[strcspn(out, "\n")] = '\0';
			break;
		}
	}
	fclose(f);
}

#endif
