"""One self-contained HTML file: markup, style and script of our own, the data as JSON.

Everything recorded is untrusted: a prompt, an agent's output or a file path can hold
``</script>``, ``<img onerror=...>`` or a ``javascript:`` link. It never becomes markup:

- the data goes into one ``<script type="application/json">`` element, which the browser
  does not run, as JSON with every ``<``, ``>`` and ``&`` written as a ``\\u`` escape, so
  neither ``</script>`` nor ``<!--`` can occur inside it and end or alter the element
  (U+2028 and U+2029 are escaped too, for readers that take the JSON for JavaScript);
- the page's own script reads it with ``JSON.parse`` and builds the DOM with
  ``textContent`` and ``createElement``, never ``innerHTML``, and makes no link from
  data (so a recorded ``javascript:`` URL is only ever text);
- a Content-Security-Policy ``<meta>``, the first thing in ``<head>``, allows no
  network at all (``default-src 'none'``: no fetch, image, font, frame or form) and no
  script or style but the page's own, named by their SHA-256 hashes: even markup that
  got in could run nothing.

The markup and title are constant (the script sets ``document.title``), so no recorded
byte is ever in the HTML outside that one JSON element.
"""

from __future__ import annotations

import base64
import hashlib
from typing import Any

from acp_pipes.protocol.jsontext import dumps

__all__ = ["csp", "embed_json", "html_page"]

#: In the JSON: what could end or alter a script element, or confuse a JavaScript reader.
_ESCAPES = (
    (b"<", b"\\u003c"),
    (b">", b"\\u003e"),
    (b"&", b"\\u0026"),
    ("\u2028".encode(), b"\\u2028"),
    ("\u2029".encode(), b"\\u2029"),
)


def embed_json(data: Any) -> bytes:
    """``data`` as JSON that is safe as the text of a script element.

    >>> embed_json({"x": "</script><!--"})
    b'{"x":"\\\\u003c/script\\\\u003e\\\\u003c!--"}'
    """
    text = dumps(data)  # a lone surrogate in a recording stays its escape
    for raw, escaped in _ESCAPES:
        if raw in text:
            text = text.replace(raw, escaped)
    return text


def _sha256(text: str) -> str:
    return "'sha256-" + base64.b64encode(hashlib.sha256(text.encode()).digest()).decode() + "'"


def csp(script: str, style: str) -> str:
    """The page's policy: nothing from anywhere, only its own script and style."""
    return ("default-src 'none'; "
            f"script-src {_sha256(script)}; style-src {_sha256(style)}; "
            "img-src 'none'; font-src 'none'; connect-src 'none'; media-src 'none'; "
            "object-src 'none'; frame-src 'none'; worker-src 'none'; manifest-src 'none'; "
            "base-uri 'none'; form-action 'none'")


def html_page(*, body: str, style: str, script: str, data: Any, generator: str,
              parts: dict[str, Any] | None = None) -> bytes:
    """The page. ``body``, ``style`` and ``script`` are the page's own constant text,
    never data; ``data`` is embedded with :func:`embed_json` for the script to read, as
    the element ``acp-data``; each of ``parts`` as an element of its own (its key the
    element's id, one of ours: never data), which the script parses only when it needs
    it (a large recording opens without parsing what is not shown yet)."""
    for own in (body, style, script):
        if "</script" in own.lower() or "</style" in own.lower():
            raise ValueError("the page's own text must not close its element")
    for key in parts or ():
        if not key.replace("-", "").isalnum():
            raise ValueError(f"a part's id must be ours, not {key!r}")
    head = (
        '<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        f'<meta http-equiv="Content-Security-Policy" content="{csp(script, style)}">\n'
        '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
        f'<meta name="generator" content="{generator}">\n'
        "<title>acp-view</title>\n"
        f"<style>{style}</style>\n</head>\n<body>\n{body}\n"
    )
    out = [head.encode()]
    for key, value in [*(parts or {}).items(), ("acp-data", data)]:
        out += [f'<script type="application/json" id="{key}">'.encode(), embed_json(value),
                b"</script>\n"]
    out.append(f"<script>{script}</script>\n</body>\n</html>\n".encode())
    return b"".join(out)
