"""The trusted half of a code verdict: the candidate program runs in a sandbox (see
:mod:`bots_rft.rewards.sandbox`) as a server of plain data, and this process runs the tests.

Only plain data crosses the boundary: JSON documents whose values decode to exact built-in types
(None, bool, int, float, str, bytes, complex, list, tuple, set, frozenset, dict). An object the
candidate cannot send as plain data stays in the sandbox and is seen here as a
:class:`RemoteObject`: calling it, reading an attribute or an item, taking its length, iterating it
or asking its truth value is forwarded (one request per operation); comparing it is by identity
only, so no object of the candidate's ever decides an ``==`` here. Modules cross as such
references too: nothing the candidate sends is ever imported, unpickled, evaluated or used as a
name here (the names the tests take are chosen by the caller; an exception's name is only a key
into a fixed table of built-in exceptions). Decoding is bounded in size, depth, value count, time
and hashing cost. Tests, expected outputs and the pass decision never enter the sandbox.

Anything that goes wrong on the candidate's side — it exits, crashes, times out, answers with
something that is not plain data — is a :class:`CandidateFailure`.
An exception the candidate raises is re-raised as a :class:`CandidateRaised` (an ``Exception``,
also an instance of the matching built-in exception where that is safe, so ``except ValueError``
in a test still works; never StopIteration, StopAsyncIteration or a non-``Exception``). That is a ``BaseException``,
so a test's ``except Exception`` cannot swallow it, and it is also remembered by the
:class:`Candidate`: a verdict is a pass only if no such failure happened at all.
"""

from __future__ import annotations

import builtins
import json
import os
import select
import time
from collections.abc import Iterator, Sequence
from typing import Any

from .sandbox import SandboxLimits, finish, launch

__all__ = ["Candidate", "CandidateFailure", "RemoteObject", "CandidateRaised"]

_MAX_REPLY_BYTES = 16 << 20
_MAX_DEPTH = 200
_MAX_NODES = 2_000_000  # values in one answer (a 16 MiB reply holds at most about 8 M)
_MAX_REMOTES = 100_000  # the program's objects one verdict may refer to
_MAX_SAME_HASH = 64  # keys of one set or dict that may share a hash value


class CandidateFailure(BaseException):
    """The candidate's process failed in a way that can only mean a failed verdict. ``reason``
    is in the harness's own words."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class CandidateRaised(Exception):
    """Marker base: exceptions re-raised here on the candidate's behalf also derive from this."""


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


def _reraised_class(name: object) -> type[CandidateRaised]:
    """A class deriving from :class:`CandidateRaised` and, where ``name`` is in the table above,
    from that built-in exception: tests that expect e.g. a ``ValueError`` see one, and the
    verdict can tell it came from the candidate."""
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
    """A value that stayed in the candidate's sandbox."""

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
        if name.startswith("__"):  # protocol probes (copy, pickle, numpy): not forwarded
            raise AttributeError(name)
        return self._ask("getattr", name=name)

    def __setattr__(self, name: str, value: Any) -> None:
        raise TypeError("the candidate's objects cannot be modified from the tests")

    def __getitem__(self, key: Any) -> Any:
        return self._ask("getitem", key=self._candidate.encode(key))

    def __len__(self) -> int:
        n = self._ask("len")
        if type(n) is not int or n < 0:
            raise self._candidate.fail("the candidate's len() was not a non-negative integer")
        return n

    def __iter__(self) -> Iterator[Any]:
        items = self._ask("iter")
        if type(items) is not list:
            raise self._candidate.fail("the candidate's iteration did not give a list")
        return iter(items)

    def __bool__(self) -> bool:
        value = self._ask("bool")
        if type(value) is not bool:
            raise self._candidate.fail("the candidate's truth value was not a bool")
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
    """One candidate program in its own sandbox, serving requests until :meth:`close`.

    The whole exchange shares one wall-clock budget (``limits.timeout_s``), sandbox start
    included."""

    def __init__(self, limits: SandboxLimits, *, allow_unsandboxed: bool | None = None) -> None:
        self.limits = limits
        self.deadline = time.monotonic() + limits.timeout_s
        self.failure: str | None = None
        self.last_raised: BaseException | None = None
        self._remotes: dict[int, RemoteObject] = {}
        req_r, self._req_w = os.pipe()
        self._rep_r, rep_w = os.pipe()
        try:
            self._launched = launch(
                "serve",
                limits,
                allow_unsandboxed=allow_unsandboxed,
                pass_fds=(req_r, rep_w),
                extra={"request_fd": req_r, "reply_fd": rep_w},
            )
        except BaseException:
            for fd in (self._req_w, self._rep_r):
                os.close(fd)
            raise
        finally:
            os.close(req_r)
            os.close(rep_w)

    def __enter__(self) -> Candidate:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        if self._launched is not None:
            try:
                finish(self._launched)
            finally:
                self._launched = None  # type: ignore[assignment]
                os.close(self._req_w)
                os.close(self._rep_r)

    # ------------------------------------------------------------------------------ failures
    def fail(self, reason: str) -> CandidateFailure:
        """Record ``reason`` as the verdict's failure (the first one wins) and return the
        exception to raise."""
        if self.failure is None:
            self.failure = reason
        return CandidateFailure(self.failure)

    def _exit_reason(self) -> str:
        proc = self._launched.proc
        try:
            code = proc.wait(timeout=0.5)
        except Exception:  # noqa: BLE001 - still running: it closed its pipe
            return "the program closed its connection to the tests"
        if code == 0:
            return "the program exited before the tests finished"
        if code > 128:
            return f"the program was killed (signal {code - 128}: a resource limit or a crash)"
        return f"the program exited before the tests finished (exit status {code})"

    # ------------------------------------------------------------------------------ protocol
    def request(self, msg: dict[str, Any], *, raw: bool = False) -> Any:
        """Send one request and return the decoded answer (``raw``: the JSON value as is)."""
        if self.failure is not None:
            raise CandidateFailure(self.failure)
        body = json.dumps(msg, allow_nan=False).encode()
        data = len(body).to_bytes(4, "little") + body
        try:
            while data:
                self._wait(self._req_w, write=True)
                data = data[os.write(self._req_w, data) :]
            header = self._read(4)
            size = int.from_bytes(header, "little")
            if size > _MAX_REPLY_BYTES:
                raise self.fail(f"the program's answer exceeds {_MAX_REPLY_BYTES >> 20} MiB")
            reply = json.loads(self._read(size), parse_constant=_reject_constant)
        except BrokenPipeError:
            raise self.fail(self._exit_reason()) from None
        except (ValueError, RecursionError):
            raise self.fail("the program's answer is not plain data") from None
        if type(reply) is not dict:
            raise self.fail("the program's answer is not plain data")
        if "raised" in reply:
            cls = _reraised_class(reply["raised"])
            text = f"raised by the program ({msg.get('op')})"
            try:
                exc: CandidateRaised = cls(text)
            except TypeError:  # e.g. UnicodeDecodeError wants five arguments
                exc = CandidateRaised(text)
            self.last_raised = exc
            raise exc
        if "ok" not in reply:
            raise self.fail("the program's answer is not plain data")
        if raw:
            return reply["ok"]
        try:
            return self.decode(reply["ok"])
        except (ValueError, TypeError, RecursionError, OverflowError):
            raise self.fail("the program's answer is not plain data") from None

    def _wait(self, fd: int, write: bool = False) -> None:
        remaining = self.deadline - time.monotonic()
        if remaining <= 0:
            raise self.fail(f"timed out after {self.limits.timeout_s:g}s")
        ready = select.select([], [fd], [], remaining)[1] if write else select.select([fd], [], [], remaining)[0]
        if not ready:
            raise self.fail(f"timed out after {self.limits.timeout_s:g}s")

    def _read(self, n: int) -> bytes:
        chunks = []
        while n:
            self._wait(self._rep_r)
            chunk = os.read(self._rep_r, min(n, 1 << 20))
            if not chunk:
                raise self.fail(self._exit_reason())
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
            return {"t": "dict", "v": [[self.encode(k, depth + 1), self.encode(x, depth + 1)] for k, x in v.items()]}
        if isinstance(v, (bytes, bytearray)):
            return {"t": "bytes", "v": bytes(v).hex()}
        if isinstance(v, complex):
            return {"t": "complex", "v": [self.encode(v.real), self.encode(v.imag)]}
        raise TypeError(f"a {type(v).__name__} cannot be sent to the program")

    def decode(self, v: Any) -> Any:
        """The candidate's plain data as built-in values; references as :class:`RemoteObject`.
        Anything else is refused (ValueError), and so is data whose decoding would cost more
        than plain data of its size should: over :data:`_MAX_NODES` values, nested deeper than
        :data:`_MAX_DEPTH`, past the verdict's deadline, or a set or dict whose keys share one
        hash too often (hashes of numbers and tuples are the program's choice; colliding keys
        would make building the set quadratic here)."""
        budget = [_MAX_NODES]
        return self._decode(v, 0, budget)

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
        if tag == "ref" and type(body) is int and body >= 0:
            if body not in self._remotes:
                if len(self._remotes) >= _MAX_REMOTES:
                    raise ValueError("too many of the program's objects")
                self._remotes[body] = RemoteObject(self, body, str(v.get("type", "object"))[:60])
            return self._remotes[body]
        raise ValueError("not plain data")

    # ------------------------------------------------------------------------- operations
    def load(self, source: str, names: Sequence[str] = (), *, run: bool = True) -> dict[str, Any]:
        """Load the program's source as module ``__main__`` (``run=False``: compile only) and
        return those of ``names`` (chosen by the caller, never by the program) that it defines:
        plain values or :class:`RemoteObject`."""
        wanted = [str(n) for n in names]
        reply = self.request({"op": "load", "source": source, "run": run, "names": wanted}, raw=True)
        if type(reply) is not dict or not set(reply) <= set(wanted):
            raise self.fail("the program's answer is not plain data")
        try:
            return {name: self.decode(reply[name]) for name in wanted if name in reply}
        except (ValueError, TypeError, RecursionError, OverflowError):
            raise self.fail("the program's answer is not plain data") from None

    def run_case(self, stdin: str) -> tuple[bytes, int, bool]:
        """Run the loaded program once on ``stdin``: (raw standard output, exit status,
        truncated at ``limits.output_bytes``)."""
        reply = self.request({"op": "run", "stdin": stdin, "output_bytes": self.limits.output_bytes}, raw=True)
        if (
            type(reply) is not dict
            or type(reply.get("stdout")) is not str
            or type(reply.get("status")) is not int
            or type(reply.get("truncated")) is not bool
        ):
            raise self.fail("the program's answer is not plain data")
        try:
            out = reply["stdout"].encode("latin-1")
        except UnicodeEncodeError:
            raise self.fail("the program's answer is not plain data") from None
        return out[: self.limits.output_bytes], reply["status"], reply["truncated"]


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
