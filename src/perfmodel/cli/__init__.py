"""The ``perfmodel`` command line: argument parsing and printing over the public API.

Each subcommand lives in its own module of this package with a ``register(subparsers)`` function
that adds its parser and sets ``func(args) -> int``.  Errors a user can fix (a bad file, an
unknown name, a bad unit) print one message and exit 2, never a traceback.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys

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
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        return args.func(args) or 0
    except BrokenPipeError:  # output piped into `head` and friends: stop quietly, as Unix tools do
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except (CatalogError, ScenarioError, UnitError, ValueError, KeyError, FileNotFoundError) as error:
        message = error.args[0] if isinstance(error, KeyError) and error.args else str(error)
        print(f"perfmodel: error: {message}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
