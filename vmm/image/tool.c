/*
 * tool: a host program of an import, by absolute path, in a clean
 * environment. See tool.h.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <grp.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "image/tool.h"
#include "lib/util.h"

#define WORDS_MAX 400	/* of a program's stderr, in the error */

static const char *const dirs[] = { "/usr/sbin", "/usr/bin", "/sbin", "/bin" };
static char *const clean_env[] = { "PATH=/usr/sbin:/usr/bin:/sbin:/bin", "LC_ALL=C", NULL };

/* name in the system's directories: 0 with its path, or -ENOENT. */
static int find(const char *name, char *out, size_t len)
{
	struct stat st;
	size_t i;

	for (i = 0; i < ARRAY_SIZE(dirs); i++) {
		snprintf(out, len, "%s/%s", dirs[i], name);
		if (!stat(out, &st) && S_ISREG(st.st_mode) && !access(out, X_OK))
			return 0;
	}
	return -ENOENT;
}

/* The start of what the program said on stderr, on one line and printable. */
static void first_words(int fd, char *out, size_t cap)
{
	char raw[WORDS_MAX + 1], line[2 * WORDS_MAX + 1];
	ssize_t n = pread(fd, raw, WORDS_MAX, 0);
	size_t len = n > 0 ? (size_t)n : 0, o = 0;

	while (len && (raw[len - 1] == '\n' || raw[len - 1] == ' '))
		len--;
	for (size_t i = 0; i < len; i++) {
		if (raw[i] != '\n' && raw[i] != '\0') {
			line[o++] = raw[i];
		} else {
			line[o++] = ';';
			line[o++] = ' ';
		}
	}
	line[o] = '\0';
	husk_escape(out, cap, line);
}

/* The calling process becomes as, for good: no groups, then gid, then uid. */
static int become(const struct image_reader *as)
{
	uid_t r, e, s;

	if (setgroups(0, NULL) || setresgid(as->gid, as->gid, as->gid) ||
	    setresuid(as->uid, as->uid, as->uid) || prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0))
		return -1;
	if (getresuid(&r, &e, &s) || r != as->uid || e != as->uid || s != as->uid)
		return -1;
	return 0;
}

static pid_t start(const char *path, char *const argv[], int out_fd, int err_fd,
		   const struct image_reader *as)
{
	pid_t pid = fork();
	int nul;

	if (pid)
		return pid;
	nul = open("/dev/null", O_RDWR | O_CLOEXEC);
	if (nul < 0 || dup2(nul, 0) < 0 || dup2(out_fd >= 0 ? out_fd : nul, 1) < 0 ||
	    dup2(err_fd, 2) < 0)
		_exit(126);
	close_range(3, ~0u, 0);
	if (as && become(as)) {
		static const char msg[] = "cannot take the reader's user and groups\n";

		write_best_effort(2, msg, sizeof(msg) - 1);
		_exit(126);
	}
	execve(path, argv, clean_env);
	_exit(127);
}

int image_tool_run(char *const argv[], const char *pkg, int out_fd,
		   const struct image_reader *as)
{
	char path[64], words[WORDS_MAX * 8 + 8];
	int err_fd, st;
	pid_t pid;

	if (find(argv[0], path, sizeof(path)))
		return husk_seterr(ENOENT, "%s is not in /usr/sbin, /usr/bin, /sbin or /bin: "
				   "install the Debian package %s", argv[0], pkg);
	err_fd = memfd_create("husk-tool-stderr", MFD_CLOEXEC);
	if (err_fd < 0)
		return husk_seterr(errno, "memfd_create: %s", strerror(errno));
	pid = start(path, argv, out_fd, err_fd, as);
	if (pid < 0) {
		close(err_fd);
		return husk_seterr(errno, "fork: %s", strerror(errno));
	}
	while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
		;
	if (WIFEXITED(st) && !WEXITSTATUS(st)) {
		close(err_fd);
		return 0;
	}
	first_words(err_fd, words, sizeof(words));
	close(err_fd);
	if (WIFEXITED(st) && WEXITSTATUS(st) >= 126)
		return husk_seterr(EIO, "cannot run %s%s%s", path, *words ? ": " : "", words);
	return husk_seterr(EIO, "%s failed (%s %d)%s%s", path, WIFEXITED(st) ? "exit" : "signal",
			   WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st), *words ? ": " : "", words);
}
