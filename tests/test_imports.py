"""The package's import structure: ``import bots_rft`` stays light (no torch), and no two bots_rft
modules import each other, directly or through others (module-level imports, read with ast)."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import bots_rft

PACKAGE = Path(bots_rft.__file__).parent


def _imports_in_fresh_interpreter(statement: str) -> set[str]:
    code = f"import sys\n{statement}\nprint('\\n'.join(sorted(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True).stdout
    return set(out.split())


def test_importing_bots_rft_does_not_import_torch() -> None:
    loaded = _imports_in_fresh_interpreter("import bots_rft, bots_rft.methods, bots_rft.baselines")
    assert "bots_rft.selector" in loaded  # the statement ran
    heavy = sorted(m for m in loaded if m.split(".")[0] in ("torch", "transformers", "matplotlib"))
    assert heavy == [], heavy


def test_cli_parsing_and_configs_do_not_import_torch() -> None:
    """``bots --help`` and config validation are for machines without the train extra too."""
    loaded = _imports_in_fresh_interpreter(
        "import bots_rft.cli, bots_rft.train.config, bots_rft.train.selection, bots_rft.simulate, bots_rft.llm, "
        "bots_rft.report"
    )
    assert not any(m.split(".")[0] == "torch" for m in loaded)


def _module_name(path: Path) -> str:
    rel = path.relative_to(PACKAGE.parent).with_suffix("")
    parts = list(rel.parts)
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


def _module_level_imports(tree: ast.Module) -> list[ast.Import | ast.ImportFrom]:
    """Imports executed when the module is imported: at top level or inside top-level if/try
    blocks, but not under ``if TYPE_CHECKING:`` nor inside functions or classes."""
    found: list[ast.Import | ast.ImportFrom] = []

    def visit(stmts: list[ast.stmt]) -> None:
        for node in stmts:
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                found.append(node)
            elif isinstance(node, ast.If):
                if not (isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING"):
                    visit(node.body)
                visit(node.orelse)
            elif isinstance(node, ast.Try):
                visit(node.body)
                for handler in node.handlers:
                    visit(handler.body)
                visit(node.orelse)
                visit(node.finalbody)

    visit(tree.body)
    return found


def import_graph() -> dict[str, set[str]]:
    """bots_rft module -> the bots_rft modules it imports at module level."""
    modules = {_module_name(p): p for p in PACKAGE.rglob("*.py")}
    # The compiled core (a .pyi beside the extension) is a module too, importing nothing of ours.
    compiled = {_module_name(p) for p in PACKAGE.rglob("*.pyi")}
    graph: dict[str, set[str]] = {name: set() for name in (*modules, *compiled)}
    for name, path in modules.items():
        is_package = path.name == "__init__.py"
        for node in _module_level_imports(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            else:
                base = _resolve(name, is_package, node.level, node.module)
                # `from . import x` imports the submodule x when there is one.
                targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in graph else base for a in node.names]
            for t in targets:
                while t and t not in graph:  # `import bots_rft.x.y` names a module or its package
                    t = t.rpartition(".")[0]
                if t.startswith("bots_rft") and t != name:
                    graph[name].add(t)
    return graph


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import cycle, as the list of modules around it, or None."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                return path[path.index(nxt) :] + [nxt]
            if nxt not in state:
                found = visit(nxt)
                if found:
                    return found
        path.pop()
        state[node] = 2
        return None

    for start in sorted(graph):
        if start not in state:
            found = visit(start)
            if found:
                return found
    return None


def test_no_import_cycle_between_bots_rft_modules() -> None:
    graph = import_graph()
    assert "bots_rft.methods" in graph and graph["bots_rft.report.training"]  # the graph was read
    cycle = _cycle(graph)
    assert cycle is None, " -> ".join(cycle or [])


def test_the_cycle_finder_finds_a_cycle() -> None:
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b"}, "b": set(), "c": {"a", "b"}}) is None


def _type_checking_blocks(tree: ast.Module) -> set[int]:
    """ids of the import nodes under ``if TYPE_CHECKING:`` (they never run)."""
    skip: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING":
            for inner in node.body:
                skip.update(id(n) for n in ast.walk(inner))
    return skip


def full_import_graph() -> dict[str, set[str]]:
    """bots_rft module -> every bots_rft module it may import when it runs: module-level imports,
    function-local ones, and modules named in strings handed to ``importlib`` (``"pkg.mod"`` or
    ``"pkg.mod:attr"``, as the method table's builders and lazy re-exports use). Imports under
    ``if TYPE_CHECKING:`` are left out: they never run."""
    modules = {_module_name(p): p for p in PACKAGE.rglob("*.py")}
    compiled = {_module_name(p) for p in PACKAGE.rglob("*.pyi")}
    graph: dict[str, set[str]] = {name: set() for name in (*modules, *compiled)}
    for name, path in modules.items():
        is_package = path.name == "__init__.py"
        tree = ast.parse(path.read_text(encoding="utf-8"))
        skip = _type_checking_blocks(tree)
        uses_importlib = "importlib" in path.read_text(encoding="utf-8")
        for node in ast.walk(tree):
            if id(node) in skip:
                continue
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = _resolve(name, is_package, node.level, node.module)
                targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in graph else base for a in node.names]
            elif uses_importlib and isinstance(node, ast.Constant) and isinstance(node.value, str):
                text = node.value.partition(":")[0]
                if text.startswith("bots_rft.") and text.replace(".", "").replace("_", "").isalnum():
                    targets = [text]
            for t in targets:
                while t and t not in graph:
                    t = t.rpartition(".")[0]
                if t.startswith("bots_rft") and t != name:
                    graph[name].add(t)
    return graph


def _strongly_connected(graph: dict[str, set[str]]) -> list[set[str]]:
    """The groups of two or more modules that import each other, directly or through others."""
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


#: No circle is left. The last one ran between the selector and its torch backend; the selector's
#: shared layer is a package of its own now (bots_rft.selector), the backends import it, and the
#: backends register themselves with BOTS (bots_rft.backends), so nothing imports back.
KNOWN_CIRCLES: list[set[str]] = []


def test_no_import_circle_when_function_local_and_lazy_imports_count() -> None:
    graph = full_import_graph()
    # The graph was read, function-local imports included: the method table builds the selectors.
    assert {"bots_rft.selector", "bots_rft.peers.greso", "bots_rft.screening"} <= graph["bots_rft.methods"]
    assert _strongly_connected(graph) == KNOWN_CIRCLES


def test_the_full_graph_sees_function_local_imports_and_importlib_strings() -> None:
    tree = ast.parse(
        "import importlib\n"
        "def f():\n    from bots_rft import selector\n"
        "X = 'bots_rft.peers.speed:SpeedRL'\n"
        "if TYPE_CHECKING:\n    from bots_rft import methods\n"
    )
    skip = _type_checking_blocks(tree)
    seen = [n for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and id(n) not in skip]
    assert [n.module for n in seen] == ["bots_rft"]  # the local import counts, the TYPE_CHECKING one not
    assert _strongly_connected({"a": {"b"}, "b": {"a", "c"}, "c": set()}) == [{"a", "b"}]
