"""Capability gates: a call, a content block, an MCP transport, an elicitation mode or an
update that needs a capability its peer did not advertise (rule ``capability``). Which
feature needs what is data (:data:`acp_pipes.frame.validate.rules.GATES`); this is the
check of one stream's frames against what its ``initialize`` exchange advertised.
"""

from __future__ import annotations

from typing import Any

from acp_pipes.frame.validate.record import violation
from acp_pipes.frame.validate.rules import GATES, LIFECYCLE, advertised, capability_source
from acp_pipes.frame.validate.schema import REVISIONS, schema_file

__all__ = ["Gates"]

_MISS = object()
#: Prompt content blocks a capability gates.
_GATED_BLOCKS = ("image", "audio", "resource")


class Gates:
    """What the peers of one stream advertised (``client_init``: the initialize
    request's params; ``agent_init``: its result), and the verdict on each feature
    (``verdicts``: feature -> its problem, or None when allowed), kept until an
    initialize message or a new protocol version changes it; an update's verdict under
    its bare tag, so the hot path needs no string built."""

    __slots__ = ("agent_init", "client_init", "of_params", "table", "verdicts", "version")

    def __init__(self) -> None:
        self.client_init: dict[str, Any] | None = None
        self.agent_init: dict[str, Any] | None = None
        self.version: Any = None
        self.table: dict[str, Any] = {}
        self.verdicts: dict[str, Any] = {}
        # the features a method's params hold, by method
        self.of_params = {"session/prompt": self._prompt, "elicitation/create": self._elicitation,
                          **dict.fromkeys(LIFECYCLE, self._lifecycle)}

    def use(self, version: Any) -> None:
        """The gates of protocol ``version`` from now on."""
        self.version = version
        self.verdicts.clear()
        self.table = GATES.get(version, {})

    def method(self, f: dict[str, Any], method: str, params: Any,
               out: list[dict[str, Any]]) -> None:
        """The capability ``method`` needs, and those its params' parts need."""
        if self.gate(f, method, "/method", out) or params.__class__ is not dict:
            return
        of_params = self.of_params.get(method)
        if of_params is not None:
            of_params(f, params, out)

    def _prompt(self, f: dict[str, Any], params: dict[str, Any],
                out: list[dict[str, Any]]) -> None:
        prompt = params.get("prompt")
        if prompt.__class__ is list:
            for i, block in enumerate(prompt):
                if block.__class__ is dict and block.get("type") in _GATED_BLOCKS:
                    self.gate(f, "prompt/" + block["type"], f"/params/prompt/{i}/type", out)

    def _lifecycle(self, f: dict[str, Any], params: dict[str, Any],
                   out: list[dict[str, Any]]) -> None:
        servers = params.get("mcpServers")
        if servers.__class__ is list:
            for i, server in enumerate(servers):
                if server.__class__ is dict:
                    transport = server.get("type", "stdio")
                    if transport.__class__ is str:
                        self.gate(f, "mcp/" + transport, f"/params/mcpServers/{i}", out)
        if params.get("additionalDirectories"):
            self.gate(f, "param/additionalDirectories", "/params/additionalDirectories", out)
        if params.get("systemPrompt") is not None:
            self.gate(f, "param/systemPrompt", "/params/systemPrompt", out)

    def _elicitation(self, f: dict[str, Any], params: dict[str, Any],
                     out: list[dict[str, Any]]) -> None:
        mode = params.get("mode")
        if mode.__class__ is str:
            self.gate(f, "elicitation/" + mode, "/params/mode", out)

    def gate(self, f: dict[str, Any], feature: str, pointer: str,
             out: list[dict[str, Any]]) -> bool:
        """Report ``feature`` if its capability was not advertised; True if reported."""
        key = feature[7:] if feature[:7] == "update/" else feature
        problem = self.verdicts.get(key, _MISS)
        if problem is _MISS:
            problem = self.verdicts[key] = self._problem(feature)
        if problem is None:
            return False
        message, file, location, words = problem
        out.append(violation(f, "capability", pointer, message, file, location, words))
        return True

    def _problem(self, feature: str) -> tuple[str, str, str, str | None] | None:
        rows = self.table.get(feature)
        if not rows:
            return None
        for holder, path in rows:
            init = self.client_init if holder == "client" else self.agent_init
            if init is None or advertised(init, path):
                continue
            location, words = capability_source(self.version, holder, path, feature)
            return (f"{feature} needs the {holder} capability {'.'.join(path)}, which it "
                    "did not advertise", schema_file(REVISIONS[self.version], True), location,
                    words)
        return None
