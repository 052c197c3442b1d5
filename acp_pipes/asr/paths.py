"""PathRefs: ACP's absolute paths as root-relative references (ASR-711).

A PathRef is ``{"root": "root<i>", "path": "<relative, / separated>"}`` against the
first declared root whose path is a segment-wise prefix of the absolute path (the path
equal to a root is ``"."``), otherwise ``{"root": null, "path": "<absolute>"}``.
Segment-wise: ``/a/b`` prefixes ``/a/b/c`` but not ``/a/bc``. No normalisation (``..``,
symlinks, case) is applied: paths are compared as ACP sent them, and a trailing ``/`` (a
directory) is kept (``src/``; the root itself ``./``).

ACP's absolute paths are those of the agent's machine, as the v2 schema's
``AbsolutePath`` words them: POSIX (``/home/u/proj``), a Windows drive
(``C:\\Users\\u\\proj``) or a UNC share (``\\\\server\\share\\proj``). A Windows path
is split at either slash, its drive letter compared without case (``c:`` is ``C:``) and
its other segments as sent; a UNC path's first two segments (server and share) are its
root, the server's name compared without case (a host name has none). A path of one
kind never lies under a root of another. The relative ``path`` is ``/``-separated
whatever the kind; :func:`resolve` joins it with the root's own separator.

A path that is not absolute breaks ACP's schema (its paths are absolute), yet real agents
send them (a diff's ``path: "out.txt"``). It is kept as sent, never resolved against a
guessed directory, as ``{"root": null, "path": "out.txt", "relative": true}`` (acp-pipes
choice): ``root: null`` alone means an absolute path outside every root (ASR-711).
"""

from __future__ import annotations

import re
from typing import Any

__all__ = ["LOSS_RELATIVE", "declare_roots", "is_absolute", "is_relative", "path_ref",
           "resolve"]

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


_WINDOWS = re.compile(r"[A-Za-z]:[\\/]")
_SEPARATORS = re.compile(r"[\\/]")


def _split(p: str) -> tuple[str, list[str]] | None:
    """An absolute path as (its kind, its segments), None when it is not absolute. The
    kind keeps roots of one syntax from matching paths of another: ``/`` (POSIX),
    ``C:`` (a Windows drive, its letter upper-cased: drive letters have no case),
    ``\\\\`` (UNC, whose first two segments are the server and the share)."""
    if p.startswith("/"):
        return "/", [s for s in p.split("/") if s]
    if p.startswith("\\\\"):
        segs = [s for s in _SEPARATORS.split(p[2:]) if s]
        if segs:
            segs[0] = segs[0].lower()  # the server: a host name, which has no case
        return "\\\\", segs
    if _WINDOWS.match(p):
        return p[0].upper() + ":", [s for s in _SEPARATORS.split(p[3:]) if s]
    return None


def is_absolute(path: str) -> bool:
    """An absolute path in any syntax ACP's schema allows (POSIX, Windows drive, UNC)."""
    return _split(path) is not None


def path_ref(path: Any, roots: list[dict[str, Any]]) -> dict[str, Any] | Any:
    """The PathRef for an absolute ACP path; a non-string is returned unchanged."""
    if not isinstance(path, str):
        return path
    split = _split(path)
    if split is None:
        return {"root": None, "path": path, "relative": True}  # not absolute: as sent
    kind, segs = split
    for root in roots:
        rp = root.get("path")
        if not isinstance(rp, str):
            continue
        rsplit = _split(rp)
        if rsplit is None or rsplit[0] != kind:
            continue
        rsegs = rsplit[1]
        if kind == "\\\\" and len(rsegs) < 2:
            continue  # a UNC root names at least its server and share
        if segs[: len(rsegs)] == rsegs:
            rest = segs[len(rsegs):]
            rel = "/".join(rest) if rest else "."
            if segs and path[-1] in "/\\":
                rel += "/"  # a directory stays one
            return {"root": root["id"], "path": rel}
    return {"root": None, "path": path}


def is_relative(ref: Any) -> bool:
    """A PathRef holding a path the agent sent that is not absolute: marked ``relative``,
    or (as an older acp-asr wrote it) ``root: null`` with a path not starting with ``/``."""
    return (isinstance(ref, dict) and ref.get("root") is None
            and isinstance(ref.get("path"), str)
            and (ref.get("relative") is True or not is_absolute(ref["path"])))


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
            rp: str = root["path"]
            sep = "/" if rp.startswith("/") or "\\" not in rp else "\\"
            base = rp.rstrip("/\\") or ""
            if rel == "./":
                return base + sep
            if rel in (".", ""):
                return rp
            return base + sep + (rel if sep == "/" else rel.replace("/", sep))
    return None
