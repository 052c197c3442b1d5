// A real ACP v2 client (the official TypeScript SDK, experimental v2 unstable API) that
// runs one session against an agent command and prints what it received, one JSON line
// per prompt, so a test can compare the session against a live agent and a replay.
//
// usage: node sdk_client.mjs PROMPTS PERMISSION_EVERY -- AGENT [ARGS...]
//   PROMPTS            number of prompts ("hello <i>")
//   PERMISSION_EVERY   every k-th prompt starts with /permission (0: never); the
//                      client allows every permission request it gets
import { spawn } from "node:child_process";
import { Readable, Writable } from "node:stream";
import * as acp from "@agentclientprotocol/sdk/experimental/v2/unstable";

const args = process.argv.slice(2);
const cut = args.indexOf("--");
const [prompts, permissionEvery] = args.slice(0, cut).map(Number);
const argv = args.slice(cut + 1);

const child = spawn(argv[0], argv.slice(1), { stdio: ["pipe", "pipe", "inherit"] });
const stream = acp.ndJsonStream(Writable.toWeb(child.stdin), Readable.toWeb(child.stdout));
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
    for (let i = 1; i <= prompts; i++) {
      const text = permissionEvery && i % permissionEvery === 0 ? `/permission hello ${i}` : `hello ${i}`;
      const response = await session.prompt(text);
      const echoed = await session.readTextUntilIdle();
      console.log(JSON.stringify({ prompt: i, messageId: response.messageId, text: echoed }));
    }
    await agent.request("session/close", { sessionId: session.sessionId });
    session.dispose();
  });
} catch (e) {
  failed = true;
  console.error(`sdk_client: ${e?.stack ?? e}`);
}
console.log(JSON.stringify({ done: !failed, permissions }));
child.stdin.end();
const code = await new Promise((resolve) => child.on("close", (c) => resolve(c)));
process.exit(failed ? 1 : code === 0 ? 0 : 3);
