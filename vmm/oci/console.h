/*
 * console: the terminal of a container whose process.terminal is true,
 * handed to the engine as runc does it: a pty whose master goes over the
 * engine's --console-socket, whose slave is the container process's stdio.
 */
#ifndef HUSK_OCI_CONSOLE_H
#define HUSK_OCI_CONSOLE_H

/*
 * Make a pty, send its master to the Unix socket at path (SCM_RIGHTS, its
 * name as the message) and close it here; the slave, raw (the guest's own
 * pty does the line discipline), is returned for the container's stdio.
 * -errno with husk_lasterr() on failure.
 */
int oci_console_open(const char *path);

#endif
