"""The code sandbox's third red team: what went through, each as a failing-first test.

- a right answer that fills the pending-signal count the kernel charges to the scorer's uid (the
  owner of the sandbox's user namespace) for the whole host, and leaves the next verdict broken;
- a ``functional`` test's free names taken from the program (``math`` bound by the program, a
  LeetCode helper such as ``is_same_list`` defined by it), and a test's own ``ListNode`` that
  cannot cross to the program;
- the answer-form decision (whole function or body) quadratic in blank lines, run outside the
  sandbox;
- right answers scored 0: a whole function followed by an ``if __name__ == "__main__":`` block, a
  body whose nested helper is named like the entry point, ``from __future__`` first in a whole
  function; and ``AF_VSOCK`` sockets in the sandbox.
"""

from __future__ import annotations

import json
import time
from typing import Any

import pytest

from bots_rft.rewards.code import verify_code
from bots_rft.rewards.sandbox import SandboxLimits, isolation, run_python

pytestmark = pytest.mark.slow

LIMITS = SandboxLimits(timeout_s=10.0, memory_mb=256, output_bytes=64 * 1024, max_processes=16)
ADD_PROMPT = 'import math\n\n\ndef add(a, b):\n    """The sum of a and b."""\n'
ADD = json.dumps(
    {
        "prompt": ADD_PROMPT,
        "test": "def check(candidate):\n    assert candidate(2, 3) == 5\n    assert candidate(-1, 1) == 0\n",
        "entry_point": "add",
    }
)

needs_kernel = pytest.mark.skipif(
    not isolation().kernel, reason=f"no kernel sandbox on this host: {isolation().missing}"
)


def answer(code: str) -> str:
    return f"```python\n{code}\n```"


def reward(code: str, ground_truth: str = ADD) -> Any:
    return verify_code("humaneval", answer(code), ground_truth, {}, limits=LIMITS)


# ----------------------------------------------------------------------------- answer forms
@needs_kernel
@pytest.mark.parametrize("form", ["body", "whole function"])
def test_fifty_thousand_blank_lines_cost_well_under_a_second(form: str) -> None:
    """The form check ("whole function or body") ran ``^\\s*def`` over the answer outside the
    sandbox: ``\\s*`` spans newlines, so a body followed by blank lines cost O(n^2) in the scorer's
    worker (32,000 newlines: 58 s of CPU)."""
    from bots_rft.rewards import code as code_module

    body = "    return a + b" if form == "body" else "def add(a, b):\n    return a + b"
    text = body + "\n" * 50_000 + "x = 1\n"
    start = time.process_time()
    source = code_module._program_source(text, json.loads(ADD))
    assert time.process_time() - start < 0.5
    assert source.count("def add(") == 1
    res = reward(text)
    assert res.reward == 1.0, res


MAIN_BLOCKS = {
    "reads input": 'if __name__ == "__main__":\n    a, b = map(int, input().split())\n    print(add(a, b))\n',
    "unittest.main": (
        "import unittest\n\nclass T(unittest.TestCase):\n    def test(self):\n        self.assertEqual(add(1, 1), 2)\n\n"
        'if __name__ == "__main__":\n    unittest.main()\n'
    ),
    "exits": 'if __name__ == "__main__":\n    raise SystemExit(3)\n',
}


@needs_kernel
@pytest.mark.parametrize("name", list(MAIN_BLOCKS))
def test_a_main_block_after_a_whole_function_is_not_run(name: str) -> None:
    """HumanEval's own harness does not run the program as ``__main__``: a right answer followed by
    a demo block that reads input or runs its own unit tests earns 1."""
    res = reward("def add(a, b):\n    return a + b\n\n" + MAIN_BLOCKS[name])
    assert res.reward == 1.0, res


@needs_kernel
def test_a_body_whose_nested_helper_is_named_like_the_entry_point_is_a_body() -> None:
    body = "    def add(x, y):\n        return x + y\n    return add(a, b)\n"
    res = reward(body)
    assert res.reward == 1.0, res
    assert reward("    def add(x, y):\n        return x - y\n    return add(a, b)\n").reward == 0.0


@needs_kernel
def test_future_imports_first_in_a_whole_function_are_hoisted() -> None:
    code = "from __future__ import annotations\n\n\ndef add(a: int, b: int) -> int:\n    return a + b\n"
    res = reward(code)
    assert res.reward == 1.0, res
    # The prompt's own future import too, in front of a body.
    prompt = "from __future__ import annotations\n" + ADD_PROMPT
    spec = json.dumps({**json.loads(ADD), "prompt": prompt})
    assert reward("    return a + b\n", spec).reward == 1.0
    assert reward(code, spec).reward == 1.0


@needs_kernel
def test_vsock_sockets_are_denied() -> None:
    code = (
        "import errno, socket\ntry:\n    socket.socket(40, socket.SOCK_STREAM)\n    print('made')\n"
        "except OSError as exc:\n    print(errno.errorcode.get(exc.errno))\n"
    )
    run = run_python(code, limits=LIMITS)
    assert run.ok, run
    assert run.stdout.split() in (["EPERM"], ["EAFNOSUPPORT"]), run.stdout
