"""A scripted ACP client that waits like an interactive one, for recording and replay tests.

usage: python lockstep_client.py SCRIPT -- AGENT [ARGS...]

SCRIPT holds the client frames, one a line (``acp-echo-agent --client-session N``
writes one). Unlike piping the script into the agent, each frame is sent only when the
agent is done with the previous one, as an editor would: after a request, once its
response came; after a ``session/prompt`` (or an answer to the agent's request), once
the turn went idle or the agent asked something. So a recording made through this
client interleaves the two directions turn by turn. The agent's bytes go to stdout
unchanged; exit status 0 when the agent answered everything, 1 if it ended early.
"""

from __future__ import annotations

import json
import subprocess
import sys


def main() -> int:
    args = sys.argv[1:]
    cut = args.index("--")
    script = open(args[0], "rb").read().splitlines()  # noqa: SIM115
    agent = subprocess.Popen(args[cut + 1 :], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    out = sys.stdout.buffer

    def wait(response_id, turn: bool) -> bool:
        """Read agent frames until the response (if any) came and, for a turn, until it is
        idle or the agent asks the client something."""
        got_response = response_id is None
        settled = not turn
        while not (got_response and settled):
            line = agent.stdout.readline()
            if not line:
                return False
            out.write(line)
            out.flush()
            msg = json.loads(line)
            if "method" not in msg and msg.get("id") == response_id:
                got_response = True
            elif "method" in msg and "id" in msg:
                settled = True  # the agent asks: the script's next frame answers it
            elif msg.get("method") == "session/update":
                update = msg["params"]["update"]
                if update.get("sessionUpdate") == "state_update" and update.get("state") == "idle":
                    settled = True
        return True

    ok = True
    for raw in script:
        if not raw.strip():
            continue
        agent.stdin.write(raw + b"\n")
        agent.stdin.flush()
        msg = json.loads(raw)
        if "method" in msg:
            rid = msg.get("id")
            turn = msg["method"] == "session/prompt"
            if rid is None and not turn:
                continue
        else:
            rid, turn = None, True  # an answer to the agent: the turn goes on
        if not wait(rid, turn):
            ok = False
            break
    agent.stdin.close()
    rest = agent.stdout.read()
    out.write(rest)
    out.flush()
    agent.wait()
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
