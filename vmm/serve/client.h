/*
 * client: husk serve's command-line clients (client.c): `husk ps`, `husk
 * kill`, `husk exec` and `husk run --server`. Each returns the process's
 * exit status.
 */
#ifndef HUSK_CLIENT_H
#define HUSK_CLIENT_H

#include "cli_run.h"

int client_ps(int argc, char **argv);
int client_kill(int argc, char **argv);
int client_exec(int argc, char **argv);
/* o: the parsed run options, sent as a run request to the daemon at server. */
int client_run(const struct run_opts *o, const char *server);

#endif
