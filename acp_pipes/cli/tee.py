"""`acp-tee`: Record an ACP session: a stdio proxy that forwards every byte untouched and logs every frame."""

from acp_pipes.cli.runner import not_built, run

TOOL = not_built("acp-tee", "Record an ACP session: a stdio proxy that forwards every byte untouched and logs every frame.")


def main() -> None:
    run(TOOL)


if __name__ == "__main__":
    main()
