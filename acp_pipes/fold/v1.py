"""ACP v1 recordings, lifted into the ACP v2 shapes the fold already folds.

Every agent and editor in use today negotiates ``protocolVersion: 1``; the mapping
(seed 000) is written for v2 and says only that a v1 converter follows the same
principles and declares its losses. This module says what acp-pipes knows about v1
and holds its shapes (the losses, v1's tool calls, diffs and content lifted into v2's);
the lift (:class:`~acp_pipes.fold.v1_lift.V1Lift`) sits in front of the fold of a
connection that negotiated v1 and turns each v1 frame into the v2 frames the v2 rules
then apply to, so the fold and the ASR mapping stay one implementation; which entity a
v1 message is, is :mod:`acp_pipes.fold.v1_identity`. Every choice below is written in docs/asr.md,
"ACP v1", with a fixture named by its rule.

What differs, and what the lift does (v2 names on the right):

* ``initialize``: ``clientInfo``/``agentInfo`` -> ``info`` (ASR-703).
* message chunks carry no ``messageId``: a message runs until the chunk kind changes, a
  tool call, a plan or a request of the agent intervenes, or the turn ends (ASR-704).
  Its chunks are held until then; its ID is derived from its folded content and its
  occurrence in the session, counted across the run's connections (so a
  ``session/load`` replay of the same message gets the same ID, whichever connection
  saw it first, ASR-717) and marked ``idSource: derived``; updates that arrive
  meanwhile (``usage_update`` between chunks) follow it in order. The prompt's
  ``messageId`` is derived the same way (ASR-713), unless the agent echoed the prompt
  under an ID of its own during the turn: then that ID is the prompt's. Which entity a
  message is follows one rule (docs/asr.md "One rule for identity", ``identify``): the
  one its own ID names, else the one at its place (role, text, occurrence; a fork's
  copied history at the parent's places), else a new one; so an echo without an ID, a
  load's replay under IDs the agent never sent live (opencode) and a fork's copy are
  the entity already stored.
* ``tool_call`` (creation) -> ``tool_call_update`` (an upsert); v1 diffs
  (``path``/``oldText``/``newText``) -> v2 diffs with a full-context ``git_patch``
  (ASR-714, ASR-715).
* ``plan`` (the whole entry list) -> ``plan_update`` of one plan per session.
* the ``session/prompt`` response ends the turn: it answers with the derived
  ``messageId`` and is followed by ``state_update`` idle with its ``stopReason`` (or the
  JSON-RPC ``error``), so finality (ASR-705) and state records follow from it.
* ``session/load`` -> ``session/resume`` with ``replayFrom: {type: start}`` (ASR-707,
  ASR-717).
* ``session/request_permission``: ``toolCall`` -> ``subject`` (ASR-716).
* the client's terminals (``terminal/create``, ``terminal/output``,
  ``terminal/wait_for_exit``) -> ``terminal_update``; ``fs/write_text_file`` is not
  recorded and declared lost.

Losses v1 adds to ASR-722's are declared per session through ``declare`` (a ``lossy``
fold record); :data:`SOURCE` is the header's ``producer.source`` for a v1 stream.
"""

from __future__ import annotations

from typing import Any

import blake3
import orjson

from acp_pipes.fold.patch import append_block
from acp_pipes.protocol.canonical import CanonicalError, canonical_hash

__all__ = ["LOSSES", "PLAN_ID", "SOURCE", "content_digest", "empty_text", "folded", "git_patch",
           "lift_diff", "lift_initialize", "lift_tool_call", "texts_from_patch"]

#: ``producer.source`` of a stream recorded from ACP v1 (acp-pipes choice, ASR-700).
SOURCE = {"format": "acp", "formatVersion": "1"}
LOSS_BOUNDARIES = "_org.agent-session.acp/v1_message_boundaries"
LOSS_FS_WRITES = "_org.agent-session.acp/v1_fs_writes"
LOSS_TERMINAL_TRUNCATED = "_org.agent-session.acp/v1_terminal_truncated"
#: Every loss a v1 stream can declare, in the order a header lists them.
LOSSES = (LOSS_BOUNDARIES, LOSS_FS_WRITES, LOSS_TERMINAL_TRUNCATED)
#: The ID of a session's one v1 plan (v1 plans have none).
PLAN_ID = "v1:plan"


def lift_initialize(params: dict[str, Any], result: dict[str, Any]
                    ) -> tuple[dict[str, Any], dict[str, Any]]:
    """v1's ``clientInfo`` and ``agentInfo`` under v2's name, ``info`` (ASR-703)."""
    if "info" not in params and "clientInfo" in params:
        params = {**params, "info": params["clientInfo"]}
    if "info" not in result and "agentInfo" in result:
        result = {**result, "info": result["agentInfo"]}
    return params, result


_TEXT_HEAD, _TEXT_TAIL = b'[{"text":', b',"type":"text"}]'


def content_digest(content: list[Any]) -> str:
    """The first 16 hex digits of the canonical hash (blake3 of JCS) of ``content``.
    One plain text block, the common message, is written in JCS directly (keys in
    order, orjson's string escaping is JCS's: see acp_pipes.protocol.canonical) and hashed;
    tests/test_v1.py checks it equals canonical_hash."""
    if len(content) == 1:
        b = content[0]
        if b.__class__ is dict and len(b) == 2 and b.get("type") == "text":
            text = b.get("text")
            if text.__class__ is str:
                try:
                    data = _TEXT_HEAD + orjson.dumps(text) + _TEXT_TAIL
                except orjson.JSONEncodeError:  # a lone surrogate: no JCS form
                    return "0" * 16
                return blake3.blake3(data).digest()[:8].hex()
    try:
        return canonical_hash(content)[7:23]
    except CanonicalError:
        return "0" * 16


def empty_text(block: Any) -> bool:
    return block.__class__ is dict and block.get("type") == "text" and block.get("text") == ""


def folded(blocks: list[Any]) -> list[Any]:
    """Content blocks as the fold joins them (ASR-704: text onto text by concatenation),
    the form a derived message ID is taken from, whatever the chunk boundaries were.
    Runs of plain text blocks are joined at once; other blocks go through the fold's
    own rule (:func:`~acp_pipes.fold.patch.append_block`)."""
    out: list[Any] = []
    run: list[str] | None = None
    for b in blocks:
        if b.__class__ is dict and len(b) == 2 and b.get("type") == "text" and (
                b.get("text").__class__ is str):
            if run is None:
                run = [b["text"]]
            else:
                run.append(b["text"])
            continue
        if run is not None:
            out.append({"type": "text", "text": "".join(run)})
            run = None
        if b is not None:
            append_block(out, b)
    if run is not None:
        out.append({"type": "text", "text": "".join(run)})
    return out


def lift_tool_call(upd: dict[str, Any]) -> dict[str, Any]:
    """``tool_call`` (creation) and ``tool_call_update`` -> v2's ``tool_call_update``
    upsert (omitted fields unchanged), v1 diffs lifted to v2 diffs. The update is copied
    only when something changes. v1's ``name: null`` leaves the name unchanged (v1's
    schema: "omitting it or sending null both mean that the existing name is left
    unchanged"), where v2's null clears it (ASR-704): it is dropped."""
    if "name" in upd and upd["name"] is None:
        upd = {k: v for k, v in upd.items() if k != "name"}
    content = upd.get("content")
    if content.__class__ is list:
        for item in content:
            if item.__class__ is dict and item.get("type") == "diff" and "changes" not in item:
                return {**upd, "sessionUpdate": "tool_call_update", "content": [
                    lift_diff(i) if i.__class__ is dict and i.get("type") == "diff"
                    and "changes" not in i else i for i in content]}
    if upd.get("sessionUpdate") == "tool_call_update":
        return upd
    return {**upd, "sessionUpdate": "tool_call_update"}


def lift_diff(item: dict[str, Any]) -> dict[str, Any]:
    """A v1 diff (one ``path``, ``oldText`` or none for a new file, ``newText``) -> a v2
    diff: one change (``add`` without ``oldText``, else ``modify``) and a ``git_patch``
    holding both texts whole (full context: nothing of v1's diff is lost). A diff
    missing its path or new text is kept as sent."""
    path, old, new = item.get("path"), item.get("oldText"), item.get("newText")
    if path.__class__ is not str or new.__class__ is not str:
        return item
    if old.__class__ is not str:
        old = None  # "omitted or null for new files"
    out: dict[str, Any] = {"type": "diff", "changes": [
        {"operation": "add" if old is None else "modify", "path": path}],
        "patch": {"format": "git_patch", "text": git_patch(path, old, new)}}
    if item.get("_meta") is not None:
        out["_meta"] = item["_meta"]
    return out


def _lines(text: str | None) -> list[str]:
    """Lines split after each LF only (a CR stays in its line); the last one may lack
    its LF."""
    if not text:
        return []
    lines = text.split("\n")
    last = lines.pop()
    out = [line + "\n" for line in lines]
    if last:
        out.append(last)
    return out


def git_patch(path: str, old: str | None, new: str) -> str:
    """One ``diff --git`` section with absolute paths, as v2's ``git_patch`` format
    asks, whose single hunk spans both files: the common leading and trailing lines as
    context, the rest removed and added. Deterministic, linear in the texts, and both
    texts can be read back from it whole (:func:`texts_from_patch`). A diff that
    changes nothing keeps its text too, as a hunk that removes every line and adds it
    back (patch tools refuse a hunk of context only; ASR-715: what the agent said is
    kept, acp-pipes choice); two empty texts have no hunk."""
    a, b = _lines(old), _lines(new)
    head = f"diff --git {path} {path}\n--- {path if old is not None else '/dev/null'}\n+++ {path}\n"
    if not a and not b:
        return head  # nothing on either side: no hunk
    n = 0 if a == b else min(len(a), len(b))  # the same texts: no context (see above)
    p = 0
    while p < n and a[p] == b[p]:
        p += 1
    q = 0
    while q < n - p and a[-1 - q] == b[-1 - q]:
        q += 1
    out = [head, f"@@ -{1 if a else 0},{len(a)} +{1 if b else 0},{len(b)} @@\n"]
    for mark, lines in ((" ", a[:p]), ("-", a[p:len(a) - q]), ("+", b[p:len(b) - q]),
                        (" ", a[len(a) - q:])):
        for line in lines:
            out.append(mark + line)
            if not line.endswith("\n"):
                out.append("\n\\ No newline at end of file\n")
    return "".join(out)


def texts_from_patch(text: str) -> tuple[str | None, str]:
    """The two texts back from a patch :func:`git_patch` made (``None`` for a file it
    added; two empty texts for a patch without a hunk): what a v1 diff needs, for a
    replay into v1."""
    lines = text.split("\n")
    added = len(lines) > 1 and lines[1] == "--- /dev/null"
    old: list[str] = []
    new: list[str] = []
    prev = ""  # the mark of the hunk line before
    in_hunk = False
    for line in lines:
        if not in_hunk:
            in_hunk = line.startswith("@@ ")
            continue
        mark, rest = line[:1], line[1:]
        if not mark:
            continue
        if mark == "\\":  # "\ No newline at end of file": the line before has no LF
            for side, marks in ((old, " -"), (new, " +")):
                if prev and prev in marks and side:
                    side[-1] = side[-1][:-1]
            continue
        if mark in " -":
            old.append(rest + "\n")
        if mark in " +":
            new.append(rest + "\n")
        if mark in " -+":
            prev = mark
    return (None if added else "".join(old)), "".join(new)
