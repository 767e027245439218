"""The ``purebandits`` command line.

Sub-commands live next to the code they drive; each module provides ``HELP``,
``add_arguments(parser)`` and ``run(args) -> int`` and is imported only when needed.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys

from purebandits._extras import MissingExtraError, require_extra

__all__ = ["main"]

#: sub-command -> module implementing it
COMMANDS = {
    "serve": "purebandits.service.cli",
    "experiment": "purebandits.service.cli_experiment",
    "simulate": "purebandits.simulate.cli",
    "reproduce": "purebandits.experiments.cli",
    "journal": "purebandits.simulate.journal_cli",
    "algorithms": "purebandits.cli_algorithms",
    "verify": "purebandits.cli_verify",
}

#: sub-command -> the extra it needs as a whole (checked before it runs; ``--help`` works without it); commands
#: that need one only for some of their work check it there (``simulate --plot``, ``reproduce`` but not its
#: ``--list``, ``experiment token``) and :func:`main` prints the message
NEEDS_EXTRA = {"serve": "service"}


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The parser of every sub-command, or of ``only`` (its module alone is imported: ``purebandits experiment
    show`` starts without the simulator's or the learners' compiled code)."""
    parser = argparse.ArgumentParser(prog="purebandits", description="Pure-exploration bandits for crowdsourcing.")
    sub = parser.add_subparsers(dest="command", required=True)
    for name, module_name in COMMANDS.items():
        if only is not None and name != only:
            continue
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as exc:
            if exc.name and module_name.startswith(exc.name):
                continue  # that part of the package is not installed in this build
            raise
        p = sub.add_parser(name, help=module.HELP, description=module.HELP)
        module.add_arguments(p)
        p.set_defaults(_run=module.run)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run ``purebandits`` with ``argv`` (default the command line); the sub-command's exit code, 1 if the reader
    of stdout went away."""
    argv = sys.argv[1:] if argv is None else list(argv)
    command = argv[0] if argv and argv[0] in COMMANDS else None
    args = build_parser(command).parse_args(argv)
    try:
        if args.command in NEEDS_EXTRA:
            require_extra(NEEDS_EXTRA[args.command], f"purebandits {args.command}")
        code = int(args._run(args) or 0)
        sys.stdout.flush()
    except MissingExtraError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except BrokenPipeError:
        # the reader went away (``purebandits journal DIR | head``): stop quietly, as the
        # Python docs advise (signal module, "Note on SIGPIPE"): point stdout at devnull so the
        # flush at exit does not raise again
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1
    return code


if __name__ == "__main__":
    sys.exit(main())
