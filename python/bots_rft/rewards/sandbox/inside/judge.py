"""The test side of a code verdict, run inside the sandbox: ``import judge`` by the agent.

Standard library only and self-contained, like the agent: the sandbox shows it nothing but the
interpreter, its standard library, the agent and this file. The agent's ``verdict`` mode forks
the candidate's process (the program, serving plain data as in ``serve`` mode) and then runs
:func:`judge` in its own process, as another unprivileged identity (see the agent). This module
runs the ground truth's test code and the prompt's helpers against the candidate, talking to it
only through the two pipes of the data-only channel, and returns one verdict: pass, or fail with
a reason *code* and a few small values. The trusted scorer turns the code into words from a fixed
table of its own (:mod:`bots_rft.rewards.sandbox.verdict`); nothing else leaves this process.

Only plain data crosses from the candidate: JSON documents whose values decode to exact built-in
types (None, bool, int, float, str, bytes, complex, list, tuple, set, frozenset, dict) or to a few
standard types rebuilt here from plain data (``Counter``, ``OrderedDict``, ``defaultdict``,
``deque``, dict views, ``Fraction``, ``Decimal``); the candidate's side sends plain data under
another type (an ``IntEnum`` member, a ``namedtuple``, a ``list`` subclass) as its base value. An object
the candidate cannot send as plain data stays in its process and is seen here as a
:class:`RemoteObject`: calling it, reading an attribute or an item, taking its length, iterating
it or asking its truth value is forwarded (one request per operation); comparing it is by
identity only, so no object of the candidate's ever decides an ``==`` here. Nothing the
candidate sends is imported, unpickled, evaluated or used as a name (the names the tests take
are chosen from the ground truth before the program runs; an exception's class names are only
keys into a fixed table of built-in exceptions and into the tests' own namespace). Decoding is bounded in size, depth, value count, time and
hashing cost.

Anything that goes wrong on the candidate's side (it exits, crashes, times out, answers with
something that is not plain data) is a :class:`CandidateFailure`, and fails the verdict even if
the test code catches it. An exception the candidate raises is re-raised as a
:class:`CandidateRaised` (an ``Exception``, also an instance of the matching built-in exception
where that is safe, so ``except ValueError`` in a test still works, or of the exception class the
trusted text defines under one of its class names; never StopIteration, StopAsyncIteration or a
non-``Exception``), with the program's message (capped) as its ``str()``.
"""

from __future__ import annotations

import builtins
import json
import os
import select
import time
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # annotations only: every import costs start-up time on each verdict
    import ast
    from collections.abc import Iterator
    from types import TracebackType
    from typing import Any

MAX_REPLY_BYTES = 16 << 20
_MAX_DEPTH = 200
_MAX_NODES = 2_000_000  # values in one answer (a 16 MiB reply holds at most about 8 M)
_MAX_REMOTES = 100_000  # the program's objects one verdict may refer to
_MAX_SAME_HASH = 64  # keys of one set or dict that may share a hash value
_TEST_FILE = "<test>"


class CandidateFailure(BaseException):
    """The candidate's process failed in a way that can only mean a failed verdict: ``code`` and
    ``args`` name the reason (the trusted side words it)."""

    def __init__(self, code: str, *args: int) -> None:
        super().__init__(code, *args)
        self.code = code
        self.values = list(args)


class CandidateRaised(Exception):
    """Marker base: exceptions re-raised here on the candidate's behalf also derive from this."""


class GroundTruthError(Exception):
    """The ground truth itself does not run (its prompt raises, its test defines no check)."""

    def __init__(self, code: str, name: str = "") -> None:
        super().__init__(code, name)
        self.code = code
        self.name = name


# The built-in exceptions a candidate's exception may appear as, so that a test written as
# ``except ValueError`` sees one. Never those that steer control flow instead of reporting an
# error: StopIteration / StopAsyncIteration would end the test's own ``map()`` or generator
# early (``all(map(candidate, xs))`` would pass), and BaseExceptions that are not Exceptions
# (KeyboardInterrupt, SystemExit, GeneratorExit) would escape the test. Those, and any name
# not in this table, arrive as plain :class:`CandidateRaised`. The name the program sends is
# only ever a key into this fixed table.
_REFUSED_EXCEPTIONS = (StopIteration, StopAsyncIteration)
_RERAISABLE: dict[str, type[Exception]] = {
    name: cls
    for name, cls in vars(builtins).items()
    if isinstance(cls, type)
    and issubclass(cls, Exception)
    and cls is not Exception
    and not issubclass(cls, _REFUSED_EXCEPTIONS)
}
_RERAISED: dict[str, type[CandidateRaised]] = {}


_MESSAGE_CHARS = 2000  # of an exception's message, as the candidate's side caps it


def _trusted_exception(names: object, trusted: dict[str, Any]) -> type[Exception] | None:
    """The first of the candidate exception's class ``names`` that names, in the tests'
    namespace, an exception class the trusted text defined (a prompt's ``class BadInput``); None
    when there is none. Only ever a key into that namespace; never a class that steers control
    flow (see :data:`_REFUSED_EXCEPTIONS`)."""
    if type(names) is not list:
        return None
    for name in names[:8]:
        cls = trusted.get(name) if type(name) is str else None
        if (
            isinstance(cls, type)
            and issubclass(cls, Exception)
            and not issubclass(cls, _REFUSED_EXCEPTIONS)
            and getattr(cls, "__module__", None) == _TRUSTED_MODULE
        ):
            return cls
    return None


_RERAISED_TRUSTED: dict[type, type[CandidateRaised]] = {}


def _reraised_trusted(cls: type[Exception]) -> type[CandidateRaised] | None:
    if cls not in _RERAISED_TRUSTED:
        try:
            _RERAISED_TRUSTED[cls] = type(cls.__name__, (cls, CandidateRaised), {"__module__": cls.__module__})
        except TypeError:  # a layout that does not mix: the built-in class instead
            return None
    return _RERAISED_TRUSTED[cls]


def _make_raised(cls: type[CandidateRaised], message: str) -> CandidateRaised | None:
    """An instance of ``cls`` whose ``str()`` is ``message``, made without the class's own
    ``__init__`` (a trusted class's may want other arguments); None where it cannot be made."""
    try:
        exc = cls.__new__(cls, message)
        BaseException.__init__(exc, message)
    except Exception:  # noqa: BLE001 - e.g. UnicodeDecodeError wants five arguments
        return None
    return exc if isinstance(exc, cls) else None


def _reraised_class(name: object) -> type[CandidateRaised]:
    base = _RERAISABLE.get(name) if type(name) is str else None
    if base is None:
        return CandidateRaised
    if base.__name__ not in _RERAISED:
        try:
            _RERAISED[base.__name__] = type(base.__name__, (base, CandidateRaised), {})
        except TypeError:  # a built-in class whose layout does not mix (none today)
            _RERAISED[base.__name__] = CandidateRaised
    return _RERAISED[base.__name__]


class RemoteObject:
    """A value that stayed in the candidate's process."""

    __slots__ = ("_candidate", "_ref", "_type")

    def __init__(self, candidate: Candidate, ref: int, type_name: str) -> None:
        object.__setattr__(self, "_candidate", candidate)
        object.__setattr__(self, "_ref", ref)
        object.__setattr__(self, "_type", type_name)

    def _ask(self, op: str, **fields: Any) -> Any:
        return self._candidate.request({"op": op, "ref": self._ref, **fields})

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        enc = self._candidate.encode
        return self._ask("call", args=[enc(a) for a in args], kwargs={str(k): enc(v) for k, v in kwargs.items()})

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):  # protocol probes (copy, pickle): not forwarded
            raise AttributeError(name)
        return self._ask("getattr", name=name)

    def __setattr__(self, name: str, value: Any) -> None:
        raise TypeError("the candidate's objects cannot be modified from the tests")

    def __getitem__(self, key: Any) -> Any:
        return self._ask("getitem", key=self._candidate.encode(key))

    def __len__(self) -> int:
        n = self._ask("len")
        if type(n) is not int or n < 0:
            raise self._candidate.fail("bad_len")
        return n

    def __iter__(self) -> Iterator[Any]:
        items = self._ask("iter")
        if type(items) is not list:
            raise self._candidate.fail("bad_iter")
        return iter(items)

    def __bool__(self) -> bool:
        value = self._ask("bool")
        if type(value) is not bool:
            raise self._candidate.fail("bad_bool")
        return value

    def __eq__(self, other: object) -> bool:
        return self is other

    def __ne__(self, other: object) -> bool:
        return self is not other

    def __hash__(self) -> int:
        return id(self)

    def __repr__(self) -> str:
        return f"<candidate's {self._type} object>"


class Candidate:
    """The candidate's process (child ``pid`` of this one), reached through the request pipe
    ``req_w`` and the reply pipe ``rep_r`` until ``deadline`` (``time.monotonic()``)."""

    def __init__(self, req_w: int, rep_r: int, pid: int, deadline: float, output_bytes: int) -> None:
        self.req_w, self.rep_r, self.pid = req_w, rep_r, pid
        self.deadline = deadline
        self.output_bytes = output_bytes
        self.failure: CandidateFailure | None = None
        self._remotes: dict[int, RemoteObject] = {}
        #: The tests' namespace: the exception classes its trusted text defines are matched by name.
        self.trusted: dict[str, Any] = {}

    # ------------------------------------------------------------------------------ failures
    def fail(self, code: str, *values: int) -> CandidateFailure:
        """Record a failure (the first one wins) and return the exception to raise."""
        if self.failure is None:
            self.failure = CandidateFailure(code, *values)
        return CandidateFailure(self.failure.code, *self.failure.values)

    def _exit_failure(self) -> CandidateFailure:
        status = None
        for _ in range(50):  # it closed its pipe: give it a moment to finish exiting
            try:
                pid, status = os.waitpid(self.pid, os.WNOHANG)
            except ChildProcessError:
                break
            if pid:
                break
            status = None
            time.sleep(0.01)
        if status is None:
            return self.fail("closed")
        if os.WIFSIGNALED(status):
            return self.fail("killed", os.WTERMSIG(status))
        code = os.WEXITSTATUS(status)
        return self.fail("exited") if code == 0 else self.fail("exit_status", code)

    # ------------------------------------------------------------------------------ protocol
    def request(self, msg: dict[str, Any], *, raw: bool = False, max_reply: int = MAX_REPLY_BYTES) -> Any:
        """Send one request and return the decoded answer (``raw``: the JSON value as is) of at
        most ``max_reply`` bytes."""
        if self.failure is not None:
            raise self.fail(self.failure.code)
        body = json.dumps(msg, allow_nan=False).encode()
        data = len(body).to_bytes(4, "little") + body
        try:
            while data:
                self._wait(self.req_w, write=True)
                data = data[os.write(self.req_w, data) :]
            size = int.from_bytes(self._read(4), "little")
            if size > max(MAX_REPLY_BYTES, max_reply):
                raise self.fail("too_big")
            reply = json.loads(self._read(size), parse_constant=_reject_constant)
        except BrokenPipeError:
            raise self._exit_failure() from None
        except (ValueError, RecursionError, MemoryError):
            raise self.fail("not_plain") from None
        if type(reply) is not dict:
            raise self.fail("not_plain")
        if "raised" in reply:
            message = reply.get("message")
            message = message[:_MESSAGE_CHARS] if type(message) is str else ""
            exc = None
            trusted = _trusted_exception(reply.get("classes"), self.trusted)
            sub = _reraised_trusted(trusted) if trusted is not None else None
            if sub is not None:
                exc = _make_raised(sub, message)
            if exc is None:
                exc = _make_raised(_reraised_class(reply["raised"]), message) or CandidateRaised(message)
            raise exc
        if "ok" not in reply:
            raise self.fail("not_plain")
        if raw:
            return reply["ok"]
        try:
            return self.decode(reply["ok"])
        except (ValueError, TypeError, RecursionError, OverflowError, MemoryError):
            raise self.fail("not_plain") from None

    def _wait(self, fd: int, write: bool = False) -> None:
        remaining = self.deadline - time.monotonic()
        if remaining <= 0:
            raise self.fail("timeout")
        ready = select.select([], [fd], [], remaining)[1] if write else select.select([fd], [], [], remaining)[0]
        if not ready:
            raise self.fail("timeout")

    def _read(self, n: int) -> bytes:
        chunks = []
        while n:
            self._wait(self.rep_r)
            chunk = os.read(self.rep_r, min(n, 1 << 20))
            if not chunk:
                raise self._exit_failure()
            chunks.append(chunk)
            n -= len(chunk)
        return b"".join(chunks)

    # --------------------------------------------------------------------------- plain data
    def encode(self, v: Any, depth: int = 0) -> Any:
        """A test's value as plain data for the candidate (built-in containers by kind)."""
        if depth > _MAX_DEPTH:
            raise TypeError("argument nested too deeply to send to the program")
        if v is None or isinstance(v, (bool, str)):
            return str(v) if isinstance(v, str) else v
        if isinstance(v, int):
            v = int(v)
            return v if -(1 << 53) < v < (1 << 53) else {"t": "int", "v": hex(v)}
        if isinstance(v, float):
            v = float(v)
            return v if v == v and abs(v) != float("inf") else {"t": "float", "v": repr(v)}
        if isinstance(v, RemoteObject):
            if v._candidate is not self:
                raise TypeError("an object of another program cannot be sent")
            return {"t": "ref", "v": v._ref}
        if isinstance(v, (list, tuple, set, frozenset)):
            kind = next(k for k in (list, tuple, frozenset, set) if isinstance(v, k))
            return {"t": kind.__name__, "v": [self.encode(x, depth + 1) for x in v]}
        if isinstance(v, dict):
            import collections

            pairs = [[self.encode(k, depth + 1), self.encode(x, depth + 1)] for k, x in v.items()]
            for standard in (collections.Counter, collections.OrderedDict):
                if isinstance(v, standard):
                    return {"t": standard.__name__, "v": pairs}
            if isinstance(v, collections.defaultdict):
                factory = v.default_factory
                name = getattr(factory, "__name__", None)
                named = name if getattr(builtins, str(name), None) is factory and name in _FACTORIES else None
                return {"t": "defaultdict", "v": pairs, "factory": named}
            return {"t": "dict", "v": pairs}
        if isinstance(v, (bytes, bytearray)):
            return {"t": "bytes", "v": bytes(v).hex()}
        if isinstance(v, complex):
            return {"t": "complex", "v": [self.encode(v.real), self.encode(v.imag)]}
        if _crosses_as_object(v):
            return self._encode_objects(v, depth)
        standard = self._encode_standard(v, depth)
        if standard is not None:
            return standard
        raise TypeError(f"a {type(v).__name__} cannot be sent to the program")

    def _encode_standard(self, v: Any, depth: int) -> Any:
        """A test's ``deque``, dict view, ``Fraction`` or ``Decimal`` (the standard types that
        cross tagged), or None."""
        import sys

        collections: Any = sys.modules["collections"]
        if isinstance(v, collections.deque):
            return {"t": "deque", "v": [self.encode(x, depth + 1) for x in v], "maxlen": v.maxlen}
        view: Any = v
        for kind, tag in ((type({}.keys()), "keys"), (type({}.values()), "values")):
            if isinstance(v, kind):
                return {"t": tag, "v": [self.encode(x, depth + 1) for x in view]}
        if isinstance(v, type({}.items())):
            return {"t": "items", "v": [[self.encode(k, depth + 1), self.encode(x, depth + 1)] for k, x in view]}
        fractions, decimal = sys.modules.get("fractions"), sys.modules.get("decimal")
        if fractions is not None and isinstance(v, fractions.Fraction):
            return {"t": "fraction", "v": [self.encode(v.numerator), self.encode(v.denominator)]}
        if decimal is not None and isinstance(v, decimal.Decimal):
            return {"t": "decimal", "v": str(v)}
        return None

    def _encode_objects(self, root: Any, depth: int) -> Any:
        """An object of a class the trusted text defines (a test's or the header's ``ListNode``,
        ``TreeNode``) and the objects its attributes reach, as one flat graph: a list of (class
        name, attributes) with node 0 the root and links as node numbers, so cycles and long
        lists cross without deep nesting. The program's process rebuilds them as instances of
        its own class of that name (the header's, when the pool declares one), or of a plain
        stand-in class with that name."""
        index = {id(root): 0}
        order = [root]
        nodes = []
        i = 0
        while i < len(order):
            obj = order[i]
            attrs = []
            for key, x in vars(obj).items():
                if _crosses_as_object(x):
                    if id(x) not in index:
                        index[id(x)] = len(order)
                        order.append(x)
                    attrs.append([str(key), {"t": "node", "v": index[id(x)]}])
                else:
                    attrs.append([str(key), self.encode(x, depth + 1)])
            nodes.append([type(obj).__name__, attrs])
            i += 1
        return {"t": "obj", "v": nodes}

    def decode(self, v: Any) -> Any:
        """The candidate's plain data as built-in values; references as :class:`RemoteObject`.
        Anything else is refused (ValueError), and so is data whose decoding would cost more
        than plain data of its size should: over :data:`_MAX_NODES` values, nested deeper than
        :data:`_MAX_DEPTH`, past the verdict's deadline, or a set or dict whose keys share one
        hash too often (hashes of numbers and tuples are the program's choice; colliding keys
        would make building the set quadratic here)."""
        return self._decode(v, 0, [_MAX_NODES])

    def _decode(self, v: Any, depth: int, budget: list[int]) -> Any:
        budget[0] -= 1
        if budget[0] < 0:
            raise ValueError("too many values")
        if depth > _MAX_DEPTH:
            raise ValueError("nested too deeply")
        if not budget[0] % 4096 and time.monotonic() > self.deadline:
            raise ValueError("decoding ran past the deadline")
        if v is None or type(v) in (bool, int, float, str):
            return v
        if type(v) is not dict or type(v.get("t")) is not str:
            raise ValueError("not plain data")
        tag, body = v["t"], v.get("v")
        if tag in ("list", "tuple", "set", "frozenset"):
            if type(body) is not list:
                raise ValueError("not plain data")
            items = [self._decode(x, depth + 1, budget) for x in body]
            _check_hashes(items)
            return {"list": list, "tuple": tuple, "set": set, "frozenset": frozenset}[tag](items)
        if tag == "dict":
            if type(body) is not list or any(type(p) is not list or len(p) != 2 for p in body):
                raise ValueError("not plain data")
            pairs = [(self._decode(k, depth + 1, budget), self._decode(x, depth + 1, budget)) for k, x in body]
            _check_hashes([k for k, _ in pairs])
            return dict(pairs)
        if tag == "int" and type(body) is str and len(body) <= 100_000:
            return int(body, 16)
        if tag == "float" and body in ("nan", "inf", "-inf"):
            return float(body)
        if tag == "bytes" and type(body) is str:
            return bytes.fromhex(body)
        if tag == "complex" and type(body) is list and len(body) == 2 and all(type(x) in (int, float) for x in body):
            return complex(body[0], body[1])
        if tag in _STANDARD_TAGS:
            return self._decode_standard(tag, v, body, depth, budget)
        if tag == "ref" and type(body) is int and body >= 0:
            if body not in self._remotes:
                if len(self._remotes) >= _MAX_REMOTES:
                    raise ValueError("too many of the program's objects")
                self._remotes[body] = RemoteObject(self, body, str(v.get("type", "object"))[:60])
            return self._remotes[body]
        raise ValueError("not plain data")

    def _decode_standard(self, tag: str, v: dict[str, Any], body: Any, depth: int, budget: list[int]) -> Any:
        """A value the candidate sent as one of the standard types that cross tagged, rebuilt here
        from plain data as that type (never the program's class of it)."""
        import collections

        if tag == "decimal":
            if type(body) is not str or len(body) > 100_000:
                raise ValueError("not plain data")
            import decimal

            try:
                return decimal.Decimal(body)
            except (ArithmeticError, ValueError):
                raise ValueError("not plain data") from None
        if type(body) is not list:
            raise ValueError("not plain data")
        if tag == "fraction":
            if len(body) != 2:
                raise ValueError("not plain data")
            num, den = (self._decode(x, depth + 1, budget) for x in body)
            if type(num) is not int or type(den) is not int or den == 0:
                raise ValueError("not plain data")
            import fractions

            return fractions.Fraction(num, den)
        if tag in ("Counter", "OrderedDict", "defaultdict", "items"):
            if any(type(p) is not list or len(p) != 2 for p in body):
                raise ValueError("not plain data")
            pairs = [(self._decode(k, depth + 1, budget), self._decode(x, depth + 1, budget)) for k, x in body]
            _check_hashes([k for k, _ in pairs])
            if tag == "items":
                return dict(pairs).items()
            if tag == "defaultdict":
                factory = v.get("factory")
                return collections.defaultdict(getattr(builtins, factory) if factory in _FACTORIES else None, pairs)
            if tag == "Counter":
                return collections.Counter(dict(pairs))
            return collections.OrderedDict(pairs)
        items = [self._decode(x, depth + 1, budget) for x in body]
        if tag == "deque":
            maxlen = v.get("maxlen")
            return collections.deque(items, maxlen if type(maxlen) is int and maxlen >= 0 else None)
        if tag == "keys":
            _check_hashes(items)
            return dict.fromkeys(items).keys()
        return dict(enumerate(items)).values()

    # ------------------------------------------------------------------------- operations
    def load(self, source: str, names: list[str], *, run: bool = True) -> dict[str, Any]:
        """Load the program's source as module ``solution``, never ``__main__`` (``run=False``:
        compile only), and return those of ``names`` (chosen from the ground truth, never by the
        program) that it defines: plain values or :class:`RemoteObject`."""
        reply = self.request({"op": "load", "source": source, "run": run, "names": names}, raw=True)
        if type(reply) is not dict or not set(reply) <= set(names):
            raise self.fail("not_plain")
        try:
            return {name: self.decode(reply[name]) for name in names if name in reply}
        except (ValueError, TypeError, RecursionError, OverflowError, MemoryError):
            raise self.fail("not_plain") from None

    def run_case(self, stdin: str, cap: int | None = None) -> tuple[bytes, int, bool, int]:
        """Run the loaded program once on ``stdin``: (raw standard output, exit status, truncated
        at ``cap`` bytes (default ``output_bytes``), bytes of its input the program was given)."""
        cap = self.output_bytes if cap is None else cap
        # The output crosses as latin-1 text in JSON: at most 6 bytes per byte (a \u00XX escape).
        reply = self.request({"op": "run", "stdin": stdin, "output_bytes": cap}, raw=True, max_reply=6 * cap + 4096)
        if (
            type(reply) is not dict
            or type(reply.get("stdout")) is not str
            or type(reply.get("status")) is not int
            or type(reply.get("truncated")) is not bool
            or type(reply.get("input_bytes")) is not int
        ):
            raise self.fail("not_plain")
        try:
            out = reply["stdout"].encode("latin-1")
        except UnicodeEncodeError:
            raise self.fail("not_plain") from None
        return out[:cap], reply["status"], reply["truncated"], reply["input_bytes"]


# The factories a defaultdict may name when it crosses (built-in types only).
_FACTORIES = ("int", "float", "str", "bytes", "list", "dict", "set", "frozenset", "tuple", "bool", "complex")
_STANDARD_TAGS = ("Counter", "OrderedDict", "defaultdict", "deque", "keys", "items", "values", "fraction", "decimal")
_TRUSTED_MODULE = "__bots_test__"  # the tests' namespace: classes its text defines carry it


def _crosses_as_object(v: Any) -> bool:
    """An instance of a class the trusted text (header, prompt, test) defined, with plain attributes."""
    return getattr(type(v), "__module__", None) == _TRUSTED_MODULE and hasattr(v, "__dict__")


def _check_hashes(items: list[Any]) -> None:
    """Refuse more than :data:`_MAX_SAME_HASH` distinct values that share one hash value (equal
    values, as in ``[0] * 1000``, are fine: a set finds them at once). Sorting the hash values
    costs O(n log n) whatever they are; a set of colliding values would cost O(n^2), in the
    decoding here or later in a test that makes a set of what the program returned."""
    if len(items) <= _MAX_SAME_HASH:
        return
    keyed: list[tuple[int, int]] = []
    hashable: list[Any] = []
    for x in items:
        try:
            keyed.append((hash(x), len(hashable)))
        except TypeError:  # unhashable (a list in a list): it cannot enter a set
            continue
        hashable.append(x)
    keyed.sort()
    run_start = 0
    for i in range(1, len(keyed) + 1):
        if i < len(keyed) and keyed[i][0] == keyed[run_start][0]:
            continue
        if i - run_start > _MAX_SAME_HASH:
            first = hashable[keyed[run_start][1]]
            distinct = sum(1 for _, j in keyed[run_start:i] if hashable[j] is not first and hashable[j] != first)
            if distinct >= _MAX_SAME_HASH:
                raise ValueError("values whose hashes collide")
        run_start = i


def _reject_constant(name: str) -> Any:
    raise ValueError(f"JSON constant {name} is not plain data")


# ------------------------------------------------------------------------------------ tests
def _test_line(tb: TracebackType | None) -> int | None:
    line = None
    while tb is not None:
        if tb.tb_frame.f_code.co_filename == _TEST_FILE:
            line = tb.tb_lineno
        tb = tb.tb_next
    return line


def _exception_name(exc: BaseException) -> str:
    """The nearest built-in exception class of ``exc`` (a test's own class is not named)."""
    if isinstance(exc, CandidateRaised):
        for cls in type(exc).__mro__:
            if cls is not CandidateRaised and _RERAISABLE.get(cls.__name__) is cls:
                return cls.__name__
        return "CandidateRaised"
    for cls in type(exc).__mro__:
        if getattr(builtins, cls.__name__, None) is cls:
            return cls.__name__
    return "Exception"


def _referenced_names(tree: ast.AST) -> set[str]:
    import ast

    return {node.id for node in ast.walk(tree) if isinstance(node, ast.Name)}


def _bound_names(tree: ast.Module) -> set[str]:
    """Names a module's top-level statements bind (definitions, imports, assignments)."""
    import ast

    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((a.asname or a.name).split(".")[0] for a in node.names)
        else:
            names.update(n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store))
    return names


def _defined_by_program(source: str) -> set[str]:
    """Names the program binds only with its own top-level ``def`` or ``class``: a name it also
    binds otherwise (an assignment, an import, a loop target) or declares ``global`` anywhere is
    not one. A program that does not parse binds nothing (its load fails anyway)."""
    import ast

    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return set()
    defs = {n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))}
    other: set[str] = set()
    for node in tree.body:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            other.update((a.asname or a.name).split(".")[0] for a in node.names)
        elif not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            other.update(n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store))
            other.update(n.name for n in ast.walk(node) if isinstance(n, ast.ExceptHandler) and n.name)
    for sub in ast.walk(tree):
        if isinstance(sub, (ast.Global, ast.Nonlocal)):
            other.update(sub.names)
        elif isinstance(sub, ast.NamedExpr) and isinstance(sub.target, ast.Name):
            other.add(sub.target.id)
    return defs - other


def _used_only_as_modules(tree: ast.AST) -> set[str]:
    """Names every use of which reads an attribute (``math.isclose``): a test uses them as modules.
    A name also called, passed or compared itself is a value (a function under test named like
    a module, ``statistics(xs)``)."""
    import ast

    nodes = list(ast.walk(tree))
    bases = {id(n.value) for n in nodes if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name)}
    dotted = {n.id for n in nodes if isinstance(n, ast.Name) and id(n) in bases}
    bare = {n.id for n in nodes if isinstance(n, ast.Name) and id(n) not in bases}
    return dotted - bare


def _standard_module(name: str) -> Any:
    """The standard-library module ``name`` imported here, or None: a test that uses ``math``
    without importing it gets the real one, never the program's."""
    import importlib
    import sys

    if name.startswith("_") or name not in sys.stdlib_module_names:
        return None
    try:
        return importlib.import_module(name)
    except Exception:  # noqa: BLE001 - a module this interpreter lacks
        return None


def _fail(code: str, *values: Any) -> dict[str, Any]:
    return {"pass": False, "code": code, "values": list(values)}


def run_tests(candidate: Candidate, task: dict[str, Any]) -> dict[str, Any]:
    """HumanEval / GURU functional tests. The tests' namespace is built here from trusted text
    only: the real built-ins, then the pool's harness header and the prompt's imports and
    helpers. From the program it takes only the entry point, or, for a test without one, the
    names the test uses that nothing trusted defines and that are no standard-library module
    (those are imported here), and only where the program's own top-level ``def`` or ``class``
    binds them."""
    entry = task.get("entry")
    compiled = compile(task["test"], _TEST_FILE, "exec")
    namespace: dict[str, Any] = {"__name__": _TRUSTED_MODULE, "__builtins__": builtins}
    if task.get("context"):
        try:
            exec(compile(task["context"], "<prompt>", "exec"), namespace)
        except Exception as exc:  # noqa: BLE001 - the ground truth's own prompt does not run
            raise GroundTruthError("prompt", _exception_name(exc)) from None
    if entry:
        wanted = [entry]
    else:  # only here is the test's syntax tree needed (ast takes a while to import)
        import ast

        tree = ast.parse(task["test"], _TEST_FILE)
        trusted = set(namespace) | set(dir(builtins)) | _bound_names(tree)
        free = sorted(_referenced_names(tree) - trusted)
        as_module = _used_only_as_modules(tree)
        for name in free:  # real standard-library modules, imported here
            module = _standard_module(name) if name in as_module else None
            if module is not None:
                namespace[name] = module
        # What the test still needs comes from the program only where its own top-level def or
        # class binds it; a name it gets nowhere fails the test as a NameError.
        own = _defined_by_program(task["source"])
        wanted = [name for name in free if name not in namespace and name in own]
    candidate.trusted = namespace
    try:
        names = candidate.load(task["source"], wanted)
    except CandidateFailure as failure:
        return _fail(failure.code, *failure.values)
    except CandidateRaised as exc:
        return _fail("raised_loading", _exception_name(exc))
    for name in wanted:
        if name in names:
            namespace[name] = names[name]
    try:
        exec(compiled, namespace)
        if entry and task.get("check"):
            if entry not in names:
                return _fail("no_entry")
            if not callable(namespace.get("check")):
                raise GroundTruthError("no_check")
            namespace["check"](names[entry])
    except CandidateFailure:
        pass  # recorded in candidate.failure: reported below, whatever the test did with it
    except CandidateRaised as exc:
        return _fail("raised", _exception_name(exc), _test_line(exc.__traceback__))
    except AssertionError as exc:
        if candidate.failure is None:
            return _fail("assertion", _test_line(exc.__traceback__))
    except GroundTruthError:
        raise
    except Exception as exc:  # noqa: BLE001 - the test failed on what the program returned
        if candidate.failure is None:
            return _fail("test_raised", _exception_name(exc), _test_line(exc.__traceback__))
    if candidate.failure is not None:  # also a failure the test code caught and ignored
        return _fail(candidate.failure.code, *candidate.failure.values)
    return {"pass": True}


def run_stdio(candidate: Candidate, task: dict[str, Any]) -> dict[str, Any]:
    """Standard input/output cases: the program runs once per input in a fresh child process of
    its own; its raw output is compared here as whitespace-separated tokens. A case's output may
    reach twice its expected output's size where that exceeds the output cap. The verdict's time
    limit covers all cases together."""
    case = -1
    try:
        candidate.load(task["source"], [], run=False)
        for case, (given, wanted) in enumerate(task["cases"]):
            cap = max(candidate.output_bytes, 2 * len(wanted.encode("utf-8")))
            out, status, truncated, received = candidate.run_case(given, cap)
            if received != len(given.encode("utf-8")):
                return _fail("case_input", case, len(given.encode("utf-8")))
            if truncated:
                return _fail("case_output", case, cap)
            if status > 128:
                return _fail("case_killed", case, status - 128)
            if status != 0:
                return _fail("case_status", case, status)
            if out.decode("utf-8", "replace").split() != wanted.split():
                return _fail("case_wrong", case)
    except CandidateFailure as failure:
        if failure.code == "timeout" and case >= 0:
            return _fail("case_timeout", case)
        return _fail(failure.code, *failure.values)
    except CandidateRaised as exc:
        return _fail("raised_loading", _exception_name(exc))
    return {"pass": True}


def judge(task: dict[str, Any], candidate: Candidate) -> dict[str, Any]:
    """The verdict on ``task`` (``kind`` "tests" or "stdio"), as a small JSON-able dict."""
    try:
        if task["kind"] == "stdio":
            return run_stdio(candidate, task)
        return run_tests(candidate, task)
    except GroundTruthError as exc:
        return {"pass": False, "ground_truth": exc.code, "values": [exc.name] if exc.name else []}
