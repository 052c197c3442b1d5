// A real ACP v2 client over a remote transport (the official TypeScript SDK's
// experimental ws-client or http-client) that runs one session against the agent at URL
// and prints what it received, one JSON line per prompt, as sdk_client.mjs does on stdio:
// a test compares the two.
//
// usage: node --experimental-websocket sdk_remote_client.mjs URL PROMPTS PERMISSION_EVERY [HEADERS_JSON]
//   URL                ws://... (WebSocket) or http://... (Streamable HTTP)
//   PROMPTS            number of prompts ("hello <i>")
//   PERMISSION_EVERY   every k-th prompt starts with /permission (0: never); the client
//                      allows every permission request it gets
//   HEADERS_JSON       headers sent on the handshake and every request, e.g. Authorization
// With ACP_SDK_HTTP2=1 the http-client's requests go over node:http2 (h2c with prior
// knowledge, h2_fetch.mjs) instead of the built-in fetch (HTTP/1.1).
import * as acp from "@agentclientprotocol/sdk/experimental/v2/unstable";
import { createWebSocketStream } from "@agentclientprotocol/sdk/experimental/ws-client";
import { createHttpStream } from "@agentclientprotocol/sdk/experimental/http-client";
import { closeWhenIdle, h2fetch } from "./h2_fetch.mjs";

const [url, prompts, permissionEvery, headersJson] = process.argv.slice(2);
const headers = headersJson ? JSON.parse(headersJson) : undefined;
const http2 = process.env.ACP_SDK_HTTP2 === "1";
const stream = url.startsWith("ws")
  ? createWebSocketStream(url, { headers })
  : createHttpStream(url, http2 ? { headers, fetch: h2fetch } : { headers });
let permissions = 0;
const app = acp
  .client({ name: "acp-pipes-sdk-client" })
  .onRequest("session/request_permission", () => {
    permissions += 1;
    return { outcome: { outcome: "selected", optionId: "allow" } };
  });

let failed = false;
try {
  await app.connectWith(stream, async (agent) => {
    const init = await agent.request("initialize", {
      protocolVersion: acp.PROTOCOL_VERSION,
      info: { name: "acp-pipes-sdk-client", version: "1" },
      capabilities: {},
    });
    console.log(JSON.stringify({ initialized: init.protocolVersion, agent: init.info?.name }));
    const session = await agent.buildSession("/tmp/acp-sdk-client").start();
    for (let i = 1; i <= Number(prompts); i++) {
      const every = Number(permissionEvery);
      const text = every && i % every === 0 ? `/permission hello ${i}` : `hello ${i}`;
      const response = await session.prompt(text);
      const echoed = await session.readTextUntilIdle();
      console.log(JSON.stringify({ prompt: i, messageId: response.messageId, text: echoed }));
    }
    await agent.request("session/close", { sessionId: session.sessionId });
    session.dispose();
  });
} catch (e) {
  failed = true;
  console.error(`sdk_remote_client: ${e?.stack ?? e}`);
}
console.log(JSON.stringify({ done: !failed, permissions }));
if (http2) await closeWhenIdle();
// no process.exit: the transport's own close (the HTTP DELETE) is still under way
process.exitCode = failed ? 1 : 0;
