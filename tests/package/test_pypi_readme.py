"""The description PyPI shows (README.pypi.md, generated from README.md by
docs/gen_pypi_readme.py): current, and free of the repository-relative links and images that
PyPI cannot resolve."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "docs"))

import gen_pypi_readme  # noqa: E402


def test_the_pypi_description_is_generated_from_the_readme_and_current() -> None:
    done = subprocess.run(
        [sys.executable, "docs/gen_pypi_readme.py", "--check"], cwd=ROOT, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    pyproject = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    assert re.search(r'^readme = "README\.pypi\.md"', pyproject, re.M), "pyproject.toml: readme"


def test_the_pypi_description_links_nothing_pypi_cannot_resolve() -> None:
    text = (ROOT / "README.pypi.md").read_text(encoding="utf-8")
    prose = re.sub(r"```.*?```", "", text, flags=re.S)
    targets = re.findall(r"\]\(([^)\s]+)\)", prose)
    assert all(re.match(r"^(https?://|#)", t) for t in targets), targets
    # Everything README.md says is still there: only links and images changed form.
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert readme.count("\n## ") == text.count("\n## ")


def test_links_become_named_paths_and_images_named_figures() -> None:
    convert = gen_pypi_readme.convert
    body = convert(
        "See [docs/training.md](docs/training.md), [the guide](docs/pools.md#spread) and "
        "[the paper](https://arxiv.org/abs/1) or [below](#using-it).\n"
        "![a plot](docs/img/x.png)\n```bash\n[kept](docs/a.md)\n```\n"
    ).split("\n", 3)[3]
    assert body.startswith(
        "See `docs/training.md`, the guide (`docs/pools.md`) and [the paper](https://arxiv.org/abs/1) "
        "or [below](#using-it).\n*Figure: a plot (`docs/img/x.png`).*\n```bash\n[kept](docs/a.md)\n```\n"
    ), body
