"""Volatile values: what two runs of one script differ in that is not behaviour.

Three kinds, each applied the same way to both frames of a comparison (:class:`View`):

- **minted identifiers and clocks** (:mod:`acp_pipes.sameness.minted`): learned as a
  renaming (an agent's session, tool-call, message ids) or left out (the clocks ACP's
  schemas define). No preset needed: the schemas say what they are.
- **a vendor's own values**, by preset: the agent's ``initialize`` answer names it
  (``agentInfo.name``) and the presets whose ``agent`` pattern matches apply (the
  package's data file ``presets.json``; a user adds presets with ``--preset FILE``, the
  same format). A preset names JSON pointers (RFC 6901, ``*`` any key or index: removed
  before comparing, as ``--ignore``) and *scrubbers*: a regular expression and what its
  matches become, applied inside every string of a frame, so an ID, a clock or a process
  id inside a shell's output or a message's text is masked and the rest of the text is
  still compared (as ApprovalTests' scrubbers mask GUIDs and dates). A preset may also
  name more ``sessionUpdate`` kinds that float for that agent, and frames it sends only
  sometimes (``optional``).
- **learned noise** (:mod:`acp_pipes.sameness.noise`): what differs between two
  recordings of one script.

A preset file::

    {"format": "acp-pipes/presets", "version": 1, "presets": [
      {"agent": "my-agent*", "why": "what these values are",
       "ignore": ["/params/update/_meta/startedAt"],
       "scrub": [{"name": "request id", "pattern": "req_[0-9a-f]{16}", "as": "<request-id>"}],
       "floating": ["_my_agent_status"],
       "optional": [{"method": "session/update", "update": "tool_call", "why": "..."}]}]}
"""

from __future__ import annotations

import fnmatch
import os
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import orjson

from acp_pipes.errors import InputError
from acp_pipes.sameness.minted import drop_clocks, rename

if TYPE_CHECKING:
    from acp_pipes.sameness.normalize import Normalizer

__all__ = ["FORMAT", "Preset", "Rules", "Scrubber", "View", "agent_name", "default_presets",
           "load_presets", "presets_of", "rules_for"]

FORMAT = "acp-pipes/presets"
_KEYS = frozenset({"agent", "why", "ignore", "scrub", "floating", "optional", "name"})


@dataclass(frozen=True)
class Scrubber:
    """A regular expression whose matches, inside any string of a frame, become ``as_``."""

    name: str
    pattern: re.Pattern[str]
    as_: str

    def to_json(self) -> dict[str, str]:
        return {"name": self.name, "pattern": self.pattern.pattern, "as": self.as_}


@dataclass(frozen=True)
class Preset:
    """One entry of a preset file: the agents it is for (a glob over ``agentInfo.name``;
    ``*`` every agent) and what it declares volatile."""

    agent: str
    why: str = ""
    ignore: tuple[str, ...] = ()
    scrub: tuple[Scrubber, ...] = ()
    floating: frozenset[str] = frozenset()
    optional: tuple[dict[str, str], ...] = ()
    source: str = ""

    def applies(self, name: str | None) -> bool:
        return self.agent == "*" or (name is not None and fnmatch.fnmatchcase(name, self.agent))


@dataclass
class Rules:
    """The volatile values of one comparison: the presets that apply, merged, and the
    user's ``--ignore`` pointers."""

    presets: list[Preset] = field(default_factory=list)
    ignore: tuple[str, ...] = ()

    @property
    def pointers(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(p for x in self.presets for p in x.ignore)) + self.ignore

    @property
    def scrubbers(self) -> tuple[Scrubber, ...]:
        return tuple(s for x in self.presets for s in x.scrub)

    @property
    def floating(self) -> frozenset[str]:
        return frozenset(k for x in self.presets for k in x.floating)

    @property
    def has_optional(self) -> bool:
        return any(x.optional for x in self.presets)

    def optional(self, method: str | None, update: str | None) -> str | None:
        """Why a frame of this method and update kind is one the agent sends only
        sometimes (None: it is not)."""
        for x in self.presets:
            for o in x.optional:
                if o.get("method", method) == method and o.get("update", update) == update:
                    return o.get("why") or f"preset for {x.agent}"
        return None

    def names(self) -> list[str]:
        return [x.agent for x in self.presets]


def _fail(source: str, message: str) -> InputError:
    return InputError(source, 0, message)


def _preset(entry: Any, source: str, n: int) -> Preset:
    """Preset ``n`` of a preset file, each member checked in turn (the first bad one is
    the file's error)."""
    where = f"preset {n + 1}"
    if not isinstance(entry, dict):
        raise _fail(source, f"{where} is not an object")
    unknown = set(entry) - _KEYS
    if unknown:
        raise _fail(source, f"{where}: unknown {', '.join(sorted(unknown))}")
    agent = entry.get("agent")
    if not isinstance(agent, str) or not agent:
        raise _fail(source, f"{where}: \"agent\" must name the agents it is for (a glob)")
    ignore = _ignored(entry.get("ignore", []), source, where)
    scrubs = [_scrubber(x, source, where) for x in entry.get("scrub", [])]
    floating = entry.get("floating", [])
    optional = entry.get("optional", [])
    if not isinstance(floating, list) or not all(isinstance(k, str) for k in floating):
        raise _fail(source, f"{where}: \"floating\" must be a list of sessionUpdate kinds")
    if not isinstance(optional, list) or not all(
            isinstance(o, dict) and set(o) <= {"method", "update", "why"} and o for o in optional):
        raise _fail(source, f"{where}: \"optional\" must be a list of {{\"method\", "
                    "\"update\", \"why\"}")
    return Preset(agent, str(entry.get("why", "")), tuple(ignore), tuple(scrubs),
                  frozenset(floating), tuple(optional), source)


def _ignored(ignore: Any, source: str, where: str) -> list[str]:
    """A preset's ``ignore``: JSON pointers."""
    from acp_pipes.sameness.normalize import parse_pointer

    if not isinstance(ignore, list) or not all(isinstance(p, str) for p in ignore):
        raise _fail(source, f"{where}: \"ignore\" must be a list of JSON pointers")
    for p in ignore:
        try:
            parse_pointer(p)
        except ValueError as e:
            raise _fail(source, f"{where}: {e}") from None
    return ignore


def _scrubber(s: Any, source: str, where: str) -> Scrubber:
    """One of a preset's ``scrub``: a pattern and the text it becomes, which the pattern
    must not match."""
    if not isinstance(s, dict) or not isinstance(s.get("pattern"), str):
        raise _fail(source, f"{where}: each scrubber is {{\"pattern\": REGEX, \"as\": TEXT}}")
    try:
        pattern = re.compile(s["pattern"])
    except re.error as e:
        raise _fail(source, f"{where}: scrubber {s['pattern']!r}: {e}") from None
    replacement = s.get("as", "<scrubbed>")
    if not isinstance(replacement, str) or pattern.search(replacement):
        raise _fail(source, f"{where}: scrubber {s['pattern']!r}: \"as\" must be text "
                    "the pattern does not match")
    return Scrubber(str(s.get("name", s["pattern"])), pattern, replacement)


def load_presets(data: bytes, source: str) -> list[Preset]:
    """The presets of a preset file's bytes; an InputError naming ``source`` when they
    are not one."""
    try:
        doc = orjson.loads(data)
    except orjson.JSONDecodeError as e:
        raise _fail(source, f"not JSON: {e}") from None
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        raise _fail(source, f'expected a preset file ({{"format": "{FORMAT}", ...}})')
    if doc.get("version") != 1:
        raise _fail(source, f"preset file version {doc.get('version')!r}: this acp-pipes "
                    "reads version 1")
    presets = doc.get("presets")
    if not isinstance(presets, list):
        raise _fail(source, '"presets" must be a list')
    return [_preset(e, source, n) for n, e in enumerate(presets)]


def default_presets() -> list[Preset]:
    """The package's presets (``acp_pipes/sameness/presets.json``)."""
    with open(os.path.join(os.path.dirname(__file__), "presets.json"), "rb") as f:
        data = f.read()
    return load_presets(data, "acp_pipes/sameness/presets.json")


def presets_of(paths: list[str], no_preset: bool) -> list[Preset]:
    """``--preset FILE`` and ``--no-preset`` (acp-replay --client, acp-align): the
    package's presets (unless ``no_preset``), then each file's; a file that cannot be read
    or is no preset file is the file's error (exit 2, naming it)."""
    from acp_pipes.io.lines import display_name, open_source

    presets = [] if no_preset else default_presets()
    for path in paths:
        with open_source(path) as f:
            presets += load_presets(f.read(), display_name(path))
    return presets


def agent_name(initialize_result: Any) -> str | None:
    """The agent's name in an ``initialize`` answer (a whole frame or its result): v1's
    ``agentInfo.name``, v2's ``info.name``."""
    if isinstance(initialize_result, dict) and "result" in initialize_result:
        initialize_result = initialize_result["result"]
    info = None
    if isinstance(initialize_result, dict):
        info = initialize_result.get("agentInfo", initialize_result.get("info"))
    name = info.get("name") if isinstance(info, dict) else None
    return name if isinstance(name, str) else None


def rules_for(name: str | None, presets: Iterable[Preset], ignore: Sequence[str] = ()
              ) -> Rules:
    """The rules for the agent ``name``: every preset that applies, in order."""
    return Rules([p for p in presets if p.applies(name)], tuple(ignore))


class View:
    """What a frame is compared as, the same for both sides: the recorded frame renamed
    (its minted identifiers by the renaming learned so far; its session's working
    directory by ``paths``, the re-drive's workspace), then on both sides the clocks
    dropped, secrets concealed, the pointers removed (presets and ``--ignore``, as
    :class:`acp_pipes.sameness.normalize.Normalizer`), the JSON-RPC id of an agent's request
    masked (it is the agent's to mint), every string scrubbed, and the noise learned for
    the recorded frame applied (:meth:`acp_pipes.sameness.noise.Noise.apply`)."""

    def __init__(self, rules: Rules | None = None, paths: dict[str, str] | None = None):
        self.rules = rules or Rules()
        self._normalizer: Normalizer | None = None
        self.scrubbers = self.rules.scrubbers
        self.paths = dict(paths or {})
        self._path_re = _paths_pattern(self.paths)

    @property
    def normalizer(self) -> Normalizer:
        """The pointers' normaliser, made when a frame is first compared as JSON (a
        re-drive whose frames are the recorded bytes never loads it)."""
        if self._normalizer is None:
            from acp_pipes.sameness.normalize import Normalizer

            self._normalizer = Normalizer.from_pointers(self.rules.pointers)
        return self._normalizer

    @property
    def maps_paths(self) -> bool:
        """Whether a recorded directory stands for another one (``--workspace``)."""
        return self._path_re is not None

    def with_paths(self, paths: dict[str, str]) -> View:
        return View(self.rules, paths)

    def recorded(self, value: Any, names: dict[str, str], request: bool) -> Any:
        if names:
            value = rename(value, names)
        if self._path_re is not None:
            value = map_strings(value, self._map_path)
        return self._common(value, request)

    def live(self, value: Any, request: bool) -> Any:
        return self._common(value, request)

    def _common(self, value: Any, request: bool) -> Any:
        value = self.normalizer.view(drop_clocks(value), drop_id=request)
        if self.scrubbers:
            value = map_strings(value, self.scrub)
        return value

    def scrub(self, text: str) -> str:
        for s in self.scrubbers:
            if s.pattern.search(text) is not None:
                text = s.pattern.sub(s.as_, text)
        return text

    def _map_path(self, text: str) -> str:
        pattern = self._path_re
        if pattern is None or pattern.search(text) is None:
            return text  # the same object: nothing changed
        return pattern.sub(lambda m: self.paths[m.group(0)], text)

    def map_paths(self, value: Any) -> Any:
        """``value`` with each recorded path prefix in its strings replaced by its live
        counterpart (what a re-drive sends its agent under ``--workspace``)."""
        return value if self._path_re is None else map_strings(value, self._map_path)


def _paths_pattern(paths: dict[str, str]) -> re.Pattern[str] | None:
    """The recorded directories, longest first, each ending at a path boundary."""
    keys = [k for k, v in paths.items() if k and k != v]
    if not keys:
        return None
    keys.sort(key=len, reverse=True)
    return re.compile("|".join(re.escape(k) + r"(?![\w.-])" for k in keys))


def map_strings(value: Any, fn) -> Any:
    """``value`` with ``fn`` applied to every string in it (not keys); copies only what
    changes."""
    if value.__class__ is str:
        return fn(value)  # (fn returns the same object when nothing changed)
    if value.__class__ is dict:
        out = None
        for k, v in value.items():
            new = map_strings(v, fn) if v.__class__ in (str, dict, list) else v
            if new is not v:
                if out is None:
                    out = dict(value)
                out[k] = new
        return value if out is None else out
    if value.__class__ is list:
        items = [map_strings(v, fn) if v.__class__ in (str, dict, list) else v for v in value]
        return value if all(a is b for a, b in zip(items, value, strict=True)) else items
    return value

