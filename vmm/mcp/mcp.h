/*
 * mcp: `husk mcp`, a Model Context Protocol server over stdio whose tools
 * run in one husk serve sandbox per MCP connection (docs/mcp.md).
 *
 * mcp.c speaks JSON-RPC 2.0 and MCP's lifecycle on stdin/stdout;
 * mcp_tools.c holds the tools and the sandbox they use.
 */
#ifndef HUSK_MCP_H
#define HUSK_MCP_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#define MCP_MAX_LINE (16u << 20)	/* one message from the client */
#define MCP_MAX_RULES 64

/* How the sandbox is made and how much of a tool's output comes back. */
struct mcp_opts {
	const char *server;		/* husk serve's socket, NULL: the default */
	const char *template_name, *image;
	bool net;			/* "egress" */
	const char *allow[MCP_MAX_RULES], *allow_host[MCP_MAX_RULES], *deny[MCP_MAX_RULES];
	unsigned nr_allow, nr_allow_host, nr_deny;
	uint64_t mem_mib, vcpus;
	const char *cpus;
	uint64_t lifetime_s;		/* the sandbox's, 0: the daemon's default */
	uint64_t idle_s;		/* the sandbox's idle timeout, 0: default */
	uint64_t timeout_s;		/* a tool call's default and most */
	uint64_t max_return;		/* bytes of each stream returned to the client */
	uint64_t max_file;		/* bytes read_file returns at most */
};

/*
 * While a tool runs, the client may ping or cancel: mcp.c reads what it
 * sent. Returns true when the call in progress must stop (cancelled, or the
 * client went away).
 */
typedef bool (*mcp_pump_fn)(void *arg);

struct mcp_box;

struct mcp_box *mcp_box_new(const struct mcp_opts *o);
/* Destroy the sandbox, if one was made, and free. */
void mcp_box_free(struct mcp_box *b);
/* The tools/list result's "tools" array (new reference). */
json_t *mcp_tools_list(void);
/*
 * Run a tool: the tools/call result (content, structuredContent, isError),
 * or NULL with *rpc_code/husk_lasterr() for a JSON-RPC error (unknown tool,
 * bad arguments). pump is called when a client fd is readable. *cancelled says the call was cancelled: no answer goes out.
 * wait_fds[0..1] are the client's fds to watch (-1: none), read anew at
 * each wait: pump may close one.
 */
json_t *mcp_tool_call(struct mcp_box *b, const char *name, json_t *args, const int *wait_fds,
		      mcp_pump_fn pump, void *arg, int *rpc_code, bool *cancelled);

/* Parse `husk mcp ...` (argv[0] "mcp"): 0, 1 for --help, or -EINVAL. */
int mcp_parse(int argc, char **argv, struct mcp_opts *o);
int mcp_main(int argc, char **argv);
extern const char mcp_usage[];

#endif
