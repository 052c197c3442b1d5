// A real ACP v2 agent (the official TypeScript SDK, experimental v2 unstable API) that
// delegates each prompt to a subagent and, on session/resume with replayFrom, replays
// the whole history: its own messages and its subagents' (as the chunks they streamed),
// including a subagent report that was never sent live (the subagent finished after
// the turn ended). History is kept in STATE, so a resume can come on a new connection.
//
// usage: node sdk_subagent_agent.mjs STATE
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { Readable, Writable } from "node:stream";
import * as acp from "@agentclientprotocol/sdk/experimental/v2/unstable";

const statePath = process.argv[2];
const state = existsSync(statePath)
  ? JSON.parse(readFileSync(statePath, "utf8"))
  : { sessions: 0, history: {} };
const save = () => writeFileSync(statePath, JSON.stringify(state));
const text = (t) => ({ type: "text", text: t });

const app = acp
  .agent({ name: "acp-pipes-sdk-subagent-agent" })
  .onRequest("initialize", () => ({
    protocolVersion: acp.PROTOCOL_VERSION,
    info: { name: "SDK Subagent Agent", version: "1.0.0" },
    capabilities: {},
  }))
  .onRequest("session/new", () => {
    state.sessions += 1;
    const sessionId = `parent-${state.sessions}`;
    state.history[sessionId] = [];
    save();
    return { sessionId };
  })
  .onRequest("session/prompt", async ({ params, client }) => {
    const sid = params.sessionId;
    const history = state.history[sid];
    const n = history.filter((h) => h.update.sessionUpdate === "user_message").length + 1;
    const kid = `${sid}-kid-${n}`;
    const send = async (sessionId, update, live = true) => {
      history.push({ sessionId, update });
      if (live) await client.notify("session/update", { sessionId, update });
    };
    await send(sid, { sessionUpdate: "user_message", messageId: `u${n}`, content: params.prompt });
    await send(sid, { sessionUpdate: "subagent_update", sessionId: kid, title: "Researcher" });
    for (const piece of ["Looking ", "it up"]) {
      await send(kid, { sessionUpdate: "agent_message_chunk", messageId: `k${n}`, content: text(piece) });
    }
    await send(kid, { sessionUpdate: "state_update", state: "idle", stopReason: "end_turn" }, true);
    await send(sid, { sessionUpdate: "agent_message", messageId: `a${n}`, content: [text("Done")] });
    // the subagent's report comes after the turn: kept in history, never sent live
    await send(kid, { sessionUpdate: "agent_message_chunk", messageId: `r${n}`, content: text("Report") }, false);
    save();
    await client.notify("session/update", {
      sessionId: sid, update: { sessionUpdate: "state_update", state: "idle", stopReason: "end_turn" },
    });
    return { messageId: `u${n}` };
  })
  .onRequest("session/resume", async ({ params, client }) => {
    if (params.replayFrom) {
      for (const { sessionId, update } of state.history[params.sessionId] ?? []) {
        if (update.sessionUpdate === "state_update") continue;
        await client.notify("session/update", { sessionId, update });
      }
    }
    return {};
  })
  .onRequest("session/close", () => ({}));

const connection = app.connect(acp.ndJsonStream(Writable.toWeb(process.stdout), Readable.toWeb(process.stdin)));
await connection.closed;
