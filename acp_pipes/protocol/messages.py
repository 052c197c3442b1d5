"""What ACP's content means, said once: the text of a list of content blocks and what a
reasoning part is. Every reader of sessions (the fold, ASR, replay, export, align) asks
these questions; they answer them here, so a rule changes in one place.

ACP's ``ContentBlock`` is a tagged object (``{"type": "text", "text": ...}``, image,
audio, resource, resource_link); ASR's message parts add ``{"type": "reasoning"}``
(ASR-727). Anything that is not a dict is no block: it is counted as left out, never
raised on, because these functions read recordings as they are.
"""

from __future__ import annotations

from typing import Any

__all__ = ["block_text", "is_reasoning", "reasoning_only", "texts_of"]


def texts_of(blocks: Any) -> tuple[list[str], bool]:
    """The texts of the blocks that carry one (a string ``text``), in order, and whether
    any block was left out (an image, a resource, a block that is no object).

    >>> texts_of([{"type": "text", "text": "a"}, {"type": "image"}, {"text": "b"}])
    (['a', 'b'], True)
    >>> texts_of("not a list")
    ([], False)
    """
    if blocks.__class__ is not list:
        return [], False
    texts: list[str] = []
    other = False
    for b in blocks:
        t = b.get("text") if b.__class__ is dict else None
        if t.__class__ is str:
            texts.append(t)
        else:
            other = True
    return texts, other


def block_text(blocks: Any) -> tuple[str, bool]:
    """The texts of ``blocks`` joined (ACP streams a message in chunks: their texts make
    one text), and whether any block was left out.

    >>> block_text([{"type": "text", "text": "hel"}, {"type": "text", "text": "lo"}])
    ('hello', False)
    """
    texts, other = texts_of(blocks)
    return "".join(texts), other


def is_reasoning(part: Any) -> bool:
    """Whether a message part is reasoning (ASR-727: an ACP thought is stored as one)."""
    return part.__class__ is dict and part.get("type") == "reasoning"


def reasoning_only(parts: Any) -> bool:
    """Whether a message's content is reasoning and nothing else: such a message is a
    thought (ASR-727), replayed as ``agent_thought_chunk`` and keyed in the thought's ID
    space; an empty content is no thought.

    >>> reasoning_only([{"type": "reasoning", "text": "hm"}])
    True
    >>> reasoning_only([{"type": "reasoning"}, {"type": "text", "text": "x"}]), reasoning_only([])
    (False, False)
    """
    return parts.__class__ is list and bool(parts) and all(map(is_reasoning, parts))
