"""``purebandits algorithms``: list the registered learners."""

from __future__ import annotations

import argparse

HELP = "list the registered algorithms"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of ``purebandits algorithms``."""
    parser.add_argument("--markdown", action="store_true", help="print the docs/algorithms.md table")


def run(args: argparse.Namespace) -> int:
    """Print name, class, kind and paper of every registered learner, or with ``--markdown`` the docs table."""
    if args.markdown:
        from purebandits.docs import algorithms_markdown

        print(algorithms_markdown(), end="")
        return 0
    from purebandits.registry import all_learners

    for name, cls in all_learners().items():
        print(f"{name:24s} {cls.__name__:24s} {cls.kind:17s} {cls.paper}")
    return 0
