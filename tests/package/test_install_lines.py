"""Every install line the README and docs/integrations.md show resolves against the package index
as written, to the stack the integrations were tested with. Resolved, not installed: a full install
of torch, verl and their stacks into a clean environment per line would take most of the suite's
time budget; the integrations' own checks (`python -m bots_rft.integrations.check`, `verl
--check`) run against the installed stack in tests/package/test_examples.py and the integration tests.
Needs the package index (uv pip compile); skipped when it cannot be reached."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import tomllib

from doc_commands import fenced_lines

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
EXTRAS: dict[str, list[str]] = PYPROJECT["project"]["optional-dependencies"]


def requirements(extra: str) -> list[str]:
    """The extra's requirements with its references to other extras of bots-rft expanded."""
    out: list[str] = []
    for req in EXTRAS[extra]:
        match = re.fullmatch(r"bots-rft\[([\w,]+)\]", req)
        out += [r for name in match.group(1).split(",") for r in requirements(name)] if match else [req]
    return out


def documented_extras() -> list[str]:
    found = []
    for doc, line in fenced_lines():
        match = re.match(r"pip install 'bots-rft\[(\w+)\]'", line.strip())
        if match and doc.name in ("README.md", "integrations.md"):
            found.append(match.group(1))
    return sorted(set(found))


def resolve(reqs: list[str], *extra_args: str) -> dict[str, str]:
    uv = shutil.which("uv", path=str(Path(sys.executable).parent)) or shutil.which("uv")
    if uv is None:
        pytest.skip("uv is not installed")
    done = subprocess.run(
        [uv, "pip", "compile", "-", "--python-version", "3.11", "--no-header", "--no-annotate", "--quiet", *extra_args],
        input="\n".join(PYPROJECT["project"]["dependencies"] + reqs),
        capture_output=True,
        text=True,
        timeout=600,
    )
    if done.returncode != 0 and re.search(r"dns error|Failed to fetch|Connect|timed out", done.stderr):
        pytest.skip(f"the package index cannot be reached: {done.stderr.strip().splitlines()[-1]}")
    assert done.returncode == 0, done.stderr
    pins = (line.split(";")[0].strip().split("==") for line in done.stdout.splitlines() if "==" in line)
    return {name.split("[")[0].lower().replace("_", "-"): version for name, version in pins}


def test_the_docs_show_every_extra() -> None:
    assert documented_extras() == sorted(EXTRAS)


@pytest.mark.parametrize("extra", sorted(EXTRAS))
def test_each_documented_extra_resolves(extra: str) -> None:
    resolved = resolve(requirements(extra))
    assert resolved, extra


def test_the_verl_line_resolves_to_the_tested_stack() -> None:
    from bots_rft.integrations.verl import TESTED_VERL

    resolved = resolve(requirements("verl"))
    assert TESTED_VERL.contains(resolved["verl"]), resolved["verl"]
    assert resolved["transferqueue"] == "0.1.11"
    # What `verl --check` imported one at a time on a bare `pip install verl==0.9.1`.
    for package in ("cachetools", "uvicorn", "fastapi", "ray", "hydra-core", "tensordict", "torchdata"):
        assert package in resolved, package
    major_minor = tuple(int(p) for p in resolved["transformers"].split(".")[:2])
    assert (5, 5) <= major_minor < (5, 11), f"verl 0.9.1 pins transformers <5.11, got {resolved['transformers']}"


def test_the_cpu_torch_line_resolves() -> None:
    line = next(
        line.strip() for _doc, line in fenced_lines() if line.strip().startswith("pip install torch --index-url")
    )
    index = line.split("--index-url", 1)[1].split()[0]
    resolved = resolve(["torch"], "--index-url", index, "--python-platform", "x86_64-manylinux_2_28")
    assert "+cpu" in resolved["torch"], resolved["torch"]
