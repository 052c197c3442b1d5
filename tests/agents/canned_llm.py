"""A canned OpenAI-compatible model server on 127.0.0.1, so real agents run whole turns
offline: the chat completions API (`POST /v1/chat/completions`, streamed or not) and
the Responses API (`POST /v1/responses`, streamed).

What it answers is decided by the conversation, never at random, so two runs of one
agent on one script get the same words:
- the last user text holds lines ``CALL <tool> <json>``: the replies call those tools in
  turn, one a reply, each with its arguments (the agent runs it for real, asking the
  client as it does); the n-th reply after that user text calls the n-th tool;
- every tool of the user text has been called: the reply is ``done: <tool>, <tool>``;
- anything else: the reply echoes the user's text, streamed in small pieces.

``--variant reply`` plants one change: the closing reply to a user text that called
more than one tool says ``changed: ...`` instead of ``done: ...`` (every other reply as
without it), so a recording made against the plain server differs from a run against
this one at that message alone.

Run it as ``python canned_llm.py PORTFILE [--variant reply]``: it writes the port it
bound to PORTFILE, and every request body to PORTFILE.requests.jsonl (one JSON line
each), then serves until killed. Only the standard library: it runs in any interpreter
the test has.
"""

from __future__ import annotations

import json
import os
import re
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

CALL = re.compile(r"^CALL (\S+) (\{.*\})[ \t]*$", re.M)
TAG = re.compile(r"<([a-z_-]+)>.*?</\1>|</?[a-z_-]+>", re.S)


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(_text_of(part.get("text", "")) if isinstance(part, dict) else ""
                       for part in content)
    return ""


def decide(items: list[tuple[str, str]], variant: str = "") -> tuple[str, Any]:
    """From the conversation as (role, text) pairs, oldest first ("tool" for a tool's
    result, "call" for the model's own call): ("call", (name, arguments)) or ("say",
    text)."""
    if not items:
        return "say", "hello"
    # the user's own text, not the context agents send as user text wrapped in <tags>
    last_user = max((i for i, (r, t) in enumerate(items)
                     if r == "user" and TAG.sub("", t).strip()), default=-1)
    user = TAG.sub("", items[last_user][1]).strip() if last_user >= 0 else ""
    calls = CALL.findall(user)
    done = sum(1 for r, _ in items[last_user + 1:] if r == "tool")
    if calls and done < len(calls):
        return "call", calls[done]
    if calls:
        word = "changed" if variant == "reply" and len(calls) > 1 else "done"
        return "say", f"{word}: " + ", ".join(name for name, _ in calls)
    return "say", "echo: " + user.splitlines()[-1][:200] if user else "hello"


def chat_items(body: dict) -> list[tuple[str, str]]:
    items: list[tuple[str, str]] = []
    for m in body.get("messages", []):
        role = m.get("role")
        if role == "tool":
            items.append(("tool", _text_of(m.get("content"))))
        elif role == "assistant" and m.get("tool_calls"):
            items.append(("call", m["tool_calls"][-1]["function"]["name"]))
        elif role in ("user", "assistant", "system"):
            items.append((role, _text_of(m.get("content"))))
    return [i for i in items if i[0] != "system"]


def responses_items(body: dict) -> list[tuple[str, str]]:
    raw = body.get("input", [])
    if isinstance(raw, str):
        return [("user", raw)]
    items: list[tuple[str, str]] = []
    for it in raw:
        kind = it.get("type", "message")
        if kind == "function_call_output":
            items.append(("tool", _text_of(it.get("output"))))
        elif kind == "function_call":
            items.append(("call", it.get("name", "")))
        elif kind == "message" and it.get("role") in ("user", "assistant"):
            text = _text_of(it.get("content"))
            # agents put their own context (AGENTS.md, environment) in user messages
            if it["role"] == "user" and text.lstrip().startswith("<"):
                continue
            items.append((it["role"], text))
    return items


def pieces(text: str, size: int = 7) -> list[str]:
    return [text[i:i + size] for i in range(0, len(text), size)] or [""]


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    lock = threading.Lock()
    log_path = ""
    variant = ""

    def log_message(self, *args: Any) -> None:  # quiet: the test reads the request log
        pass

    def do_GET(self) -> None:
        if self.path.rstrip("/").endswith("/models"):
            self._json({"object": "list", "data": [
                {"id": "canned", "object": "model", "created": 0, "owned_by": "acp-pipes"}]})
        else:
            self._json({"error": {"message": "not found"}}, 404)

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = json.loads(self.rfile.read(length) or b"{}")
        with Handler.lock, open(Handler.log_path, "a") as log:
            log.write(json.dumps({"path": self.path, "body": body}) + "\n")
        if self.path.rstrip("/").endswith("/chat/completions"):
            self._chat(body)
        elif self.path.rstrip("/").endswith("/responses"):
            self._responses(body)
        else:
            self._json({"error": {"message": f"no {self.path} here"}}, 404)

    def _json(self, value: Any, status: int = 200) -> None:
        data = json.dumps(value).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _sse_start(self) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Connection", "close")
        self.end_headers()
        self.close_connection = True

    def _event(self, data: Any, event: str | None = None) -> None:
        head = f"event: {event}\n" if event else ""
        payload = data if isinstance(data, str) else json.dumps(data)
        self.wfile.write(f"{head}data: {payload}\n\n".encode())
        self.wfile.flush()

    def _chat(self, body: dict) -> None:
        items = chat_items(body)
        kind, what = decide(items, Handler.variant)
        n = len(items)  # ids from the conversation, not a count of requests: the same each run
        base = {"id": f"chatcmpl-{n}", "object": "chat.completion.chunk", "created": 0,
                "model": body.get("model", "canned")}
        usage = {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}
        if not body.get("stream"):
            message: dict[str, Any] = {"role": "assistant", "content": None}
            if kind == "call":
                message["tool_calls"] = [{"id": f"call_{n}", "type": "function", "function": {
                    "name": what[0], "arguments": what[1]}}]
            else:
                message["content"] = what
            self._json({**base, "object": "chat.completion", "usage": usage, "choices": [
                {"index": 0, "message": message,
                 "finish_reason": "tool_calls" if kind == "call" else "stop"}]})
            return
        self._sse_start()
        if kind == "call":
            self._event({**base, "choices": [{"index": 0, "delta": {
                "role": "assistant", "tool_calls": [{"index": 0, "id": f"call_{n}",
                                                     "type": "function", "function": {
                                                         "name": what[0], "arguments": ""}}]},
                "finish_reason": None}]})
            for part in pieces(what[1], 16):
                self._event({**base, "choices": [{"index": 0, "delta": {"tool_calls": [
                    {"index": 0, "function": {"arguments": part}}]}, "finish_reason": None}]})
            finish = "tool_calls"
        else:
            self._event({**base, "choices": [{"index": 0, "delta": {
                "role": "assistant", "content": ""}, "finish_reason": None}]})
            for part in pieces(what):
                self._event({**base, "choices": [{"index": 0, "delta": {"content": part},
                                                  "finish_reason": None}]})
            finish = "stop"
        self._event({**base, "choices": [{"index": 0, "delta": {}, "finish_reason": finish}]})
        self._event({**base, "choices": [], "usage": usage})
        self._event("[DONE]")

    def _responses(self, body: dict) -> None:
        items = responses_items(body)
        kind, what = decide(items, Handler.variant)
        n = len(items)
        rid = f"resp_{n}"
        resp = {"id": rid, "object": "response", "created_at": 0, "status": "in_progress",
                "model": body.get("model", "canned"), "output": []}
        self._sse_start()
        self._event({"type": "response.created", "response": resp}, "response.created")
        if kind == "call":
            item = {"type": "function_call", "id": f"fc_{n}", "call_id": f"call_{n}",
                    "name": what[0], "arguments": what[1], "status": "completed"}
            self._event({"type": "response.output_item.added", "output_index": 0,
                         "item": {**item, "arguments": "", "status": "in_progress"}},
                        "response.output_item.added")
            self._event({"type": "response.output_item.done", "output_index": 0,
                         "item": item}, "response.output_item.done")
        else:
            mid = f"msg_{n}"
            self._event({"type": "response.output_item.added", "output_index": 0, "item": {
                "type": "message", "id": mid, "role": "assistant", "status": "in_progress",
                "content": []}}, "response.output_item.added")
            for part in pieces(what):
                self._event({"type": "response.output_text.delta", "item_id": mid,
                             "output_index": 0, "content_index": 0, "delta": part},
                            "response.output_text.delta")
            item = {"type": "message", "id": mid, "role": "assistant", "status": "completed",
                    "content": [{"type": "output_text", "text": what, "annotations": []}]}
            self._event({"type": "response.output_item.done", "output_index": 0,
                         "item": item}, "response.output_item.done")
        done = {**resp, "status": "completed", "output": [item], "usage": {
            "input_tokens": 10, "output_tokens": 5, "total_tokens": 15,
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens_details": {"reasoning_tokens": 0}}}
        self._event({"type": "response.completed", "response": done}, "response.completed")


def main() -> None:
    args = sys.argv[1:]
    if "--variant" in args:
        at = args.index("--variant")
        Handler.variant = args[at + 1]
        del args[at:at + 2]
    portfile = args[0]
    Handler.log_path = portfile + ".requests.jsonl"
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    with open(portfile + ".tmp", "w") as f:
        f.write(str(server.server_address[1]))
    os.replace(portfile + ".tmp", portfile)
    server.serve_forever()


if __name__ == "__main__":
    main()
