"""The one reading of a command line plain enough to start an agent before parsing it
(acp-tee's :func:`~acp_pipes.cli.tee.plain_command`, acp-replay's
:func:`~acp_pipes.cli.replay.plain_client`): each tool's own options spelt out in full,
each value a separate word not starting with ``-``, then ``--`` and a command. Each tool
then checks the values it knows; anything this refuses goes the usual way (parse, then
start). It imports nothing: it runs before the tool's start-up has loaded anything."""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence


def plain_words(argv: Sequence[str], flags: frozenset[str], valued: frozenset[str]
                ) -> tuple[list[tuple[str, str]], list[str], list[str]] | None:
    """``(options, operands, command)``: the valued options given, in order, as
    ``(option, value)``; the words that are no option; the command after the first
    ``--`` (not empty). None when there is no command, a word starting with ``-`` is
    neither one of ``flags`` nor of ``valued`` (an abbreviation, ``--opt=value``,
    ``--help``), or a valued option has no value of its own."""
    if "--" not in argv:
        return None
    cut = list(argv).index("--")
    words, command = list(argv[:cut]), list(argv[cut + 1:])
    if not command:
        return None
    options: list[tuple[str, str]] = []
    operands: list[str] = []
    i = 0
    while i < len(words):
        word = words[i]
        if word in flags:
            i += 1
        elif word in valued:
            if i + 1 >= len(words) or words[i + 1].startswith("-"):
                return None
            options.append((word, words[i + 1]))
            i += 2
        elif word.startswith("-"):
            return None
        else:
            operands.append(word)
            i += 1
    return options, operands, command
