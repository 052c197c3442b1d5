"""`acp-replay`: a recorded session played back. Six modes, declared in :data:`MODES` with
the options each takes and checked in :func:`choose` before anything runs: a trace (wire
log or frames) replayed byte for byte as the agent, as the client (``--client``) or one
direction emitted (``--emit``), with bodies in :mod:`acp_pipes.cli.replay_trace`; an ASR
stream replayed as ACP, served to an editor (``--serve``) or compared with another
(``--compare``), with bodies in :mod:`acp_pipes.cli.replay_asr`. The entry point is
:mod:`acp_pipes.cli.replay`, which may start ``--client``'s agent before this module
loads (:func:`main` gets it)."""

from __future__ import annotations

import argparse
import itertools
import subprocess
import sys
from dataclasses import dataclass
from typing import Any

import orjson

from acp_pipes.cli import listen as listening
from acp_pipes.cli.manual import page
from acp_pipes.cli.reports import Reporter
from acp_pipes.cli.runner import Context, InputError, Tool, UsageError, exit_now, run
from acp_pipes.io.lines import STDIN, display_name
from acp_pipes.io.streams import ASR, describe, header_format
from acp_pipes.replay.trace.spawn import end_agent

SUMMARY = "Replay a recorded ACP session: a trace byte for byte, or an ASR stream as ACP."

DESCRIPTION = """\
TRACE is a wire log (acp-tee) or frames (acp-frame; faster: the hashes are already there).

As the agent (default): acp-replay TRACE is put where the agent command goes. Each
client frame is matched against the recording (equal bytes, or equal canonical hash
after --ignore, so reordered keys are fine); the agent frames recorded after it are
written with their exact bytes. Agent requests (permission, elicitation, fs/*,
terminal/*) are sent as recorded and the client's answers matched like any frame.
Nothing is executed and no file is touched.

A frame that matches nothing stops the replay (exit 1) with one JSON line on stderr:
expected (seq, method, hash), received (method, id, hash), consumed, and a JSON-pointer
diff to the nearest recorded candidate. A client that sends more than was recorded, or
a trace cut off mid-session, is reported the same way (events trace_ended, trace_cut).

As the client (--client TRACE -- AGENT [ARGS...]): re-drives AGENT from its recording
and judges its frames by the model of the same session (its manual: sameness.md): a partial
order, not a sequence (a response after its request, a turn's frames inside the turn,
one tool call's in order; floating notifications such as usage_update anywhere in
their window), the ids it mints learned as a renaming and rewritten in what is sent
next, clocks and its vendor's own values (a preset chosen by its agentInfo name;
--preset FILE adds more) not compared, --noise OTHER tolerating what differs between
two recordings of the script. Its requests (permission, fs/*, terminal/*) are answered
from the recording; with --workspace DIR the recorded client's file writes are done
under DIR. Each client frame goes once the agent frames recorded before it came. The
first difference stops the run (exit 1, one JSON line on stderr: its kind, the recorded
and live frames, the JSON pointers that differ; --keep-going lists all); what was
tolerated is said as notes; --strict-order compares in recorded order. At the end the
agent's input is closed and, after a grace, its process group ended. The run's wire log
goes to -o (default stdout).

--emit a2c|c2a writes one direction's recorded bytes verbatim (offline, no peer).

STREAM is an ASR stream (acp-asr). acp-replay STREAM writes the session/update
notifications an agent sends when a client reopens the session (ACP v2's resume, or with
--protocol 1 v1's session/load), and a loss report (one JSON line on stderr); --wire
resends the captured bytes instead. --serve is a read-only ACP agent on stdio, of the
version the client asks for, that lists and reopens the stored sessions; --compare
compares the context views of two streams (exit 1 when they differ).

--listen URL (as the agent, or with --serve) serves remote clients over WebSocket at a
ws:// URL, or Streamable HTTP and WebSocket at an http:// URL, instead of stdio, a replay
for each connection (acp-tee's listener, without a log); port 0 picks a free port, said
on stderr as "listening on URL". It refuses web pages of other origins and foreign Host
names, binds beyond loopback only with a token, and takes acp-tee's listener options
(--allow-origin, --allow-host, --token-file, --max-agents, --max-message,
--header-timeout, --idle-timeout).

""" + (f"Manual: {page('acp-replay.md')}\nWhen two sessions are the same: "
       f"{page('sameness.md')}\nListeners: {page('security.md')}")

EXAMPLE = """\
acp-tee -o s.jsonl -- acp-echo-agent < client.jsonl > /dev/null   # record once
acp-replay s.jsonl < client.jsonl | cmp - <(acp-replay --emit a2c s.jsonl)
acp-replay --remap-ids --ignore /params/cwd s.jsonl                # in the editor
acp-replay --client s.jsonl -o rerun.jsonl -- acp-echo-agent
acp-replay --client s.jsonl --workspace ws/ --noise run1.jsonl -o rerun.jsonl -- acp-echo-agent
acp-asr -o asr/ s.jsonl && acp-replay --serve asr/*.asr.jsonl      # stored sessions"""

TRACE, STREAM = "trace", "ASR stream"
ONE_TRACE = "give exactly one TRACE (usage: acp-replay [OPTIONS] TRACE [-- AGENT ARGS...])"


@dataclass(frozen=True)
class Mode:
    """One way acp-replay runs: the flag that asks for it (None: chosen by the kind of its
    input), what it reads, its operands and the options it takes besides ``-o``."""

    selector: str | None
    reads: str  # TRACE or STREAM
    operands: str
    files: tuple[int, int | None]  # how many input files, at least and at most
    options: tuple[str, ...]
    stdin_is_the_clients: bool = False  # the input cannot be stdin

    @property
    def label(self) -> str:
        if self.selector:
            return f"--{self.selector}"
        return "replaying as the agent" if self.reads == TRACE else "replaying an ASR stream"


#: The six modes and their options (argparse ``dest`` names, declared in :data:`OPTIONS`).
MODES: dict[str, Mode] = {
    "agent": Mode(None, TRACE, "TRACE", (1, 1),
                  ("session", "match", "pace", "ignore", "remap_ids", "remap_log", "listen",
                   *listening.OPTIONS), stdin_is_the_clients=True),
    "client": Mode("client", TRACE, "TRACE -- AGENT [ARGS ...]", (1, 1),
                   ("session", "pace", "ignore", "preset", "no_preset", "noise",
                    "workspace", "keep_going", "strict_order", "remap_ids", "remap_log",
                    "timeout", "strict", "clock", "no_host")),
    "emit": Mode("emit", TRACE, "TRACE", (1, 1), ("session",)),
    "stream": Mode(None, STREAM, "STREAM", (1, 1),
                   ("protocol", "session_id", "report", "wire", "quiet")),
    "serve": Mode("serve", STREAM, "STREAM...", (1, None),
                  ("session_id", "report", "quiet", "listen", *listening.OPTIONS),
                  stdin_is_the_clients=True),
    "compare": Mode("compare", STREAM, "STREAM STREAM2", (2, 2), ()),
}
#: The flags that choose a mode, in the order a conflict names them.
SELECTORS = ("serve", "compare", "emit", "client")


def _flag(flag: str, help: str) -> tuple[str, None, dict]:
    """An option without a value (:data:`OPTIONS`)."""
    return flag, None, {"action": "store_true", "help": help}


def _repeated(flag: str, value: str, help: str) -> tuple[str, str, dict]:
    """An option that may be given again, each value kept (:data:`OPTIONS`)."""
    return flag, value, {"action": "append", "help": help}


#: Every option of a mode: dest -> (flag, its value in usage lines or None, add_argument
#: keywords). Unset options are None (or False) so that :func:`choose` sees which were
#: given; their defaults are in :data:`DEFAULTS`.
OPTIONS: dict[str, tuple[str, str | None, dict]] = {
    "listen": ("--listen", "URL", dict(
        help="as the agent or with --serve: serve remote clients at this ws:// or http:// "
             "URL instead of stdio (a replay for each connection; port 0 picks one)")),
    **listening.OPTIONS,  # who may use a listener, how much: acp-tee's options
    "emit": ("--emit", "a2c|c2a", dict(
        choices=("a2c", "c2a"),
        help="write the recorded bytes of one direction and exit (offline)")),
    "client": _flag("--client",
        "replay the client side against a live agent: --client TRACE -- AGENT "
        "[ARGS...]; -o gets the run's wire log"),
    "match": ("--match", "order|any", dict(
        choices=("order", "any"),
        help="order (default): client frames in recorded order; any: serve each client "
             "frame from the earliest unserved recorded frame with its hash, with the "
             "agent frames that recorded frame owns")),
    "pace": ("--pace", "fast|recorded", dict(
        choices=("fast", "recorded"),
        help="fast (default), or keep the recorded gaps between frames")),
    "ignore": _repeated("--ignore", "POINTER",
        "JSON pointer (RFC 6901, * = any key or index) not to match on: removed "
        "(object member) or masked (array element) before hashing; repeatable"),
    "remap_ids": _flag("--remap-ids",
        "match modulo JSON-RPC id; give each side its own ids (spliced into the "
        "recorded bytes, nothing else changes)"),
    "remap_log": ("--remap-log", "FILE", dict(
        help="with --remap-ids: write each id mapping as JSONL (recorded, live, dir, seq)")),
    "timeout": ("--timeout", "SECONDS", dict(
        type=float,
        help="--client: how long an agent may stay silent (default 10)")),
    "strict": _flag("--strict", "--client: stop at the first difference (the default)"),
    "keep_going": _flag("--keep-going",
        "--client: go on after a difference and list every one to the end"),
    "strict_order": _flag("--strict-order",
        "--client: compare the agent's frames in recorded order, floating "
        "notifications too (the re-drive before the model of the same session)"),
    "workspace": ("--workspace", "DIR", dict(
        help="--client: perform the recorded client's file writes under DIR, the "
             "session's working directory mapped onto it (without it nothing is written)")),
    "preset": _repeated("--preset", "FILE",
        "--client: volatile values of more agents (a preset file, as "
        "acp_pipes/sameness/presets.json); repeatable"),
    "no_preset": _flag("--no-preset",
        "--client: none of the package's presets (minted IDs and clocks still "
        "learned and dropped)"),
    "noise": _repeated("--noise", "TRACE",
        "--client: another recording of the same script: what differs between it "
        "and TRACE is noise, tolerated and said; repeatable"),
    "clock": ("--clock", "system|epoch|nanos:N", dict(
        help="--client: receipt times in the run's wire log (as acp-tee)")),
    "no_host": _flag("--no-host",
        "--client: leave host os/arch/cwd/pid out of the wire log header"),
    "protocol": ("--protocol", "1|2", dict(
        type=int, choices=(1, 2),
        help="ASR stream: the ACP version to replay as: 2 (default), the updates of "
             "session/resume; 1, those of session/load (today's editors)")),
    "session": ("--session", "ID", dict(
        help="trace: replay only session ID (its frames, and the connection's own: "
             "initialize, ...), as acp-asr --session converts one")),
    "quiet": _flag("--quiet",
        "ASR stream: say the loss report only when the run fails (--report FILE "
        "still gets it); -q for short"),
    "session_id": ("--session-id", "ID", dict(
        help="ASR stream: replay (or serve) under this session id")),
    "report": ("--report", "FILE", dict(
        help="ASR stream: also write the loss report (JSON lines) to FILE")),
    "wire": _repeated("--wire", "WIRELOG",
        "ASR stream: resend the captured agent frames from the wire log(s) it was "
        "recorded from (one per connection, in order)"),
    "serve": _flag("--serve",
        "serve ASR streams as a read-only ACP agent on stdio (v1 or v2, as the "
        "client asks): --serve STREAM..."),
    "compare": _flag("--compare", "compare the context views of two ASR streams: --compare S S2"),
}
DEFAULTS = {"match": "order", "pace": "fast", "ignore": [], "timeout": 10.0,
            "clock": "system", "wire": [], "protocol": 2, "preset": [], "noise": []}


def usage() -> str:
    """One line per mode, from :data:`MODES`."""
    lines = []
    for mode in MODES.values():
        words = ["acp-replay"]
        if mode.selector:
            flag, value, _ = OPTIONS[mode.selector]
            words.append(f"{flag} {value}" if value else flag)
        words.append("[-o FILE]")
        for dest in mode.options:
            flag, value, _ = OPTIONS[dest]
            words.append(f"[{flag} {value}]" if value else f"[{flag}]")
        words.append(mode.operands)
        lines.append(_wrap(words, 88, " " * 13))
    return "\n       ".join(lines)


def _wrap(words: list[str], width: int, indent: str) -> str:
    """``words`` filled into lines of at most ``width``, never split inside one."""
    lines = [words[0]]
    for word in words[1:]:
        if len(lines[-1]) + 1 + len(word) > width:
            lines.append(indent + word)
        else:
            lines[-1] += " " + word
    return "\n".join(lines)


def configure(p: argparse.ArgumentParser) -> None:
    p.usage = usage()
    for dest, (flag, value, kw) in OPTIONS.items():
        flags = ("-q", flag) if dest == "quiet" else (flag,)
        # (the first mapping holds a metavar only: a str)
        p.add_argument(*flags, **({"metavar": value} if value else {}), **kw)  # type: ignore[arg-type]


def _given(args: argparse.Namespace, dest: str) -> bool:
    return getattr(args, dest, None) not in (None, False, [])


def choose(args: argparse.Namespace, sniff) -> tuple[str, str | None, object]:
    """Check the arguments against :data:`MODES` and pick the mode: (name, the input's
    format or None, the input's lines when one file was sniffed). ``sniff(path)`` reads
    the first line of a file and returns (format, all its lines). Defaults are filled in
    once the options are known to belong to the mode. Raises UsageError."""
    picked = [s for s in SELECTORS if _given(args, s)]
    if len(picked) > 1:
        raise UsageError(f"--{picked[0]} and --{picked[1]} do not go together")
    files = [f for f in (args.files or []) if f]
    command = list(getattr(args, "command", None) or [])
    if command and picked != ["client"]:
        raise UsageError("an agent command is only used with --client")
    if picked in (["serve"], ["compare"]):
        name, fmt, lines, unusable, unnamed = picked[0], None, None, None, False
    else:
        unnamed = not files
        files = files or [STDIN]  # as for every tool: no file is stdin
        name, fmt, lines, unusable = _one_input(picked[0] if picked else None, files,
                                                bool(command), sniff)
    if name == "agent" and unnamed:
        raise UsageError(ONE_TRACE)  # stdin is the client's, and no TRACE was named
    _check_options(args, name, files[0] if len(files) == 1 else None, fmt)
    _check_files(name, files)
    if unusable is not None:
        raise unusable
    for dest, value in DEFAULTS.items():
        if getattr(args, dest, None) is None:
            setattr(args, dest, value)
    return name, fmt, lines


def _one_input(name: str | None, files: list[str], command: bool, sniff
               ) -> tuple[str, str | None, object, InputError | None]:
    """The mode of one input file (``name``: the mode a flag asked for), by the format
    its first line names: (name, format, lines, the error that makes it unusable, said
    once the mode is known)."""
    if len(files) != 1:
        raise UsageError(ONE_TRACE)
    if name == "client" and not command:
        raise UsageError("--client needs the agent command: acp-replay --client TRACE "
                         "-- AGENT [ARGS...]")
    if name is None and files[0] == STDIN and sys.stdin is None:
        return "agent", None, None, None  # stdin closed (<&-): nothing to look at
    unusable = None
    try:
        fmt, lines = sniff(files[0])
    except InputError as e:  # empty, or no JSONL: said once the mode is known,
        if files[0] != STDIN:  # unless stdin turns out to be the client's
            raise
        fmt, lines, unusable = None, iter(()), e
    kind = STREAM if fmt == ASR else TRACE
    if name is None:
        name = "agent" if kind == TRACE else "stream"
    elif kind != MODES[name].reads:
        raise UsageError(f"--{name} is for traces; {display_name(files[0])} is "
                         f"{describe(fmt)}")
    return name, fmt, lines, unusable


def _check_files(name: str, files: list[str]) -> None:
    """As many input files as the mode takes, and stdin not the client's own."""
    mode = MODES[name]
    low, high = mode.files
    if not low <= len(files) <= (high or len(files)):
        if name == "serve":
            raise UsageError("--serve needs at least one ASR stream (usage: acp-replay "
                             "--serve STREAM.asr.jsonl...)")
        raise UsageError(f"--{name} needs two ASR streams: acp-replay --compare S S2")
    if mode.stdin_is_the_clients and STDIN in files:
        if name == "serve":
            raise UsageError("--serve: stdin is the client's; name the stream files")
        raise UsageError("TRACE cannot be stdin when replaying as the agent: stdin is "
                         "the client's")


def _check_options(args: argparse.Namespace, name: str, path: str | None,
                   fmt: str | None) -> None:
    """Every option given belongs to the mode; then the pairs within a mode."""
    mode = MODES[name]
    for dest in OPTIONS:
        if dest in SELECTORS or not _given(args, dest) or dest in mode.options:
            continue
        flag = OPTIONS[dest][0]
        owners = [m for m in MODES.values() if dest in m.options]
        if all(m.reads != mode.reads for m in owners) and path is not None:
            kinds = "ASR streams" if owners[0].reads == STREAM else "traces"
            raise UsageError(f"{flag} is for {kinds}; {display_name(path)} is "
                             f"{describe(fmt)}")
        if mode.selector:
            raise UsageError(f"{flag} does not go with --{mode.selector}")
        others = " or ".join(f"--{m.selector}" for m in owners if m.selector)
        raise UsageError(f"{flag} is only used with {others}")
    if _given(args, "remap_log") and not _given(args, "remap_ids"):
        raise UsageError("--remap-log needs --remap-ids")
    if _given(args, "wire") and _given(args, "session_id"):
        raise UsageError("--wire resends the recorded bytes, which name the recorded "
                         "session: it does not go with --session-id")
    if _given(args, "wire") and _given(args, "protocol"):
        raise UsageError("--wire resends the recorded bytes, in the recorded protocol: "
                         "it does not go with --protocol")


def _sniff(path: str):
    """The format the first non-blank line of ``path`` names, and all its lines (the
    first ones read again), so stdin works too."""
    from acp_pipes.io.lines import raw_lines

    lines = raw_lines(path)
    head = []
    fmt = None
    for raw in lines:
        head.append(raw)
        if raw.strip():
            try:  # parse_json: a lone-surrogate escape in a header is still JSON
                fmt = header_format(orjson.loads(raw))
            except orjson.JSONDecodeError:  # (parse_json's first step; ~15 ms to import)
                from acp_pipes.protocol.canonical import parse_json

                try:
                    fmt = header_format(parse_json(raw))
                except ValueError:
                    fmt = None
            break
    return fmt, itertools.chain(head, lines)


#: The run's state for :func:`main`: whether it is ``--client`` (ended at once,
#: :func:`_exit`) and the agent :mod:`acp_pipes.cli.replay` started before parsing
#: (None once the run has taken it; ended at the exit if it never did).
_STATE: dict[str, Any] = {"client": False, "early": None}


def _run(args: argparse.Namespace, ctx: Context) -> int:
    name, _fmt, lines = choose(args, _sniff)
    _STATE["client"] = name == "client"
    report = Reporter(ctx.prog, ctx.term, quiet=bool(getattr(args, "quiet", False)))
    status = None
    try:
        status = _body(args, ctx, name, lines, report)
        return status
    finally:
        if status != 0:  # a run that did not succeed: what -q held back is said after all
            report.release()


def _body(args: argparse.Namespace, ctx: Context, name: str, lines, report: Reporter) -> int:
    files = [f for f in (args.files or []) if f] or [STDIN]
    policy = listening.options(args)  # a listener's option without --listen: usage error
    if getattr(args, "listen", None):
        return _listen(args, ctx, policy)
    if MODES[name].reads == TRACE:
        from acp_pipes.cli import replay_trace

        early, _STATE["early"] = _STATE["early"], None
        if name != "client" and early is not None:  # (plain_client says --client)
            end_agent(early)
            early = None
        return replay_trace.run(args, ctx, name, files[0], lines, report, early=early)
    from acp_pipes.cli import replay_asr

    if name == "serve":
        return replay_asr.serve(args, ctx, files, report)
    if name == "compare":
        return replay_asr.compare(args, ctx, files, report)
    return replay_asr.replay(args, ctx, files[0], lines, report)


def _listen(args: argparse.Namespace, ctx: Context, policy: dict) -> int:
    """``--listen URL``: acp-tee's listener (:mod:`acp_pipes.tee.remote`) in front of this
    same command without ``--listen`` and the listener's options, one for each
    connection, unrecorded; ``policy``: who may use it, and how much
    (:func:`acp_pipes.cli.listen.options`)."""
    from acp_pipes.tee import remote
    from acp_pipes.tee.options import Options, parse_url

    parse_url(args.listen, listening=True)  # an OptionError for a bad URL
    argv = [sys.executable, "-m", "acp_pipes.cli.replay", *without_listen(sys.argv[1:])]
    opts = Options(log_path=None, note=ctx.note, **policy)
    return remote.listen(args.listen, opts, argv=argv)


def without_listen(argv: list[str]) -> list[str]:
    """``argv`` without its ``--listen URL`` and the listener's options (spaced, after
    ``=``, or abbreviated as argparse took them): what each connection's replay runs.

    >>> without_listen(["--serve", "--lis", "ws://h:1/acp", "--max-a=2", "a.asr.jsonl"])
    ['--serve', 'a.asr.jsonl']
    """
    flags = [flag for action in TOOL.parser()._actions for flag in action.option_strings
             if flag.startswith("--")]
    return listening.strip(argv, flags)


TOOL = Tool(
    prog="acp-replay",
    summary=SUMMARY,
    example=EXAMPLE,
    run=_run,
    configure=configure,
    description=DESCRIPTION,
    takes_command=True,
    command_metavar="",
    inputs=lambda args: [*(args.wire or []), *(args.preset or []), *(args.noise or [])],
    outputs=lambda args: [args.report, args.remap_log],
    files_metavar="TRACE|STREAM",
    files_help="a trace (wire log or frames) or an ASR stream; several ASR streams with "
               "--serve, two with --compare",
    exits="0 ok (--client: the same session; notes may say what was tolerated), 1 a "
          "frame matched nothing (a stop; --client: a difference), or --compare found "
          "differences, 2 usage or unusable input (--client: or an agent that did not "
          "start), 130 interrupted",
)


def _exit(status: int) -> None:
    """``--client``: the run's log is closed and the agent reaped (the driver waits for
    it whatever happens), so the process ends without the interpreter's teardown (~10 ms
    of freeing modules one by one, after the session); every other mode exits as usual.
    An agent started before parsing that the run never took (it stopped before) is
    ended first."""
    early, _STATE["early"] = _STATE["early"], None
    if early is not None:
        end_agent(early)
    if _STATE["client"]:
        exit_now(status)
    sys.exit(status)


def main(early: subprocess.Popen[bytes] | None = None) -> None:
    """Run acp-replay; ``early``: the agent of a ``--client`` command line, started
    already (:func:`acp_pipes.cli.replay.plain_client`)."""
    _STATE["early"] = early
    run(TOOL, exit=_exit)


if __name__ == "__main__":
    main()
