"""`acp-asr`: Convert ACP v2 recordings into ASR streams, one per ACP session."""

from acp_pipes.cli.runner import not_built, run

TOOL = not_built("acp-asr", "Convert ACP v2 recordings into ASR streams, one per ACP session.")


def main() -> None:
    run(TOOL)


if __name__ == "__main__":
    main()
