"""The modes: one recording in, the files its single-file tool would write out.

Each calls the library functions its tool calls, with the tool's defaults for a pipe
(JSON lines, no colour), so a batch's outputs are the bytes of::

    asr       acp-asr -o DEST/STEM/ INPUT              -> DEST/STEM/<sessionId>.asr.jsonl
    validate  acp-frame --validate INPUT > DEST/STEM.validate.jsonl
    view      acp-view INPUT -o DEST/STEM.html
    align     acp-align --format diff BASELINE INPUT > DEST/STEM.diff   (.ops.jsonl,
              .json, .html for --format ops, json, html)
    export    acp-export otlp INPUT > DEST/STEM.otlp.json   (--endpoint: sent, no file);
              acp-export agent-trail INPUT -o DEST/STEM/ with --format agent-trail

A mode returns a :class:`Done`: the outputs it wrote, its status (``ok``; ``invalid``:
violations found; ``differs``: not equal to the baseline; ``failed``), the error and, for
align, the row of the batch's table. An input its tool cannot read is ``failed``; what
that tool still writes for such an input (acp-asr: the streams read up to there;
acp-view: the page as read) is written too.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypedDict

import orjson

from acp_pipes.batch.places import inside
from acp_pipes.errors import InputError, Warn

__all__ = ["MODES", "Done", "Mode"]

_NL = orjson.OPT_APPEND_NEWLINE


class Done:
    """What one input gave."""

    __slots__ = ("error", "info", "outputs", "status")

    def __init__(self, outputs: list[str], status: str = "ok", error: str | None = None,
                 info: dict[str, Any] | None = None):
        self.outputs = outputs
        self.status = status
        self.error = error
        self.info = info


class Mode:
    """A mode's name, its body ``run(path, name, stem, dest, options, warn) -> Done``,
    the options (CLI dest names) that change what it writes, the modules its body
    imports (see :meth:`warm`), and ``owns(stem, rel)``: whether ``rel`` is an output
    it may write for ``stem`` (a manifest names no other file for a rerun to remove)."""

    def __init__(self, name: str, run: Callable[..., Done], options: tuple[str, ...],
                 modules: tuple[str, ...], owns: Callable[[str, str], bool]):
        self.name = name
        self.run = run
        self.options = options
        self.modules = modules
        self.owns = owns

    def warm(self) -> None:
        """Import what the body needs, in a driver about to fork its workers: they start
        with it loaded, instead of each importing it on its first input."""
        import importlib

        for module in self.modules:
            importlib.import_module(module)


def _asr(path: str, name: str, stem: str, dest: Any, opts: dict, warn: Warn) -> Done:
    from acp_pipes.asr.mapping import convert_paths
    from acp_pipes.asr.output import session_names

    got = convert_paths([path], warn=warn, agent_name=opts.get("agent_name"),
                        secret_fields=opts.get("secret_field") or (),
                        keep_fields=opts.get("keep_field") or (),
                        snapshots=bool(opts.get("snapshots")))
    outputs = []
    names = session_names(got.headers)  # as acp-asr -o DIR names them
    for sid, header in got.headers.items():
        rel = f"{stem}/{names[sid]}"
        with dest.create(rel) as f:
            got.spool.write_to(f, {sid: header})
        outputs.append(rel)
    if got.unreadable is not None:
        return Done(outputs, "failed", str(got.unreadable))
    return Done(outputs)


def _validate(path: str, name: str, stem: str, dest: Any, opts: dict, warn: Warn) -> Done:
    from acp_pipes.frame.core import read_frames
    from acp_pipes.frame.validate import reports

    lines: list[bytes] = []
    found = 0
    records = read_frames(path, direction=opts.get("direction"), warn=warn, headers=True)
    for r in reports(records, protocol=opts.get("protocol"), stable=bool(opts.get("stable")),
                     revision=opts.get("revision")):
        if r["type"] == "summary":
            r = {"type": "summary", "source": name, **r}
            found += r["violations"]
        lines.append(orjson.dumps(r, option=_NL))
    rel = f"{stem}.validate.jsonl"
    dest.write(rel, b"".join(lines))
    return Done([rel], "invalid" if found else "ok")


def _view(path: str, name: str, stem: str, dest: Any, opts: dict, warn: Warn) -> Done:
    from acp_pipes.view import load, session_page

    recording = load([path], [name], direction=opts.get("direction"), warn=warn,
                     validate=opts.get("validate", True))
    rel = f"{stem}.html"
    dest.write(rel, session_page(recording))
    if recording.cut:
        return Done([rel], "failed", str(recording.cut[0]))
    return Done([rel])


ALIGN_SUFFIXES = {"diff": ".diff", "ops": ".ops.jsonl", "json": ".json", "html": ".html"}


def _align(path: str, name: str, stem: str, dest: Any, opts: dict, warn: Warn) -> Done:
    from acp_pipes.align import render
    from acp_pipes.align.compare import compare
    from acp_pipes.align.steps import StepTable, load_steps
    from acp_pipes.io.terminal import Terminal
    from acp_pipes.sameness.normalize import Normalizer

    base_path, base_name = opts["baseline_path"], opts["baseline"]
    fmt = opts.get("format") or "diff"
    table = StepTable()
    normalizer = Normalizer.from_pointers(opts.get("ignore") or [])
    a, b = (load_steps(p, table, normalizer=normalizer, warn=warn, source=n,
                       direction=opts.get("direction"), keep_cut=True)
            for p, n in ((base_path, base_name), (path, name)))
    if a.kind != b.kind:
        return Done([], "failed", f"cannot align a trace with an ASR stream ({a.source} is "
                    f"{a.what}; {b.source} is {b.what}): give inputs of one kind")
    cmp = compare(a, b, table, None)
    changes = cmp.changes()
    summary = render.summary(cmp, changes)
    chunks: list[bytes] = []
    if fmt == "diff":
        if cmp.distance:
            chunks = [line.encode("utf-8") + b"\n"
                      for line in render.diff_lines(cmp, opts.get("context", 3),
                                                    term=Terminal())]
    elif fmt == "ops":
        chunks = [orjson.dumps(rec, option=_NL) for rec in render.ops(cmp, changes)]
    elif fmt == "json":
        chunks = [orjson.dumps(summary, option=_NL)]
    else:
        from acp_pipes.view.sidebyside import align_page

        chunks = [align_page(render.ops(cmp, changes), a, b, summary, opts.get("context", 3))]
    rel = stem + ALIGN_SUFFIXES[fmt]
    dest.write(rel, b"".join(chunks))
    info = _row(summary)
    cut = a.cut or b.cut
    if cut is not None:
        return Done([rel], "failed", str(cut), info)
    return Done([rel], "ok" if cmp.equal else "differs", None, info)


class _ExportOptions(TypedDict):
    """What both of :func:`_export`'s OTLP paths give :func:`acp_pipes.export.export_otlp`."""

    warn: Warn
    cap: int
    encoder: Any
    resource: dict[str, Any]
    namespace: str


def _export(path: str, name: str, stem: str, dest: Any, opts: dict, warn: Warn) -> Done:
    from acp_pipes.export import DEFAULT_CAP

    cap = opts.get("max_attribute_bytes") or DEFAULT_CAP
    if opts.get("format") == "agent-trail":
        from acp_pipes.export.trail import Written, trail_files

        done = Written()
        outputs: list[str] = []
        for file, lines in trail_files([path], warn=warn, cap=cap, done=done):
            rel = f"{stem}/{file}"
            with dest.create(rel) as f:
                for line in lines:
                    f.write(orjson.dumps(line, option=_NL))
            outputs.append(rel)
        return Done(outputs, "failed", str(done.cut)) if done.cut else Done(outputs)
    from acp_pipes.export import export_otlp
    from acp_pipes.export.otlp import Encoder, Sender

    encoder = Encoder()
    resource = dict(pair.split("=", 1) for pair in opts.get("resource") or ())
    common: _ExportOptions = {"warn": warn, "cap": cap, "encoder": encoder, "resource": resource,
              "namespace": opts.get("id_namespace") or ""}
    if opts.get("endpoint"):  # a corpus to a collector: nothing written but the manifest
        sender = Sender(opts["endpoint"])
        try:
            got = export_otlp([path], sender.send, **common)
        finally:
            sender.close()
        outputs = []
    else:
        chunks: list[bytes] = []
        got = export_otlp([path], lambda spans: chunks.append(encoder.json_line(spans)),
                          **common)
        rel = f"{stem}.otlp.json"
        dest.write(rel, b"".join(chunks))
        outputs = [rel]
    info = {"sessions": got.sessions, "spans": got.spans}
    if got.cut is not None:
        return Done(outputs, "failed", str(got.cut), info)
    return Done(outputs, "ok", None, info)


def _owns_export(stem: str, rel: str) -> bool:
    """``STEM.otlp.json``, or ``STEM/<name>.trail.jsonl`` (Agent Trail, one per session)."""
    name = rel[len(stem) + 1:] if rel.startswith(stem + "/") else ""
    return inside(rel) and (rel == stem + ".otlp.json" or (
        "/" not in name and name.endswith(".trail.jsonl")))


def _row(summary: dict[str, Any]) -> dict[str, Any]:
    """The table's row of one run: where it first diverged, and by how much."""
    counts = summary["counts"]
    first = summary["first_divergence"] or {}
    step = first.get("step_b") or first.get("step_a") or {}
    return {"equal": summary["equal"], "first_a": first.get("a"), "first_b": first.get("b"),
            "first_op": first.get("op"), "first_step": step.get("summary"),
            "only_a": counts["only-a"], "only_b": counts["only-b"],
            "changed": counts["changed"], "same": counts["equal"],
            "distance": summary["distance"]}


def _owns_streams(stem: str, rel: str) -> bool:
    """``STEM/<name>.asr.jsonl``: a session's stream in the input's own folder."""
    name = rel[len(stem) + 1:] if rel.startswith(stem + "/") else ""
    return "/" not in name and name.endswith(".asr.jsonl") and inside(rel)


def _owns(*suffixes: str) -> Callable[[str, str], bool]:
    return lambda stem, rel: rel in {stem + s for s in suffixes} and inside(rel)


MODES: dict[str, Mode] = {
    "asr": Mode("asr", _asr, ("agent_name", "secret_field", "keep_field", "snapshots"),
                ("acp_pipes.asr.mapping", "acp_pipes.asr.output", "acp_pipes.fold"),
                _owns_streams),
    "validate": Mode("validate", _validate, ("direction", "protocol", "stable", "revision"),
                     ("acp_pipes.frame.core", "acp_pipes.frame.validate"),
                     _owns(".validate.jsonl")),
    "view": Mode("view", _view, ("direction", "validate"), ("acp_pipes.view",),
                 _owns(".html")),
    "align": Mode("align", _align, ("baseline", "baseline_hash", "format", "context",
                                    "ignore", "direction"),
                  ("acp_pipes.align.compare", "acp_pipes.align.render",
                   "acp_pipes.align.steps", "acp_pipes.sameness.normalize"),
                  _owns(*ALIGN_SUFFIXES.values())),
    "export": Mode("export", _export, ("format", "endpoint", "id_namespace",
                                       "max_attribute_bytes", "resource"),
                   ("acp_pipes.export", "acp_pipes.export.otlp", "acp_pipes.export.trail",
                    "acp_pipes.asr.mapping"), _owns_export),
}


def input_error(e: InputError, path: str, name: str) -> str:
    """An InputError's message, naming the input as the batch knows it (a URL's
    temporary copy by its URL)."""
    if e.source == path and path != name:
        e = InputError(name, e.line, e.message)
    return str(e)
