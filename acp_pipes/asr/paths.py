"""PathRefs: ACP's absolute paths as root-relative references (ASR-711).

A PathRef is ``{"root": "root<i>", "path": "<relative, / separated>"}`` against the
first declared root whose path is a segment-wise prefix of the absolute path (the path
equal to a root is ``"."``), otherwise ``{"root": null, "path": "<absolute>"}``.
Segment-wise: ``/a/b`` prefixes ``/a/b/c`` but not ``/a/bc``. No normalisation (``..``,
symlinks, case) is applied: paths are compared as ACP sent them, and a trailing ``/`` (a
directory) is kept (``src/``; the root itself ``./``).

A path that is not absolute breaks ACP's schema (its paths are absolute), yet real agents
send them (a diff's ``path: "out.txt"``). It is kept as sent, never resolved against a
guessed directory, as ``{"root": null, "path": "out.txt", "relative": true}`` (acp-pipes
choice): ``root: null`` alone means an absolute path outside every root (ASR-711).
"""

from __future__ import annotations

from typing import Any

__all__ = ["LOSS_RELATIVE", "declare_roots", "is_relative", "path_ref", "resolve"]

#: The loss a stream declares when the agent sent a path that is not absolute (ASR-722).
LOSS_RELATIVE = "_org.agent-session.acp/relative_paths"


def declare_roots(cwd: Any, additional: list[Any]) -> list[dict[str, Any]]:
    """``root0`` for cwd, ``root1..`` for additionalDirectories in order (ASR-711)."""
    roots = []
    if isinstance(cwd, str):
        roots.append({"id": "root0", "path": cwd})
    for d in additional if isinstance(additional, list) else ():
        if isinstance(d, str):
            roots.append({"id": f"root{len(roots)}", "path": d})
    return roots


def _segments(p: str) -> list[str]:
    return [s for s in p.split("/") if s]


def path_ref(path: Any, roots: list[dict[str, Any]]) -> dict[str, Any] | Any:
    """The PathRef for an absolute ACP path; a non-string is returned unchanged."""
    if not isinstance(path, str):
        return path
    if path.startswith("/"):
        segs = _segments(path)
        for root in roots:
            rp = root.get("path")
            if not isinstance(rp, str):
                continue
            rsegs = _segments(rp)
            if segs[: len(rsegs)] == rsegs:
                rest = segs[len(rsegs):]
                rel = "/".join(rest) if rest else "."
                if path.endswith("/") and len(path) > 1:
                    rel += "/"  # a directory stays one
                return {"root": root["id"], "path": rel}
        return {"root": None, "path": path}
    return {"root": None, "path": path, "relative": True}  # not absolute: as sent


def is_relative(ref: Any) -> bool:
    """A PathRef holding a path the agent sent that is not absolute: marked ``relative``,
    or (as an older acp-asr wrote it) ``root: null`` with a path not starting with ``/``."""
    return (isinstance(ref, dict) and ref.get("root") is None
            and isinstance(ref.get("path"), str)
            and (ref.get("relative") is True or not ref["path"].startswith("/")))


def resolve(ref: dict[str, Any], roots: list[dict[str, Any]]) -> str | None:
    """The absolute path a PathRef names; None when it names none: its root unknown or
    redacted, or its ``path`` not a string (a broken or hostile stream, which is read on
    rather than ending the replay)."""
    rel = ref.get("path")
    if not isinstance(rel, str):
        return None
    if ref.get("root") is None:
        return rel
    for root in roots:
        if root.get("id") == ref["root"] and isinstance(root.get("path"), str):
            base = root["path"].rstrip("/") or ""
            if rel == "./":
                return base + "/"
            return base + "/" + rel if rel not in (".", "") else root["path"]
    return None
