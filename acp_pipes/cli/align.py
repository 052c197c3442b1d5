"""`acp-align`: Align two or more recordings and show where they parted ways."""

from acp_pipes.cli.runner import not_built, run

TOOL = not_built("acp-align", "Align two or more recordings and show where they parted ways.")


def main() -> None:
    run(TOOL)


if __name__ == "__main__":
    main()
