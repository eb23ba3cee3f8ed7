"""docs/architecture.md and README.md's map of the package are generated from the tree
(``python docs/gen_architecture.py``): they must match it, and the generator must refuse a tree
with an import circle instead of drawing layers that do not exist."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "docs"))
import gen_architecture  # noqa: E402


def test_generated_docs_are_up_to_date() -> None:
    run = subprocess.run(
        [sys.executable, "docs/gen_architecture.py", "--check"], cwd=ROOT, capture_output=True, text=True
    )
    assert run.returncode == 0, run.stderr


def test_the_documented_command_regenerates_both_files(tmp_path: Path) -> None:
    """``python docs/gen_architecture.py``, exactly as the README shows it, run on a copy of the
    tree with both generated parts blanked, writes back what the repository holds."""
    for rel in ["docs/gen_architecture.py", *(str(p.relative_to(ROOT)) for p in (ROOT / "python").rglob("*.py"))]:
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_bytes((ROOT / rel).read_bytes())
    readme = (ROOT / "README.md").read_text()
    begin, end = readme.index(gen_architecture.MAP_BEGIN), readme.index(gen_architecture.MAP_END)
    (tmp_path / "README.md").write_text(readme[: begin + len(gen_architecture.MAP_BEGIN)] + "\n" + readme[end:])
    subprocess.run([sys.executable, "docs/gen_architecture.py"], cwd=tmp_path, check=True)
    assert (tmp_path / "README.md").read_text() == readme
    assert (tmp_path / "docs/architecture.md").read_text() == (ROOT / "docs/architecture.md").read_text()


def test_every_unit_imports_only_lower_layers() -> None:
    edges = gen_architecture.unit_graph()
    level = {u: i for i, units in enumerate(gen_architecture.layers(edges)) for u in units}
    assert set(level) == set(edges)
    for unit, deps in edges.items():
        assert all(level[d] < level[unit] for d in deps), (unit, sorted(deps))


def test_a_circle_has_no_layers() -> None:
    with pytest.raises(SystemExit, match="import circle"):
        gen_architecture.layers({"a": {"b"}, "b": {"c"}, "c": {"a"}})


def test_the_diagram_names_modules_that_exist() -> None:
    text = gen_architecture.diagram()
    for _, _, modules in gen_architecture.STAGES:
        assert all(module in text for module in modules)
