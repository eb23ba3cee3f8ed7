"""Code verifier: the response's program runs in the sandbox, its tests run here.

``ground_truth`` is a JSON object (string or dict) in one of two forms:
- HumanEval / GURU "functional": ``{"test": "...def check(candidate): ...", "entry_point": "f",
  "prompt": "def f(...):\\n    \\"\\"\\"...\\"\\"\\""}`` (``prompt`` optional; put in front of a response that
  is only the function body), or ``{"functional": "<test code that raises on failure>"}``;
- standard input/output: ``{"inputs": ["1 2\\n", ...], "outputs": ["3\\n", ...]}``.

The program is loaded in a sandboxed process of its own (:class:`~bots_rft.rewards.harness.Candidate`);
the test code runs in this process, where the names it uses from the program (the entry point,
helpers, classes) are stand-ins that forward each call and return plain data. For stdin/stdout
tasks the program runs once per input and only its raw output comes back; the comparison
(whitespace-separated tokens) is made here. So the tests, the expected outputs and the decision
never enter the program's process, and nothing it prints, patches or returns other than plain
data can turn into a pass. Reward 1 when every test passes, else 0 with a reason in the
verifier's own words (never the program's output).
"""

from __future__ import annotations

import ast
import builtins
import importlib
import json
import re
import sys
from collections.abc import Mapping
from types import TracebackType
from typing import Any

from .base import RewardResult
from .extract import extract_code
from .harness import Candidate, CandidateFailure, CandidateRaised, ModuleName
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


def _stdlib_module(name: str) -> Any:
    """The tests' own copy of a standard-library module the program imported, else None."""
    if name.split(".")[0] not in sys.stdlib_module_names:
        return None
    try:
        return importlib.import_module(name)
    except ImportError:
        return None


def _verify_tests(
    code: str, spec: dict[str, Any], limits: SandboxLimits, allow_unsandboxed: bool | None
) -> RewardResult:
    entry = spec.get("entry_point")
    entry = str(entry) if entry else None
    if entry and not re.search(rf"^\s*(async\s+)?def\s+{re.escape(entry)}\s*\(", code, re.M):
        # A completion of the function body: put the signature and docstring back in front.
        code = str(spec.get("prompt", "")) + code
    test = str(spec.get("test") or spec.get("functional"))
    tree = ast.parse(test, _TEST_FILE)  # the ground truth's own syntax error is a data error
    compiled = compile(tree, _TEST_FILE, "exec")
    with Candidate(limits, allow_unsandboxed=allow_unsandboxed) as candidate:
        try:
            names = candidate.load(code)
        except CandidateFailure as failure:
            return _fail(failure.reason)
        except CandidateRaised as exc:
            return _fail(f"the program raised {type(exc).__name__} while loading")
        namespace: dict[str, Any] = {"__name__": "__bots_test__", "__builtins__": builtins}
        for name in _referenced_names(tree) & names.keys():
            value = names[name]
            namespace[name] = _stdlib_module(value.name) if isinstance(value, ModuleName) else value
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
