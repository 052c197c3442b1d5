"""acp-frame --validate: hand-made frames, one per kind of violation, each asserting the
exact violation reported (rule, frame, JSON pointer, message); and clean conversations
that report none.

The conversations are written out frame by frame (v1 and v2), then broken in one place.
"""

from __future__ import annotations

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from acp_pipes.frame.core import frames
from acp_pipes.frame.validate import RULES, reports, violations
from acp_pipes.io.wire import frame_record

V1_SCHEMA = "v1/schema.unstable.json"
V2_SCHEMA = "v2.0.0-alpha.9/schema.unstable.json"


def m(**kw) -> dict:
    return {"jsonrpc": "2.0", **kw}


def records(convo: list[tuple[str, object]], *, header: bool = True) -> list[dict]:
    """Frame records of a conversation of (dir, message dict or raw bytes)."""
    wire = [frame_record(i, 1_000 + i, d, x if isinstance(x, bytes) else orjson.dumps(x))
            for i, (d, x) in enumerate(convo)]
    out = list(frames(wire))
    if header:
        out.insert(0, {"format": "acp-pipes/frames", "version": 1, "source": {"format": "x"}})
    return out


def found(convo, **kw) -> list[tuple]:
    """(rule, seq, pointer, message) of every violation, in the order reported."""
    return [(v["rule"], v["seq"], v["pointer"], v["message"])
            for v in violations(records(convo), **kw)]


def summary(convo, **kw) -> dict:
    return [r for r in reports(records(convo), **kw) if r["type"] == "summary"][-1]


# -- two clean conversations -------------------------------------------------------------

V1_CLIENT_CAPS = {"fs": {"readTextFile": True, "writeTextFile": True}, "terminal": True}
V1_AGENT_CAPS = {"loadSession": True, "promptCapabilities": {"image": True}}


def v1(client_caps=None, agent_caps=None) -> list[tuple[str, object]]:
    """A v1 conversation: initialize, a session, one prompt with an update and a file
    read by the agent, answered."""
    return [
        ("c2a", m(id=0, method="initialize", params={
            "protocolVersion": 1,
            "clientCapabilities": V1_CLIENT_CAPS if client_caps is None else client_caps})),
        ("a2c", m(id=0, result={
            "protocolVersion": 1,
            "agentCapabilities": V1_AGENT_CAPS if agent_caps is None else agent_caps,
            "authMethods": []})),
        ("c2a", m(id=1, method="session/new", params={"cwd": "/tmp", "mcpServers": []})),
        ("a2c", m(id=1, result={"sessionId": "s1"})),
        ("c2a", m(id=2, method="session/prompt", params={
            "sessionId": "s1", "prompt": [{"type": "text", "text": "hi"}]})),
        ("a2c", m(method="session/update", params={"sessionId": "s1", "update": {
            "sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "yo"}}})),
        ("a2c", m(id=0, method="fs/read_text_file", params={"sessionId": "s1", "path": "/a"})),
        ("c2a", m(id=0, result={"content": "x"})),
        ("a2c", m(id=2, result={"stopReason": "end_turn"})),
    ]


def v2(client_caps=None, agent_caps=None) -> list[tuple[str, object]]:
    """A v2 conversation: initialize, a session, one prompt answered at once, updates
    until idle, a permission asked and granted, the session closed."""
    sid = "sess-1"

    def upd(u):
        return ("a2c", m(method="session/update", params={"sessionId": sid, "update": u}))

    return [
        ("c2a", m(id=0, method="initialize", params={
            "protocolVersion": 2, "info": {"name": "c", "version": "1"},
            "capabilities": {} if client_caps is None else client_caps})),
        ("a2c", m(id=0, result={
            "protocolVersion": 2, "info": {"name": "a", "version": "1"},
            "capabilities": {"session": {}} if agent_caps is None else agent_caps})),
        ("c2a", m(id=1, method="session/new", params={"cwd": "/tmp", "mcpServers": []})),
        ("a2c", m(id=1, result={"sessionId": sid})),
        ("c2a", m(id=2, method="session/prompt", params={
            "sessionId": sid, "prompt": [{"type": "text", "text": "hi"}]})),
        ("a2c", m(id=2, result={"messageId": "u1"})),
        upd({"sessionUpdate": "state_update", "state": "running"}),
        upd({"sessionUpdate": "agent_message_chunk", "messageId": "a1",
             "content": {"type": "text", "text": "yo"}}),
        ("a2c", m(id=7, method="session/request_permission", params={
            "sessionId": sid, "title": "Run?",
            "subject": {"type": "tool_call", "toolCall": {"toolCallId": "c1", "name": "t"}},
            "options": [{"optionId": "ok", "name": "Allow", "kind": "allow_once"}]})),
        ("c2a", m(id=7, result={"outcome": {"outcome": "selected", "optionId": "ok"}})),
        upd({"sessionUpdate": "state_update", "state": "idle", "stopReason": "end_turn"}),
        ("c2a", m(id=3, method="session/close", params={"sessionId": sid})),
        ("a2c", m(id=3, result={})),
    ]


def test_clean_conversations_have_no_violation():
    assert found(v1()) == []
    assert found(v2()) == []
    s = summary(v2())
    assert (s["protocolVersion"], s["versionFrom"], s["schema"], s["frames"]) == (
        2, "agreed", "v2.0.0-alpha.9", 13)
    assert (s["violations"], s["rules"], s["paired"], s["unstable"]) == (0, {}, True, 0)


def v2_open(**kw) -> list[tuple[str, object]]:
    """:func:`v2` before the session is closed: the session is still live."""
    return v2(**kw)[:-2]


def replace(convo, seq, message):
    out = list(convo)
    out[seq] = (out[seq][0], message)
    return out


# -- frames that are no JSON-RPC message -------------------------------------------------


def test_not_json():
    convo = [*v2(), ("c2a", b"{oops")]
    assert found(convo) == [("not-json", 13, "", "not one JSON text")]


def test_not_jsonrpc():
    convo = [*v2(), ("c2a", b'{"id":9,"method":"session/prompt"}')]
    assert found(convo) == [("not-jsonrpc", 13, "", 'no "jsonrpc": "2.0"')]


def test_a_batch_is_not_jsonrpc_in_v1_and_checked_whole_in_v2():
    call = m(method="session/cancel", params={"sessionId": "s1"})
    assert found([*v1(), ("c2a", orjson.dumps([call]))]) == [
        ("not-jsonrpc", 9, "", "a batch (JSON array)")]
    ok = m(method="session/cancel", params={"sessionId": "sess-1"})
    assert found([*v2(), ("c2a", orjson.dumps([ok]))]) == []
    bad = found([*v2(), ("c2a", orjson.dumps([{"jsonrpc": "1.0"}]))])
    assert [b[:2] for b in bad] == [("schema", 13)]


def test_json_orjson_refuses_is_checked_too():
    # lone surrogates (in a method, in a key, in a value) and a number beyond a double
    convo = [*v2_open(),
             ("c2a", b'{"jsonrpc":"2.0","id":70,"method":"\\udc00"}'),
             ("c2a", b'{"jsonrpc":"2.0","id":71,"method":"_x","params":{"\\udc00":1}}'),
             ("a2c", b'{"jsonrpc":"2.0","id":71,"result":{}}'),
             ("a2c", b'{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":'
                     b'"sess-1","update":{"sessionUpdate":"usage_update","used":1e400,'
                     b'"size":"\\udc00"}}}')]
    out = found(convo)
    assert out[0] == ("not-jsonrpc", 11, "", "a lone surrogate in its method, id or sessionId")
    # 1e400 is no uint64 (the validator sees it as null, having no such number); the
    # surrogate is quoted escaped, as a record must be UTF-8
    assert [o[:3] for o in out[1:]] == [("schema", 14, "/params/update/used"),
                                        ("schema", 14, "/params/update/size")]
    assert out[2][3] == '"\\\\udc00" is not of type "integer"'
    orjson.dumps(list(violations(records(convo))))


# -- the version -------------------------------------------------------------------------


def test_a_version_with_no_schema_is_one_violation_and_nothing_is_checked_against_a_schema():
    convo = v2()
    convo[1] = ("a2c", m(id=0, result={"protocolVersion": 7, "capabilities": {}}))
    convo[4] = ("c2a", m(id=2, method="session/prompt", params={"sessionId": "sess-1"}))
    assert found(convo) == [
        ("version", 1, "/result/protocolVersion",
         "protocol version 7 has no schema here (have 1, 2); frames are not checked "
         "against a schema")]
    assert summary(convo)["schema"] is None


def test_the_agreed_version_decides_the_schema():
    # the client asks for 2 (its initialize is checked as v2), the agent answers 1: the
    # rest is v1, where {"stopReason"} answers a prompt (v2 wants a messageId)
    convo = [*v1()[:6], v1()[-1]]
    convo[0] = ("c2a", m(id=0, method="initialize", params={
        "protocolVersion": 2, "info": {"name": "c", "version": "1"}, "capabilities": {}}))
    s = summary(convo)
    assert (s["protocolVersion"], s["versionFrom"], s["schema"], s["violations"]) == (
        1, "agreed", "v1", 0)


def test_protocol_forced_and_assumed():
    no_init = v2()[2:]
    s = summary(no_init, paired=False)
    assert (s["protocolVersion"], s["versionFrom"]) == (2, "assumed")
    s = summary(v1(), protocol=2)
    assert (s["protocolVersion"], s["versionFrom"], s["schema"]) == (2, "forced", "v2.0.0-alpha.9")
    assert s["violations"] == 8  # a v1 conversation read as v2


def test_a_second_initialize_brings_its_own_capabilities():
    ask = m(id=40, method="elicitation/create", params={
        "sessionId": "sess-1", "mode": "form", "message": "name?",
        "requestedSchema": {"type": "object", "properties": {}}})
    again = v2(client_caps={"elicitation": {"form": {}}})[:-2]  # ids and session anew
    convo = [*v2(), *again, ("a2c", ask), ("c2a", m(id=40, result={"action": "cancel"}))]
    assert found(convo) == []
    convo = [*v2(client_caps={"elicitation": {"form": {}}}), *v2()[:-2], ("a2c", ask),
             ("c2a", m(id=40, result={"action": "cancel"}))]
    assert [f[:2] for f in found(convo)] == [("capability", 24)]


def test_not_initialized():
    convo = v2()
    convo = [convo[2], *convo]  # session/new before initialize
    convo[0] = ("c2a", m(id=9, method="session/new", params={"cwd": "/tmp", "mcpServers": []}))
    out = found(convo)
    assert out[0] == ("not-initialized", 0, "",
                      "session/new sent before the initialize exchange completed "
                      "(later frames before it are not reported)")
    assert [o[0] for o in out[1:]] == ["unanswered"]


# -- methods -----------------------------------------------------------------------------


def test_unknown_method_and_extension_methods():
    convo = [*v2(), ("c2a", m(id=8, method="session/frobnicate", params={})),
             ("a2c", m(id=8, result={})),  # answered: no second violation for it
             ("c2a", m(id=9, method="_acme/frobnicate", params={"any": 1})),
             ("a2c", m(id=9, result={"whatever": True}))]
    assert found(convo) == [
        ("unknown-method", 13, "/method",
         "session/frobnicate is not a method of ACP v2.0.0-alpha.9 (extension methods "
         "begin with _)")]


def test_v1_methods_are_unknown_in_v2():
    convo = replace(v2(), 11, m(id=3, method="session/load", params={
        "sessionId": "sess-1", "cwd": "/", "mcpServers": []}))
    assert found(convo) == [
        ("unknown-method", 11, "/method",
         "session/load is not a method of ACP v2.0.0-alpha.9 (extension methods begin "
         "with _)")]


def test_unstable_methods_pass_and_are_counted_and_fail_with_stable():
    fork = m(id=3, method="session/fork", params={"sessionId": "sess-1", "cwd": "/tmp"})
    convo = replace(v2(agent_caps={"session": {"fork": {}}}), 11, fork)
    convo[12] = ("a2c", m(id=3, result={"sessionId": "sess-2"}))
    assert found(convo) == []
    assert summary(convo)["unstable"] == 2  # the request and its response
    v = list(violations(records(convo), stable=True))
    assert [(x["rule"], x["seq"], x["message"], x["schema"]) for x in v] == [
        ("unknown-method", 11, "session/fork is unstable: not in "
         "v2.0.0-alpha.9/schema.json", V2_SCHEMA)]


def test_wrong_direction():
    convo = [*v2_open(), ("a2c", m(id=50, method="session/prompt", params={
        "sessionId": "sess-1", "prompt": []})), ("c2a", m(id=50, result={"messageId": "x"}))]
    v = list(violations(records(convo)))
    assert [(x["rule"], x["seq"], x["pointer"], x["message"]) for x in v] == [
        ("wrong-direction", 11, "/method", "session/prompt is sent by the client, not to it")]
    assert v[0]["location"] == "#/$defs/PromptRequest"
    assert v[0]["words"].startswith("Request parameters for sending a user prompt")


def test_wrong_kind():
    convo = [*v2_open(), ("c2a", m(method="session/prompt", params={
        "sessionId": "sess-1", "prompt": []})),
        ("c2a", m(id=60, method="session/cancel", params={"sessionId": "sess-1"})),
        ("a2c", m(id=60, result={}))]
    assert found(convo) == [
        ("wrong-kind", 11, "/method", "session/prompt is a request, sent as a notification"),
        ("wrong-kind", 12, "/method", "session/cancel is a notification, sent as a request")]


# -- the schema --------------------------------------------------------------------------


def test_schema_violation_names_pointer_file_location_and_words():
    convo = replace(v2(), 7, m(method="session/update", params={"sessionId": "sess-1", "update": {
        "sessionUpdate": "agent_message_chunk", "messageId": "a1", "content": {"type": "text"}}}))
    (v,) = violations(records(convo))
    assert v == {
        "seq": 7, "dir": "a2c", "kind": "notification", "method": "session/update",
        "rule": "schema", "pointer": "/params/update/content",
        "message": '"text" is a required property', "schema": V2_SCHEMA,
        "location": "#/$defs/TextContent/required",
        "words": "Text payload carried by this content block."}


def test_a_response_is_checked_as_the_result_of_the_request_it_answers():
    # {"messageId": ...} answers session/prompt; as the answer to session/new it is wrong
    convo = replace(v2(), 3, m(id=1, result={"messageId": "u0"}))
    out = found(convo)
    assert out[0] == ("schema", 3, "/result", '"sessionId" is a required property')
    # and the session it failed to create is unknown to what follows
    assert {o[0] for o in out[1:]} == {"unknown-session"}


def test_schema_errors_inside_a_union_point_at_the_branch_meant():
    convo = replace(v2(), 7, m(method="session/update", params={"sessionId": "sess-1", "update": {
        "sessionUpdate": "agent_message_chunk", "messageId": "a1",
        "content": {"type": "text", "text": 5}}}))
    assert found(convo) == [
        ("schema", 7, "/params/update/content/text", '5 is not of type "string"')]


def test_error_responses_are_checked_against_the_error_object():
    convo = replace(v2(), 5, m(id=2, error={"code": "bad", "message": "no"}))
    out = found(convo)
    assert [(o[0], o[1], o[2]) for o in out] == [("schema", 5, "/error/code")]


def test_a_frame_with_many_errors_reports_twenty_and_counts_the_rest():
    blocks = [{"type": "text"} for _ in range(25)]
    convo = replace(v2(), 4, m(id=2, method="session/prompt", params={
        "sessionId": "sess-1", "prompt": blocks}))
    out = found(convo)
    assert len(out) == 20
    assert out[-1][3].endswith("(and 5 more in this frame)")


def test_reserved_value():
    convo = replace(v2(), 7, m(method="session/update", params={"sessionId": "sess-1", "update": {
        "sessionUpdate": "agent_mesage_chunk", "messageId": "a1",
        "content": {"type": "text", "text": "yo"}}}))
    (v,) = violations(records(convo))
    assert (v["rule"], v["seq"], v["pointer"], v["message"], v["location"]) == (
        "reserved-value", 7, "/params/update/sessionUpdate",
        '"agent_mesage_chunk" is reserved for future ACP versions (an extension value '
        "must begin with _)", "#/$defs/SessionUpdate/anyOf/23")
    assert v["schema"] == V2_SCHEMA
    assert v["words"] == "Custom or future session update."
    # an extension value is fine
    convo = replace(v2(), 7, m(method="session/update", params={"sessionId": "sess-1", "update": {
        "sessionUpdate": "_acme_progress", "percent": 5}}))
    assert found(convo) == []


def test_reserved_value_nested_in_the_branch_meant():
    convo = replace(v2(), 10, m(method="session/update", params={"sessionId": "sess-1", "update": {
        "sessionUpdate": "state_update", "state": "idle", "stopReason": "done"}}))
    assert found(convo) == [
        ("reserved-value", 10, "/params/update/stopReason",
         '"done" is reserved for future ACP versions (an extension value must begin with _)')]


def test_reserved_value_of_a_string_enum():
    # the union of ToolCallStatus's names and its "other" string: the name's own branch
    # misses by value, the "other" branch is the one meant
    convo = replace(v2(), 7, m(method="session/update", params={"sessionId": "sess-1", "update": {
        "sessionUpdate": "tool_call_update", "toolCallId": "c1", "status": "other"}}))
    v = list(violations(records(convo)))
    assert [(x["rule"], x["seq"], x["pointer"], x["location"]) for x in v] == [
        ("reserved-value", 7, "/params/update/status", "#/$defs/ToolCallStatus/anyOf/5")]


# -- requests and responses ---------------------------------------------------------------


def test_id_reused_while_in_flight():
    convo = v2()
    convo.insert(5, ("c2a", m(id=2, method="_acme/ping", params={})))
    # two answers with id 2 (seq 6, and one at the end): one each, neither a duplicate
    convo.append(("a2c", m(id=2, result={"messageId": "u1"})))
    v = list(violations(records(convo)))
    assert [(x["rule"], x["seq"], x["pointer"], x["message"], x.get("related")) for x in v] == [
        ("id-reused", 5, "/id", "id 2 is still in flight (session/prompt, seq 4)", 4)]


def test_an_id_may_be_reused_once_answered():
    convo = [*v2()[:-2], ("c2a", m(id=2, method="session/prompt", params={
        "sessionId": "sess-1", "prompt": [{"type": "text", "text": "again"}]})),
        ("a2c", m(id=2, result={"messageId": "u2"}))]
    assert found(convo) == []


def test_unknown_response():
    convo = [*v2(), ("a2c", m(id=99, result={}))]
    assert found(convo) == [
        ("unknown-response", 13, "/id",
         "no request with id 99 is waiting for an answer from the agent")]


def test_ids_match_by_json_type():
    convo = [*v2(), ("a2c", m(id="2", result={}))]  # "2" is not 2
    assert [o[0] for o in found(convo)] == ["unknown-response"]


def test_duplicate_response():
    convo = [*v2(), ("a2c", m(id=2, result={"messageId": "u1"}))]
    v = list(violations(records(convo)))
    assert [(x["rule"], x["seq"], x["message"], x.get("related")) for x in v] == [
        ("duplicate-response", 13, "id 2 was already answered (seq 5)", 5)]


def test_unanswered_requests_are_reported_at_the_end_in_order():
    convo = v2()[:-1]  # session/close never answered
    convo = replace(convo, 9, m(method="session/cancel", params={"sessionId": "sess-1"}))
    convo = replace(convo, 10, (convo[10][1] | {"params": convo[10][1]["params"] | {
        "update": {"sessionUpdate": "state_update", "state": "idle",
                   "stopReason": "cancelled"}}}))
    # the permission request (seq 8) is no longer answered either
    v = list(violations(records(convo)))
    assert [(x["rule"], x["seq"], x["dir"], x["method"], x["id"], x["message"]) for x in v] == [
        ("unanswered", 8, "a2c", "session/request_permission", 7,
         "session/request_permission (id 7) got no response: the recording ended"),
        ("unanswered", 11, "c2a", "session/close", 3,
         "session/close (id 3) got no response: the recording ended")]


# -- sessions ----------------------------------------------------------------------------


def test_unknown_session():
    convo = [*v2(), ("c2a", m(id=20, method="session/prompt", params={
        "sessionId": "sess-9", "prompt": [{"type": "text", "text": "x"}]})),
        ("a2c", m(id=20, error={"code": -32002, "message": "no such session"}))]
    assert found(convo) == [
        ("unknown-session", 13, "/params/sessionId",
         "session/prompt: session sess-9 was never created, loaded, resumed or forked on "
         "this connection")]


def test_a_closed_session_is_not_live():
    convo = [*v2(), ("a2c", m(method="session/update", params={"sessionId": "sess-1", "update": {
        "sessionUpdate": "state_update", "state": "idle"}}))]
    v = list(violations(records(convo)))
    assert [(x["rule"], x["seq"], x["message"], x.get("related")) for x in v] == [
        ("unknown-session", 13, "session/update: session sess-1 was closed (seq 12)", 12)]


def test_load_makes_a_session_live_from_its_request_and_a_failed_load_does_not():
    convo = v1()
    load = m(id=5, method="session/load", params={"sessionId": "old", "cwd": "/",
                                                   "mcpServers": []})
    replay = m(method="session/update", params={"sessionId": "old", "update": {
        "sessionUpdate": "user_message_chunk", "content": {"type": "text", "text": "before"}}})
    ok = [*convo, ("c2a", load), ("a2c", replay), ("a2c", m(id=5, result={}))]
    assert found(ok) == []
    failed = [*convo, ("c2a", load), ("a2c", m(id=5, error={"code": -32002, "message": "no"})),
              ("a2c", replay)]
    assert found(failed) == [
        ("unknown-session", 11, "/params/sessionId",
         "session/update: session old was never created, loaded, resumed or forked on "
         "this connection")]


def test_stored_sessions_need_not_be_live():
    convo = [*v2(agent_caps={"session": {"delete": {}}}),
             ("c2a", m(id=30, method="session/delete", params={"sessionId": "archived-7"})),
             ("a2c", m(id=30, result={}))]
    assert found(convo) == []


def _prompt(rid, sid):
    return ("c2a", m(id=rid, method="session/prompt", params={
        "sessionId": sid, "prompt": [{"type": "text", "text": "x"}]}))


def test_resume_and_fork_make_a_session_live():
    # resume: live from its request (the agent may replay before answering); fork: the
    # new session is live from the fork's response, not before
    base = v2(agent_caps={"session": {"fork": {}}})[:-2]  # the session not closed
    resumed = [("c2a", m(id=20, method="session/resume", params={"sessionId": "old", "cwd": "/"})),
               ("a2c", m(id=20, result={})),
               _prompt(21, "old"), ("a2c", m(id=21, result={"messageId": "u2"}))]
    forked = [("c2a", m(id=22, method="session/fork", params={"sessionId": "sess-1",
                                                               "cwd": "/"})),
              ("a2c", m(id=22, result={"sessionId": "sess-2"})),
              _prompt(23, "sess-2"), ("a2c", m(id=23, result={"messageId": "u3"}))]
    assert found([*base, *resumed, *forked]) == []
    early = [*base, forked[0], _prompt(23, "sess-2"), forked[1],
             ("a2c", m(id=23, error={"code": -32002, "message": "no such session"}))]
    assert found(early) == [
        ("unknown-session", 12, "/params/sessionId",
         "session/prompt: session sess-2 used before session/fork (seq 11) was answered")]
    failed = [*base, resumed[0], ("a2c", m(id=20, error={"code": -32002, "message": "no"})),
              _prompt(21, "old"), ("a2c", m(id=21, error={"code": -32002, "message": "no"}))]
    assert [f[:3] for f in found(failed)] == [("unknown-session", 13, "/params/sessionId")]


# -- capabilities ------------------------------------------------------------------------


def test_capability_of_the_client():
    convo = v1(client_caps={"fs": {"readTextFile": False}})
    v = list(violations(records(convo)))
    assert [(x["rule"], x["seq"], x["pointer"], x["message"]) for x in v] == [
        ("capability", 6, "/method",
         "fs/read_text_file needs the client capability clientCapabilities.fs.readTextFile, "
         "which it did not advertise")]
    assert (v[0]["schema"], v[0]["location"], v[0]["words"]) == (
        V1_SCHEMA, "#/$defs/FileSystemCapabilities/properties/readTextFile",
        "Whether the Client supports `fs/read_text_file` requests.")


def test_capability_of_the_agent_for_a_method_and_for_content():
    convo = [*v1(agent_caps={}),
             ("c2a", m(id=3, method="session/load", params={
                 "sessionId": "s1", "cwd": "/", "mcpServers": []})),
             ("a2c", m(id=3, result={})),
             ("c2a", m(id=4, method="session/prompt", params={"sessionId": "s1", "prompt": [
                 {"type": "text", "text": "see"},
                 {"type": "image", "data": "AA==", "mimeType": "image/png"}]})),
             ("a2c", m(id=4, result={"stopReason": "end_turn"}))]
    assert found(convo) == [
        ("capability", 9, "/method", "session/load needs the agent capability "
         "agentCapabilities.loadSession, which it did not advertise"),
        ("capability", 11, "/params/prompt/1/type", "prompt/image needs the agent capability "
         "agentCapabilities.promptCapabilities.image, which it did not advertise")]


def test_capability_of_mcp_transports_and_v2_session_surface():
    http = {"type": "http", "name": "x", "url": "http://127.0.0.1:1/", "headers": []}
    convo = replace(v2(agent_caps={"session": {"mcp": {"stdio": {}}}}), 2, m(
        id=1, method="session/new", params={"cwd": "/tmp", "mcpServers": [http]}))
    assert found(convo) == [
        ("capability", 2, "/params/mcpServers/0", "mcp/http needs the agent capability "
         "capabilities.session.mcp.http, which it did not advertise")]
    # an agent with no session capability supports no session/* method at all
    out = found(v2(agent_caps={}))
    assert out[0] == ("capability", 2, "/method", "session/new needs the agent capability "
                      "capabilities.session, which it did not advertise")


def test_elicitation_needs_the_client_capability_and_its_mode():
    ask = m(id=40, method="elicitation/create", params={
        "sessionId": "sess-1", "mode": "form", "message": "name?",
        "requestedSchema": {"type": "object", "properties": {}}})
    answer = m(id=40, result={"action": "cancel"})
    base = v2()[:-2]
    assert found([*base, ("a2c", ask), ("c2a", answer)]) == [
        ("capability", 11, "/method", "elicitation/create needs the client capability "
         "capabilities.elicitation, which it did not advertise")]
    only_url = v2(client_caps={"elicitation": {"url": {}}})[:-2]
    assert found([*only_url, ("a2c", ask), ("c2a", answer)]) == [
        ("capability", 11, "/params/mode", "elicitation/form needs the client capability "
         "capabilities.elicitation.form, which it did not advertise")]
    both = v2(client_caps={"elicitation": {"form": {}}})[:-2]
    assert found([*both, ("a2c", ask), ("c2a", answer)]) == []


def test_capability_of_session_list_and_terminals():
    calls = [("c2a", m(id=3, method="session/list", params={})),
             ("a2c", m(id=3, result={"sessions": []})),
             ("a2c", m(id=1, method="terminal/create", params={"sessionId": "s1",
                                                                "command": "ls"})),
             ("c2a", m(id=1, result={"terminalId": "t1"}))]
    unadvertised = [*v1(client_caps={"fs": {"readTextFile": True}}), *calls]
    assert found(unadvertised) == [
        ("capability", 9, "/method", "session/list needs the agent capability "
         "agentCapabilities.sessionCapabilities.list, which it did not advertise"),
        ("capability", 11, "/method", "terminal/create needs the client capability "
         "clientCapabilities.terminal, which it did not advertise")]
    advertised = [*v1(client_caps={"fs": {"readTextFile": True}, "terminal": True},
                      agent_caps={"sessionCapabilities": {"list": {}}}), *calls]
    assert found(advertised) == []


# -- one direction -----------------------------------------------------------------------


def test_a_bare_stream_is_checked_frame_by_frame_only():
    agent_side = [(d, x) for d, x in v2() if d == "a2c"]
    wire = [frame_record(i, None, d, orjson.dumps(x)) for i, (d, x) in enumerate(agent_side)]
    recs = [{"format": "acp-pipes/frames", "version": 1, "source": None}, *frames(wire)]
    s = [r for r in reports(recs) if r["type"] == "summary"][0]
    assert (s["paired"], s["violations"], s["protocolVersion"], s["versionFrom"]) == (
        False, 0, 2, "agreed")
    bad = list(agent_side)
    bad[3] = ("a2c", m(method="session/update", params={"sessionId": "sess-1", "update": {
        "sessionUpdate": "agent_message_chunk", "messageId": "a1", "content": {"type": "text"}}}))
    wire = [frame_record(i, None, d, orjson.dumps(x)) for i, (d, x) in enumerate(bad)]
    recs = [{"format": "acp-pipes/frames", "version": 1, "source": None}, *frames(wire)]
    assert [(v["rule"], v["seq"]) for v in violations(recs)] == [("schema", 3)]


def test_streams_are_checked_each_on_its_own():
    one = records(v2())
    two = records(v1())
    out = [r for r in reports([*one, *two]) if r["type"] == "summary"]
    assert [(s["protocolVersion"], s["violations"]) for s in out] == [(2, 0), (1, 0)]


# -- turns: cancel, paths, tool calls -----------------------------------------------------


def test_cancel_stop_reason_v1_the_prompt_answer_after_session_cancel():
    """v1 StopReason cancelled: "This stop reason MUST be returned when the client sends
    a `session/cancel` notification" (opencode answers end_turn)."""
    convo = v1()
    cancel = ("c2a", m(method="session/cancel", params={"sessionId": "s1"}))
    bad = [*convo[:5], cancel, *convo[5:]]
    v = list(violations(records(bad)))
    assert [(x["rule"], x["seq"], x["pointer"], x["related"], x["location"]) for x in v] == [
        ("cancel-stop-reason", 9, "/result/stopReason", 5, "#/$defs/StopReason/oneOf/4")]
    assert v[0]["message"] == ('the prompt session/cancel (seq 5) cancelled ended with '
                               '"end_turn", not "cancelled"')
    assert "MUST be returned when the client sends a `session/cancel`" in v[0]["words"]
    good = replace(bad, 9, m(id=2, result={"stopReason": "cancelled"}))
    assert found(good) == []
    # a cancel after the answer owes nothing
    assert found([*convo, cancel]) == []


def test_cancel_stop_reason_v2_the_idle_state_update_after_session_cancel():
    """v2 IdleStateUpdate cancelled: "Agents MUST report this stop reason on an idle
    `state_update` when cancellation ends active foreground work"."""
    convo = v2()
    cancel = ("c2a", m(method="session/cancel", params={"sessionId": "sess-1"}))
    bad = [*convo[:7], cancel, *convo[7:]]  # while running; idle says end_turn (seq 11)
    assert found(bad) == [
        ("cancel-stop-reason", 11, "/params/update/stopReason",
         'the work session/cancel (seq 7) ended stopped with "end_turn", not "cancelled"')]
    idle = {"sessionUpdate": "state_update", "state": "idle", "stopReason": "cancelled"}
    good = replace(bad, 11, ("a2c", m(method="session/update", params={
        "sessionId": "sess-1", "update": idle}))[1])
    assert found(good) == []
    assert found([*convo[:-2], cancel, *convo[-2:]]) == []  # idle already: nothing owed


def test_relative_path_where_the_schema_says_absolute():
    """v1 NewSessionRequest.cwd: "Must be an absolute path."; v2 AbsolutePath: "An
    absolute filesystem path used by the protocol." (qwen-code sends a relative one)."""
    v = list(violations(records(replace(v1(), 2, m(id=1, method="session/new", params={
        "cwd": "work", "mcpServers": []})))))
    assert [(x["rule"], x["seq"], x["pointer"], x["message"], x["location"], x["words"])
            for x in v] == [
        ("relative-path", 2, "/params/cwd", '"work" is not an absolute path',
         "#/$defs/NewSessionRequest/properties/cwd",
         "The working directory for this session. Must be an absolute path.")]
    v = list(violations(records(replace(v1(), 6, m(id=0, method="fs/read_text_file", params={
        "sessionId": "s1", "path": "a.txt"})))))
    assert [(x["rule"], x["pointer"], x["words"]) for x in v] == [
        ("relative-path", "/params/path", "Absolute path to the file to read.")]
    v = list(violations(records(replace(v2(agent_caps={"session": {
        "additionalDirectories": {}}}), 2, m(id=1, method="session/new", params={
            "cwd": "./w", "mcpServers": [], "additionalDirectories": ["/ok", "rel"]})))))
    assert [(x["rule"], x["pointer"], x["location"]) for x in v] == [
        ("relative-path", "/params/cwd", "#/$defs/AbsolutePath"),
        ("relative-path", "/params/additionalDirectories/1", "#/$defs/AbsolutePath")]
    for ok in ("/home/u", "C:\\Users\\u", "c:/u", "\\\\server\\share"):
        assert found(replace(v2(), 2, m(id=1, method="session/new", params={
            "cwd": ok, "mcpServers": []}))) == [], ok


def _permission(rid, tid, command="ls"):
    return ("a2c", m(id=rid, method="session/request_permission", params={
        "sessionId": "s1", "toolCall": {"toolCallId": tid, "title": "execute",
                                        "rawInput": {"command": command}},
        "options": [{"optionId": "ok", "name": "Allow", "kind": "allow_once"}]}))


def _granted(rid):
    return ("c2a", m(id=rid, result={"outcome": {"outcome": "selected", "optionId": "ok"}}))


def test_unannounced_tool_call_and_a_placeholder_id_reused_are_warnings():
    """v1 ToolCallUpdate (a permission request's toolCall): "An update to an existing tool
    call."; ToolCallId: "Unique identifier for a tool call within a session." (fast-agent
    asks under "pending", then again for its next call)."""
    convo = v1()
    announce = ("a2c", m(method="session/update", params={"sessionId": "s1", "update": {
        "sessionUpdate": "tool_call", "toolCallId": "t1", "title": "execute"}}))
    known = [*convo[:5], announce, _permission(5, "t1"), _granted(5), *convo[5:]]
    assert found(known) == []
    bad = [*convo[:5], _permission(5, "pending"), _granted(5),
           _permission(6, "pending", "pwd"), _granted(6), *convo[5:]]
    v = list(violations(records(bad)))
    assert [(x["rule"], x["seq"], x["pointer"], x["level"], x.get("related")) for x in v] == [
        ("unannounced-tool-call", 5, "/params/toolCall/toolCallId", "warning", None),
        ("tool-call-id-reused", 7, "/params/toolCall/toolCallId", "warning", 5)]
    assert v[0]["words"] == "An update to an existing tool call."
    s = summary(bad)
    assert (s["violations"], s["warnings"]) == (0, 2)


def test_v2_permission_may_upsert_a_tool_call():
    """v2 ToolCallUpdate "Represents an upsert for a tool call": no warning."""
    assert found(v2()) == []


def test_a_session_used_before_session_new_was_answered_says_so():
    convo = v1()
    early = ("a2c", m(method="session/update", params={"sessionId": "s1", "update": {
        "sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "."}}}))
    v = list(violations(records([*convo[:3], early, *convo[3:]])))
    assert [(x["rule"], x["seq"], x["message"], x["related"]) for x in v] == [
        ("unknown-session", 3,
         "session/update: session s1 used before session/new (seq 2) was answered", 2)]


def _set_title(rid=5):
    return ("c2a", m(id=rid, method="session/set_title", params={
        "sessionId": "sess-1", "title": "t"}))


def test_the_newest_v2_schema_when_the_agent_advertises_what_only_it_defines():
    """SDK 2.4.0's v2 adds session/set_title (gated by ``session.title``), tool status
    paused; an agent that advertises ``capabilities.session.title`` is on it."""
    newer = v2(agent_caps={"session": {"title": {}}})
    convo = [*newer[:-2], _set_title(), ("a2c", m(id=5, result={"title": "t"})), *newer[-2:]]
    assert found(convo) == []
    s = summary(convo)
    assert (s["schema"], s["schemaFrom"]) == ("v2-sdk-2.4.0", "detected")
    old = [*v2()[:-2], _set_title(), ("a2c", m(id=5, result={"title": "t"})), *v2()[-2:]]
    assert found(old) == [
        ("unknown-method", 11, "/method",
         "session/set_title is not a method of ACP v2.0.0-alpha.9 (extension methods "
         "begin with _)")]
    assert summary(old)["schemaFrom"] == "default"
    forced = summary(old, revision="v2-sdk-2.4.0")
    assert (forced["schema"], forced["schemaFrom"], forced["protocolVersion"]) == (
        "v2-sdk-2.4.0", "forced", 2)
    assert summary(v1(), revision="v1")["schema"] == "v1"


def test_a_batch_in_the_newest_v2_is_not_jsonrpc():
    """alpha.9 defines batches (checked whole); SDK 2.4.0's v2 has none."""
    batch = [m(method="session/cancel", params={"sessionId": "sess-1"})]
    convo = [*v2_open(), ("c2a", batch)]
    assert found(convo) == []
    assert found(convo, revision="v2-sdk-2.4.0") == [
        ("not-jsonrpc", 11, "", "a batch (JSON array): ACP v2-sdk-2.4.0 has no batches")]


def _null_ids(convo: list, rid=None) -> list:
    """``convo`` with its prompt and the prompt's answer under id ``rid``."""
    at = next(i for i, (_, x) in enumerate(convo) if x.get("method") == "session/prompt")
    answer = next(i for i, (d, x) in enumerate(convo) if i > at and d == "a2c"
                  and x.get("id") == convo[at][1]["id"] and "method" not in x)
    out = list(convo)
    out[at] = (out[at][0], {**out[at][1], "id": rid})
    out[answer] = (out[answer][0], {**out[answer][1], "id": rid})
    return out


def test_a_null_request_id_in_the_newest_v2():
    """SDK 2.4.0's v2 ``RequestId``: "a string or an integer. Unlike base JSON-RPC, it
    MUST NOT be `null`." A request with id null and the result answering it are each
    flagged there, detected or forced; v1 and alpha.9 take null."""
    newer = _null_ids(v2(agent_caps={"session": {"title": {}}}))
    assert summary(newer)["schema"] == "v2-sdk-2.4.0"
    assert found(newer) == [
        ("request-id", 4, "/id", "a request with id null: not a request id of ACP v2-sdk-2.4.0"),
        ("request-id", 5, "/id", "a result with id null: not a request id of ACP v2-sdk-2.4.0")]
    v = list(violations(records(newer)))[0]
    assert (v["schema"], v["location"]) == ("v2-sdk-2.4.0/schema.json", "#/$defs/RequestId")
    assert "it MUST NOT be `null`" in v["words"]
    assert [x[0] for x in found(_null_ids(v2()), revision="v2-sdk-2.4.0")] == [
        "request-id", "request-id"]
    assert found(_null_ids(v2())) == []  # alpha.9
    assert found(_null_ids(v1())) == []
    # 2.4.0's error response: "`null` only when the request's id could not be
    # determined, such as for a parse error": not a request-id finding
    convo = [*v2_open(), ("c2a", b"{not json"),
             ("a2c", m(id=None, error={"code": -32700, "message": "Parse error"}))]
    rules = [r for r, *_ in found(convo, revision="v2-sdk-2.4.0")]
    assert rules[0] == "not-json" and "request-id" not in rules


def test_a_fractional_request_id_in_every_revision():
    """Every revision's ``RequestId`` number is an integer."""
    for convo, rev in ((v1(), "v1"), (v2(), "v2.0.0-alpha.9")):
        assert found(_null_ids(convo, 1.5)) == [
            ("request-id", 4, "/id", f"a request with id 1.5: not a request id of ACP {rev}"),
            ("request-id", 5 if rev != "v1" else 8, "/id",
             f"a result with id 1.5: not a request id of ACP {rev}")]


def test_every_rule_is_exercised_here():
    import inspect
    import sys

    src = inspect.getsource(sys.modules[__name__])
    missing = [rule for rule in RULES if f'"{rule}"' not in src.split("def test_every_rule")[0]]
    assert missing == []


@pytest.mark.parametrize("rule", sorted(RULES))
def test_rules_are_described(rule):
    assert RULES[rule] and rule == rule.lower()


# -- any input ---------------------------------------------------------------------------

_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False)
    | st.text(max_size=8) | st.sampled_from(["2.0", "session/prompt", "sess-1", "_x", "\udc00"]),
    lambda inner: st.lists(inner, max_size=3)
    | st.dictionaries(st.sampled_from(["jsonrpc", "id", "method", "params", "result", "error",
                                       "sessionId", "update", "sessionUpdate", "prompt",
                                       "protocolVersion", "\udc00"]), inner, max_size=4),
    max_leaves=10)


def _encoded(value) -> bytes:
    import json

    return json.dumps(value, allow_nan=True).encode("utf-8", "surrogatepass")


_frame = st.one_of(
    st.sampled_from([orjson.dumps(x) for _, x in v2() + v1()]),
    _json.map(_encoded),
    st.builds(lambda m_: _encoded({"jsonrpc": "2.0", **m_}),
              st.dictionaries(st.sampled_from(["id", "method", "params", "result", "error"]),
                              _json, max_size=3)),
    st.binary(max_size=12))


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["c2a", "a2c"]), _frame), max_size=25),
       st.booleans())
def test_any_frames_give_violation_records_never_an_exception(convo, paired):
    recs = records([(d, raw) for d, raw in convo])
    recs[0]["source"] = {"format": "x"} if paired else None
    out = list(reports(recs))
    assert out[-1]["type"] == "summary" and out[-1]["frames"] == len(convo)
    for r in out[:-1]:
        assert r["type"] == "violation" and r["rule"] in RULES
        assert r["pointer"] == "" or r["pointer"].startswith("/")
    orjson.dumps(out)  # every record is UTF-8 JSON
