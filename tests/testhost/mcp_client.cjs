// An MCP client built on the official TypeScript SDK (@modelcontextprotocol/sdk,
// from npm; NODE_PATH names its node_modules): it starts `husk mcp` over
// stdio, lists the tools and calls each, and prints what came back as one
// JSON object for sdk_inner.py to check.
//   node mcp_client.cjs HUSK SOCKET
const { Client } = require("@modelcontextprotocol/sdk/client/index.js");
const { StdioClientTransport } = require("@modelcontextprotocol/sdk/client/stdio.js");

async function main() {
	const [husk, sock] = process.argv.slice(2);
	const transport = new StdioClientTransport({
		command: husk,
		args: ["mcp", "--server", sock, "--template", "base", "--timeout", "30"],
		stderr: "inherit",
	});
	const client = new Client({ name: "husk-test", version: "1.0.0" });
	const out = { calls: {} };
	const t0 = Date.now();
	await client.connect(transport);
	out.server = client.getServerVersion();
	out.protocol = transport._protocolVersion || null;
	out.tools = (await client.listTools()).tools.map((t) => t.name).sort();
	const call = async (key, name, args) => {
		const s = Date.now();
		try {
			const r = await client.callTool({ name, arguments: args });
			out.calls[key] = { result: r, ms: Date.now() - s };
		} catch (e) {
			out.calls[key] = { error: { code: e.code, message: String(e.message) } };
		}
	};
	await call("echo", "run_command", { command: "echo hello from $(id -un)" });
	out.first_call_ms = out.calls.echo.ms;
	await call("fail", "run_command", { command: "echo oops >&2; exit 3" });
	await call("code", "run_code", { code: "echo $((6 * 7))", language: "sh" });
	await call("write", "write_file", { path: "dir/a b.txt", content: "line1\nline2\n" });
	await call("read", "read_file", { path: "dir/a b.txt" });
	await call("list", "list_files", { path: "dir" });
	await call("binary", "write_file", { path: "bin", content: "AAEC/w==", encoding: "base64" });
	await call("readbin", "read_file", { path: "bin" });
	await call("missing", "read_file", { path: "nope" });
	await call("timeout", "run_command", { command: "sleep 20", timeout: 2 });
	await call("unknown", "no_such_tool", {});
	await call("badargs", "run_command", { command: 42 });
	await client.close();
	out.session_ms = Date.now() - t0;
	console.log(JSON.stringify(out));
}

main().catch((e) => {
	console.log(JSON.stringify({ fatal: String(e && e.stack || e) }));
	process.exit(1);
});
