"""Record scripted sessions of five real ACP agents through the real acp-tee, offline.

The agents are the registries' own, pinned and installed under ``.peers/``
(scripts/install-peers: fast-agent; scripts/install-agents: qwen-code, codex-acp and
opencode from npm, mistral-vibe from PyPI). Every one but fast-agent (whose
``passthrough`` model echoes) runs whole turns against the canned OpenAI-compatible model
server beside this file, on 127.0.0.1; each gets a home of its own under the recording's
root (HOME, XDG dirs, its config pointing at that server, telemetry and update checks
off), so nothing is read from or written to the machine's home, and nothing leaves it.

The client is the official Python SDK (``acp``) as an editor is: it writes and reads the
files the agent asks it to, on disk, runs the terminals it asks for, and answers each
permission request with the option a script chooses. One script, the same for every
agent in its own tool names (:data:`AGENTS`):

1. initialize, session/new, a greeting prompt;
2. a prompt that makes the model write a file with a tool, then read it back with a
   tool and with a shell (a re-drive that does not write the file sees another world);
3. a prompt that makes the agent ask ``session/request_permission``;
4. where the agent can load sessions: a second connection (a new agent process) that
   ``session/load``s the session and prompts once more.

Planted changes, one at a time (``plant=``): ``reply``, the model's closing reply to
prompt 2 differs (canned_llm.py ``--variant reply``); ``client``, the client's answers to
``fs/read_text_file`` and ``terminal/output`` say ``planted`` instead of what is there;
``permission``, the client picks the reject option for prompt 3's requests.

Run ``python -m tests.agents.harness --help`` from the checkout to record by hand.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.sdk_editor import PERMISSION, Editor

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
PEERS = REPO / ".peers"
NPM_BIN = PEERS / "agents" / "node_modules" / ".bin"

#: Seconds one request of the script may take before the recording fails.
REQUEST_TIMEOUT = 120.0
#: acp-tee's --grace: how long an agent is given to end once its client's input has
#: ended. On 2 cores at a load of 5-10, fast-agent takes 1-3.4 s to exit, qwen-code
#: 0.1-4.5 s and once over 10 s (it finishes its background model requests first:
#: memory extraction, suggestions): ample for every agent that ends by itself, and
#: paid only by one that does not; codex-acp never does, and is given little.
GRACE = 30.0
GRACE_NO_EOF = 2.0
PLANTS = ("reply", "client", "permission")
PLANTED_TEXT = "planted\n"


# -- the canned model server -------------------------------------------------------------


@dataclass
class CannedLLM:
    """A running canned_llm.py: its base URL and its request log."""

    url: str
    requests: Path
    proc: subprocess.Popen


@contextlib.contextmanager
def canned_llm(workdir: Path, variant: str = "") -> Iterator[CannedLLM]:
    """canned_llm.py on a free port of 127.0.0.1, in a process group of its own that is
    ended when the block is left."""
    workdir.mkdir(parents=True, exist_ok=True)
    portfile = workdir / "llm.port"
    for stale in (portfile, Path(f"{portfile}.requests.jsonl")):
        stale.unlink(missing_ok=True)
    argv = [sys.executable, str(HERE / "canned_llm.py"), str(portfile)]
    proc = subprocess.Popen(argv + (["--variant", variant] if variant else []),
                            start_new_session=True, stdin=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 20
        while not portfile.exists():
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"canned_llm.py did not start (exit {proc.poll()})")
            time.sleep(0.02)
        yield CannedLLM(f"http://127.0.0.1:{portfile.read_text()}/v1",
                        Path(f"{portfile}.requests.jsonl"), proc)
    finally:
        end_group(proc.pid)
        proc.wait()


def end_group(pgid: int) -> None:
    with contextlib.suppress(OSError):
        os.killpg(pgid, signal.SIGKILL)


def session_members(sid: int) -> list[str]:
    """The command lines of the processes in session ``sid`` (Linux /proc)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            fields = stat[stat.rindex(")") + 2:].split()
            if int(fields[3]) != sid or fields[0] == "Z":
                continue
            cmd = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except (OSError, ValueError):
            continue
        found.append(f"{entry.name} {cmd.strip()}")
    return found


def end_session(sid: int) -> None:
    """SIGKILL every process left in session ``sid`` (one a recording started with
    setsid: acp-tee, the agent in its own process group, whatever the agent started)."""
    for _ in range(3):
        left = [int(m.split()[0]) for m in session_members(sid)]
        if not left:
            return
        for pid in left:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
        time.sleep(0.05)


# -- the agents ----------------------------------------------------------------------------


@dataclass
class Agent:
    """How to start one agent offline, and its script in its own tool names."""

    name: str
    argv: Callable[[], list[str]]
    #: (home, ws, llm url) -> environment variables; writes the agent's config in home
    configure: Callable[[Path, Path, str], dict[str, str]]
    #: ws -> the prompts of the first connection; the last asks for permission
    prompts: Callable[[Path], list[str]]
    uses_llm: bool = True
    #: whether it exits once its input ends (codex-acp does not: acp-tee's grace, then
    #: SIGTERM to its process group, acp-tee's exit status 143)
    ends_at_eof: bool = True
    #: what the client of this agent is asked besides permissions (the ``client`` plant)
    client_answers: tuple[str, ...] = ()


def _call(tool: str, args: dict) -> str:
    return f"CALL {tool} {json.dumps(args)}"


def _exe(path: Path) -> list[str]:
    if not path.exists():
        raise MissingAgent(f"{path} is missing: `make test-agents` installs the agents")
    return [str(path)]


class MissingAgent(RuntimeError):
    """An agent the script needs is not installed."""


def _fast_agent_argv() -> list[str]:
    return _exe(PEERS / "fast-agent" / "bin" / "fast-agent") + [
        "acp", "--model", "passthrough", "--shell"]


def _fast_agent_env(home: Path, ws: Path, url: str) -> dict[str, str]:
    return {}


def _fast_agent_prompts(ws: Path) -> list[str]:
    def tool(name: str, args: dict) -> str:
        return f"***CALL_TOOL {name} {json.dumps(args)}"
    notes = str(ws / "notes.txt")
    return ["hello there",
            tool("write_text_file", {"path": notes, "content": "one\n"}),
            tool("read_text_file", {"path": notes}),
            tool("execute", {"command": "cat notes.txt"}),
            tool("execute", {"command": "echo two > perm.txt"})]


def _config(path: Path, text: str) -> Path:
    """Write an agent's config file, its directory made; returns the directory."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path.parent


def _qwen_env(home: Path, ws: Path, url: str) -> dict[str, str]:
    _config(home / ".qwen" / "settings.json", json.dumps({
        "security": {"auth": {"selectedType": "openai"}},
        "model": {"name": "canned"},
        "privacy": {"usageStatisticsEnabled": False},
        "telemetry": {"enabled": False},
        "general": {"disableAutoUpdate": True, "disableUpdateNag": True}}))
    return {"OPENAI_API_KEY": "sk-canned", "OPENAI_BASE_URL": url, "OPENAI_MODEL": "canned"}


def _qwen_prompts(ws: Path) -> list[str]:
    notes = str(ws / "notes.txt")
    return ["hello there",
            "\n".join([_call("write_file", {"file_path": notes, "content": "one\n"}),
                       _call("read_file", {"file_path": notes}),
                       _call("run_shell_command", {"command": "cat notes.txt"})]),
            _call("run_shell_command", {"command": "echo two > perm.txt"})]


def _codex_env(home: Path, ws: Path, url: str) -> dict[str, str]:
    # untrusted: every command outside codex's known-safe list (cat is in it) asks
    codex = _config(
        home / ".codex" / "config.toml",
        'model = "canned"\nmodel_provider = "canned"\napproval_policy = "untrusted"\n'
        'sandbox_mode = "danger-full-access"\ncheck_for_update_on_startup = false\n'
        '[analytics]\nenabled = false\n[feedback]\nenabled = false\n'
        '[model_providers.canned]\nname = "canned"\n'
        f'base_url = "{url}"\nenv_key = "CANNED_API_KEY"\nwire_api = "responses"\n')
    return {"CODEX_HOME": str(codex), "CANNED_API_KEY": "sk-canned"}


def _codex_prompts(ws: Path) -> list[str]:
    return ["hello there",
            "\n".join([_call("exec_command", {"cmd": "printf 'one\\n' > notes.txt"}),
                       _call("exec_command", {"cmd": "cat notes.txt"})]),
            _call("exec_command", {"cmd": "echo two > perm.txt"})]


def _opencode_env(home: Path, ws: Path, url: str) -> dict[str, str]:
    config = {
        "$schema": "https://opencode.ai/config.json",
        "model": "canned/canned", "small_model": "canned/canned",
        "autoupdate": False, "share": "disabled",
        "permission": {"bash": "ask"},  # its default allows every command
        "provider": {"canned": {
            "npm": "@ai-sdk/openai-compatible", "name": "canned",
            "options": {"baseURL": url, "apiKey": "sk-canned"},
            "models": {"canned": {"name": "canned"}}}}}
    return {"OPENCODE_CONFIG_CONTENT": json.dumps(config),
            "OPENCODE_DISABLE_MODELS_FETCH": "1", "OPENCODE_DISABLE_AUTOUPDATE": "1",
            "OPENCODE_DISABLE_SHARE": "1", "OPENCODE_DISABLE_LSP_DOWNLOAD": "1",
            "OPENCODE_DISABLE_DEFAULT_PLUGINS": "1", "OPENCODE_DISABLE_CLAUDE_CODE": "1",
            "OPENCODE_DISABLE_EXTERNAL_SKILLS": "1"}


def _opencode_prompts(ws: Path) -> list[str]:
    notes = str(ws / "notes.txt")
    return ["hello there",
            "\n".join([_call("write", {"filePath": notes, "content": "one\n"}),
                       _call("read", {"filePath": notes}),
                       _call("bash", {"command": "cat notes.txt",
                                      "description": "Show notes"})]),
            _call("bash", {"command": "echo two > perm.txt", "description": "Write perm"})]


def _vibe_env(home: Path, ws: Path, url: str) -> dict[str, str]:
    vibe = _config(
        home / ".vibe" / "config.toml",
        'active_model = "canned"\nenable_telemetry = false\nenable_update_checks = false\n'
        'enable_auto_update = false\nenable_notifications = false\n'
        'enable_connectors = false\nexperimental_enable_model_catalog = false\n'
        '[[providers]]\nname = "canned"\n'
        f'api_base = "{url}"\napi_key_env_var = "CANNED_API_KEY"\n'
        'api_style = "openai"\nbackend = "generic"\n'
        '[[models]]\nname = "canned"\nprovider = "canned"\nalias = "canned"\n')
    return {"VIBE_HOME": str(vibe), "CANNED_API_KEY": "sk-canned"}


def _vibe_prompts(ws: Path) -> list[str]:
    notes = str(ws / "notes.txt")
    return ["hello there",
            "\n".join([_call("write_file", {"path": notes, "content": "one\n"}),
                       _call("read_file", {"path": notes}),
                       _call("bash", {"command": "cat notes.txt"})]),
            _call("bash", {"command": "echo two > perm.txt"})]


AGENTS: dict[str, Agent] = {a.name: a for a in [
    Agent("fast-agent", _fast_agent_argv, _fast_agent_env, _fast_agent_prompts,
          uses_llm=False, client_answers=("fs/read_text_file", "terminal/output")),
    Agent("qwen-code", lambda: _exe(NPM_BIN / "qwen") + ["--acp"], _qwen_env, _qwen_prompts,
          client_answers=("fs/read_text_file",)),
    Agent("codex-acp", lambda: _exe(NPM_BIN / "codex-acp"), _codex_env, _codex_prompts,
          ends_at_eof=False),
    Agent("opencode", lambda: _exe(NPM_BIN / "opencode") + ["acp"], _opencode_env,
          _opencode_prompts),
    Agent("mistral-vibe", lambda: _exe(PEERS / "mistral-vibe" / "bin" / "vibe-acp"),
          _vibe_env, _vibe_prompts),
]}


def plants_for(agent: Agent) -> list[str]:
    """The planted changes that can be made in this agent's script: no model reply for
    an agent without the model server, no client answer for one that asks the client
    nothing but permissions."""
    return [p for p in PLANTS if (p != "reply" or agent.uses_llm)
            and (p != "client" or agent.client_answers)]


@contextlib.contextmanager
def holding(root: Path) -> Iterator[None]:
    """Hold ``root`` for one recording or re-drive: the recordings' roots are fixed paths
    (they are in the frames), so two runs at one root, from two checkouts, take turns
    instead of wiping each other's home and workspace (a lock on ``ROOT.lock``)."""
    import fcntl

    root.parent.mkdir(parents=True, exist_ok=True)
    with open(root.parent / f"{root.name}.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def prepare(name: str, root: Path, url: str = "") -> tuple[list[str], dict[str, str], Path]:
    """A fresh ``root`` (home and workspace) for agent ``name`` pointed at the model
    server ``url``: the agent's argv, its environment, its workspace. A re-drive of a
    recording made at ``root`` prepares the same root, while it holds it
    (:func:`holding`)."""
    agent = AGENTS[name]
    argv = agent.argv()
    shutil.rmtree(root, ignore_errors=True)
    home, ws = root / "home", root / "ws"
    home.mkdir(parents=True)
    ws.mkdir()
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LANG": "C.UTF-8",
           "HOME": str(home), "USER": os.environ.get("USER", "root"),
           "XDG_CONFIG_HOME": str(home / ".config"), "XDG_DATA_HOME": str(home / ".local/share"),
           "XDG_CACHE_HOME": str(home / ".cache"), "XDG_STATE_HOME": str(home / ".local/state"),
           "TMPDIR": str(root / "tmp"), "NO_COLOR": "1"}
    (root / "tmp").mkdir()
    env.update(agent.configure(home, ws, url))
    return argv, env, ws


# -- the client ----------------------------------------------------------------------------


class ScriptClient(Editor):
    """The SDK's client side as an editor with a disk: writes and reads files for real,
    runs terminals for real in the workspace, answers permissions as the script says.
    ``plant`` changes one kind of answer (module docstring)."""

    def __init__(self, ws: Path, plant: str = "") -> None:
        super().__init__()
        self.ws = ws
        self.plant = plant
        self.reject = False  # set for the prompt whose permissions the plant rejects
        self.answered: list[dict[str, Any]] = []  # each permission's answer
        self._terms: dict[str, dict[str, Any]] = {}

    async def request_permission(self, options, session_id, tool_call, **kw: Any):
        from acp.schema import AllowedOutcome, RequestPermissionResponse

        call = tool_call.model_dump(by_alias=True, exclude_none=True)
        self.asked.append(call)
        self.updates.append({"sessionUpdate": "tool_call_update", **call, PERMISSION: True})
        want = "reject" if self.reject and self.plant == "permission" else "allow"
        chosen = next((o for o in options if o.kind == f"{want}_once"), None) or next(
            (o for o in options if o.kind.startswith(want)), options[0])
        self.answered.append({"toolCallId": call.get("toolCallId", ""),
                              "optionId": chosen.option_id, "kind": chosen.kind,
                              "planted": want == "reject"})
        return RequestPermissionResponse(
            outcome=AllowedOutcome(outcome="selected", option_id=chosen.option_id))

    async def read_text_file(self, path, session_id, line=None, limit=None, **kw: Any):
        from acp.schema import ReadTextFileResponse

        if self.plant == "client":
            return ReadTextFileResponse(content=PLANTED_TEXT)
        try:
            text = Path(path).read_text()
        except OSError as e:
            from acp import RequestError

            raise RequestError.resource_not_found(path) from e
        if line or limit:
            lines = text.splitlines(keepends=True)
            start = max((line or 1) - 1, 0)
            text = "".join(lines[start:start + limit if limit else None])
        return ReadTextFileResponse(content=text)

    async def write_text_file(self, content, path, session_id, **kw: Any):
        from acp.schema import WriteTextFileResponse

        self.files[path] = content
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        Path(path).write_text(content)
        return WriteTextFileResponse()

    async def create_terminal(self, command, session_id, args=None, cwd=None, env=None,
                              output_byte_limit=None, **kw: Any):
        from acp.schema import CreateTerminalResponse

        self.terminals.append(" ".join([command, *(args or [])]))
        argv = [command, *args] if args else ["/bin/sh", "-c", command]
        extra = {v.name: v.value for v in env or []}
        proc = await asyncio.create_subprocess_exec(
            *argv, cwd=cwd or str(self.ws), env={**os.environ, **extra},
            stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT, start_new_session=True)
        tid = f"term-{len(self.terminals)}"
        self._terms[tid] = {"proc": proc, "out": b"", "done": asyncio.ensure_future(
            self._collect(tid, proc))}
        return CreateTerminalResponse(terminal_id=tid)

    async def _collect(self, tid: str, proc) -> None:
        self._terms[tid]["out"] = await proc.stdout.read()
        await proc.wait()

    def _status(self, tid: str):
        from acp.schema import TerminalExitStatus

        term = self._terms[tid]
        if not term["done"].done():
            return None
        return TerminalExitStatus(exit_code=term["proc"].returncode)

    async def terminal_output(self, session_id, terminal_id, **kw: Any):
        from acp.schema import TerminalOutputResponse

        term = self._terms[terminal_id]
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(asyncio.shield(term["done"]), 10)
        out = PLANTED_TEXT if self.plant == "client" else term["out"].decode(errors="replace")
        return TerminalOutputResponse(output=out, truncated=False,
                                      exit_status=self._status(terminal_id))

    async def wait_for_terminal_exit(self, session_id, terminal_id, **kw: Any):
        from acp.schema import WaitForTerminalExitResponse

        await self._terms[terminal_id]["done"]
        return WaitForTerminalExitResponse(exit_code=self._terms[terminal_id]["proc"].returncode)

    async def kill_terminal(self, session_id, terminal_id, **kw: Any):
        from acp.schema import KillTerminalResponse

        with contextlib.suppress(OSError):
            os.killpg(self._terms[terminal_id]["proc"].pid, signal.SIGKILL)
        return KillTerminalResponse()

    async def release_terminal(self, session_id, terminal_id, **kw: Any):
        from acp.schema import ReleaseTerminalResponse

        term = self._terms.pop(terminal_id, None)
        if term and not term["done"].done():
            with contextlib.suppress(OSError):
                os.killpg(term["proc"].pid, signal.SIGKILL)
        return ReleaseTerminalResponse()



# -- one connection ------------------------------------------------------------------------


#: Where the acp-tee the recordings are made with is: this checkout's console script.
TOOLS = REPO / ".venv" / "bin"


def tee_argv(wire: Path, agent_argv: list[str], tools: Path | None = None,
             grace: float = GRACE) -> list[str]:
    """The real acp-tee (``tools``/acp-tee, default this checkout's) recording into
    ``wire``. Nothing is added to the environment it passes on to the agent."""
    return [str((tools or TOOLS) / "acp-tee"), "--grace", str(grace), "-o", str(wire),
            "--", *agent_argv]


async def connection(wire: Path, argv: list[str], env: dict[str, str], ws: Path,
                     client: ScriptClient, steps: list[tuple[str, str]],
                     tools: Path | None = None, grace: float = GRACE) -> dict[str, Any]:
    """One connection of the SDK client to the agent through acp-tee (its own session,
    ended whole afterwards): initialize, then ``steps`` — ("new", ""), ("load", SID),
    ("prompt", TEXT), ("reject", TEXT: a prompt whose permissions the permission plant
    rejects). Returns the session id, the agent's capabilities and each prompt's stop."""
    from acp import connect_to_agent, text_block
    from acp.schema import ClientCapabilities, FileSystemCapabilities, Implementation

    tee = tee_argv(wire, argv, tools, grace)
    proc = await asyncio.create_subprocess_exec(
        *tee, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, env=env,
        cwd=str(ws), start_new_session=True, limit=64 << 20)
    conn = connect_to_agent(client, proc.stdin, proc.stdout)
    out: dict[str, Any] = {"sid": "", "stops": []}
    try:
        init = await asyncio.wait_for(conn.initialize(
            protocol_version=1, client_info=Implementation(name="acp-pipes-harness", version="1"),
            client_capabilities=ClientCapabilities(
                fs=FileSystemCapabilities(read_text_file=True, write_text_file=True),
                terminal=True)), REQUEST_TIMEOUT)
        out["caps"] = init.agent_capabilities.model_dump(by_alias=True, exclude_none=True) \
            if init.agent_capabilities else {}
        out["agentInfo"] = init.agent_info.model_dump(by_alias=True, exclude_none=True) \
            if init.agent_info else {}
        for step, arg in steps:
            if step == "new":
                out["sid"] = (await asyncio.wait_for(conn.new_session(
                    cwd=str(ws), mcp_servers=[]), REQUEST_TIMEOUT)).session_id
            elif step == "load":
                out["sid"] = arg
                await asyncio.wait_for(conn.load_session(
                    cwd=str(ws), session_id=arg, mcp_servers=[]), REQUEST_TIMEOUT)
                client.updates.append({"sessionUpdate": "turn_end"})
            else:
                client.reject = step == "reject"
                got = await asyncio.wait_for(conn.prompt(
                    session_id=out["sid"], prompt=[text_block(arg)]), REQUEST_TIMEOUT)
                client.reject = False
                out["stops"].append(got.stop_reason)
                client.updates.append({"sessionUpdate": "turn_end"})
    finally:
        # as an editor leaves: its output closed, acp-tee ends the agent (its grace for
        # one that outlives its input) and writes the log's end; then anything left of
        # the session it was started in is ended
        with contextlib.suppress(OSError):
            proc.stdin.close()
        try:
            await asyncio.wait_for(_drain_and_wait(proc), grace * 3 + 10)
        except TimeoutError:
            out["killed"] = True
        await conn.close()
        # what outlived acp-tee (which ends its agent's process group): nothing, or a leak
        out["left_running"] = session_members(proc.pid) if proc.returncode is not None else []
        end_session(proc.pid)
        if proc.returncode is None:
            await proc.wait()
    out["tee_exit"] = proc.returncode
    return out


async def _drain_and_wait(proc) -> None:
    # the SDK stops reading once closed; what the agent still sends must not block
    # acp-tee's forward, so read to the end here
    with contextlib.suppress(Exception):
        while await proc.stdout.read(1 << 16):
            pass
    await proc.wait()


# -- one recording -------------------------------------------------------------------------


def record(name: str, out: Path, label: str, root: Path, *, plant: str = "",
           llm: CannedLLM | None = None, tools: Path | None = None,
           load: bool = True) -> dict[str, Any]:
    """One scripted session of agent ``name``: its first connection's wire log to
    ``out/LABEL.wire.jsonl``, the second's (where the agent loads sessions) to
    ``out/LABEL.load.wire.jsonl``. ``root`` is made afresh (home, workspace): give the
    same root to every recording that is to be compared, the paths are in the frames.
    Without ``llm`` a canned server is started for this recording (with the plant's
    variant); with one, a ``reply`` plant needs a server started with that variant.
    ``load=False`` leaves out the second connection."""
    agent = AGENTS[name]
    if plant and plant not in plants_for(agent):
        raise ValueError(f"{name}: no {plant!r} change can be planted in its script")
    out.mkdir(parents=True, exist_ok=True)
    with contextlib.ExitStack() as stack:
        stack.enter_context(holding(root))
        if llm is None and agent.uses_llm:
            variant = "reply" if plant == "reply" else ""
            llm = stack.enter_context(canned_llm(
                root.parent / f"{root.name}.llm{'-' + variant if variant else ''}", variant))
        argv, env, ws = prepare(name, root, llm.url if llm else "")
        prompts = agent.prompts(ws)
        client = ScriptClient(ws, plant)
        steps = [("new", "")] + [("prompt", p) for p in prompts[:-1]] + [("reject", prompts[-1])]
        wire = out / f"{label}.wire.jsonl"
        grace = GRACE if agent.ends_at_eof else GRACE_NO_EOF
        first = asyncio.run(connection(wire, argv, env, ws, client, steps, tools, grace))
        result: dict[str, Any] = {
            "agent": name, "label": label, "plant": plant, "root": root, "ws": ws,
            "wire": wire, "sid": first["sid"], "prompts": prompts, "first": first,
            "client": client, "load_wire": None, "again": None, "second": None}
        if load and first["caps"].get("loadSession"):
            again = ScriptClient(ws, "")
            load_wire = out / f"{label}.load.wire.jsonl"
            second = asyncio.run(connection(
                load_wire, argv, env, ws, again,
                [("load", first["sid"]), ("prompt", "goodbye")], tools, grace))
            result.update(load_wire=load_wire, again=again, second=second)
    return result


def record_set(name: str, out: Path, root: Path, same: int = 3,
               tools: Path | None = None) -> list[dict[str, Any]]:
    """The set of recordings the comparison tools are measured on: ``same`` recordings
    of the script (same-1, same-2, ...) and one per change that can be planted in it
    (planted-reply, planted-client, planted-permission), all made at ``root``."""
    agent = AGENTS[name]
    done = []
    with contextlib.ExitStack() as stack:
        llm = stack.enter_context(canned_llm(root.parent / f"{root.name}.llm")) \
            if agent.uses_llm else None
        for i in range(1, same + 1):
            done.append(record(name, out, f"same-{i}", root, llm=llm, tools=tools))
        for plant in plants_for(agent):
            done.append(record(name, out, f"planted-{plant}", root, plant=plant,
                               llm=None if plant == "reply" else llm, tools=tools))
    return done


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m tests.agents.harness",
        description="Record scripted sessions of real ACP agents through acp-tee, offline "
                    "(tests/agents/harness.py says what the script is).")
    parser.add_argument("agent", nargs="+", choices=sorted(AGENTS) + ["all"])
    parser.add_argument("-o", "--out", type=Path, required=True,
                        help="directory: each agent's recordings go to OUT/AGENT/")
    parser.add_argument("--root", type=Path, default=Path("/tmp/acp-pipes-agents"),
                        help="where each agent's home and workspace are made, ROOT/AGENT "
                             "(made afresh: the paths are in the frames; default %(default)s)")
    parser.add_argument("--label", help="one recording with this name instead of the set")
    parser.add_argument("--plant", choices=PLANTS, default="",
                        help="with --label: the change to plant")
    parser.add_argument("--same", type=int, default=3,
                        help="recordings of the unchanged script in the set (default 3)")
    parser.add_argument("--tools", type=Path,
                        help="directory holding the acp-tee to record with "
                             "(default: this checkout's .venv/bin)")
    args = parser.parse_args(argv)
    names = sorted(AGENTS) if "all" in args.agent else args.agent
    for name in names:
        started = time.monotonic()
        if args.label:
            done = [record(name, args.out / name, args.label, args.root / name,
                           plant=args.plant, tools=args.tools)]
        else:
            done = record_set(name, args.out / name, args.root / name, args.same, args.tools)
        for r in done:
            print(f"{name}: {r['wire']}" + (f" + {r['load_wire']}" if r["load_wire"] else ""),
                  file=sys.stderr)
        print(f"{name}: {len(done)} recordings in {time.monotonic() - started:.1f} s",
              file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
