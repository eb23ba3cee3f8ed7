"""The code sandbox's fourth red team: right answers that scored 0, each as a failing-first test.

- standard input/output programs written the way people write them: ``exit()``/``quit()``, the
  deep-recursion thread idiom, ``atexit`` handlers and ``sys.__stdout__``, ``sys.argv``,
  ``__file__`` and ``pickle`` of ``__main__``'s classes, input over 1 MiB, expected output over
  1 MiB, and the time limit that covers all cases together;
- functional answers whose results are plain data under another type (``Counter``,
  ``defaultdict``, ``OrderedDict``, a ``namedtuple``, an ``IntEnum`` member, ``bytearray``, dict
  views, ``Fraction``, ``Decimal``), exceptions of a class the prompt defines and their messages,
  the threads the docs promise, time-zone data, the user database and ``localhost``;
- a hostile neighbour that starves a right answer with ``setsid`` spinners;
- the code-block extraction, quadratic in blanks after a fence;
- ``flock``/``fcntl`` locks on the host's files through the read-only view.
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

needs_kernel = pytest.mark.skipif(
    not isolation().kernel, reason=f"no kernel sandbox on this host: {isolation().missing}"
)


def answer(code: str) -> str:
    return f"```python\n{code}\n```"


def stdio(code: str, inputs: list[str], outputs: list[str], limits: SandboxLimits = LIMITS) -> Any:
    truth = json.dumps({"inputs": inputs, "outputs": outputs})
    return verify_code("codegen__x", answer(code), truth, {}, limits=limits)


def functional(code: str, test: str, prompt: str = "", entry: str = "f", limits: SandboxLimits = LIMITS) -> Any:
    truth = json.dumps({"prompt": prompt, "test": test, "entry_point": entry})
    return verify_code("humaneval", answer(code), truth, {}, limits=limits)


# ------------------------------------------------------------------------ stdin/stdout programs
SUM_IN, SUM_OUT = ["1 2\n", "5 7\n"], ["3\n", "12\n"]
EXITS = {
    "exit()": "a, b = map(int, input().split())\nprint(a + b)\nexit()\nprint('after')\n",
    "quit()": "a, b = map(int, input().split())\nprint(a + b)\nquit()\n",
    "exit(0) in a branch": "a, b = map(int, input().split())\nif a + b > 0:\n    print(a + b)\n    exit(0)\nprint(0)\n",
    "sys.exit in a function": "import sys\ndef main():\n    a, b = map(int, input().split())\n    print(a + b)\n"
    "    sys.exit()\nmain()\n",
    "exit with a message on stderr": "a, b = map(int, input().split())\nprint(a + b)\nimport sys\nsys.stdout.flush()\n"
    "exit(0)\n",
}


@needs_kernel
@pytest.mark.parametrize("name", list(EXITS))
def test_programs_that_exit_with_the_builtins_earn_one(name: str) -> None:
    """``exit``/``quit`` were missing (the interpreter ran without ``site``): ``NameError``."""
    res = stdio(EXITS[name], SUM_IN, SUM_OUT)
    assert res.reward == 1.0, res
    # A nonzero exit still fails its case, as it did.
    assert stdio("print(3)\nexit(2)\n", SUM_IN[:1], SUM_OUT[:1]).reward == 0.0


THREAD_IDIOM = """
import sys, threading
sys.setrecursionlimit(1 << 20)
threading.stack_size(1 << 26)

def depth(n):
    return 0 if n == 0 else 1 + depth(n - 1)

def main():
    n = int(input())
    print(depth(n))

threading.Thread(target=main).start()
"""


@needs_kernel
def test_the_deep_recursion_thread_idiom_earns_one() -> None:
    """The case ended before the non-daemon thread printed: no thread was joined."""
    res = stdio(THREAD_IDIOM, ["20000\n", "5\n"], ["20000\n", "5\n"], limits=SandboxLimits(timeout_s=10.0))
    assert res.reward == 1.0, res
    assert stdio(THREAD_IDIOM, ["7\n"], ["8\n"]).reward == 0.0


ENDINGS = {
    "atexit handler": "import atexit\nn = int(input())\natexit.register(lambda: print(n * 2))\n",
    "sys.__stdout__": "import sys\nsys.__stdout__.write(str(int(input()) * 2) + '\\n')\n",
    "sys.__stdout__ after an exit": "import sys\nsys.__stdout__.write(str(int(input()) * 2))\nsys.exit(0)\n",
    "daemon thread that finished": "import threading\nout = []\nt = threading.Thread(target=lambda: out.append(int(input()) * 2), daemon=True)\n"
    "t.start()\nt.join()\nprint(out[0])\n",
}


@needs_kernel
@pytest.mark.parametrize("name", list(ENDINGS))
def test_output_written_at_the_interpreters_normal_end_counts(name: str) -> None:
    res = stdio(ENDINGS[name], ["4\n", "21\n"], ["8\n", "42\n"])
    assert res.reward == 1.0, res


MAIN_MODULE = """
import os, pickle, sys

class Point:
    def __init__(self, x, y):
        self.x, self.y = x, y

p = pickle.loads(pickle.dumps(Point(*map(int, input().split()))))
assert __name__ == "__main__" and sys.modules["__main__"].Point is Point
assert len(sys.argv) == 1 and os.path.basename(sys.argv[0]) == "main.py", sys.argv
assert os.path.isabs(__file__) and os.path.basename(__file__) == "main.py", __file__
assert open(__file__).read().startswith("\\nimport os, pickle"), "its own source"
print(p.x + p.y)
"""


@needs_kernel
def test_a_program_is_main_with_its_own_argv_file_and_classes() -> None:
    """``sys.argv`` was the agent's, ``__file__`` was missing and pickle could not find
    ``__main__``'s classes (``__main__`` was the agent)."""
    res = stdio(MAIN_MODULE, SUM_IN, SUM_OUT)
    assert res.reward == 1.0, res
    run = run_python(MAIN_MODULE, stdin="5 7\n", limits=LIMITS)
    assert run.ok and run.stdout.split() == ["12"], run


BIG_INPUT = 2_400_001


@needs_kernel
@pytest.mark.parametrize("read", ["sys.stdin.buffer.read()", "os.read(0, os.fstat(0).st_size)"])
def test_input_over_a_mebibyte_reaches_the_program_whole(read: str) -> None:
    """Input over 1 MiB was cut to 1,048,576 bytes (written under the program's file-size limit,
    the count never checked): a wrong answer printing 1048576 passed."""
    code = f"import os, sys\ndata = {read}\nprint(len(data), data[-1:] == b'z')\n"
    given = "x" * (BIG_INPUT - 1) + "z"
    res = stdio(code, [given], [f"{BIG_INPUT} True\n"])
    assert res.reward == 1.0, res
    # The expected output of the cut input no longer passes.
    assert stdio(code, [given], ["1048576 False\n"]).reward == 0.0


@needs_kernel
def test_an_expected_output_over_a_mebibyte_is_not_refused_for_its_size() -> None:
    """A right answer whose expected output exceeds the output cap was refused for its size."""
    n = 300_000
    expected = "\n".join(map(str, range(n))) + "\n"
    assert len(expected) > 1 << 20
    code = "n = int(input())\nprint('\\n'.join(map(str, range(n))))\n"
    limits = SandboxLimits(timeout_s=10.0, memory_mb=512, output_bytes=1 << 20)
    res = stdio(code, [f"{n}\n"], [expected], limits=limits)
    assert res.reward == 1.0, res
    # Output past twice the expected output (and the cap) still fails, with the cap named.
    flood = "import sys\nwhile True:\n    sys.stdout.write('0' * 65536)\n"
    res = stdio(flood, [f"{n}\n"], [expected], limits=limits)
    assert res.reward == 0.0 and f"output exceeds {2 * len(expected)} bytes" in str(res.reason), res


@needs_kernel
def test_the_time_limit_covers_all_cases_and_says_so() -> None:
    """The limit is the whole verdict's, all cases together: a timeout says so and names the case
    that was running."""
    limits = SandboxLimits(timeout_s=2.0, memory_mb=256)
    code = "import time\ntime.sleep(0.3)\nprint(int(input()) + 1)\n"
    res = stdio(code, [f"{i}\n" for i in range(12)], [f"{i + 1}\n" for i in range(12)], limits=limits)
    assert res.reward == 0.0, res
    assert "all cases together" in str(res.reason) and "case " in str(res.reason), res
    assert stdio(code, ["1\n", "2\n"], ["2\n", "3\n"], limits=limits).reward == 1.0


# ---------------------------------------------------------------------- functional answers' values
PLAIN_UNDER_ANOTHER_TYPE = {
    "Counter": ("from collections import Counter\ndef f(s):\n    return Counter(s)\n",
                "assert candidate('aab') == {'a': 2, 'b': 1}\n    assert candidate('aab')['c'] == 0\n"
                "    assert candidate('aab').most_common(1) == [('a', 2)]\n",
                "from collections import Counter\ndef f(s):\n    return Counter(s + 'b')\n"),
    "defaultdict": ("from collections import defaultdict\ndef f(s):\n    d = defaultdict(list)\n    for i, c in enumerate(s):\n"
                    "        d[c].append(i)\n    return d\n",
                    "assert candidate('aba') == {'a': [0, 2], 'b': [1]}\n    assert candidate('a')['z'] == []\n",
                    "from collections import defaultdict\ndef f(s):\n    return defaultdict(list, {'a': [0]})\n"),
    "OrderedDict": ("from collections import OrderedDict\ndef f(s):\n    return OrderedDict((c, 1) for c in s)\n",
                    "from collections import OrderedDict\n    assert candidate('ba') == {'a': 1, 'b': 1}\n"
                    "    assert candidate('ba') == OrderedDict([('b', 1), ('a', 1)])\n"
                    "    assert candidate('ba') != OrderedDict([('a', 1), ('b', 1)])\n",
                    "from collections import OrderedDict\ndef f(s):\n    return OrderedDict((c, 1) for c in sorted(s))\n"),
    "namedtuple": ("from collections import namedtuple\nP = namedtuple('P', 'x y')\ndef f(s):\n    return P(len(s), s)\n",
                   "assert candidate('ab') == (2, 'ab')\n    assert candidate('ab')[0] == 2\n",
                   "from collections import namedtuple\nP = namedtuple('P', 'x y')\ndef f(s):\n    return P(len(s) + 1, s)\n"),
    "IntEnum": ("import enum\nclass C(enum.IntEnum):\n    RED = 1\n    BLUE = 2\ndef f(s):\n    return C.BLUE if s else C.RED\n",
                "assert candidate('x') == 2\n    assert type(candidate('')) is int and candidate('') == 1\n",
                "import enum\nclass C(enum.IntEnum):\n    RED = 1\n    BLUE = 3\ndef f(s):\n    return C.BLUE\n"),
    "bool stays bool": ("def f(s):\n    return bool(s)\n", "assert candidate('x') is True\n    assert candidate('') is False\n",
                        "def f(s):\n    return 1 if s else 0\n"),
    "bytearray": ("def f(s):\n    return bytearray(s, 'ascii')\n", "assert candidate('ab') == b'ab'\n",
                  "def f(s):\n    return bytearray(s[::-1], 'ascii')\n"),
    "memoryview": ("def f(s):\n    return memoryview(s.encode())\n", "assert candidate('ab') == b'ab'\n",
                   "def f(s):\n    return memoryview(b'ba')\n"),
    "dict keys": ("def f(s):\n    return dict.fromkeys(s).keys()\n",
                  "assert candidate('ba') == {'a', 'b'}\n    assert list(candidate('ba')) == ['b', 'a']\n",
                  "def f(s):\n    return dict.fromkeys(sorted(s)).keys()\n"),
    "dict items": ("def f(s):\n    return {c: i for i, c in enumerate(s)}.items()\n",
                   "assert candidate('ab') == {('a', 0), ('b', 1)}\n",
                   "def f(s):\n    return {c: 0 for c in s}.items()\n"),
    "dict values": ("def f(s):\n    return {c: i for i, c in enumerate(s)}.values()\n",
                    "assert list(candidate('ab')) == [0, 1]\n    assert sorted(candidate('ba')) == [0, 1]\n",
                    "def f(s):\n    return {c: 1 for c in s}.values()\n"),
    "list subclass": ("class L(list):\n    pass\ndef f(s):\n    return L(s)\n", "assert candidate('ab') == ['a', 'b']\n",
                      "class L(list):\n    pass\ndef f(s):\n    return L(s[::-1])\n"),
    "str subclass": ("class S(str):\n    pass\ndef f(s):\n    return S(s.upper())\n", "assert candidate('ab') == 'AB'\n",
                     "class S(str):\n    pass\ndef f(s):\n    return S(s)\n"),
    "float subclass": ("class F(float):\n    pass\ndef f(s):\n    return F(len(s) / 2)\n", "assert candidate('abc') == 1.5\n",
                       "class F(float):\n    pass\ndef f(s):\n    return F(1.25)\n"),
    "Fraction": ("from fractions import Fraction\ndef f(s):\n    return Fraction(1, len(s))\n",
                 "from fractions import Fraction\n    assert candidate('abc') == Fraction(1, 3)\n"
                 "    assert isinstance(candidate('ab'), Fraction)\n",
                 "from fractions import Fraction\ndef f(s):\n    return Fraction(1, len(s) + 1)\n"),
    "Decimal": ("from decimal import Decimal\ndef f(s):\n    return Decimal('0.1') * len(s)\n",
                "from decimal import Decimal\n    assert candidate('abc') == Decimal('0.3')\n"
                "    assert str(candidate('ab')) == '0.2'\n",
                "from decimal import Decimal\ndef f(s):\n    return Decimal(0.1) * len(s)\n"),
}  # fmt: skip


@needs_kernel
@pytest.mark.parametrize("name", list(PLAIN_UNDER_ANOTHER_TYPE))
def test_plain_data_under_another_type_crosses_as_plain_data(name: str) -> None:
    """Results of types that subclass or stand for plain data crossed as references compared by
    identity (``Counter``, ``defaultdict``, ``OrderedDict``, ``namedtuple``, ``IntEnum``,
    ``bytearray``, dict views), and ``Fraction``/``Decimal`` had no plain form: right answers
    scored 0. A wrong answer of the same kind still scores 0."""
    right, checks, wrong = PLAIN_UNDER_ANOTHER_TYPE[name]
    test = "def check(candidate):\n    " + checks
    res = functional(right, test)
    assert res.reward == 1.0, res
    res = functional(wrong, test)
    assert res.reward == 0.0, res


LYING = {
    "list subclass": "class L(list):\n    def __eq__(self, other):\n        return True\n    __hash__ = None\n"
    "def f(s):\n    return L([0])\n",
    "dict subclass": "class D(dict):\n    def __eq__(self, other):\n        return True\n    def __ne__(self, other):\n"
    "        return False\ndef f(s):\n    return D()\n",
    "Counter subclass": "from collections import Counter\nclass C(Counter):\n    def __eq__(self, other):\n        return True\n"
    "    def items(self):\n        return {'a': 2, 'b': 1}.items()\n    def most_common(self, n=None):\n        return [('a', 2)]\n"
    "def f(s):\n    return C()\n",
    "int subclass": "class I(int):\n    def __eq__(self, other):\n        return True\n    __hash__ = int.__hash__\n"
    "    def __int__(self):\n        return 2\n    def __index__(self):\n        return 2\ndef f(s):\n    return I(0)\n",
    "str subclass": "class S(str):\n    def __eq__(self, other):\n        return True\n    __hash__ = str.__hash__\n"
    "    def __str__(self):\n        return 'ab'\ndef f(s):\n    return S('zz')\n",
    "fake __class__": "class X:\n    __class__ = int\n    def __eq__(self, other):\n        return True\n"
    "def f(s):\n    return X()\n",
    "Fraction subclass": "from fractions import Fraction\nclass Q(Fraction):\n    def __eq__(self, other):\n        return True\n"
    "    numerator = 1\n    denominator = 3\ndef f(s):\n    return Q(5, 7)\n",
    "Decimal subclass": "from decimal import Decimal\nclass D(Decimal):\n    def __eq__(self, other):\n        return True\n"
    "    def __str__(self):\n        return '0.3'\ndef f(s):\n    return D('7')\n",
}


@needs_kernel
@pytest.mark.parametrize("name", list(LYING))
def test_a_lying_subclass_never_gets_its_eq_consulted(name: str) -> None:
    test = (
        "def check(candidate):\n    r = candidate('aab')\n    assert r == {'a': 2, 'b': 1} or r == 2 or r == 'ab' "
        "or r == 0.3 or r == [1] or r == 1 / 3\n"
    )
    res = functional(LYING[name], test)
    assert res.reward == 0.0, res


@needs_kernel
def test_fractions_and_decimals_cross_to_the_program_too() -> None:
    test = (
        "from fractions import Fraction\nfrom decimal import Decimal\n\ndef check(candidate):\n"
        "    assert candidate(Fraction(1, 3), Decimal('0.5')) == (Fraction(2, 3), Decimal('1.0'))\n"
    )
    right = "def f(q, d):\n    assert type(q).__name__ == 'Fraction' and type(d).__name__ == 'Decimal'\n    return q * 2, d * 2\n"
    assert functional(right, test).reward == 1.0
    assert functional("def f(q, d):\n    return q, d\n", test).reward == 0.0


EXC_PROMPT = (
    'class BadInput(ValueError):\n    """Raised on a negative input."""\n\n\n'
    'def root(x):\n    """The integer square root of x; BadInput("negative") when x < 0."""\n'
)
EXC_TEST = (
    "def check(candidate):\n    try:\n        candidate(-1)\n    except BadInput as e:\n"
    "        assert 'negative' in str(e)\n    else:\n        assert False\n    assert candidate(9) == 3\n"
)
MESSAGE_TEST = (
    "def check(candidate):\n    try:\n        candidate(-1)\n    except ValueError as e:\n"
    "        assert 'negative' in str(e), str(e)\n    else:\n        assert False\n"
)


@needs_kernel
def test_an_exception_class_the_prompt_defines_and_its_message_reach_the_test() -> None:
    """``class BadInput(ValueError)`` in the prompt reached the test as ``ValueError`` and the
    message was replaced: ``except BadInput`` and ``'negative' in str(e)`` failed."""
    body = "    if x < 0:\n        raise BadInput('negative: ' + str(x))\n    return int(x ** 0.5)\n"
    whole = "def root(x):\n" + body
    for code in (body, whole):
        truth = json.dumps({"prompt": EXC_PROMPT, "test": EXC_TEST, "entry_point": "root"})
        res = verify_code("humaneval", answer(code) if code is whole else code, truth, {}, limits=LIMITS)
        assert res.reward == 1.0, res
    # Wrong: a plain ValueError where BadInput is expected, or the wrong message.
    for wrong in (
        "def root(x):\n    if x < 0:\n        raise ValueError('negative')\n    return int(x ** 0.5)\n",
        "def root(x):\n    if x < 0:\n        raise BadInput('positive')\n    return int(x ** 0.5)\n",
    ):
        assert functional(wrong, EXC_TEST, EXC_PROMPT, "root").reward == 0.0, wrong
    # A built-in exception's message reaches the test too; the verdict still carries no words.
    good = "def root(x):\n    if x < 0:\n        raise ValueError('negative input')\n    return 0\n"
    assert functional(good, MESSAGE_TEST, entry="root").reward == 1.0
    res = functional("def root(x):\n    raise ValueError('SECRET-WORDS')\n", MESSAGE_TEST, entry="root")
    assert res.reward == 0.0 and "SECRET" not in str(res.reason), res
    # A huge message is capped, not refused.
    huge = "def root(x):\n    raise ValueError('negative' + 'x' * 10_000_000)\n"
    assert functional(huge, MESSAGE_TEST, entry="root", limits=SandboxLimits(timeout_s=10.0)).reward == 1.0


@needs_kernel
def test_a_program_cannot_pass_a_control_flow_exception_off_as_a_trusted_class() -> None:
    """A trusted class that derives from ``StopIteration`` is never matched by name: it would end
    the test's ``map()`` early."""
    prompt = "class Done(StopIteration):\n    pass\n\n\ndef f(x):\n    pass\n"
    test = "def check(candidate):\n    assert all(map(candidate, [1, 2, 3]))\n"
    res = functional("def f(x):\n    raise Done()\n", test, prompt)
    assert res.reward == 0.0, res


THREADS = """
import threading
N = 30
barrier = threading.Barrier(N + 1)
held = []
lock = threading.Lock()
def work():
    block = bytearray(1 << 20)  # each thread allocates (a glibc arena per thread)
    with lock:
        held.append(len(block))
    barrier.wait()
threads = [threading.Thread(target=work) for _ in range(N)]
for t in threads:
    t.start()
barrier.wait()
for t in threads:
    t.join()
print(sum(held) >> 20)
"""


@needs_kernel
def test_the_thread_count_the_docs_promise_fits() -> None:
    """About 20 threads fit under the 1 GiB address-space cap (each 8 MiB of stack and a 64 MiB
    glibc arena), although the docs promise 32 processes and threads (30 of the program's own)."""
    run = run_python(THREADS, limits=SandboxLimits(timeout_s=10.0))
    assert run.ok and run.stdout.split() == ["30"], run
    res = stdio(THREADS, ["\n"], ["30\n"], limits=SandboxLimits(timeout_s=10.0))
    assert res.reward == 1.0, res
    pool = (
        "import os\nfrom concurrent.futures import ThreadPoolExecutor\n"
        "with ThreadPoolExecutor() as ex:\n    print(sum(ex.map(lambda i: len(bytearray(1 << 20)) >> 20, range(200))))\n"
        "print(os.cpu_count() <= 24)\n"
    )
    run = run_python(pool, limits=SandboxLimits(timeout_s=10.0))
    assert run.ok and run.stdout.split() == ["200", "True"], run


HOST_DATA = """
import datetime, grp, os, pwd, socket, zoneinfo
print(datetime.datetime(2024, 1, 1, tzinfo=zoneinfo.ZoneInfo("UTC")).utcoffset())
print(datetime.datetime(2024, 7, 1, tzinfo=zoneinfo.ZoneInfo("America/New_York")).utcoffset())
print(pwd.getpwuid(os.getuid()).pw_dir, grp.getgrgid(os.getgid()).gr_gid == os.getgid())
print(sorted({a[4][0] for a in socket.getaddrinfo("localhost", 80, type=socket.SOCK_STREAM)})[-1])
"""


@needs_kernel
def test_time_zones_the_user_database_and_localhost_resolve() -> None:
    run = run_python(HOST_DATA, limits=LIMITS)
    assert run.ok, run
    assert run.stdout.split("\n")[:4] == ["0:00:00", "-1 day, 20:00:00", "/work True", "127.0.0.1"], run.stdout


# ------------------------------------------------------------------------------- CPU fairness
SPINNERS = """
import os
for _ in range(SPIN):
    if os.fork() == 0:
        try:
            os.setsid()
        except OSError:
            pass
        while True:
            pass

def add(a, b):
    while True:
        pass
"""
# Real work: about a second of CPU on an idle core.
BUSY_ADD = "def add(a, b):\n    x = 0\n    for i in range(30_000_000):\n        x += i & 1\n    return a + b + x - 15_000_000\n"
ADD = json.dumps({"test": "def check(candidate):\n    assert candidate(2, 3) == 5\n", "entry_point": "add"})


@needs_kernel
def test_setsid_is_denied() -> None:
    code = (
        "import errno, os\nr, w = os.pipe()\nif os.fork() == 0:\n    try:\n        os.setsid()\n        os.write(w, b'made')\n"
        "    except OSError as e:\n        os.write(w, errno.errorcode[e.errno].encode())\n    os._exit(0)\n"
        "os.wait()\nprint(os.read(r, 100).decode())\n"
    )
    run = run_python(code, limits=LIMITS)
    assert run.ok and run.stdout.split() == ["EPERM"], run


CPU_LIMITS = SandboxLimits(timeout_s=6.0, memory_mb=256, max_processes=32)


def verify_under_cpu_limits(data_source: str, response: str, ground_truth: Any, extra_info: Any) -> Any:
    """The code verifier with a short time limit (a scorer worker imports it by name)."""
    return verify_code(data_source, response, ground_truth, extra_info, limits=CPU_LIMITS)


@needs_kernel
def test_a_neighbour_of_setsid_spinners_keeps_its_share_of_the_cpu() -> None:
    """30 forks that each call ``setsid`` and spin were 30 scheduler autogroups against the right
    answer's one: a right answer needing real CPU, scored beside them, timed out."""
    from bots_rft.rewards import RewardItem, RewardScorer, register_verifier

    register_verifier("red-team4-cpu", verify_under_cpu_limits)
    hostile = RewardItem("red-team4-cpu", answer(SPINNERS.replace("SPIN", "30")), ADD, {})
    right = RewardItem("red-team4-cpu", answer(BUSY_ADD), ADD, {})
    with RewardScorer(workers=2, timeout=30) as scorer:
        got = scorer.score_batch([hostile, right])
    assert got[0].reward == 0.0
    assert got[1].reward == 1.0, got[1]


# ------------------------------------------------------------------------ extraction, outside
def _timed(code: str, text: str, limit_s: float = 10.0) -> dict[str, Any]:
    """Run ``code`` on ``text`` in a child interpreter: its CPU seconds and its ``out``; a run
    past ``limit_s`` (a quadratic scan) is reported as that many seconds, not waited for."""
    import subprocess
    import sys

    script = (
        "import json, sys, time\ntext = sys.stdin.read()\nstart = time.process_time()\n" + code + "\n"
        "print(json.dumps({'cpu': time.process_time() - start, 'out': out}))\n"
    )
    try:
        run = subprocess.run(
            [sys.executable, "-c", script], input=text, capture_output=True, text=True, timeout=limit_s
        )
    except subprocess.TimeoutExpired:
        return {"cpu": limit_s, "out": None}
    assert run.returncode == 0, run.stderr[-2000:]
    return json.loads(run.stdout)  # type: ignore[no-any-return]


@pytest.mark.parametrize("blank", [" ", "\t", " \t"])
def test_a_fence_followed_by_blanks_is_extracted_in_linear_time(blank: str) -> None:
    """The fence regex backtracked quadratically on a fence followed by blanks and no newline, in
    the scorer's worker before any sandbox: a right answer followed by a fence and 300,000 spaces
    scored 0 ("verifier timed out after 30s")."""
    text = answer("def add(a, b):\n    return a + b") + "\n```" + blank * (300_000 // len(blank))
    got = _timed("from bots_rft.rewards.extract import extract_code\nout = extract_code(text).strip()", text)
    assert got["out"] == "def add(a, b):\n    return a + b" and got["cpu"] < 0.5, got


RESPONSE_BOMBS = {
    "fence, blanks, name, blanks": "```" + " " * 100_000 + "py" + " " * 100_000,
    "fence and a long name": "```" + "a" * 300_000,
    "many fences with blanks": ("```" + " " * 300 + "x") * 1_000,
    "unclosed fences": "```python\n" * 30_000,
    "unclosed answer tags": "<answer>" * 100_000,
    "unclosed boxes": "\\boxed{" * 60_000,
    "boxes and blanks": "\\boxed" + " " * 300_000,
    "digits and commas": "1," * 150_000 + "x",
    "signs and digits": "+1" * 150_000,
    "def lines": "def f(" * 50_000,
    "future lines": "from __future__ import " * 20_000,
    "blank lines": "\n" * 300_000,
}


@pytest.mark.parametrize("name", list(RESPONSE_BOMBS))
def test_every_extraction_that_runs_before_the_sandbox_is_linear(name: str) -> None:
    """Every regex and scan that runs on a response outside the sandbox, on inputs shaped to make
    a backtracking pattern or a rescan quadratic."""
    run = (
        "from bots_rft.rewards import code as code_module, extract\n"
        "extract.extract_code(text)\nextract.extract_tag(text)\nextract.extract_boxed(text)\n"
        "extract.extract_last_number(text)\nextract.extract_last_line(text)\n"
        "code_module._program_source(text, {'prompt': 'def f(x):\\n', 'entry_point': 'f'})\nout = None\n"
    )
    got = _timed(run, RESPONSE_BOMBS[name])
    assert got["cpu"] < 1.0, (name, got)


def test_extraction_results_are_unchanged() -> None:
    from bots_rft.rewards.extract import extract_boxed, extract_code, extract_tag

    assert extract_code("x\n```py\na\n```\n```js\nb\n```") == "a\n"
    assert extract_code("```  python  \nx = 1\n```") == "x = 1\n"
    assert extract_code("```\ny\n```") == "y\n"
    assert extract_code("no fence") == "no fence"
    assert extract_code("```rust\nfn\n```") == "fn\n"
    assert extract_tag("<answer>1</answer> <answer>2</answer>") == "2"
    assert extract_tag("<answer><answer>x</answer><answer>") == "<answer>x"
    assert extract_tag("<answer>1") is None
    assert extract_boxed("\\boxed{a{b}} and \\boxed{c") == "a{b}"
    assert extract_boxed("\\boxed{\\frac{1}{2}} \\boxed {3}") == "3"
    assert extract_boxed("\\boxed{x \\boxed{y}}") == "y"
    assert extract_boxed("\\fbox{z}") == "z"
    assert extract_boxed("none") is None


# ------------------------------------------------------------------------------- host file locks
LOCKS = """
import errno, fcntl, os, struct, sys
results = []
paths = [os.__file__, sys.executable, "/work/mine"]
open("/work/mine", "w").close()
for path in paths:
    fd = os.open(path, os.O_RDONLY)
    for name, call in (
        ("flock", lambda: fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)),
        ("lockf", lambda: fcntl.lockf(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)),
        ("getlk", lambda: fcntl.fcntl(fd, fcntl.F_GETLK, struct.pack("hhqqi", fcntl.F_RDLCK, 0, 0, 0, 0))),
        ("ofd", lambda: fcntl.fcntl(fd, 37, struct.pack("hhqqi", fcntl.F_RDLCK, 0, 0, 0, 0))),
        ("lease", lambda: fcntl.fcntl(fd, fcntl.F_SETLEASE, fcntl.F_RDLCK)),
    ):
        try:
            call()
            results.append(name + ":held")
        except OSError as e:
            results.append(name + ":" + errno.errorcode[e.errno])
print(" ".join(results))
sys.stdout.flush()
import time
time.sleep(HOLD)
"""


def _host_locks_on(paths: list[str]) -> list[str]:
    inodes = set()
    for p in paths:
        st = os.stat(p)
        inodes.add(f"{os.major(st.st_dev):02x}:{os.minor(st.st_dev):02x}:{st.st_ino}")
    with open("/proc/locks") as f:
        return [line for line in f if line.split()[-3] in inodes]


@needs_kernel
def test_a_sandbox_cannot_lock_the_hosts_files() -> None:
    """``flock`` and ``fcntl`` locks on the view's files (the host's own interpreter and standard
    library, bound read-only) showed in the host's ``/proc/locks`` and could be read by a
    concurrent verdict: a channel between two responses. Locks and leases are denied."""
    import sys
    import threading

    paths = [os.path.realpath(os.__file__), os.path.realpath(sys.executable)]
    before = _host_locks_on(paths)
    seen: list[str] = []
    done = threading.Event()

    def watch() -> None:
        while not done.is_set():
            seen.extend(_host_locks_on(paths))
            time.sleep(0.05)

    watcher = threading.Thread(target=watch)
    watcher.start()
    try:
        run = run_python(LOCKS.replace("HOLD", "1.5"), limits=LIMITS)
    finally:
        done.set()
        watcher.join()
    assert run.ok, run
    results = run.stdout.split()
    assert len(results) == 15 and all(r.endswith((":ENOLCK", ":EPERM")) for r in results), results
    assert before == [] and seen == [], seen


# The findings again, started as a user (one uid for the sandbox and the scorer, the sandbox's
# user namespace created by bubblewrap).
AS_USER_ENV = "BOTS_RED_TEAM4_AS_USER"
AS_USER_TESTS = (
    "exit_with_the_builtins or thread_idiom or normal_end or own_argv or over_a_mebibyte or all_cases "
    "or plain_data_under or lying_subclass or cross_to_the_program or exception_class or control_flow "
    "or thread_count or time_zones or setsid or neighbour_of_setsid or hosts_files"
)


@needs_kernel
@pytest.mark.skipif(not can_map_a_user(AS_USER_ENV), reason="needs a start as root and util-linux unshare --map-user")
def test_the_findings_hold_when_started_as_a_user(tmp_path: Any) -> None:
    import re

    summary = rerun_as_user(__file__, AS_USER_TESTS, AS_USER_ENV, tmp_path / "as-user")
    expected = len(EXITS) + len(ENDINGS) + len(PLAIN_UNDER_ANOTHER_TYPE) + len(LYING) + 14
    assert re.search(rf"\b{expected} passed", summary) and "failed" not in summary, summary
