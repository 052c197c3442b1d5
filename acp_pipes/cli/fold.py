"""`acp-fold`: Fold ACP v2 frames into one record per entity when it becomes final."""

from acp_pipes.cli.runner import not_built, run

TOOL = not_built("acp-fold", "Fold ACP v2 frames into one record per entity when it becomes final.")


def main() -> None:
    run(TOOL)


if __name__ == "__main__":
    main()
