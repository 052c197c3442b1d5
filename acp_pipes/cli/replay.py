"""`acp-replay`: Replay a recording byte for byte, or an ASR stream as ACP v2 updates."""

from acp_pipes.cli.runner import not_built, run

TOOL = not_built("acp-replay", "Replay a recording byte for byte, or an ASR stream as ACP v2 updates.")


def main() -> None:
    run(TOOL)


if __name__ == "__main__":
    main()
