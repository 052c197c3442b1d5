// A fetch() over node:http2 (h2c with prior knowledge: the client's first bytes are the
// HTTP/2 preface), for the SDK's http-client (its `fetch` option), so the official
// client's Streamable HTTP runs over a real HTTP/2 stack: one connection per origin,
// every POST, SSE GET and DELETE a stream of it.
import http2 from "node:http2";
import { Readable } from "node:stream";

const sessions = new Map();

function session(origin) {
  let s = sessions.get(origin);
  if (!s || s.closed || s.destroyed) {
    s = http2.connect(origin);
    s.on("error", () => {});
    sessions.set(origin, s);
  }
  return s;
}

let inflight = 0;

/** Once no request has been under way for a moment (the SDK's DELETE is sent after
 * its session ends, unawaited), close every connection, so the process can exit. */
export async function closeWhenIdle() {
  let quiet = 0;
  for (let i = 0; i < 400 && quiet < 3; i++) {
    await new Promise((r) => setTimeout(r, 25));
    quiet = inflight === 0 ? quiet + 1 : 0;
  }
  for (const s of sessions.values()) s.close();
  sessions.clear();
}

export async function h2fetch(input, init = {}) {
  const url = new URL(typeof input === "string" ? input : input.url);
  const headers = {
    ":method": init.method ?? "GET",
    ":path": url.pathname + url.search,
  };
  new Headers(init.headers ?? {}).forEach((value, key) => {
    headers[key] = value;
  });
  const body = init.body == null ? null : Buffer.from(
    typeof init.body === "string" ? init.body : new Uint8Array(await new Response(init.body).arrayBuffer()));
  const req = session(url.origin).request(headers, { endStream: body === null });
  inflight += 1;
  req.on("close", () => { inflight -= 1; });
  if (body !== null) req.end(body);
  const signal = init.signal;
  const abort = () => req.close(http2.constants.NGHTTP2_CANCEL);
  if (signal) {
    if (signal.aborted) abort();
    else signal.addEventListener("abort", abort, { once: true });
  }
  return await new Promise((resolve, reject) => {
    req.on("error", reject);
    req.on("response", (h) => {
      const status = h[":status"];
      const out = new Headers();
      for (const [k, v] of Object.entries(h)) {
        if (k.startsWith(":")) continue;
        for (const item of Array.isArray(v) ? v : [v]) out.append(k, String(item));
      }
      const nobody = status === 204 || status === 304 || init.method === "HEAD";
      const stream = nobody ? null : Readable.toWeb(req);
      resolve(new Response(stream, { status, headers: out }));
    });
  });
}
