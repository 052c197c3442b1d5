// The official TypeScript SDK's experimental ACP server (Streamable HTTP, the RFD's
// transport) in front of a stdio agent: each connection starts AGENT and relays its
// messages, so a test can put acp-tee on either side of a real RFD server.
//
// usage: node sdk_http_server.mjs PORT [--h2] [--tls KEY CERT] -- AGENT [ARGS...]
//   --h2: the server speaks HTTP/2 only (node:http2, h2c with prior knowledge), as an
//   RFD server may; without it HTTP/1.1 (node:http)
//   --tls KEY CERT: over TLS (https://), HTTP/2 chosen by ALPN only with --h2 (no
//   HTTP/1.1 then), HTTP/1.1 without (and no ALPN)
//   prints "listening on http://127.0.0.1:PORT/acp" on stderr once it listens (PORT 0:
//   a free one)
import { spawn } from "node:child_process";
import { createServer } from "node:http";
import { createServer as createHttpsServer } from "node:https";
import { createServer as createH2Server, createSecureServer } from "node:http2";
import { readFileSync } from "node:fs";
import { Readable, Writable } from "node:stream";
import * as acp from "@agentclientprotocol/sdk/experimental/v2/unstable";
import { AcpServer } from "@agentclientprotocol/sdk/experimental/server";
import { createNodeHttpHandler } from "@agentclientprotocol/sdk/experimental/node";

const args = process.argv.slice(2);
const cut = args.indexOf("--");
const port = Number(args[0]);
const argv = args.slice(cut + 1);

const children = new Set();
const connector = {
  connect(stream) {
    const child = spawn(argv[0], argv.slice(1), { stdio: ["pipe", "pipe", "inherit"] });
    children.add(child);
    child.on("close", () => children.delete(child));
    const agent = acp.ndJsonStream(Writable.toWeb(child.stdin), Readable.toWeb(child.stdout));
    stream.readable.pipeTo(agent.writable).catch(() => {});
    agent.readable.pipeTo(stream.writable).catch(() => {});
    return undefined;
  },
};
const server = new AcpServer({ agent: connector });
const handler = createNodeHttpHandler(server);
// node:http2's compatibility request lists the pseudo-headers among its headers, which
// the SDK's adapter (written for node:http) copies into a fetch Headers, which refuses
// them: it is given the headers without them, and :authority as the Host it looks for
const h2handler = (req, res) => {
  const headers = {};
  for (const [name, value] of Object.entries(req.headers)) {
    if (!name.startsWith(":")) headers[name] = value;
  }
  if (headers.host === undefined) headers.host = req.headers[":authority"];
  Object.defineProperty(req, "headers", { value: headers });
  handler(req, res);
};
const opts = args.slice(1, cut);
const h2 = opts.includes("--h2");
const tlsAt = opts.indexOf("--tls");
const tls = tlsAt < 0 ? null
  : { key: readFileSync(opts[tlsAt + 1]), cert: readFileSync(opts[tlsAt + 2]) };
const http = tls
  ? (h2 ? createSecureServer({ ...tls, allowHTTP1: false }, h2handler)
    : createHttpsServer(tls, handler))
  : (h2 ? createH2Server(h2handler) : createServer(handler));
http.listen(port, "127.0.0.1", () => {
  const scheme = tls ? "https" : "http";
  process.stderr.write(`listening on ${scheme}://127.0.0.1:${http.address().port}/acp\n`);
});
const stop = async () => {
  await server.close().catch(() => {});
  for (const child of children) child.kill("SIGTERM");
  http.close(() => process.exit(0));
  setTimeout(() => process.exit(0), 2000).unref();
};
process.on("SIGTERM", stop);
process.on("SIGINT", stop);
