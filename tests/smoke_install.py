"""The smoke test of an installed bots-rft (a wheel or the sdist, in a clean environment), run by
``make wheel``, by the release workflow on every platform it builds for, and by the light-core test:

    <venv>/bin/python tests/smoke_install.py [--readme README.md] [--no-rust] [--core-only]

It runs with the standard library and what bots-rft installs, nothing else (no pytest), from
outside the source tree, and checks:

- ``bots_rft`` comes from the environment's site-packages, not from a checkout's ``python/``,
  and importing it loads none of the extras' packages;
- README's "Using it" snippet, run as written with a small synthetic pool, then an exact resume:
  a selector loaded from its checkpoint picks and updates exactly as the one that wrote it;
- ``bots --version`` prints the installed distribution's version;
- a small ``bots demo --no-progress`` (it needs only the core);
- ``--core-only``: the extras' packages are absent, and a command that needs one (``bots demo``
  with its progress bar, ``bots simulate``) exits with status 2 and one line naming the extra;
- ``--no-rust``: no Rust toolchain is on PATH (the wheel needs none).

Prints ``smoke: ok`` at the end; any failure exits non-zero with what differed.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import importlib.util
import os
import pickle
import re
import shutil
import subprocess
import sys
import sysconfig
import tempfile
from pathlib import Path

#: Packages that only the extras bring; the core must import none of them.
EXTRA_PACKAGES = ["tqdm", "pydantic", "yaml", "matplotlib", "pyarrow", "torch", "transformers"]


def check(condition: bool, what: str) -> None:
    if not condition:
        print(f"smoke: FAILED: {what}", file=sys.stderr)
        raise SystemExit(1)


def readme_snippet(readme: Path) -> str:
    """The first ```python block after the "## Using it" heading."""
    text = readme.read_text(encoding="utf-8")
    at = text.index("## Using it")
    match = re.search(r"```python\n(.*?)```", text[at:], flags=re.S)
    check(match is not None, f"{readme}: no python block after '## Using it'")
    assert match is not None
    return match.group(1)


class Column:
    def __init__(self, values: object) -> None:
        self.values = values

    def to_numpy(self) -> object:
        return self.values


def run_snippet(snippet: str, workdir: Path) -> dict[str, object]:
    """The snippet as written, with what it leaves to the reader defined: a pool with the two
    reference columns, rollouts drawn from hidden success rates, and a training step."""
    import numpy as np

    rng = np.random.default_rng(0)
    n = 5_000
    hidden = rng.beta(0.6, 0.6, n)
    weak = np.clip(hidden - 0.2, 0, 1)
    strong = np.clip(hidden + 0.2, 0, 1)
    weak[rng.random(n) < 0.1] = np.nan  # "NaN where unknown"
    trained: list[int] = []

    def rollout_and_score(ids: np.ndarray, n: int) -> np.ndarray:
        return (rng.random((len(ids), n)) < hidden[ids, None]).astype(np.float64)

    def train_step(ids: np.ndarray, rewards: np.ndarray) -> None:
        trained.append(len(ids))

    namespace: dict[str, object] = {
        "pool": {"qwen2.5_7b_pass_rate": Column(weak), "qwen3_30b_pass_rate": Column(strong)},
        "num_steps": 60,
        "rollout_and_score": rollout_and_score,
        "train_step": train_step,
    }
    cwd = os.getcwd()
    os.chdir(workdir)
    try:
        exec(compile(snippet, "README.md (Using it)", "exec"), namespace)
    finally:
        os.chdir(cwd)
    check(trained == [256] * 60, f"the snippet trained {len(trained)} steps, not 60 of 256 tasks")
    check((workdir / "selector.bots").is_file(), "the snippet wrote no selector.bots")
    return namespace


def check_exact_resume(namespace: dict[str, object], workdir: Path) -> None:
    import numpy as np

    from bots_rft import BOTS

    sel = namespace["sel"]
    assert isinstance(sel, BOTS)
    sel.save(workdir / "resume.bots")
    twins = [BOTS.load(workdir / "resume.bots"), pickle.loads(pickle.dumps(sel))]
    rng = np.random.default_rng(1)
    for step in range(3):
        ids = sel.select(128)
        for twin in twins:
            check(np.array_equal(twin.select(128), ids), f"a resumed selector picked differently at step {step}")
        successes = rng.integers(0, 17, len(ids))
        for s in (sel, *twins):
            s.update(ids, successes, 16)
    for twin in twins:
        check(np.array_equal(twin.alpha, sel.alpha) and np.array_equal(twin.beta, sel.beta), "posteriors differ")
    # The checkpoint left by the snippet loads too.
    check(BOTS.load(workdir / "selector.bots").alpha.shape == sel.alpha.shape, "selector.bots does not load")


def bots_command() -> str:
    scripts = Path(sysconfig.get_path("scripts"))
    found = shutil.which("bots", path=str(scripts))
    check(found is not None, f"no bots command in {scripts}")
    assert found is not None
    return found


def run(argv: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    # The commands' tables have arrows (↑ ↓): UTF-8 both ways, whatever the locale (Windows' is
    # cp1252 when output goes to a pipe).
    env = dict(os.environ, PYTHONIOENCODING="utf-8")
    return subprocess.run(argv, cwd=cwd, capture_output=True, encoding="utf-8", env=env, timeout=600)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--readme", type=Path, default=Path(__file__).resolve().parent.parent / "README.md")
    parser.add_argument("--no-rust", action="store_true", help="check that no Rust toolchain is on PATH")
    parser.add_argument("--core-only", action="store_true", help="check that no extra is installed")
    args = parser.parse_args()

    if args.no_rust:
        for tool in ("cargo", "rustc", "rustup"):
            check(shutil.which(tool) is None, f"{tool} is on PATH ({shutil.which(tool)})")

    with tempfile.TemporaryDirectory(prefix="bots-smoke-", ignore_cleanup_errors=True) as tmp:
        workdir = Path(tmp)
        # Imports in a fresh process from outside any checkout.
        probe = run(
            [
                sys.executable,
                "-c",
                "import sys, bots_rft, bots_rft._core; print(bots_rft.__file__); "
                f"print(sorted(m for m in sys.modules if m.split('.')[0] in {EXTRA_PACKAGES!r}))",
            ],
            workdir,
        )
        check(probe.returncode == 0, f"import bots_rft failed:\n{probe.stderr}")
        location, loaded = probe.stdout.splitlines()
        site = Path(sysconfig.get_path("purelib")).resolve()
        platsite = Path(sysconfig.get_path("platlib")).resolve()
        where = Path(location).resolve()
        check(site in where.parents or platsite in where.parents, f"bots_rft imported from {where}, not {site}")
        check(loaded == "[]", f"import bots_rft loaded extras' packages: {loaded}")

        sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]
        namespace = run_snippet(readme_snippet(args.readme), workdir)
        check_exact_resume(namespace, workdir)
        print("smoke: README snippet and exact resume: ok")

        bots = bots_command()
        version = importlib.metadata.version("bots-rft")
        out = run([bots, "--version"], workdir)
        check(out.returncode == 0 and out.stdout.strip() == f"bots-rft {version}", f"bots --version: {out}")
        print(f"smoke: {out.stdout.strip()}")

        # The example configs travel inside the package: the wheel alone gives a user something to run.
        listed = run([bots, "example"], workdir)
        check(listed.returncode == 0 and "smoke" in listed.stdout, f"bots example: {listed}")
        shown = run([bots, "example", "smoke"], workdir)
        check(shown.returncode == 0 and "pool:" in shown.stdout, f"bots example smoke: {shown}")
        print("smoke: bots example: ok")

        demo = run([bots, "demo", "--no-progress", "--tasks", "20000", "--steps", "20", "--batch", "64"], workdir)
        check(demo.returncode == 0, f"bots demo failed:\n{demo.stdout}\n{demo.stderr}")
        check("BOTS kept" in demo.stdout and "| BOTS |" in demo.stdout, f"bots demo printed:\n{demo.stdout}")
        print("smoke: bots demo --no-progress: ok")

        if args.core_only:
            for name in EXTRA_PACKAGES:
                check(importlib.util.find_spec(name) is None, f"{name} is installed in a core-only environment")
            for argv, extra in (
                (["demo", "--tasks", "1000", "--steps", "2", "--batch", "8"], "cli"),
                (["simulate", "--steps", "2"], "cli"),
            ):
                out = run([bots, *argv], workdir)
                lines = out.stderr.strip().splitlines()
                # One line naming every extra the command needs at once: bots-rft[cli] or bots-rft[cli,plot].
                named = re.findall(r"bots-rft\[([a-z,]+)\]", lines[0]) if lines else []
                check(
                    out.returncode == 2 and len(lines) == 1 and any(extra in n.split(",") for n in named),
                    f"bots {' '.join(argv)} without [{extra}]: status {out.returncode}, stderr {out.stderr!r}",
                )
                print(f"smoke: bots {argv[0]} without [{extra}]: {lines[0]}")
    print("smoke: ok")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
