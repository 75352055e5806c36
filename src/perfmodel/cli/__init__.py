"""The ``perfmodel`` command line: argument parsing and printing over the public API.

Each subcommand lives in its own module of this package with a ``register(subparsers)`` function
that adds its parser and sets ``func(args) -> int``.  Exit statuses (``cli.common``): 0 an
answer; 2 bad input (a bad file, an unknown name, a bad unit, an unreadable or unwritable path:
one message, never a traceback); 3 valid input but nothing feasible, with the reasons.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys

from perfmodel.cli.common import EXIT_BAD_INPUT
from perfmodel.hardware.catalog import CatalogError
from perfmodel.scenario import ScenarioError
from perfmodel.units import UnitError

COMMANDS = ("catalog", "check", "workload", "roofline", "validate", "comm", "memory",
            "estimate", "search", "scaling", "rank", "calibrate", "baseline")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="perfmodel",
        description="Training time, memory, bottlenecks and cost of deep-learning jobs on GPUs.")
    parser.add_argument("--catalog", action="append", default=[], metavar="FILE",
                        help="extra catalog YAML merged over the shipped one (repeatable)")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMANDS:
        importlib.import_module(f"perfmodel.cli.{name}").register(subparsers)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as done:  # --help (0) or a bad flag (2, message already printed)
        return done.code if isinstance(done.code, int) else EXIT_BAD_INPUT
    if not getattr(args, "func", None):
        parser.print_help()
        return EXIT_BAD_INPUT
    try:
        return args.func(args) or 0
    except BrokenPipeError:  # output piped into `head` and friends: stop quietly, as Unix tools do
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except (CatalogError, ScenarioError, UnitError, ValueError, KeyError) as error:
        message = error.args[0] if isinstance(error, KeyError) and error.args else str(error)
        print(f"perfmodel: error: {message}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except OSError as error:  # writing an output (a figure, a profile): one line, path and reason
        where = f"{error.filename}: " if error.filename else ""
        print(f"perfmodel: error: {where}{error.strerror or error}", file=sys.stderr)
        return EXIT_BAD_INPUT


if __name__ == "__main__":
    sys.exit(main())
