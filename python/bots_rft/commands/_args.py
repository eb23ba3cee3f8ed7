"""Argument checks shared by the sub-commands: numbers in range (argparse ``type=`` functions) and
input/output paths checked before any work starts, so a bad argument costs nothing and leaves no
file behind."""

from __future__ import annotations

import argparse
import math
import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..errors import InvalidArgumentError

__all__ = [
    "check_training_config",
    "integer",
    "real",
    "parameter",
    "check_input",
    "check_output_file",
    "check_output_dir",
]


def integer(minimum: int | None = None, maximum: int | None = None) -> Callable[[str], int]:
    """An argparse ``type`` accepting an integer in [minimum, maximum]."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
        if minimum is not None and value < minimum:
            raise argparse.ArgumentTypeError(f"must be >= {minimum}, got {value}")
        if maximum is not None and value > maximum:
            raise argparse.ArgumentTypeError(f"must be <= {maximum}, got {value}")
        return value

    parse.__name__ = "integer"  # argparse names the type in its messages
    return parse


def real(
    low: float | None = None, high: float | None = None, *, low_open: bool = False, high_open: bool = False
) -> Callable[[str], float]:
    """An argparse ``type`` accepting a finite number between ``low`` and ``high`` (each bound
    closed unless ``*_open``)."""
    left = "(" if low_open else "["
    right = ")" if high_open else "]"
    span = f"{left}{'-inf' if low is None else f'{low:g}'}, {'inf' if high is None else f'{high:g}'}{right}"

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
        ok = math.isfinite(value)
        if low is not None:
            ok = ok and (value > low if low_open else value >= low)
        if high is not None:
            ok = ok and (value < high if high_open else value <= high)
        if not ok:
            raise argparse.ArgumentTypeError(f"must lie in {span}, got {text}")
        return value

    parse.__name__ = "number"
    return parse


def parameter(param: Any) -> Callable[[str], Any]:
    """An argparse ``type`` accepting the range of a :class:`bots_rft.selector.registry.Parameter` (a number
    parameter; the CLI spells booleans as flags)."""
    if param.type == "int":
        return integer(
            None if math.isinf(param.low) else int(param.low), None if math.isinf(param.high) else int(param.high)
        )
    return real(
        None if math.isinf(param.low) else param.low,
        None if math.isinf(param.high) else param.high,
        low_open=param.low_open,
        high_open=param.high_open,
    )


def check_input(path: str | os.PathLike[str], argument: str, *, directory_ok: bool = False) -> Path:
    """``path`` names an existing, readable file (or directory, when ``directory_ok``)."""
    p = Path(path)
    if not p.exists():
        raise InvalidArgumentError(f"{argument}: {str(p)!r} does not exist", argument)
    if p.is_dir() and not directory_ok:
        raise InvalidArgumentError(f"{argument}: {str(p)!r} is a directory, expected a file", argument)
    if not os.access(p, os.R_OK):
        raise InvalidArgumentError(f"{argument}: {str(p)!r} is not readable", argument)
    return p


def _check_creatable(p: Path, argument: str, *, directory: bool) -> None:
    """The folder ``p`` is (``directory``) or goes into exists and takes new files, or its nearest
    existing ancestor is a directory that does."""
    ancestor = p.absolute() if directory else p.absolute().parent
    while not ancestor.exists():
        ancestor = ancestor.parent
    if not ancestor.is_dir():
        raise InvalidArgumentError(
            f"{argument}: cannot create {str(p)!r}: {str(ancestor)!r} is not a directory", argument
        )
    _probe(ancestor, p, argument)


def _probe(directory: Path, target: Path, argument: str) -> None:
    """Create (and at once drop) an unnamed file in ``directory``: the one test that holds for
    root, read-only mounts and pseudo file systems alike, and leaves nothing behind."""
    try:
        with tempfile.TemporaryFile(dir=directory):
            pass
    except OSError as exc:
        raise InvalidArgumentError(
            f"{argument}: cannot write {str(target)!r}: {str(directory)!r} is not writable ({exc.strerror or exc})",
            argument,
        ) from None


def check_output_file(path: str | os.PathLike[str], argument: str, *, overwrite: bool = False) -> Path:
    """``path`` is a file this command may create: not a directory, its folder writable (or
    creatable), and not already there unless ``overwrite``."""
    p = Path(path)
    if p.is_dir():
        raise InvalidArgumentError(f"{argument}: {str(p)!r} is a directory, expected a file name", argument)
    if p.exists():
        if not overwrite:
            raise InvalidArgumentError(
                f"{argument}: {str(p)!r} already exists; pass --overwrite to replace it", argument
            )
        if not os.access(p, os.W_OK):
            raise InvalidArgumentError(f"{argument}: {str(p)!r} is not writable", argument)
    _check_creatable(p, argument, directory=False)
    return p


def check_output_dir(
    path: str | os.PathLike[str], argument: str, *, overwrite: bool = False, names: tuple[str, ...] | None = None
) -> Path:
    """``path`` is a directory this command may write into: creatable or writable, and holding none
    of ``names`` (or nothing at all, when ``names`` is None) unless ``overwrite``."""
    p = Path(path)
    if p.exists() and not p.is_dir():
        raise InvalidArgumentError(f"{argument}: {str(p)!r} exists and is not a directory", argument)
    if p.is_dir():
        used = sorted(q.name for q in p.iterdir()) if names is None else [n for n in names if (p / n).exists()]
        if used and not overwrite:
            raise InvalidArgumentError(
                f"{argument}: {str(p)!r} already holds {', '.join(map(repr, used[:3]))}{' ...' if len(used) > 3 else ''}; "
                "pass --overwrite to replace it, or choose another directory",
                argument,
            )
    _check_creatable(p, argument, directory=True)
    return p


def check_training_config(cfg: Any) -> None:
    """What ``bots train`` and ``bots compare`` refuse in a valid config before any work: an
    output directory that cannot be written. (A group of one rollout, whose GRPO advantage is
    always 0, is refused by the config's own validation.)"""
    check_output_dir(cfg.out_dir, "out_dir", overwrite=True)


def add_model_options(p: argparse.ArgumentParser) -> None:
    """``--model`` and ``--adapter``: the model a command loads, as bots refeval and bots embed
    take it."""
    p.add_argument("--model", required=True, help="'tiny', 'smollm2', a local HF model directory, or a .gguf file")
    p.add_argument(
        "--adapter",
        default=None,
        help="a LoRA adapter merged into MODEL first: a peft adapter directory, a LoRA run's checkpoint, "
        "or a LoRA run's output directory (its latest checkpoint)",
    )
