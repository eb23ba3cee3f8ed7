"""Code verifier: the response's program and its tests run in one sandbox, as two users.

``ground_truth`` is a JSON object (string or dict) in one of two forms:
- HumanEval / GURU "functional": ``{"test": "...def check(candidate): ...", "entry_point": "f",
  "prompt": "def f(...):\\n    \\"\\"\\"...\\"\\"\\""}`` (``prompt`` optional: put in front of a response that
  is only the function body; its imports, helper functions, classes and constants go in front of
  a response that is the whole function, as EvalPlus sanitises chat answers), or
  ``{"functional": "<test code that raises on failure>"}``; either may add a harness ``header``
  run in front of the program and the tests (``"leetcode"``: :data:`LEETCODE_HEADER`);
- standard input/output: ``{"inputs": ["1 2\\n", ...], "outputs": ["3\\n", ...]}``.

Nothing of the verdict runs in this process. One sandbox (:mod:`bots_rft.rewards.sandbox.verdict`)
holds both sides as two unprivileged identities: the program, loaded in a process of its own,
and the test code with the prompt's imports and helpers, in another
(:mod:`bots_rft.rewards.sandbox.inside.judge`). They talk only through a bounded, data-only channel;
this process writes the task and reads back one verdict, pass or fail with a reason code it
words itself. The tests' names come from where they belong: the built-ins are the test side's
own, the pool's harness header (``"header": "leetcode"``, or its text) and the prompt's imports
and helpers are run there from the ground truth's text, a standard-library module a
``functional`` test uses without importing it is imported there, and from the program it takes
only the entry point (or, for a ``functional`` test, the names it still needs, where the
program's own top-level ``def`` or ``class`` binds them), each a stand-in that forwards calls and
returns plain data. An exception the program raises reaches the test as an ordinary
``Exception`` with its message (the prompt's own exception class where the program's is named
like it; never one that ends an iterator or escapes the test). For stdin/stdout tasks the
program runs once per input and only its raw output reaches the test side, which compares
whitespace-separated tokens. So the tests, the expected outputs and the decision never enter the
program's process, and nothing it prints, patches or returns other than plain data can turn into
a pass. Reward 1 when every test passes, else 0 with a reason in the verifier's own words (never
the program's output).
"""

from __future__ import annotations

import ast
import functools
import json
import re
import sys
from collections.abc import Mapping
from typing import Any

from .._pyast import parse
from ..errors import InvalidArgumentError
from .base import RewardResult
from .extract import extract_code
from .sandbox import SandboxLimits, isolation
from .sandbox.verdict import run_verdict

__all__ = ["verify_code", "DEFAULT_CODE_LIMITS", "HEADERS", "LEETCODE_HEADER", "functional_free_names", "header_names"]

DEFAULT_CODE_LIMITS = SandboxLimits(timeout_s=10.0, memory_mb=1024, output_bytes=1 << 20)


#: The harness header LeetCode-style pools (GURU's LeetCode set, LeetCodeDataset) put in front of
#: both the program and the tests: the standard-library star imports the solutions assume, and the
#: list and tree helpers the tests call. The helpers compare iteratively (a long list does not
#: reach the recursion limit). A ground truth names it with ``"header": "leetcode"``.
LEETCODE_HEADER = """\
from typing import *
from functools import *
from collections import *
from itertools import *
from heapq import *
from bisect import *
from string import *
from operator import *
from math import *
import math
import datetime
inf = float("inf")


class ListNode:
    def __init__(self, val=0, next=None):
        self.val = val
        self.next = next


def list_node(values):
    head = None
    for value in reversed(list(values or [])):
        head = ListNode(value, head)
    return head


def is_same_list(p1, p2):
    while p1 is not None and p2 is not None:
        if not p1.val == p2.val:
            return False
        p1, p2 = p1.next, p2.next
    return p1 is None and p2 is None


class TreeNode:
    def __init__(self, val=0, left=None, right=None):
        self.val = val
        self.left = left
        self.right = right


def tree_node(values):
    values = list(values or [])
    if not values or values[0] is None:
        return None
    root = TreeNode(values[0])
    queue = deque([root])
    i = 1
    while queue and i < len(values):
        node = queue.popleft()
        if i < len(values) and values[i] is not None:
            node.left = TreeNode(values[i])
            queue.append(node.left)
        i += 1
        if i < len(values) and values[i] is not None:
            node.right = TreeNode(values[i])
            queue.append(node.right)
        i += 1
    return root


def is_same_tree(p, q):
    stack = [(p, q)]
    while stack:
        a, b = stack.pop()
        if a is None and b is None:
            continue
        if a is None or b is None or not a.val == b.val:
            return False
        stack += [(a.left, b.left), (a.right, b.right)]
    return True
"""

#: Harness headers a ground truth may name (``"header": NAME``); any other ``header`` value is
#: the header's own text. Trusted like the tests: it runs in front of the program and the tests.
HEADERS = {"leetcode": LEETCODE_HEADER}


def _header(spec: Mapping[str, Any]) -> str:
    header = spec.get("header")
    if header is None:
        return ""
    if not isinstance(header, str):
        raise ValueError(f"code ground truth 'header': expected a header name or Python text, got {header!r:.80}")
    text = HEADERS.get(header, header)
    return text if text.endswith("\n") else text + "\n"


def functional_free_names(ground_truth: Any) -> list[str]:
    """The names a ``functional`` test uses that nothing trusted defines: not a built-in, not bound
    by the test, the pool's header or the prompt, and no standard-library module the test uses as
    a module (the test side imports those). The verifier takes such a name from the program, where the program's own
    top-level ``def`` or ``class`` binds it, so a pool whose tests have any should declare the
    header that defines them (``bots data info`` flags them). Empty for other ground truths."""
    import builtins

    spec = _parse_spec(ground_truth)
    if "functional" not in spec or spec.get("entry_point"):
        return []
    tree = parse(str(spec["functional"]), "<test>")
    trusted = set(dir(builtins)) | _top_level_names(tree)
    trusted |= _text_names(_header(spec) + _prompt_context(str(spec.get("prompt") or ""), None))
    nodes = list(ast.walk(tree))
    bases = {id(n.value) for n in nodes if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name)}
    used = {n.id for n in nodes if isinstance(n, ast.Name)}
    bare = {n.id for n in nodes if isinstance(n, ast.Name) and id(n) not in bases}
    # A standard-library module the test only reads attributes of is imported on the test side.
    return sorted(n for n in used - trusted if n in bare or n not in sys.stdlib_module_names)


@functools.lru_cache(maxsize=64)
def _text_names(text: str) -> frozenset[str]:
    """Names trusted text (a header, a prompt's context) binds at its top level, cached: a pool
    repeats one header on every row."""
    return frozenset(_top_level_names(parse(text))) if text.strip() else frozenset()


def header_names(name: str) -> frozenset[str]:
    """The names the harness header ``name`` (a key of :data:`HEADERS`) defines."""
    if name not in HEADERS:
        raise InvalidArgumentError(f"header: expected one of {sorted(HEADERS)}, got {name!r}", "header")
    return _text_names(HEADERS[name])


def _top_level_names(tree: ast.Module) -> set[str]:
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            source = node.module if isinstance(node, ast.ImportFrom) else None
            star = any(a.name == "*" for a in node.names)
            if star and source and source.split(".")[0] in sys.stdlib_module_names:  # (only those)
                try:
                    import importlib

                    module = importlib.import_module(source)
                    names.update(getattr(module, "__all__", None) or [k for k in vars(module) if k[:1] != "_"])
                except ImportError:
                    pass
            names.update((a.asname or a.name).split(".")[0] for a in node.names if a.name != "*")
        else:
            names.update(n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store))
    return names


def _parse_spec(ground_truth: Any) -> dict[str, Any]:
    spec = json.loads(ground_truth) if isinstance(ground_truth, (str, bytes)) else ground_truth
    if not isinstance(spec, Mapping):
        raise ValueError(f"code ground truth must be a JSON object, got {type(spec).__name__}")
    return dict(spec)


def prepare() -> None:
    """Detect the code sandbox (a probe sandbox and the runtime's shared libraries: seconds on a
    busy host) ahead of a scorer worker's first timed call."""
    isolation()


def verify_code(
    data_source: str,
    solution_str: str,
    ground_truth: Any,
    extra_info: Mapping[str, Any] | None = None,
    *,
    limits: SandboxLimits = DEFAULT_CODE_LIMITS,
    allow_unsandboxed: bool | None = None,
) -> RewardResult:
    """1.0 when the response's code passes all tests, else 0.0 with a reason.

    Raises :class:`~bots_rft.rewards.sandbox.SandboxUnavailableError` where the host gives no
    kernel sandbox and ``allow_unsandboxed`` (default: ``BOTS_ALLOW_UNSANDBOXED_CODE``) is off;
    ``ValueError`` for a malformed ground truth."""
    spec = _parse_spec(ground_truth)
    code = extract_code(solution_str)
    if "inputs" in spec and "outputs" in spec:
        cases = list(zip([str(x) for x in spec["inputs"]], [str(x) for x in spec["outputs"]]))
        if not cases:
            raise ValueError("code ground truth has no input/output cases")
        return _verify_stdio(code, cases, limits, allow_unsandboxed)
    if "test" in spec or "functional" in spec:
        return _verify_tests(code, spec, limits, allow_unsandboxed)
    raise ValueError(f"code ground truth needs 'test', 'functional' or 'inputs'/'outputs'; got keys {sorted(spec)}")


_CONTEXT_STATEMENTS = (
    ast.Import,
    ast.ImportFrom,
    ast.FunctionDef,
    ast.AsyncFunctionDef,
    ast.ClassDef,
    ast.Assign,
    ast.AnnAssign,
    ast.AugAssign,
)


def _prompt_context(prompt: str, entry: str | None) -> str:
    """The part of a task's prompt both sides need: its imports (also those written inside the
    entry point's own body, as HumanEval/115 does), helper functions, classes and constants;
    never the entry point itself. A chat model's whole-function answer runs after this text (as
    EvalPlus sanitises answers), and the tests get the prompt's own helpers from it. Statements
    other than these are left out (docstrings, ``if __name__ == "__main__":`` blocks, loops), and
    so is any expression statement that names the entry point (an example call); other calls
    stay, as ``TABLE.update({...})`` after ``TABLE = {...}`` (a CodeI/O reference). A prompt that is
    not Python is ignored."""
    if not prompt.strip():
        return ""
    tree = None
    for text in (prompt, prompt + "    pass\n"):  # a prompt may end with a bare ``def f(...):``
        try:
            tree = parse(text)
            break
        except SyntaxError:
            continue
    if tree is None:
        return ""
    lines = prompt.splitlines()
    keep: list[str] = []
    for node in tree.body:
        first = min([node.lineno, *(d.lineno for d in getattr(node, "decorator_list", []))])
        segment = "\n".join(lines[first - 1 : node.end_lineno])
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == entry:
            keep += [ast.unparse(n) for n in node.body if isinstance(n, (ast.Import, ast.ImportFrom))]
        elif isinstance(node, _CONTEXT_STATEMENTS) or (
            isinstance(node, ast.Expr)
            and not isinstance(node.value, ast.Constant)
            and not any(isinstance(n, ast.Name) and n.id == entry for n in ast.walk(node))
        ):
            keep.append(segment)
    return "\n".join(keep) + "\n" if keep else ""


_FUTURE = re.compile(r"from[ \t]+__future__[ \t]+import[ \t]")


def _defines_entry(code: str, entry: str) -> bool:
    """Whether ``code`` is a whole function: it defines ``entry`` at its top level. Decided on
    the syntax tree where the answer parses as it stands; else (a body, or a whole function with
    a syntax error) line by line, on a ``def`` at column 0, so a body's nested helper named like
    the entry point never counts. A whole function indented as one block (some chat answers) is
    one that parses once dedented, defines ``entry`` at its top level and has no top-level
    ``return`` (a dedented body would). Linear in the answer's length either way."""
    import textwrap

    def top_level(text: str) -> ast.Module | None:
        try:
            return parse(text)
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            return None

    def defines(tree: ast.Module) -> bool:
        return any(isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.name == entry for n in tree.body)

    tree = top_level(code)
    if tree is not None:
        return defines(tree)
    head = re.compile(rf"(?:async[ \t]+)?def[ \t]+{re.escape(entry)}[ \t]*\(")
    if any(head.match(line) for line in code.splitlines()):
        return True
    first = next((line for line in code.splitlines() if line.strip()), "")
    if first[:1] in (" ", "\t") and head.match(first.lstrip()):
        tree = top_level(textwrap.dedent(code))
        return tree is not None and defines(tree) and not any(isinstance(n, ast.Return) for n in tree.body)
    return False


def _hoist_future(source: str) -> str:
    """``source`` with every ``from __future__ import`` line (at column 0, as a whole function or a
    prompt writes it) moved to the front: Python accepts them only there, and the prompt's
    imports and helpers go in front of a whole-function answer."""
    lines = source.split("\n")
    future = [line for line in lines if _FUTURE.match(line)]
    if not future:
        return source
    rest = [line for line in lines if not _FUTURE.match(line)]
    return "\n".join(dict.fromkeys(line.rstrip() for line in future)) + "\n" + "\n".join(rest)


def _program_source(code: str, spec: Mapping[str, Any], context: str | None = None) -> str:
    """The program as it is loaded: a completion of the function body after the prompt (its
    signature and docstring), a whole function after the prompt's imports and helpers
    (``context``, from :func:`_prompt_context`), ``from __future__`` lines first."""
    entry = spec.get("entry_point")
    entry = str(entry) if entry else None
    prompt = str(spec.get("prompt") or "")
    if context is None:
        context = _prompt_context(prompt, entry)
    if entry and not _defines_entry(code, entry):
        # A completion of the function body: put the signature and docstring back in front.
        code = prompt + code
    elif context:
        # A whole-function answer: the prompt's imports and helpers first, as prompt + completion
        # would have them; the answer's own definitions come after and win in its own process.
        code = context + "\n" + code
    return _hoist_future(_header(spec) + code)


def _verify_tests(
    code: str, spec: dict[str, Any], limits: SandboxLimits, allow_unsandboxed: bool | None
) -> RewardResult:
    entry = spec.get("entry_point")
    entry = str(entry) if entry else None
    context = _prompt_context(str(spec.get("prompt") or ""), entry)
    code = _program_source(code, spec, context)
    test = str(spec.get("test") or spec.get("functional"))
    # The ground truth's own syntax errors are data errors, found here before any sandbox starts
    # (parsing runs nothing); the test runs only in the sandbox, in the test side's process.
    parse(test, "<test>")
    # The pool's harness header runs in front of the prompt's context on the test side.
    context = _hoist_future(_header(spec) + context)
    if context.strip():
        compile(context, "<prompt>", "exec")
    task = {
        "kind": "tests",
        "source": code,
        "test": test,
        "context": context,
        "entry": entry,
        "check": bool(entry and "test" in spec),
    }
    return run_verdict(task, limits, allow_unsandboxed)


def _verify_stdio(
    code: str, cases: list[tuple[str, str]], limits: SandboxLimits, allow_unsandboxed: bool | None
) -> RewardResult:
    return run_verdict({"kind": "stdio", "source": code, "cases": cases}, limits, allow_unsandboxed)
