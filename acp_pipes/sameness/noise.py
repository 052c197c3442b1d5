"""Learned noise: what differs between two recordings of one script is not behaviour.

Twitter's Diffy runs the old build twice to learn which fields differ between two runs
of the same code, and ignores exactly those when the new build is compared. The same
here: given a recording (the *primary*, the one a re-drive plays) and others of the same
script, each other one is compared with the primary by the model
(:func:`acp_pipes.sameness.runs.learn_noise`, beside the comparison it runs), and every
difference it finds is learned for the primary frame it was found at, and for nothing
else:

- a string that differs: a *template* of the two (their common words kept, each run of
  words that differs a wildcard), so a live string matching the template compares equal
  and any other change to it is still a difference ("Chunk ID: 3fa9 ... Output: one" and
  "Chunk ID: 7c01 ... Output: one" learn "Chunk ID: * ... Output: one");
- any other value that differs, or a member present in one only: that pointer ignored
  at that frame (an array that grew: the array);
- a primary frame another recording does not have: *optional* (missing, a note);
- a frame another recording has and the primary does not: an allowed extra (the same
  frame live is a note);
- an order two recordings disagree on: that frame may come before what it follows.

:meth:`Noise.summary` says what was learned, so a user sees what is tolerated.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from difflib import SequenceMatcher
from typing import Any

from acp_pipes.sameness.events import Event
from acp_pipes.sameness.normalize import Normalizer, parse_pointer

__all__ = ["Noise", "Template"]

_TOKEN = re.compile(r"\w+|\s+|[^\w\s]")
WILDCARD = "<~>"


class Template:
    """A string with the runs of words two samples disagree on made wildcards.

    >>> t = Template("Chunk ID: 3fa9\\nOutput: one", "Chunk ID: 7c01\\nOutput: one")
    >>> t.canonical, t.match("Chunk ID: 99\\nOutput: one"), t.match("Chunk ID: 99\\nOutput: two")
    ('Chunk ID: <~>\\nOutput: one', True, False)
    """

    __slots__ = ("canonical", "regex")

    def __init__(self, a: str, b: str):
        ta, tb = _TOKEN.findall(a), _TOKEN.findall(b)
        parts: list[str | None] = []  # literal text, None: a wildcard
        for op, i1, i2, _j1, _j2 in SequenceMatcher(None, ta, tb, autojunk=False).get_opcodes():
            if op == "equal":
                parts.append("".join(ta[i1:i2]))
            elif not parts or parts[-1] is not None:
                parts.append(None)
        self.canonical = "".join(WILDCARD if p is None else p for p in parts)
        self.regex = re.compile("".join("(?:.*?)" if p is None else re.escape(p)
                                        for p in parts), re.S)

    def match(self, s: str) -> bool:
        return self.regex.fullmatch(s) is not None


@dataclass
class _Rules:
    """What was learned for one primary frame."""

    texts: dict[str, list[Template]] = field(default_factory=dict)
    ignore: list[str] = field(default_factory=list)
    normalizer: Normalizer | None = None


@dataclass
class Noise:
    """What other recordings of the primary's script taught, by primary frame index."""

    frames: dict[int, _Rules] = field(default_factory=dict)
    optional: dict[int, str] = field(default_factory=dict)
    unordered: set[int] = field(default_factory=set)
    extras: list[tuple[tuple, Any, str]] = field(default_factory=list)
    learned: list[dict[str, Any]] = field(default_factory=list)  # for the summary
    recordings: int = 0

    def apply(self, index: int, r: Any, x: Any) -> tuple[Any, Any]:
        """The views of primary frame ``index`` and of the live frame compared with it,
        with what was learned for that frame tolerated."""
        rules = self.frames.get(index)
        if rules is None:
            return r, x
        for pointer, templates in rules.texts.items():
            segs = parse_pointer(pointer)
            rv, xv = _get(r, segs), _get(x, segs)
            if rv.__class__ is str and xv.__class__ is str:
                for t in templates:
                    if t.match(xv) and t.match(rv):
                        r, x = _set(r, segs, t.canonical), _set(x, segs, t.canonical)
                        break
        if rules.normalizer is not None:
            r, x = rules.normalizer.apply(r), rules.normalizer.apply(x)
        return r, x

    def extra(self, ev: Event, view: Any) -> str | None:
        """Why a live frame no recorded frame takes is tolerated: another recording has
        it (None: none does)."""
        if not self.extras:
            return None
        cls = ev.cls()
        mine = view.live(ev.value, ev.kind == "request")
        from acp_pipes.sameness.jsondiff import pointer_diff

        for c, value, source in self.extras:
            if c == cls and not pointer_diff(value, mine, limit=1):
                return f"{source} has it"
        return None

    def learn_diff(self, index: int, ev: Event, diff: list[dict[str, Any]], source: str
                   ) -> None:
        rules = self.frames.setdefault(index, _Rules())
        for d in diff:
            path = d["path"]
            a, b = d.get("recorded"), d.get("received")
            if d["op"] == "replace" and a.__class__ is str and b.__class__ is str:
                templates = rules.texts.setdefault(path, [])
                if not any(t.match(b) and t.match(a) for t in templates):
                    templates.append(Template(a, b))
                    self.learned.append({"seq": ev.seq, "label": ev.label, "path": path,
                                         "as": "text", "template": templates[-1].canonical,
                                         "from": source})
                continue
            segs = parse_pointer(path)
            if d["op"] != "replace" and segs and segs[-1].isdigit():
                path = "/" + "/".join(s.replace("~", "~0").replace("/", "~1")
                                      for s in segs[:-1])  # an array that grew: the array
            if path not in rules.ignore:
                rules.ignore.append(path)
                self.learned.append({"seq": ev.seq, "label": ev.label, "path": path,
                                     "as": "ignored", "from": source})
        rules.normalizer = Normalizer.from_pointers(rules.ignore) if rules.ignore else None

    def summary(self) -> dict[str, Any]:
        """What was learned, for the report: one entry per pointer, per optional frame,
        per extra and per order."""
        values = sum(1 for v in self.learned if "path" in v)
        return {"event": "learned", "recordings": self.recordings,
                "values": [v for v in self.learned if "path" in v],
                "frames": [v for v in self.learned if "path" not in v],
                "extras": [{"label": " ".join(str(x) for x in c[1:] if x), "from": s}
                           for c, _v, s in self.extras],
                "message": f"learned from {self.recordings} other recording"
                f"{'s' if self.recordings != 1 else ''}: {_count(values, 'value')}, "
                f"{_count(len(self.optional), 'frame')} sent only sometimes, "
                f"{_count(len(self.extras), 'extra frame')}, "
                f"{_count(len(self.unordered), 'frame')} in another order"}


def _count(n: int, what: str) -> str:
    return f"{n} {what}{'s' if n != 1 else ''}"


def _get(value: Any, segs: list[str]) -> Any:
    for s in segs:
        if value.__class__ is dict:
            value = value.get(s)
        elif value.__class__ is list and s.isdigit() and int(s) < len(value):
            value = value[int(s)]
        else:
            return None
    return value


def _set(value: Any, segs: list[str], new: Any) -> Any:
    """``value`` with the member at ``segs`` replaced by ``new`` (copies the path)."""
    if not segs:
        return new
    head, rest = segs[0], segs[1:]
    if value.__class__ is dict and head in value:
        out = dict(value)
        out[head] = _set(value[head], rest, new)
        return out
    if value.__class__ is list and head.isdigit() and int(head) < len(value):
        out_l = list(value)
        out_l[int(head)] = _set(value[int(head)], rest, new)
        return out_l
    return value
