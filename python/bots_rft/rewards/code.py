"""Code verifier: the response's program and its tests run in one sandbox, as two users.

``ground_truth`` is a JSON object (string or dict) in one of two forms:
- HumanEval / GURU "functional": ``{"test": "...def check(candidate): ...", "entry_point": "f",
  "prompt": "def f(...):\\n    \\"\\"\\"...\\"\\"\\""}`` (``prompt`` optional: put in front of a response that
  is only the function body; its imports, helper functions, classes and constants go in front of
  a response that is the whole function, as EvalPlus sanitises chat answers), or
  ``{"functional": "<test code that raises on failure>"}``;
- standard input/output: ``{"inputs": ["1 2\\n", ...], "outputs": ["3\\n", ...]}``.

Nothing of the verdict runs in this process. One sandbox (:mod:`bots_rft.rewards.harness`)
holds both sides as two unprivileged identities: the program, loaded in a process of its own,
and the test code with the prompt's imports and helpers, in another
(:mod:`bots_rft.rewards._sandbox_judge`). They talk only through a bounded, data-only channel;
this process writes the task and reads back one verdict, pass or fail with a reason code it
words itself. The tests' names come from where they belong: the built-ins are the test side's
own, the prompt's imports and helpers are run there from the ground truth's text, and from the
program it takes only the entry point (or, for a ``functional`` test, the names it uses that
nothing trusted defines), each a stand-in that forwards calls and returns plain data. An
exception the program raises reaches the test as an ordinary ``Exception`` (never one that ends
an iterator or escapes the test). For stdin/stdout tasks the program runs once per input and
only its raw output reaches the test side, which compares whitespace-separated tokens. So the
tests, the expected outputs and the decision never enter the program's process, and nothing it
prints, patches or returns other than plain data can turn into a pass. Reward 1 when every test
passes, else 0 with a reason in the verifier's own words (never the program's output).
"""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Mapping
from typing import Any

from .._pyast import parse
from .base import RewardResult
from .extract import extract_code
from .harness import run_verdict
from .sandbox import SandboxLimits, isolation

__all__ = ["verify_code", "DEFAULT_CODE_LIMITS"]

DEFAULT_CODE_LIMITS = SandboxLimits(timeout_s=10.0, memory_mb=1024, output_bytes=1 << 20)


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
    return _hoist_future(code)


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
    if context:
        compile(_hoist_future(context), "<prompt>", "exec")
    task = {
        "kind": "tests",
        "source": code,
        "test": test,
        "context": _hoist_future(context),
        "entry": entry,
        "check": bool(entry and "test" in spec),
    }
    return run_verdict(task, limits, allow_unsandboxed)


def _verify_stdio(
    code: str, cases: list[tuple[str, str]], limits: SandboxLimits, allow_unsandboxed: bool | None
) -> RewardResult:
    return run_verdict({"kind": "stdio", "source": code, "cases": cases}, limits, allow_unsandboxed)
