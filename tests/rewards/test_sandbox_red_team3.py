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
import os
import time
from typing import Any

import pytest

from as_user import can_map_a_user, rerun_as_user
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


# ------------------------------------------------------------------ per-user counts of the host
def _sig_queue_of(pid: int) -> tuple[int, int] | None:
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("SigQ:"):
                    used, limit = line.split()[1].split("/")
                    return int(used), int(limit)
    except OSError:
        return None
    return None


FLOOD_ADD = """
import signal, threading, time
SIG = signal.SIGRTMIN + 2
signal.pthread_sigmask(signal.SIG_BLOCK, [SIG])
queued = 0
try:
    while queued < 200_000:
        signal.pthread_kill(threading.get_ident(), SIG)
        queued += 1
except OSError:
    pass

def add(a, b):
    time.sleep(SLEEP)
    return a + b
"""

# Run on the host as the scorer's uid while the flood holds its signals: queue 1,000 real-time
# signals to itself, and drop privileges from a two-thread process (glibc's set-id broadcast is a
# real-time signal; with none left it leaves a thread at the old uid and still reports success).
HOST_SIGNALS = """
import json, os, signal, threading
SIG = signal.SIGRTMIN + 3
signal.pthread_sigmask(signal.SIG_BLOCK, [SIG])
queued = 0
try:
    for _ in range(1000):
        signal.pthread_kill(threading.get_ident(), SIG)
        queued += 1
except OSError:
    pass
uids = None
if os.geteuid() == 0:
    stop = threading.Event()
    t = threading.Thread(target=stop.wait)
    t.start()
    os.setresuid(65534, 65534, 65534)
    uids = sorted({open(f"/proc/self/task/{t}/status").read().split("Uid:")[1].split()[0]
                   for t in os.listdir("/proc/self/task")})
    stop.set()
    t.join()
print(json.dumps({"queued": queued, "uids": uids}))
"""


def _flooding() -> bool:
    """Some process of this host holds pending real-time signals it queued itself (the flood)."""
    import os

    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/status") as f:
                    status = dict(line.split(":", 1) for line in f if ":" in line)
            except OSError:
                continue
            if int(status.get("SigPnd", "0").strip() or "0", 16) & (1 << (34 + 2 - 1)):
                return True
    return False


@needs_kernel
def test_a_signal_flood_leaves_the_hosts_count_and_the_next_verdict_alone() -> None:
    """A right answer that queues real-time signals to itself until EAGAIN filled the pending-signal
    count of the scorer's uid for the whole host (the kernel charges the sandbox's pending signals
    to the owner of its user namespace, root when started as root): host processes of that uid
    could queue none, and a two-thread root program that dropped to another uid kept a thread at
    uid 0. Each sandbox now holds at most its own small count."""
    import subprocess
    import sys
    import threading

    from bots_rft.rewards import RewardItem, RewardScorer

    host_before = _sig_queue_of(os.getpid())
    assert host_before is not None
    results: dict[str, Any] = {}

    def watch() -> None:
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and not _flooding():
            time.sleep(0.05)
        last = None
        while time.monotonic() < deadline:  # until the flood is as full as it gets
            now = _sig_queue_of(os.getpid())
            if now == last or (now and now[0] >= now[1] - 16):
                break
            last = now
            time.sleep(0.3)
        results["host"] = _sig_queue_of(os.getpid())
        run = subprocess.run([sys.executable, "-c", HOST_SIGNALS], capture_output=True, text=True, timeout=60)
        results["probe"] = json.loads(run.stdout) if run.returncode == 0 else run.stderr

    flood = answer(FLOOD_ADD.replace("SLEEP", "3"))
    right = answer("def add(a, b):\n    return a + b\n")
    watcher = threading.Thread(target=watch)
    watcher.start()
    with RewardScorer(workers=2, timeout=30) as scorer:
        first = scorer.score_batch(
            [RewardItem("humaneval", flood, ADD, {})] + [RewardItem("humaneval", right, ADD, {})] * 2
        )
        watcher.join()
        after = scorer.score_batch([RewardItem("humaneval", right, ADD, {})] * 3)
    assert [r.reward for r in first] == [1.0, 1.0, 1.0], first
    assert [r.reward for r in after] == [1.0, 1.0, 1.0], after
    probe = results["probe"]
    assert isinstance(probe, dict) and probe["queued"] == 1000, results
    if os.geteuid() == 0:
        assert probe["uids"] == ["65534"], results
    used, limit = results["host"]
    assert used < 4096, results  # the scorer's uid keeps (almost) all of its count


@needs_kernel
def test_the_sandbox_bounds_its_pending_signals_and_locked_memory() -> None:
    """The per-user counts the kernel charges up the user-namespace chain, bounded per sandbox:
    pending signals (real-time signals queued, POSIX timers), locked memory, POSIX message-queue
    bytes."""
    code = (
        "import ctypes, json, resource, signal, threading\n"
        "sig = signal.SIGRTMIN + 1\nsignal.pthread_sigmask(signal.SIG_BLOCK, [sig])\nn = 0\n"
        "try:\n    while n < 100000:\n        signal.pthread_kill(threading.get_ident(), sig)\n        n += 1\n"
        "except OSError:\n    pass\n"
        "libc = ctypes.CDLL(None, use_errno=True)\nbuf = ctypes.create_string_buffer(4096)\n"
        "locked = libc.mlock(buf, 4096) == 0\n"
        "limits = {k: resource.getrlimit(getattr(resource, k)) for k in ('RLIMIT_SIGPENDING', 'RLIMIT_MEMLOCK', 'RLIMIT_MSGQUEUE')}\n"
        "print(json.dumps({'queued': n, 'locked': locked, 'limits': limits}))\n"
    )
    run = run_python(code, limits=LIMITS)
    assert run.ok, run
    got = json.loads(run.stdout)
    assert 0 < got["queued"] <= LIMITS.pending_signals, got
    assert got["locked"] is False, got
    assert got["limits"]["RLIMIT_MEMLOCK"] == [0, 0] and got["limits"]["RLIMIT_MSGQUEUE"] == [0, 0], got
    assert got["limits"]["RLIMIT_SIGPENDING"] == [LIMITS.pending_signals] * 2, got


@needs_kernel
def test_a_scorer_used_from_a_thread_that_ends_keeps_its_workers() -> None:
    """A scorer's worker dies with the thread that started it (the kernel's parent-death signal
    follows the thread): a scorer first used from a thread that then ended scored the next right
    answer 0 ("its worker died (killed by signal 9)")."""
    import threading

    from bots_rft.rewards import RewardItem, RewardScorer

    right = RewardItem("humaneval", answer("def add(a, b):\n    return a + b\n"), ADD, {})
    with RewardScorer(workers=2, timeout=30) as scorer:
        out: dict[str, Any] = {}
        t = threading.Thread(target=lambda: out.setdefault("first", scorer.score_batch([right] * 2)))
        t.start()
        t.join()
        time.sleep(0.5)
        pids = scorer.worker_pids
        after = scorer.score_batch([right] * 4)
        assert scorer.worker_pids == pids and len(pids) == 2
    assert [r.reward for r in out["first"]] == [1.0, 1.0]
    assert [r.reward for r in after] == [1.0] * 4, after


def leave_a_child(data_source: str, response: str, ground_truth: Any, extra_info: Any) -> float:
    """A verifier that leaves a process running behind it (for the test below)."""
    import subprocess

    if response == "leave":
        subprocess.Popen(["sleep", "300"])
    return 1.0


def test_a_worker_a_call_leaves_broken_is_replaced_before_the_next_verdict() -> None:
    """No verdict depends on the one before it: a worker whose call left a child process running is
    cleaned up and replaced before it scores another response."""
    from bots_rft.rewards import RewardItem, RewardScorer, register_verifier

    register_verifier("red-team-leftover", leave_a_child)
    with RewardScorer(workers=1, timeout=30) as scorer:
        scorer.score_batch([RewardItem("red-team-leftover", "fine", "", {})])
        first = scorer.worker_pids
        scorer.score_batch([RewardItem("red-team-leftover", "fine", "", {})])
        assert scorer.worker_pids == first  # a healthy worker is kept
        res = scorer.score_batch([RewardItem("red-team-leftover", "leave", "", {})])
        assert [r.reward for r in res] == [1.0]
        time.sleep(0.2)
        assert scorer.worker_pids != first
        children = [p for p in os.listdir("/proc") if p.isdigit() and _parent(int(p)) == first[0]]
        assert children == []
        assert scorer.score_batch([RewardItem("red-team-leftover", "fine", "", {})])[0].reward == 1.0


def _parent(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return int(f.read().rsplit(b")", 1)[1].split()[1])
    except (OSError, IndexError, ValueError):
        return None


# ----------------------------------------------------------------------- a functional test's names
AREA = json.dumps({"functional": "assert math.isclose(area(2.0), 12.566370614359172)\n"})
LEETCODE_REVERSE = {
    "functional": (
        "assert is_same_list(reverse_list(list_node([1, 2, 3])), list_node([3, 2, 1]))\n"
        "assert reverse_list(None) is None\n"
    ),
    "header": "leetcode",
}
RIGHT_REVERSE = (
    "from typing import Optional\n\n"
    "def reverse_list(head: Optional[ListNode]) -> Optional[ListNode]:\n"
    "    prev = None\n    while head:\n        head.next, prev, head = prev, head, head.next\n    return prev\n"
)
OWN_LIST_NODE = json.dumps(
    {
        "functional": (
            "class ListNode:\n    def __init__(self, val=0, next=None):\n        self.val, self.next = val, next\n\n"
            "def build(xs):\n    head = None\n    for x in reversed(xs):\n        head = ListNode(x, head)\n    return head\n\n"
            "def values(node):\n    out = []\n    while node:\n        out.append(node.val)\n        node = node.next\n    return out\n\n"
            "assert values(reverse_list(build([1, 2, 3]))) == [3, 2, 1]\n"
            "assert values(reverse_list(build(list(range(1000))))) == list(range(999, -1, -1))\n"
        )
    }
)
RIGHT_REVERSE_PLAIN = (
    "def reverse_list(head):\n    prev = None\n    while head:\n"
    "        head.next, prev, head = prev, head, head.next\n    return prev\n"
)


@needs_kernel
def test_a_standard_module_a_functional_test_leaves_unimported_is_the_real_one() -> None:
    """``math`` in a test that never imports it came from the program: a wrong answer that binds
    its own ``math`` earned 1. The test side imports the real module."""
    right = "import math\n\ndef area(r):\n    return math.pi * r * r\n"
    assert reward(right, AREA).reward == 1.0
    assert reward("def area(r):\n    return 3.141592653589793 * r * r\n", AREA).reward == 1.0
    for wrong in (
        "math = type('m', (), {'isclose': staticmethod(lambda *a, **k: True)})\n\ndef area(r):\n    return 0\n",
        "import cmath as math\n\ndef area(r):\n    return 0\n",
        "class math:\n    isclose = staticmethod(lambda *a, **k: True)\n\ndef area(r):\n    return 0\n",
    ):
        assert reward(wrong, AREA).reward == 0.0, wrong


@needs_kernel
def test_leetcode_helpers_come_from_the_declared_header_never_from_the_program() -> None:
    """LeetCode tests call helpers (``list_node``, ``is_same_list``) that a harness header defines;
    without one they were taken from the program, and ``is_same_list = lambda *a: True`` earned 1.
    A pool declares the header (``"header": "leetcode"``); the program gets it in front too, and
    the test's ``ListNode`` values cross to the program as plain objects of its ``ListNode``."""
    spec = json.dumps(LEETCODE_REVERSE)
    res = reward(RIGHT_REVERSE, spec)
    assert res.reward == 1.0, res
    for wrong in (
        "is_same_list = lambda *a: True\n\ndef reverse_list(head):\n    return head\n",
        "def is_same_list(a, b):\n    return True\n\ndef reverse_list(head):\n    return head\n",
        "def list_node(xs):\n    return None\n\ndef reverse_list(head):\n    return head\n",
    ):
        assert reward(wrong, spec).reward == 0.0, wrong


@needs_kernel
def test_a_free_helper_name_comes_only_from_a_top_level_def_of_the_program() -> None:
    """Without a header, a name the test still needs from the program is taken only where the
    program's own top-level ``def`` or ``class`` binds it: never a lambda, an import or a module."""
    test = json.dumps({"functional": "assert check_sum(add(2, 3), 5)\n"})
    good = "def check_sum(got, want):\n    return got == want\n\ndef add(a, b):\n    return a + b\n"
    assert reward(good, test).reward == 1.0
    for wrong in (
        "check_sum = lambda *a: True\n\ndef add(a, b):\n    return 0\n",
        "from operator import truth as check_sum\n\ndef add(a, b):\n    return 0\n",
        "def check_sum(got, want):\n    return got == want\n\ncheck_sum = lambda *a: True\n\ndef add(a, b):\n    return 0\n",
        "def check_sum(got, want):\n    return got == want\n\ndef add(a, b):\n    global check_sum\n"
        "    check_sum = lambda *a: True\n    return 0\n",
    ):
        assert reward(wrong, test).reward == 0.0, wrong


@needs_kernel
def test_a_tests_own_node_class_crosses_to_the_program() -> None:
    """A test that builds its own ``ListNode`` values and passes them to the program: its right
    answers failed (the value could not cross); long lists cross too."""
    res = reward(RIGHT_REVERSE_PLAIN, OWN_LIST_NODE)
    assert res.reward == 1.0, res
    assert reward("def reverse_list(head):\n    return head\n", OWN_LIST_NODE).reward == 0.0


def test_bots_data_info_flags_functional_tests_with_free_names(tmp_path: Any, capsys: Any) -> None:
    from bots_rft.cli import main
    from bots_rft.data import TaskPool
    from bots_rft.data.schema import make_row

    truths = [
        AREA,
        json.dumps(LEETCODE_REVERSE),
        json.dumps({"functional": "assert is_same_list(f(list_node([1])), list_node([1]))"}),
    ]
    rows = [
        make_row(index=i, prompt=[{"role": "user", "content": "x"}], ground_truth=t, data_source="codegen__x",
                 ability="code", split="train")
        for i, t in enumerate(truths)
    ]  # fmt: skip
    TaskPool.from_records(rows).to_jsonl(tmp_path / "pool.jsonl")
    assert main(["data", "info", str(tmp_path / "pool.jsonl")]) == 0
    printed = capsys.readouterr().out
    assert "3 functional tests take names from the program" in printed, printed
    assert "1 of them use names the 'leetcode' header defines (is_same_list, list_node)" in printed, printed


# The kernel-level findings again, started as a user (one uid for the sandbox and the scorer, the
# sandbox's user namespace created by bubblewrap): what bots sees when a user without root runs it.
AS_USER_ENV = "BOTS_RED_TEAM3_AS_USER"
AS_USER_TESTS = "signal_flood or bounds_its_pending or vsock or standard_module or leetcode or free_helper or own_node"


@needs_kernel
@pytest.mark.skipif(not can_map_a_user(AS_USER_ENV), reason="needs a start as root and util-linux unshare --map-user")
def test_the_findings_hold_when_started_as_a_user(tmp_path: Any) -> None:
    import re

    summary = rerun_as_user(__file__, AS_USER_TESTS, AS_USER_ENV, tmp_path / "as-user")
    assert re.search(r"\b8 passed", summary) and "failed" not in summary, summary


@needs_kernel
def test_a_function_under_test_named_like_a_standard_module_is_the_programs() -> None:
    """Only a name the test uses as a module (``math.isclose``, never called or passed itself)
    is imported from the standard library; a function under test that shares a module's name
    (``statistics``, ``queue``) is the program's top-level def."""
    spec = json.dumps({"functional": "assert statistics([3, 1, 2]) == 2\nassert queue(2) == [0, 1]\n"})
    good = "def statistics(xs):\n    return sorted(xs)[len(xs) // 2]\n\ndef queue(n):\n    return list(range(n))\n"
    assert reward(good, spec).reward == 1.0
    assert reward("import statistics, queue\n", spec).reward == 0.0


@needs_kernel
@pytest.mark.skipif(os.geteuid() != 0, reason="the namespace-wide cap belongs to the start as root")
def test_the_user_namespace_caps_what_all_its_sandboxes_charge_to_root() -> None:
    """Started as root, the sandboxes of a process live in one user namespace created with a cap
    on pending signals: even a sandbox allowed far more of its own cannot take root's count past
    that cap (16,384), whatever the other sandboxes hold."""
    code = (
        "import signal, threading\nsig = signal.SIGRTMIN + 1\nsignal.pthread_sigmask(signal.SIG_BLOCK, [sig])\n"
        "n = 0\ntry:\n    while n < 200_000:\n        signal.pthread_kill(threading.get_ident(), sig)\n        n += 1\n"
        "except OSError:\n    pass\nprint(n)\n"
    )
    run = run_python(code, limits=SandboxLimits(timeout_s=20.0, memory_mb=256, pending_signals=100_000))
    assert run.ok, run
    assert 0 < int(run.stdout) <= 16_384, run.stdout
