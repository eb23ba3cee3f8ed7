"""Code verifier: the response's program runs in the sandbox, its tests run here.

``ground_truth`` is a JSON object (string or dict) in one of two forms:
- HumanEval / GURU "functional": ``{"test": "...def check(candidate): ...", "entry_point": "f",
  "prompt": "def f(...):\\n    \\"\\"\\"...\\"\\"\\""}`` (``prompt`` optional: put in front of a response that
  is only the function body; its imports, helper functions, classes and constants go in front of
  a response that is the whole function, as EvalPlus sanitises chat answers), or
  ``{"functional": "<test code that raises on failure>"}``;
- standard input/output: ``{"inputs": ["1 2\\n", ...], "outputs": ["3\\n", ...]}``.

The program is loaded in a sandboxed process of its own (:class:`~bots_rft.rewards.harness.Candidate`);
the test code runs in this process. Its names come from where they belong: the built-ins are this
process's own, the prompt's imports and helpers are run here from the ground truth's text, and
from the program it takes only the entry point (or, for a ``functional`` test, the names it uses
that nothing trusted defines), each a stand-in that forwards calls and returns plain data. An
exception the program raises reaches the test as an ordinary ``Exception`` (never one that ends
an iterator or escapes the test). For stdin/stdout
tasks the program runs once per input and only its raw output comes back; the comparison
(whitespace-separated tokens) is made here. So the tests, the expected outputs and the decision
never enter the program's process, and nothing it prints, patches or returns other than plain
data can turn into a pass. Reward 1 when every test passes, else 0 with a reason in the
verifier's own words (never the program's output).
"""

from __future__ import annotations

import ast
import builtins
import json
import re
from collections.abc import Mapping
from types import TracebackType
from typing import Any

from .base import RewardResult
from .extract import extract_code
from .harness import Candidate, CandidateFailure, CandidateRaised
from .sandbox import SandboxLimits

__all__ = ["verify_code", "DEFAULT_CODE_LIMITS"]

DEFAULT_CODE_LIMITS = SandboxLimits(timeout_s=10.0, memory_mb=1024, output_bytes=1 << 20)
_REASON_CHARS = 200
_TEST_FILE = "<test>"


def _parse_spec(ground_truth: Any) -> dict[str, Any]:
    spec = json.loads(ground_truth) if isinstance(ground_truth, (str, bytes)) else ground_truth
    if not isinstance(spec, Mapping):
        raise ValueError(f"code ground truth must be a JSON object, got {type(spec).__name__}")
    return dict(spec)


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


def _fail(reason: str) -> RewardResult:
    return RewardResult(0.0, reason[:_REASON_CHARS])


def _test_line(tb: TracebackType | None) -> str:
    line = None
    while tb is not None:
        if tb.tb_frame.f_code.co_filename == _TEST_FILE:
            line = tb.tb_lineno
        tb = tb.tb_next
    return f"test line {line}" if line is not None else "test"


def _referenced_names(tree: ast.AST) -> set[str]:
    return {node.id for node in ast.walk(tree) if isinstance(node, ast.Name)}


def _bound_names(tree: ast.Module) -> set[str]:
    """Names a module's top-level statements bind (definitions, imports, assignments)."""
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((a.asname or a.name).split(".")[0] for a in node.names)
        else:
            names.update(n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store))
    return names


_CONTEXT_STATEMENTS = (
    ast.Import,
    ast.ImportFrom,
    ast.FunctionDef,
    ast.AsyncFunctionDef,
    ast.ClassDef,
    ast.Assign,
    ast.AnnAssign,
)


def _prompt_context(prompt: str, entry: str | None) -> str:
    """The part of a task's prompt both sides need: its imports (also those written inside the
    entry point's own body, as HumanEval/115 does), helper functions, classes and constants;
    never the entry point itself. A chat model's whole-function answer runs after this text (as
    EvalPlus sanitises answers), and the tests get the prompt's own helpers from it. Statements
    other than these (docstrings, calls) are left out; a prompt that is not Python is ignored."""
    if not prompt.strip():
        return ""
    tree = None
    for text in (prompt, prompt + "    pass\n"):  # a prompt may end with a bare ``def f(...):``
        try:
            tree = ast.parse(text)
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
        elif isinstance(node, _CONTEXT_STATEMENTS):
            keep.append(segment)
    return "\n".join(keep) + "\n" if keep else ""


def _verify_tests(
    code: str, spec: dict[str, Any], limits: SandboxLimits, allow_unsandboxed: bool | None
) -> RewardResult:
    entry = spec.get("entry_point")
    entry = str(entry) if entry else None
    prompt = str(spec.get("prompt") or "")
    context = _prompt_context(prompt, entry)
    if entry and not re.search(rf"^\s*(async\s+)?def\s+{re.escape(entry)}\s*\(", code, re.M):
        # A completion of the function body: put the signature and docstring back in front.
        code = prompt + code
    elif context:
        # A whole-function answer: the prompt's imports and helpers first, as prompt + completion
        # would have them; the answer's own definitions come after and win in its own process.
        code = context + "\n" + code
    test = str(spec.get("test") or spec.get("functional"))
    tree = ast.parse(test, _TEST_FILE)  # the ground truth's own syntax error is a data error
    compiled = compile(tree, _TEST_FILE, "exec")
    # The tests' namespace is built here from trusted text only: the real built-ins, then the
    # prompt's imports and helpers (run in this process: they are part of the ground truth, like
    # the tests). From the program it takes only the entry point, or, for a test without one,
    # the names the test uses that neither the built-ins, the prompt nor the test itself define.
    namespace: dict[str, Any] = {"__name__": "__bots_test__", "__builtins__": builtins}
    if context:
        try:
            exec(compile(context, "<prompt>", "exec"), namespace)
        except Exception as exc:  # noqa: BLE001 - the ground truth's own prompt does not run here
            raise ValueError(f"code ground truth 'prompt' does not run: {type(exc).__name__}: {exc}") from None
    trusted = set(namespace) | set(dir(builtins)) | _bound_names(tree)
    wanted = [entry] if entry else sorted(_referenced_names(tree) - trusted)
    with Candidate(limits, allow_unsandboxed=allow_unsandboxed) as candidate:
        try:
            names = candidate.load(code, wanted)
        except CandidateFailure as failure:
            return _fail(failure.reason)
        except CandidateRaised as exc:
            return _fail(f"the program raised {type(exc).__name__} while loading")
        for name in wanted:
            if name in names:
                namespace[name] = names[name]
        try:
            exec(compiled, namespace)
            if entry and "test" in spec:
                if entry not in names:
                    return _fail(f"the program defines no {entry!r}")
                if not callable(namespace.get("check")):
                    raise ValueError("code ground truth 'test' defines no check(candidate) function")
                namespace["check"](names[entry])
        except CandidateFailure as failure:
            return _fail(failure.reason)
        except CandidateRaised as exc:
            return _fail(f"the program raised {type(exc).__name__} ({_test_line(exc.__traceback__)})")
        except AssertionError as exc:
            if candidate.failure is None:
                return _fail(f"wrong answer (failed assertion at {_test_line(exc.__traceback__)})")
        except Exception as exc:  # noqa: BLE001 - the test failed on what the program returned
            if candidate.failure is None:
                return _fail(f"the test raised {type(exc).__name__} ({_test_line(exc.__traceback__)})")
        if candidate.failure is not None:  # a failure the test code caught and ignored
            return _fail(candidate.failure)
    return RewardResult(1.0)


def _verify_stdio(
    code: str, cases: list[tuple[str, str]], limits: SandboxLimits, allow_unsandboxed: bool | None
) -> RewardResult:
    with Candidate(limits, allow_unsandboxed=allow_unsandboxed) as candidate:
        try:
            candidate.load(code, run=False)
            for i, (given, wanted) in enumerate(cases):
                out, status, truncated = candidate.run_case(given)
                if truncated:
                    return _fail(f"case {i}: output exceeds {limits.output_bytes} bytes")
                if status > 128:
                    return _fail(
                        f"case {i}: the program was killed (signal {status - 128}: a resource limit or a crash)"
                    )
                if status != 0:
                    return _fail(f"case {i}: the program exited with status {status}")
                if out.decode("utf-8", "replace").split() != wanted.split():
                    return _fail(f"case {i}: wrong output")
        except CandidateFailure as failure:
            return _fail(failure.reason)
        except CandidateRaised as exc:
            return _fail(f"the program raised {type(exc).__name__} while loading")
    return RewardResult(1.0)
