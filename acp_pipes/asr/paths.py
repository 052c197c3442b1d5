"""PathRefs: ACP's absolute paths as root-relative references (ASR-711).

A PathRef is ``{"root": "root<i>", "path": "<relative, / separated>"}`` against the
first declared root whose path is a segment-wise prefix of the absolute path (the path
equal to a root is ``"."``), otherwise ``{"root": null, "path": "<absolute>"}``.
Segment-wise: ``/a/b`` prefixes ``/a/b/c`` but not ``/a/bc``. No normalisation (``..``,
symlinks, case) is applied: paths are compared as ACP sent them.
"""

from __future__ import annotations

from typing import Any

__all__ = ["declare_roots", "path_ref", "resolve"]


def declare_roots(cwd: Any, additional: list) -> list[dict]:
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


def path_ref(path: Any, roots: list[dict]) -> dict | Any:
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
                return {"root": root["id"], "path": "/".join(rest) if rest else "."}
    return {"root": None, "path": path}


def resolve(ref: dict, roots: list[dict]) -> str | None:
    """The absolute path a PathRef names (None when its root is unknown or redacted)."""
    if ref.get("root") is None:
        return ref.get("path")
    for root in roots:
        if root.get("id") == ref["root"] and isinstance(root.get("path"), str):
            rel = ref.get("path")
            base = root["path"].rstrip("/") or ""
            return base + "/" + rel if rel not in (".", "") else (root["path"])
    return None
