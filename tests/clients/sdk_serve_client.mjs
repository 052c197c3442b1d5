// A real ACP v2 client (the official TypeScript SDK, experimental v2 unstable API) that
// opens a recorded session served by `acp-replay --serve`: initialize, session/list,
// session/resume with replayFrom start (collecting the session/update notifications the
// SDK parsed and validated), a prompt (which must be refused: the session is read-only), and
// session/close. Prints one JSON line per step so a test can assert what it received.
//
// usage: node sdk_serve_client.mjs SESSION_ID -- AGENT [ARGS...]
//        node --experimental-websocket sdk_serve_client.mjs SESSION_ID -- ws://HOST:PORT/PATH
import { spawn } from "node:child_process";
import { Readable, Writable } from "node:stream";
import * as acp from "@agentclientprotocol/sdk/experimental/v2/unstable";
import { createWebSocketStream } from "@agentclientprotocol/sdk/experimental/ws-client";
import { createHttpStream } from "@agentclientprotocol/sdk/experimental/http-client";

const args = process.argv.slice(2);
const cut = args.indexOf("--");
const [sessionId] = args.slice(0, cut);
const argv = args.slice(cut + 1);

const remote = /^(ws|http)s?:\/\//.test(argv[0]);
const child = remote ? null : spawn(argv[0], argv.slice(1), { stdio: ["pipe", "pipe", "inherit"] });
const stream = remote
  ? (argv[0].startsWith("ws") ? createWebSocketStream(argv[0]) : createHttpStream(argv[0]))
  : acp.ndJsonStream(Writable.toWeb(child.stdin), Readable.toWeb(child.stdout));
const updates = [];
const app = acp
  .client({ name: "acp-pipes-sdk-serve-client" })
  .onNotification("session/update", ({ params }) => {
    updates.push({ sessionId: params.sessionId, update: params.update });
  });

const out = (x) => console.log(JSON.stringify(x));
let failed = false;
try {
  await app.connectWith(stream, async (agent) => {
    const init = await agent.request("initialize", {
      protocolVersion: acp.PROTOCOL_VERSION,
      info: { name: "acp-pipes-sdk-serve-client", version: "1" },
      capabilities: {},
    });
    out({ step: "initialize", protocolVersion: init.protocolVersion, agent: init.info?.name });
    const list = await agent.request("session/list", {});
    out({ step: "list", sessions: list.sessions });
    const info = list.sessions.find((s) => s.sessionId === sessionId);
    const resumed = await agent.request("session/resume", {
      sessionId,
      cwd: info?.cwd ?? "/",
      replayFrom: { type: "start" },
    });
    out({ step: "resume", response: resumed });
    try {
      await agent.request("session/prompt", {
        sessionId,
        prompt: [{ type: "text", text: "more?" }],
      });
      out({ step: "prompt", refused: false });
    } catch (e) {
      out({ step: "prompt", refused: true, code: e?.code, message: e?.message });
    }
    await agent.request("session/close", { sessionId });
    out({ step: "close" });
  });
} catch (e) {
  failed = true;
  console.error(`sdk_serve_client: ${e?.stack ?? e}`);
}
// the SDK hands notifications to handlers on its own schedule (not ordered with
// responses), so the updates are printed once the connection is done; the wire order
// (history, state_update, response) is checked by tests/test_serve.py on the bytes
out({ step: "updates", updates });
out({ done: !failed });
if (remote) process.exit(failed ? 1 : 0);
child.stdin.end();
const code = await new Promise((resolve) => child.on("close", (c) => resolve(c)));
process.exit(failed ? 1 : code === 0 ? 0 : 3);
