"""``bots example``: the example configs that ship with the package, listed, printed or written.

A wheel has no ``configs/`` folder beside it, so the smallest configs the docs use travel inside
the package (``bots_rft/commands/examples/*.yaml``); each file's first comment line says what it
runs, and its comment the commands that make its pool and run it.
"""

from __future__ import annotations

import argparse
import difflib
import sys
from importlib import resources

from ..errors import InvalidArgumentError
from ._args import check_output_file


def add_parser(subparsers: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = subparsers.add_parser(
        "example",
        help="list the example configs that ship with bots-rft; print or write one",
        description="Without NAME, list the example configs; with NAME, print that config (or write it "
        "to --out). Each config's comment says how to make its pool and run it.",
    )
    p.add_argument("name", nargs="?", default=None, metavar="NAME", help="the example to print or write")
    p.add_argument("--out", default=None, metavar="FILE", help="write the config to FILE instead of printing it")
    p.add_argument("--overwrite", action="store_true", help="replace FILE if it exists")
    p.set_defaults(func=main, needs=())


def examples() -> dict[str, str]:
    """Every example config: name -> its text."""
    folder = resources.files("bots_rft.commands").joinpath("examples")
    found = (f for f in folder.iterdir() if f.name.endswith(".yaml"))
    return {f.name.removesuffix(".yaml"): f.read_text(encoding="utf-8") for f in sorted(found, key=lambda f: f.name)}


def summary(text: str) -> str:
    """What an example runs: its first comment line, up to the first colon."""
    return text.splitlines()[0].lstrip("# ").split(":")[0]


def main(args: argparse.Namespace) -> int:
    found = examples()
    if args.name is None:
        if args.out is not None:
            raise InvalidArgumentError(f"--out: {args.out!r} given without NAME (the example to write)", "--out")
        width = max(map(len, found))
        for name, text in found.items():
            print(f"{name:<{width}}  {summary(text)}")
        print("bots example NAME prints one; bots example NAME --out FILE writes it")
        return 0
    if args.name not in found:
        close = difflib.get_close_matches(args.name, list(found), n=1)
        hint = f" (did you mean {close[0]}?)" if close else ""
        raise InvalidArgumentError(f"NAME: no example {args.name!r}{hint}; the examples: {', '.join(found)}", "NAME")
    text = found[args.name]
    if args.out is None:
        sys.stdout.write(text)
        return 0
    out = check_output_file(args.out, "--out", overwrite=args.overwrite)
    out.write_text(text, encoding="utf-8")
    print(f"{out}: the {args.name} example ({summary(text)})")
    return 0
