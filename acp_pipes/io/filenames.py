"""Output names that stay apart on every file system a folder of outputs may land on.

macOS and Windows compare file names ignoring case (and macOS ignoring Unicode
normalisation), so ``Sess`` and ``sess`` are one file there: the second written replaces
the first. :func:`distinct` names a set of things so that no two names are equal under
:func:`fold` (NFKC, then case folding): each keeps its plain name where that is unique in
its folder under :func:`fold`, and takes its *marked* name otherwise, deterministically
(the same set always gives the same names, whatever order it comes in). Names that are
devices on Windows (``CON``, ``NUL``, ``COM1``, ... with any extension) and names of
dots and spaces alone (``.``, ``..``, ``...``) are never plain. Ordinary names are kept
byte for byte.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Callable, Iterable

__all__ = ["distinct", "fold", "is_device"]

#: Names Windows opens as devices, whatever follows their first dot.
WINDOWS_DEVICES = frozenset({"con", "prn", "aux", "nul", *(f"com{i}" for i in range(1, 10)),
                             *(f"lpt{i}" for i in range(1, 10))})


def fold(name: str) -> str:
    """The form under which two names are one file somewhere: NFKC, case folded, NFKC
    again (folding can undo a normal form), less the dots and spaces Windows drops from
    a name's end."""
    return unicodedata.normalize("NFKC", unicodedata.normalize("NFKC", name).casefold()
                                 ).rstrip(". ")


def is_device(name: str) -> bool:
    """``name`` opens a device on Windows (``nul``, ``CON.txt``, ``com1.asr.jsonl``)."""
    return name.split(".", 1)[0].rstrip(" ").casefold() in WINDOWS_DEVICES


def distinct(things: Iterable[str], plain: Callable[[str], str],
             marked: Callable[[str], str], taken: Iterable[str] = ()) -> dict[str, str]:
    """A name for each of ``things``: ``plain(thing)`` where no other thing's name, nor a
    name in ``taken``, is equal to it under :func:`fold`, and it is no device nor dots
    alone; ``marked(thing)`` otherwise (a name that tells the thing apart, such as one
    with a hash of it). Raises ValueError naming two things whose names still fold
    alike (a hash that collides)."""
    items = sorted(set(things))
    reserved = {fold(t) for t in taken}
    names = {t: plain(t) for t in items}
    marks = {t for t in items if not names[t].rstrip(". ") or is_device(names[t])}
    while True:  # a marked name may fold like another's plain one: mark that too
        for t in marks:
            names[t] = marked(t)
        holders: dict[str, list[str]] = {}
        for t in items:
            holders.setdefault(fold(names[t]), []).append(t)
        more = {t for key, ts in holders.items() if len(ts) > 1 or key in reserved
                for t in ts if t not in marks}
        if not more:
            break
        marks |= more
    for key, ts in holders.items():
        if len(ts) > 1 or key in reserved:
            raise ValueError(f"{ts[0]!r} and {(ts[1:] or ['an output of its own'])[0]!r} "
                             f"would have one file name ({names[ts[0]]!r}) where case "
                             "is ignored")
    return names
