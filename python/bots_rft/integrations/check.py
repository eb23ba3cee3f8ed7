"""``python -m bots_rft.integrations.check [FRAMEWORK ...]``: is this environment one the adapters
were tested with?

For each framework named (default: every one that is installed) it imports the adapter, which
imports the framework, and runs the adapter's version gate
(:func:`bots_rft.integrations.gates.check_framework`): the installed release against the tested
window, and every framework method the adapter overrides or wraps against the parameters and
source it was tested with. One line per framework; exit status 0 when every framework checked
passed, 1 when one failed (its line says why), 2 for a name that is not a framework.

``--versions`` prints the version table of ``docs/integrations.md`` and ``--seams`` its table of
checked methods, both built from the adapters' declarations and the installed packages (the test
suite compares them with the docs, so the docs cannot drift from what the tests ran against).
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from ..errors import BotsError, IntegrationError
from .gates import Seam, Window, check_framework, installed_version

__all__ = ["Adapter", "ADAPTERS", "check", "versions_table", "seams_table", "main"]


@dataclass(frozen=True)
class Adapter:
    """One adapter: its module, the names there of its tested window and its seam list, the
    distributions its tests also ran against, and how the docs name it."""

    name: str
    framework: str  # the distribution, as importlib.metadata names it
    module: str
    window: str  # attribute holding the Window
    seams: str  # attribute: a tuple of Seams, or a function returning a list
    label: str
    companions: tuple[str, ...] = ()
    #: attribute holding the Windows of packages under the framework whose release is also checked
    under: str | None = None

    def installed(self) -> bool:
        return installed_version(self.framework) != "unknown"

    def load(self) -> tuple[Window, list[Seam]]:
        module = importlib.import_module(self.module)
        seams = getattr(module, self.seams)
        return getattr(module, self.window), list(seams() if callable(seams) else seams)


ADAPTERS: tuple[Adapter, ...] = (
    Adapter(
        "trl",
        "trl",
        "bots_rft.integrations.trl",
        "TESTED_TRL",
        "trl_seams",
        "TRL `attach_bots`",
        ("transformers", "accelerate", "datasets", "torch"),
    ),
    Adapter(
        "trl_async",
        "trl",
        "bots_rft.integrations.trl_async",
        "TESTED_TRL_ASYNC",
        "trl_async_seams",
        "TRL `AsyncBOTS`",
        ("transformers", "accelerate", "datasets", "torch"),
    ),
    Adapter(
        "verl",
        "verl",
        "bots_rft.integrations.verl",
        "TESTED_VERL",
        "VERL_SEAMS",
        "verl",
        ("transferqueue", "ray", "hydra-core", "tensordict", "torchdata"),
        "TESTED_UNDER_VERL",
    ),
    Adapter(
        "trinity", "trinity-rft", "bots_rft.integrations.trinity", "TESTED_TRINITY", "trinity_seams", "Trinity-RFT"
    ),
    Adapter(
        "skyrl", "skyrl-train", "bots_rft.integrations.skyrl", "TESTED_SKYRL", "skyrl_seams", "SkyRL-train", ("ray",)
    ),
    Adapter("areal", "areal", "bots_rft.integrations.areal", "TESTED_AREAL", "areal_seams", "AReaL"),
)
_BY_NAME = {a.name: a for a in ADAPTERS}


def private(seam: Seam) -> bool:
    """A method whose name starts with one underscore: no stability promise from its framework."""
    return seam.name.startswith("_") and not seam.name.startswith("__")


def check(adapter: Adapter) -> tuple[bool, str]:
    """(passed, one line) for one adapter in this environment."""
    version = installed_version(adapter.framework)
    if version == "unknown":
        return False, f"{adapter.name}: {adapter.framework} is not installed"
    try:
        window, seams = adapter.load()
        bypassed = check_framework(window, seams)
        under = getattr(importlib.import_module(adapter.module), adapter.under) if adapter.under else ()
    except IntegrationError as exc:
        return False, f"{adapter.name}: {exc}"
    except ImportError as exc:
        return False, f"{adapter.name}: {adapter.module} does not import: {type(exc).__name__}: {exc}"
    where = "inside" if window.contains(version) else "OUTSIDE"
    note = f"; BOTS_ALLOW_UNTESTED=1 bypassed {len(bypassed)} problem(s)" if bypassed else ""
    # The packages under the framework: a release its own pin allows but the tests never ran is said.
    for w in under:
        v = installed_version(w.framework)
        note += f"; {w.framework} {v}, {'inside' if w.contains(v) else 'OUTSIDE'} the tested window ({w})"
    return True, (
        f"{adapter.name}: ok: {adapter.framework} {version}, {where} the tested window ({window}); "
        f"{len(seams)} method{'' if len(seams) == 1 else 's'} checked, {sum(private(s) for s in seams)} of them "
        f"private{note}"
    )


def versions_table(adapters: Sequence[Adapter] = ADAPTERS) -> str:
    """Markdown: per adapter, the tested window and the releases installed here (what the test
    suite ran against), with the companion packages its tests also ran against."""
    lines = ["| adapter | tested window | installed here | its tests also ran against |", "|---|---|---|---|"]
    for a in adapters:
        window, _ = a.load()
        also = ", ".join(f"{c} {installed_version(c)}" for c in a.companions) or "—"
        lines.append(
            f"| {a.label} | {a.framework} {window} | {a.framework} {installed_version(a.framework)} | {also} |"
        )
    return "\n".join(lines)


def seams_table(adapters: Sequence[Adapter] = ADAPTERS) -> str:
    """Markdown: per adapter, the framework methods its version gate checks, private ones marked."""
    lines = ["| adapter | methods checked (private ones in bold) | private |", "|---|---|---|"]
    for a in adapters:
        _, seams = a.load()
        names: list[str] = []
        for s in seams:
            label = f"`{s.label}`"
            if label not in names and f"**{label}**" not in names:
                names.append(f"**{label}**" if private(s) else label)
        count = len({s.label for s in seams if private(s)})
        lines.append(f"| {a.label} | {', '.join(names)} | {count} of {len({s.label for s in seams})} |")
    return "\n".join(lines)


def _names(values: Sequence[str], error: Callable[[str], None]) -> list[Adapter]:
    for v in values:
        if v not in _BY_NAME:
            error(f"framework: {v!r} is not one of {', '.join(_BY_NAME)}")
    return [_BY_NAME[v] for v in values]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bots_rft.integrations.check",
        description="Check the installed trainer frameworks against the releases the BOTS adapters were tested with.",
    )
    parser.add_argument("frameworks", nargs="*", metavar="FRAMEWORK", help=f"any of {', '.join(_BY_NAME)}")
    parser.add_argument("--versions", action="store_true", help="print the version table of docs/integrations.md")
    parser.add_argument("--seams", action="store_true", help="print the checked-methods table of docs/integrations.md")
    parser.add_argument(
        "--config",
        metavar="FILE",
        help="with trinity: also run every check a Trinity run makes of BOTS on this YAML (no Ray, no GPU)",
    )
    args = parser.parse_args(argv)
    chosen = _names(args.frameworks, parser.error)
    if args.config is not None:
        if [a.name for a in chosen] != ["trinity"]:
            parser.error(f"--config: checks a Trinity YAML; name trinity alone, got {args.frameworks or 'none'}")
        return _trinity_config(args.config)
    if args.versions or args.seams:
        tables = [versions_table(chosen or ADAPTERS)] if args.versions else []
        tables += [seams_table(chosen or ADAPTERS)] if args.seams else []
        print("\n\n".join(tables))
        return 0
    # With no names, frameworks that are not installed are listed, not failed.
    todo = chosen or [a for a in ADAPTERS if a.installed()]
    for a in ADAPTERS:
        if not chosen and not a.installed():
            print(f"{a.name}: {a.framework} is not installed (skipped)")
    failed = 0
    for a in todo:
        ok, line = check(a)
        print(line, flush=True)
        failed += not ok
    return 1 if failed else 0


def _trinity_config(path: str) -> int:
    """``check trinity --config FILE``: the gate, then :func:`bots_rft.integrations.trinity.preflight`
    on the YAML. Exit 0 with what the run would use, 1 when the gate fails, 2 with one line naming
    the key at fault."""
    ok, line = check(_BY_NAME["trinity"])
    if not ok:
        print(line, flush=True)
        return 1
    from .trinity import preflight

    try:
        lines = preflight(path)
    except BotsError as exc:
        print(f"error: {' '.join(str(exc).split())}", file=sys.stderr)
        return 2
    print("\n".join(lines))
    print("check passed: nothing was started (no Ray, no model)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
