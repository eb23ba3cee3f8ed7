"""The package's import structure: ``import bots_rft`` stays light (no torch), and no two bots_rft
modules import each other, directly or through others.

The import graph (:func:`import_graph`, read with ast) has an edge for every import a module can
run or names, wherever it is written:

- at module level, inside functions, methods and class bodies, and in a module's ``__getattr__``
  (a lazy re-export): a function-local import defers a dependency, it does not remove it;
- under ``if TYPE_CHECKING:`` too. Those never run, but a module whose annotations name another
  module's types depends on it as much as one that calls it: a circle of types is still a circle
  in the design (neither module can be read, moved or tested without the other), so it counts;
- module names written out as strings in a module that uses ``importlib`` (``"bots_rft.x"`` or
  ``"bots_rft.x:attr"``, as the CLI's sub-command list and the integration check use). A name
  built at run time is not followed; the package writes every such name out in full.

What an import reaches: ``import a.b.c`` and ``from a.b.c import name`` run the packages ``a``
and ``a.b`` (their ``__init__``) before ``a.b.c``, so they are edges to each; ``from .pkg import
name`` is an edge to ``pkg`` and, when ``name`` is a submodule, to that submodule as well. The one
exception is the importing module's own enclosing packages: Python has started them before the
module runs, so ``from . import sibling`` (``from .. import _core``) is an edge to the submodule
only. Reading a name that an enclosing package's ``__init__`` defines (``from . import SomeClass``)
is an edge to that ``__init__``.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

import bots_rft

PACKAGE = Path(bots_rft.__file__).parent


def _imports_in_fresh_interpreter(statement: str) -> set[str]:
    code = f"import sys\n{statement}\nprint('\\n'.join(sorted(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True).stdout
    return set(out.split())


def test_importing_bots_rft_does_not_import_torch() -> None:
    loaded = _imports_in_fresh_interpreter(
        "import bots_rft, bots_rft.selector.registry, bots_rft.selector.static, bots_rft.selector.peers"
    )
    assert "bots_rft.selector" in loaded  # the statement ran
    heavy = sorted(m for m in loaded if m.split(".")[0] in ("torch", "transformers", "matplotlib"))
    assert heavy == [], heavy


def test_cli_parsing_and_configs_do_not_import_torch() -> None:
    """``bots --help`` and config validation are for machines without the train extra too."""
    loaded = _imports_in_fresh_interpreter(
        "import bots_rft.cli, bots_rft.train.config, bots_rft.train.run_selector, bots_rft.simulate, bots_rft.llm, "
        "bots_rft.report"
    )
    assert not any(m.split(".")[0] == "torch" for m in loaded)


def _module_name(root: Path, path: Path) -> str:
    parts = list(path.relative_to(root.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _resolve(module: str, is_package: bool, level: int, target: str | None) -> str:
    """The absolute name of ``from <level dots><target> import ...`` written in ``module``."""
    if level == 0:
        return target or ""
    base = module.split(".")
    base = base if is_package else base[:-1]
    base = base[: len(base) - (level - 1)]
    return ".".join(base + ([target] if target else []))


def _named_in_strings(node: ast.AST, package: str) -> str | None:
    """The module a ``"pkg.mod"`` or ``"pkg.mod:attr"`` string constant names, if it names one."""
    if not (isinstance(node, ast.Constant) and isinstance(node.value, str)):
        return None
    name = node.value.partition(":")[0]
    if name.startswith(f"{package}.") and name.replace(".", "").replace("_", "").isalnum():
        return name
    return None


def import_graph(root: Path = PACKAGE) -> dict[str, set[str]]:
    """Every module of the package at ``root`` -> the package's modules it imports (module
    docstring: every import, wherever written, ``TYPE_CHECKING`` ones included)."""
    package = root.name
    sources = {_module_name(root, p): p for p in root.rglob("*.py")}
    # The compiled core (a .pyi beside the extension) is a module too, importing nothing of ours.
    known = set(sources) | {_module_name(root, p) for p in root.rglob("*.pyi")}
    graph: dict[str, set[str]] = {name: set() for name in known}

    def reach(importer: str, target: str) -> None:
        while target and target not in known:  # `import pkg.x.attr` names a module or its package
            target = target.rpartition(".")[0]
        parts = target.split(".")
        for i in range(1, len(parts) + 1):  # the packages on the way run first
            module = ".".join(parts[:i])
            enclosing = importer.startswith(f"{module}.")
            if module.split(".")[0] == package and module != importer and not enclosing:
                graph[importer].add(module)

    for name, path in sources.items():
        is_package = path.name == "__init__.py"
        text = path.read_text(encoding="utf-8")
        uses_importlib = "importlib" in text
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    reach(name, alias.name)
            elif isinstance(node, ast.ImportFrom):
                base = _resolve(name, is_package, node.level, node.module)
                for alias in node.names:
                    submodule = f"{base}.{alias.name}"
                    if submodule in known:
                        reach(name, submodule)
                    if submodule not in known or not name.startswith(f"{base}."):
                        # A name from base's __init__ (an enclosing package's too), or a submodule
                        # of a package that is not the importer's own: that __init__ runs first.
                        reach(name, base)
                        if base in known and base != name:
                            graph[name].add(base)
            elif uses_importlib:
                named = _named_in_strings(node, package)
                if named:
                    reach(name, named)
    return graph


def circles(graph: dict[str, set[str]]) -> list[set[str]]:
    """The groups of two or more modules that import each other, directly or through others
    (strongly connected components, Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[set[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = set()
            while True:
                w = stack.pop()
                on_stack.discard(w)
                group.add(w)
                if w == v:
                    break
            if len(group) > 1:
                groups.append(group)

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return groups


def _shown(graph: dict[str, set[str]], group: set[str]) -> str:
    return "; ".join(f"{m} -> {sorted(graph[m] & group)}" for m in sorted(group))


def test_no_import_circle_in_the_package() -> None:
    graph = import_graph()
    # The graph was read, with function-local, TYPE_CHECKING and __getattr__ imports.
    assert {"bots_rft.selector.bots", "bots_rft.selector.peers.greso", "bots_rft.selector.screen"} <= graph[
        "bots_rft.selector.registry"
    ]
    assert "bots_rft.train.trainer" in graph["bots_rft.train"]  # the package's lazy __getattr__
    found = circles(graph)
    assert found == [], "\n".join(_shown(graph, g) for g in found)


def _write(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return root / "pkg"


_CLEAN = {
    "pkg/__init__.py": "from .a import f\nfrom .b import g\n",
    # Its own package's submodules: edges to them, not to pkg's __init__ (which imports a and b).
    "pkg/a.py": "from . import _core\ndef f():\n    return 1\n",
    "pkg/b.py": "from . import a\nfrom .sub import h\ndef g():\n    return a.f()\n",
    "pkg/sub/__init__.py": "def h():\n    return 2\n",
    "pkg/_core.pyi": "def version() -> str: ...\n",
}

#: Circles that only the imports the module-level reading misses can show, one per kind of import.
_PLANTED = {
    "function-local": {"pkg/a.py": "def f():\n    from .b import g\n    return g()\n"},
    "TYPE_CHECKING": {
        "pkg/sub/__init__.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from ..b import g\n"
    },
    "class body": {"pkg/sub/__init__.py": "class H:\n    from ..b import g\n"},
    "module __getattr__": {
        "pkg/sub/__init__.py": "def __getattr__(name):\n    from . import lazy\n    return getattr(lazy, name)\n",
        "pkg/sub/lazy.py": "from ..b import g\n",
    },
    "importlib string": {
        "pkg/sub/__init__.py": "import importlib\nB = 'pkg.b:g'\ndef h():\n    return importlib.import_module('pkg.b')\n"
    },
    # `from .sub.deep import x` runs sub/__init__ first, which imports b back.
    "package on the way": {
        "pkg/a.py": "from .sub.deep import x\n",
        "pkg/sub/__init__.py": "from ..b import g\n",
        "pkg/sub/deep.py": "x = 1\n",
    },
    # Reading a name from the enclosing package's __init__, which imports this module.
    "enclosing package's name": {"pkg/b.py": "from . import f\n"},
}


def test_a_clean_package_has_no_circle(tmp_path: Path) -> None:
    graph = import_graph(_write(tmp_path, _CLEAN))
    assert graph["pkg.a"] == {"pkg._core"} and graph["pkg.b"] == {"pkg.a", "pkg.sub"}, graph
    assert circles(graph) == []


@pytest.mark.parametrize("kind", sorted(_PLANTED))
def test_a_planted_circle_is_reported(tmp_path: Path, kind: str) -> None:
    graph = import_graph(_write(tmp_path, {**_CLEAN, **_PLANTED[kind]}))
    found = circles(graph)
    assert len(found) == 1 and "pkg.b" in found[0], (kind, graph)


def test_a_planted_circle_in_a_copy_of_bots_rft_is_reported(tmp_path: Path) -> None:
    """The same reading on the real package: one function-local import from the bottom layer
    back up to the selector closes a circle through everything in between."""
    copy = tmp_path / "bots_rft"
    for path in PACKAGE.rglob("*.py*"):
        if path.suffix in (".py", ".pyi"):
            target = copy / path.relative_to(PACKAGE)
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(path.read_bytes())
    errors = copy / "errors.py"
    errors.write_text(errors.read_text() + "\n\ndef _planted():\n    from .selector.bots import BOTS\n")
    found = circles(import_graph(copy))
    assert len(found) == 1 and {"bots_rft.errors", "bots_rft.selector.bots"} <= found[0], found


# The paths the selection modules and the estimator interface had before they moved under
# bots_rft.selector and bots_rft.estimators: gone (no version with them was ever released).
_OLD_PATHS = [
    "bots_rft.evidence",
    "bots_rft.baselines",
    "bots_rft.selector_protocol",
    "bots_rft.static_selectors",
    "bots_rft.methods",
    "bots_rft.method_table",
    "bots_rft.planning",
    "bots_rft.screening",
    "bots_rft.guard",
    "bots_rft.multipool",
    "bots_rft.backends",
    "bots_rft.peers",
    "bots_rft.selector.base",
    "bots_rft.selector.feedback",
    "bots_rft.selector.params",
    "bots_rft.selector.rules",
    "bots_rft.selector.state",
    "bots_rft.selector.stream",
]


def test_the_catalogue_s_old_path_still_imports_with_a_deprecation_warning() -> None:
    """Method files written against 0.1 import the catalogue from ``bots_rft.selector.parameters``:
    that still works, gives the catalogue's own objects, and warns naming the new path."""
    import bots_rft.parameters as catalogue
    import bots_rft.selector.parameters as old

    with pytest.warns(DeprecationWarning, match=r"import SEED from bots_rft\.parameters"):
        seed = old.SEED
    assert seed is catalogue.SEED
    with pytest.raises(AttributeError):
        old.NOT_A_PARAMETER  # noqa: B018


@pytest.mark.parametrize("old", _OLD_PATHS)
def test_the_old_import_paths_are_gone(old: str) -> None:
    """Selection lives under bots_rft.selector and the estimator interface under
    bots_rft.estimators, and nowhere else: the old module paths do not import."""
    import importlib

    with pytest.raises(ModuleNotFoundError):
        importlib.import_module(old)


def test_the_package_top_level_holds_only_its_entry_points() -> None:
    """Every concept lives in its sub-package (selector, estimators, metrics, data, rewards, train,
    simulate, report, integrations, llm, commands); the top level keeps only the package's entry
    points (``__init__``, ``checkpoint``, ``cli``, ``config_files``), the two modules every layer
    reads (``errors``, and ``parameters``: the catalogue of every shared parameter's default and
    range, which the estimators read as well as the selectors) and private helpers (a leading
    underscore)."""
    from pathlib import Path

    root = Path(bots_rft.__file__).parent
    modules = sorted(p.stem for p in root.glob("*.py") if not p.stem.startswith("_"))
    assert modules == ["checkpoint", "cli", "config_files", "errors", "parameters"], modules
