"""`acp-frame`: Classify and hash the frames of a wire log or a bare ACP JSONL stream."""

from acp_pipes.cli.runner import not_built, run

TOOL = not_built("acp-frame", "Classify and hash the frames of a wire log or a bare ACP JSONL stream.")


def main() -> None:
    run(TOOL)


if __name__ == "__main__":
    main()
