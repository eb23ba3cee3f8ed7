"""The agent that runs inside the code sandbox: ``python -I -S -B agent.py CONFIG``.

Standard library only and self-contained: the sandbox shows it nothing but the interpreter, its
standard library and this file. It first mounts the program's ``/work`` (size and inode caps),
gives up the capability that did it and loads the whole seccomp filter (see :func:`_mount_work`),
then gives up the sandbox's setup identity for the dedicated unprivileged uid/gid (when the
launcher asks for one) and checks that no capability is left, then sets the resource limits, then
does one of:

- ``script``: run ``/work/main.py`` as ``python main.py`` would (a fresh ``__main__``, its
  ``sys.argv`` and ``__file__``, ``exit``/``quit``, and the interpreter's normal end: threads
  joined, ``atexit`` handlers run, both standard outputs flushed) with the standard streams the
  launcher gave it (``run_python``);
- ``serve``: the untrusted half of a code verdict. Requests arrive on one pipe and replies leave
  on another, each a 4-byte length and a JSON document. The program's source is loaded as module
  ``solution`` (not ``__main__``, as HumanEval's own harness loads it); afterwards the trusted side asks for its global names, calls functions, reads
  attributes, or (for stdin/stdout tasks) runs the whole program once per input in a fresh child
  process (as ``python /work/main.py``, as in ``script`` mode) and gets back the raw bytes it
  wrote. Values cross as plain data (see ``_encode``);
  anything else stays here and crosses as a numbered reference. Nothing in this process decides a
  verdict: tests, expected outputs and comparisons stay with the trusted caller.
- ``verdict``: the whole code verdict, both sides in this one sandbox. This process forks the
  candidate's process (which then serves exactly as in ``serve`` mode, as the candidate
  identity), then becomes the test side as another identity (see :func:`_verdict`): it reads the
  task (program, tests, prompt helpers) from its own pipe, runs the tests with
  :mod:`judge` (beside this file) against the candidate through the two pipes of the data-only channel,
  and writes one small verdict to the launcher. The candidate's process never holds the task.
- ``probe``: report the identity and confinement the sandbox gave (uid, capabilities,
  no_new_privs, seccomp, pid) as JSON on stdout, for the start-up check.

Anything the program does to this process (patching it, reading the pipes, exiting) can at worst
spoil its own verdict.
"""

from __future__ import annotations

import json
import os
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # annotations only: the agent imports as little as it can
    from typing import Any

_MAX_DEPTH = 200
# The name the program's module has when the tests load it (``serve`` and ``verdict`` modes).
_PROGRAM_MODULE = "solution"


def _drop_privileges(cfg: dict[str, Any], key: str = "uid") -> None:
    uid = gid = cfg.get(key)
    if uid is not None and gid is not None and os.getuid() != uid:
        os.setgroups([])
        os.setresgid(gid, gid, gid)
        os.setresuid(uid, uid, uid)  # from uid 0: clears every capability (no keep-caps)
    if cfg.get("require_unprivileged"):
        # Every thread: the C library changes the others' ids with a real-time signal each, and
        # where none can be queued it leaves a thread at the old ids and still reports success.
        for task in os.listdir("/proc/self/task"):
            status = _status(f"/proc/self/task/{task}/status")
            caps = [int(status.get(k, "0"), 16) for k in ("CapPrm", "CapEff", "CapAmb")]
            ids = [int(x) for k in ("Uid", "Gid") for x in status.get(k, "0").split()]
            if 0 in ids or (uid is not None and any(x != uid for x in ids)) or any(caps):
                os.write(2, b"sandbox agent: still privileged after the switch; refusing to run\n")
                os._exit(125)


def _status(path: str = "/proc/self/status") -> dict[str, str]:
    out = {}
    with open(path, encoding="ascii", errors="replace") as f:
        for line in f:
            key, _, value = line.partition(":")
            out[key] = value.strip()
    return out


def _set_limits(cfg: dict[str, Any]) -> None:
    import resource
    import signal

    # As its namespace's PID 1 this process would ignore SIGXCPU without a handler: end the way
    # any other process over its CPU limit ends.
    signal.signal(signal.SIGXCPU, lambda *_: os._exit(128 + signal.SIGXCPU))

    def lim(which: int, value: int, hard: int | None = None) -> None:
        try:
            resource.setrlimit(which, (value, value if hard is None else hard))
        except (ValueError, OSError):
            pass

    cpu = int(cfg["cpu_s"])
    lim(resource.RLIMIT_CPU, cpu, cpu + 1)  # SIGXCPU, then SIGKILL a second later
    lim(resource.RLIMIT_AS, int(cfg["memory_bytes"]))
    # The hard limit leaves room for the largest case input (trusted, its size known): the
    # serving process writes each case's input into a memfd, and a write past the limit is cut.
    out_bytes = int(cfg["output_bytes"])
    lim(resource.RLIMIT_FSIZE, out_bytes, max(out_bytes, int(cfg.get("input_bytes") or 0)))
    lim(resource.RLIMIT_NOFILE, int(cfg["max_open_files"]))
    lim(resource.RLIMIT_CORE, 0)
    if os.getuid() != 0:  # root ignores RLIMIT_NPROC; the sandbox never runs programs as root
        lim(resource.RLIMIT_NPROC, int(cfg["max_processes"]))
    # Per-user counts the kernel also charges to the owner of the sandbox's user namespace (the
    # scorer's uid): pending signals bounded, no locked memory, no POSIX message-queue bytes.
    lim(resource.RLIMIT_SIGPENDING, int(cfg.get("pending_signals", 64)))
    lim(resource.RLIMIT_MEMLOCK, 0)
    lim(resource.RLIMIT_MSGQUEUE, 0)


def _run_script(path: str) -> None:
    """Run ``path`` as ``python path`` would and leave with its exit status. Never returns."""
    code = 1
    try:
        with open(path, "rb") as f:
            compiled = compile(f.read(), path, "exec")
    except BaseException:  # noqa: BLE001 - the program does not compile: report it, exit 1
        import traceback

        traceback.print_exc()
    else:
        code = _run_main(compiled, _main_namespace(path))
    os._exit(code & 0xFF)


def _main_namespace(path: str) -> dict[str, Any]:
    """A fresh ``__main__`` module for the program at ``path``, as ``python path`` makes it:
    ``__file__``, ``sys.argv``, the script's folder first on ``sys.path``, and ``exit``/``quit``
    (which ``site`` would add; the agent runs without it)."""
    import _sitebuiltins
    import builtins

    module = type(sys)("__main__")
    module.__dict__.update(__file__=path, __builtins__=builtins, __cached__=None, __spec__=None, __package__=None)
    sys.modules["__main__"] = module  # pickle finds the program's classes here
    sys.argv = [os.path.basename(path)]
    sys.path.insert(0, os.path.dirname(path))
    eof = "Ctrl-D (i.e. EOF)"
    builtins.exit = _sitebuiltins.Quitter("exit", eof)  # type: ignore[attr-defined]
    builtins.quit = _sitebuiltins.Quitter("quit", eof)  # type: ignore[attr-defined]
    return module.__dict__


def _run_main(compiled: Any, namespace: dict[str, Any]) -> int:
    """Run the program, then end as the interpreter does: wait for its non-daemon threads, run
    its ``atexit`` handlers, flush both standard outputs. Returns the exit status."""
    code = 0
    try:
        exec(compiled, namespace)
    except SystemExit as exc:
        code = _exit_code(exc)
    except BaseException as exc:  # noqa: BLE001 - the program's own failure: report it, exit 1
        import traceback

        # From the program's own frames on, as the interpreter prints it.
        tb = exc.__traceback__.tb_next if exc.__traceback__ is not None else None
        traceback.print_exception(type(exc), exc, tb)
        code = 1
    threading = sys.modules.get("threading")
    if threading is not None:
        try:
            threading._shutdown()  # type: ignore[attr-defined]
        except BaseException:  # noqa: BLE001 - as at the interpreter's end: nothing more to wait for
            pass
    try:
        import atexit

        atexit._run_exitfuncs()
    except BaseException:  # noqa: BLE001 - a handler's failure is reported by atexit itself
        pass
    for stream in {id(s): s for s in (sys.stdout, sys.__stdout__, sys.stderr, sys.__stderr__)}.values():
        try:
            if stream is not None:
                stream.flush()
        except BaseException:  # noqa: BLE001 - e.g. the output cap: the interpreter exits 120
            code = code or 120
    return code


def _exit_code(exc: SystemExit) -> int:
    if exc.code is None:
        return 0
    if isinstance(exc.code, int):
        return exc.code
    try:  # as the interpreter does: any other value is printed, and the status is 1
        print(exc.code, file=sys.stderr)
    except BaseException:  # noqa: BLE001
        pass
    return 1


def _cap_cpu_count(cfg: dict[str, Any]) -> None:
    """``os.cpu_count()`` at most ``max_processes - 8``: pools sized by it
    (``ThreadPoolExecutor()``, ``min(32, cpu_count + 4)`` threads) then fit the process cap
    beside the program's main thread and the sandbox's own processes, whatever the host."""
    real = os.cpu_count() or 1
    n = max(1, min(real, int(cfg.get("max_processes", 32)) - 8))
    os.cpu_count = lambda: n


# ------------------------------------------------------------------------------- plain data
class _Refs:
    """Objects that cannot cross as plain data stay here; the other side gets their number."""

    def __init__(self) -> None:
        self.objects: list[Any] = []
        self.namespace: dict[str, Any] = {}  # the program's: classes objects from the tests become
        self.standins: dict[str, type] = {}

    def add(self, obj: object) -> dict[str, Any]:
        self.objects.append(obj)
        return {"t": "ref", "v": len(self.objects) - 1, "type": type(obj).__name__[:60]}

    def get(self, n: object) -> Any:
        if type(n) is not int or not 0 <= n < len(self.objects):
            raise ValueError("unknown reference")
        return self.objects[n]


def _encode(v: Any, refs: _Refs, depth: int = 0) -> Any:
    """Exact built-in types become JSON (tagged where JSON is ambiguous); plain data under another
    type crosses as plain data too (see :func:`_encode_plain`); anything else becomes a
    reference."""
    if depth > _MAX_DEPTH:
        raise ValueError("value nested too deeply")
    t = type(v)
    if v is None or t is bool or t is str:
        return v
    if t is int:
        return v if -(1 << 53) < v < (1 << 53) else {"t": "int", "v": hex(v)}
    if t is float:
        return v if v == v and v not in (float("inf"), float("-inf")) else {"t": "float", "v": repr(v)}
    if t in (list, tuple, set, frozenset):
        return {"t": t.__name__, "v": [_encode(x, refs, depth + 1) for x in v]}
    if t is dict:
        return {"t": "dict", "v": _encode_pairs(dict.items(v), refs, depth)}
    if t is bytes:
        return {"t": "bytes", "v": v.hex()}
    if t is complex:
        return {"t": "complex", "v": [_encode(v.real, refs), _encode(v.imag, refs)]}
    plain = _encode_plain(v, t, refs, depth)
    return refs.add(v) if plain is None else plain  # modules too: nothing crosses as a name to import


def _encode_pairs(items: Any, refs: _Refs, depth: int) -> list[Any]:
    return [[_encode(k, refs, depth + 1), _encode(x, refs, depth + 1)] for k, x in items]


# The factories a defaultdict may name when it crosses (built-in types only; anything else: none).
_FACTORIES = ("int", "float", "str", "bytes", "list", "dict", "set", "frozenset", "tuple", "bool", "complex")


def _encode_plain(v: Any, t: type, refs: _Refs, depth: int) -> Any:
    """Plain data under another type, read through the base type's own methods (so a subclass's
    overrides are never called): subclasses of the built-in numbers, strings and containers as
    their base value (an ``IntEnum`` member as an ``int``, a ``namedtuple`` as a ``tuple``);
    ``bytearray`` and ``memoryview`` as bytes; ``Counter``, ``OrderedDict``, ``defaultdict``,
    ``deque``, dict views, ``Fraction`` and ``Decimal`` tagged, rebuilt as those standard types
    on the other side. None: not plain data. The type is ``type(v)``, never ``v.__class__``."""
    mods = sys.modules
    if issubclass(t, int):  # (bool cannot be subclassed: a bool is exact, handled before)
        return _encode(int.__int__(v), refs, depth)
    if issubclass(t, float):
        return _encode(float.__float__(v), refs, depth)
    if issubclass(t, str):
        return str.__str__(v)
    if issubclass(t, complex):
        return {"t": "complex", "v": [_encode(complex.real.__get__(v), refs), _encode(complex.imag.__get__(v), refs)]}  # type: ignore[attr-defined]
    if issubclass(t, bytes):
        return {"t": "bytes", "v": bytes.hex(v)}
    if issubclass(t, bytearray):
        return {"t": "bytes", "v": bytearray.hex(v)}
    if t is memoryview:
        return {"t": "bytes", "v": memoryview.tobytes(v).hex()}
    if issubclass(t, dict):
        collections = mods.get("collections")
        tag = "dict"
        body: dict[str, Any] = {}
        if collections is not None:
            if issubclass(t, collections.Counter):
                tag = "Counter"
            elif issubclass(t, collections.OrderedDict):
                tag = "OrderedDict"
            elif issubclass(t, collections.defaultdict):
                tag = "defaultdict"
                factory = collections.defaultdict.default_factory.__get__(v)
                name = getattr(factory, "__name__", None)
                body["factory"] = name if name in _FACTORIES and factory is _builtin(name) else None
        return {"t": tag, "v": _encode_pairs(dict.items(v), refs, depth), **body}
    for base in (list, tuple, set, frozenset):
        if issubclass(t, base):
            return {"t": base.__name__, "v": [_encode(x, refs, depth + 1) for x in base.__iter__(v)]}  # type: ignore[attr-defined]
    views: dict[type, str] = {type({}.keys()): "keys", type({}.items()): "items", type({}.values()): "values"}
    for view, tag in views.items():  # (no class can derive from these but an OrderedDict's views)
        if issubclass(t, view):
            return _encode_view(tag, v, refs, depth)
    collections = mods.get("collections")
    if collections is not None and issubclass(t, collections.deque):
        items = [_encode(x, refs, depth + 1) for x in collections.deque.__iter__(v)]
        return {"t": "deque", "v": items, "maxlen": collections.deque.maxlen.__get__(v)}
    fractions = mods.get("fractions")
    if fractions is not None and issubclass(t, fractions.Fraction):
        num, den = (getattr(fractions.Fraction, k).fget(v) for k in ("numerator", "denominator"))
        if type(num) is not int or type(den) is not int:
            return None
        return {"t": "fraction", "v": [_encode(num, refs, depth), _encode(den, refs, depth)]}
    decimal = mods.get("decimal")
    if decimal is not None and issubclass(t, decimal.Decimal):
        return {"t": "decimal", "v": decimal.Decimal.__str__(v)}
    return None


def _builtin(name: str) -> Any:
    import builtins

    return getattr(builtins, name, None)


def _encode_view(tag: str, v: Any, refs: _Refs, depth: int) -> Any:
    items = list(v)  # a view's iteration is its dict's own (C code), never the program's __iter__
    if tag == "items":
        return {"t": tag, "v": [[_encode(k, refs, depth + 1), _encode(x, refs, depth + 1)] for k, x in items]}
    return {"t": tag, "v": [_encode(x, refs, depth + 1) for x in items]}


def _decode(v: Any, refs: _Refs) -> Any:
    if v is None or type(v) in (bool, int, float, str):
        return v
    if type(v) is not dict:
        raise ValueError("malformed value")
    tag, body = v.get("t"), v["v"]
    if tag == "int":
        return int(body, 16)
    if tag == "float":
        return float(body)
    if tag in ("list", "tuple", "set", "frozenset"):
        items = [_decode(x, refs) for x in body]
        return {"list": list, "tuple": tuple, "set": set, "frozenset": frozenset}[tag](items)
    if tag == "dict":
        return {_decode(k, refs): _decode(x, refs) for k, x in body}
    if tag == "bytes":
        return bytes.fromhex(body)
    if tag == "complex":
        return complex(_decode(body[0], refs), _decode(body[1], refs))
    if tag in _STANDARD_TAGS:
        return _decode_standard(tag, v, lambda x: _decode(x, refs))
    if tag == "ref":
        return refs.get(body)
    if tag == "obj":
        return _decode_objects(body, refs)
    raise ValueError("malformed value")


_STANDARD_TAGS = ("Counter", "OrderedDict", "defaultdict", "deque", "keys", "items", "values", "fraction", "decimal")


def _decode_standard(tag: str, v: dict[str, Any], decode: Any) -> Any:
    """A value of one of the standard types that cross tagged (see :func:`_encode_plain`)."""
    body = v["v"]
    if tag in ("Counter", "OrderedDict", "defaultdict", "items"):
        pairs = [(decode(k), decode(x)) for k, x in body]
        if tag == "items":
            return dict(pairs).items()
        import collections

        if tag == "defaultdict":
            factory = v.get("factory")
            return collections.defaultdict(_builtin(factory) if factory in _FACTORIES else None, pairs)
        return collections.Counter(dict(pairs)) if tag == "Counter" else collections.OrderedDict(pairs)
    if tag == "deque":
        import collections

        maxlen = v.get("maxlen")
        return collections.deque([decode(x) for x in body], maxlen if type(maxlen) is int and maxlen >= 0 else None)
    if tag == "keys":
        return dict.fromkeys([decode(x) for x in body]).keys()
    if tag == "values":
        return dict(enumerate(decode(x) for x in body)).values()
    if tag == "fraction":
        import fractions

        num, den = decode(body[0]), decode(body[1])
        if type(num) is not int or type(den) is not int or den == 0:
            raise ValueError("malformed value")
        return fractions.Fraction(num, den)
    import decimal

    if type(body) is not str or len(body) > 100_000:
        raise ValueError("malformed value")
    return decimal.Decimal(body)


def _decode_objects(nodes: Any, refs: _Refs) -> Any:
    """The tests' objects (see the test side's ``_encode_objects``) as instances of the program's
    class of the same name, or of a plain stand-in class with that name; node 0 is the root."""
    made = []
    for name, _ in nodes:
        cls = refs.namespace.get(str(name))
        obj = None
        if isinstance(cls, type):
            try:
                obj = object.__new__(cls) if cls.__new__ is object.__new__ else cls.__new__(cls)  # type: ignore[call-overload]
            except Exception:  # noqa: BLE001 - a class that cannot be made bare: the stand-in
                obj = None
        if obj is None:
            standin = refs.standins.setdefault(str(name), type(str(name), (), {}))
            obj = standin()
        made.append(obj)
    for obj, (_, attrs) in zip(made, nodes):
        for key, x in attrs:
            value = made[x["v"]] if type(x) is dict and x.get("t") == "node" else _decode(x, refs)
            try:
                setattr(obj, str(key), value)
            except Exception:  # noqa: BLE001 - the program's class refuses it: its own answer
                pass
    if not made:
        raise ValueError("malformed value")
    return made[0]


# ----------------------------------------------------------------------------------- serving
class _Channel:
    def __init__(self, rfd: int, wfd: int) -> None:
        self.rfd, self.wfd = rfd, wfd

    def read(self) -> Any:
        header = self._exact(4)
        if header is None:
            return None
        body = self._exact(int.from_bytes(header, "little"))
        return None if body is None else json.loads(body)

    def _exact(self, n: int) -> bytes | None:
        chunks = []
        while n:
            chunk = os.read(self.rfd, n)
            if not chunk:
                return None
            chunks.append(chunk)
            n -= len(chunk)
        return b"".join(chunks)

    def write(self, msg: object) -> None:
        body = json.dumps(msg, allow_nan=False).encode()
        data = len(body).to_bytes(4, "little") + body
        while data:
            data = data[os.write(self.wfd, data) :]


def _builtin_exception_name(exc: BaseException) -> str:
    """The name of the nearest built-in exception class of ``exc``: that is all that crosses."""
    import builtins

    for cls in type(exc).__mro__:
        if getattr(builtins, cls.__name__, None) is cls:
            return cls.__name__
    return "Exception"


# What of an exception crosses besides its nearest built-in class: its message, capped, and the
# names of its own classes (the test side matches them only against classes its trusted text
# defines).
_MESSAGE_CHARS = 2000
_CLASS_NAMES = 8


def _raised(exc: BaseException, op: object) -> dict[str, Any]:
    names: list[str] = []
    builtin = _builtin_exception_name(exc)
    for cls in type(exc).__mro__:
        if cls.__name__ == builtin or len(names) == _CLASS_NAMES:
            break
        names.append(str(cls.__name__)[:100])
    try:
        message = str(exc)[:_MESSAGE_CHARS]
        message = message if type(message) is str else ""
    except BaseException:  # noqa: BLE001 - a message that cannot be made: none
        message = ""
    return {"raised": builtin, "during": op, "message": message, "classes": names}


# Where a standard input/output program's source is, as ``python main.py`` would run it.
_MAIN_PATH = "/work/main.py"


def _serve(cfg: dict[str, Any]) -> None:
    import builtins

    _cap_cpu_count(cfg)
    chan = _Channel(int(cfg["request_fd"]), int(cfg["reply_fd"]))
    refs = _Refs()
    # The program is a module of its own, not ``__main__`` (as HumanEval's harness runs it): a
    # demo block under ``if __name__ == "__main__":`` (reading input, unittest.main()) is not run.
    module = type(sys)(_PROGRAM_MODULE)
    sys.modules[_PROGRAM_MODULE] = module
    namespace: dict[str, object] = module.__dict__
    namespace["__builtins__"] = builtins
    refs.namespace = namespace
    compiled = None
    # The program's prints must not reach the reply pipe, and there is no input to read.
    devnull = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(devnull, fd)
    while True:
        msg = chan.read()
        if msg is None:
            os._exit(0)
        op = msg.get("op")
        try:
            if op == "load":
                source = str(msg["source"])
                if msg.get("run", True):
                    compiled = compile(source, "solution.py", "exec")
                    exec(compiled, namespace)
                else:  # a standard input/output program: run per case as ``python main.py``
                    _write_main(source)
                    compiled = compile(source, _MAIN_PATH, "exec")
                # Only the names the tests asked for cross; the tests take nothing else from here.
                wanted = [str(k) for k in msg.get("names", ())]
                reply: dict[str, Any] = {"ok": {k: _encode(namespace[k], refs) for k in wanted if k in namespace}}
            elif op == "run":
                reply = {"ok": _run_case(compiled, str(msg["stdin"]), int(msg["output_bytes"]))}
            else:
                target = refs.get(msg.get("ref"))
                if op == "call":
                    args = [_decode(a, refs) for a in msg["args"]]
                    kwargs = {str(k): _decode(a, refs) for k, a in msg["kwargs"].items()}
                    result = target(*args, **kwargs)
                elif op == "getattr":
                    result = getattr(target, str(msg["name"]))
                elif op == "getitem":
                    result = target[_decode(msg["key"], refs)]
                elif op == "len":
                    result = len(target)
                elif op == "iter":
                    result = list(target)
                elif op == "bool":
                    result = bool(target)
                else:
                    raise ValueError(f"unknown operation {op!r}")
                reply = {"ok": _encode(result, refs)}
        except SystemExit:
            os._exit(0)  # an exit while being called ends the sandbox: a failure on the other side
        except BaseException as exc:  # noqa: BLE001 - the program's own failure crosses as names
            reply = _raised(exc, op)
        try:
            chan.write(reply)
        except (TypeError, ValueError, RecursionError):
            chan.write({"raised": "ValueError", "during": "reply"})


def _write_main(source: str) -> None:
    """The program's source as ``/work/main.py`` (a program may read its own ``__file__``)."""
    try:
        with open(_MAIN_PATH, "w", encoding="utf-8") as f:
            f.write(source)
    except OSError:  # /work full: the program runs all the same
        pass


def _input_memfd(data: bytes) -> tuple[int, int]:
    """A memfd holding ``data`` (a case's input) and how many of its bytes it holds. The input
    is trusted and may exceed the output cap: the file-size limit is raised to its hard value,
    which leaves room for the largest input, for this write only."""
    import resource

    fd = os.memfd_create("stdin")
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    try:
        resource.setrlimit(resource.RLIMIT_FSIZE, (hard, hard))
    except (ValueError, OSError):
        pass
    written = 0
    view = memoryview(data)
    try:
        while written < len(data):
            n = os.write(fd, view[written : written + (1 << 20)])
            if n <= 0:
                break
            written += n
    except OSError:  # past the limit: the count says so
        pass
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
    os.lseek(fd, 0, os.SEEK_SET)
    return fd, written


def _run_case(compiled: Any, stdin: str, cap: int) -> dict[str, Any]:
    """Run the loaded program once, as a fresh child process, with ``stdin`` as its input; return
    what it wrote to standard output (raw bytes, as latin-1 text), how it ended, and how many
    bytes of its input it was given."""
    if compiled is None:
        raise ValueError("no program loaded")
    infd, given = _input_memfd(stdin.encode("utf-8"))
    rfd, wfd = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.dup2(infd, 0)
        os.dup2(wfd, 1)
        for fd in (infd, rfd, wfd):
            os.close(fd)
        code = 1
        try:
            # The standard streams as the interpreter makes them for a file and a pipe (lines
            # split at "\n" only, block-buffered output), the ones at start-up included.
            sys.stdin = sys.__stdin__ = open(0, encoding="utf-8", newline="\n", closefd=False)  # type: ignore[misc]  # noqa: SIM115
            sys.stdout = sys.__stdout__ = open(1, "w", encoding="utf-8", newline="\n", closefd=False)  # type: ignore[misc]  # noqa: SIM115
            code = _run_main(compiled, _main_namespace(_MAIN_PATH))
        finally:
            os._exit(code & 0xFF)
    os.close(infd)
    os.close(wfd)
    out = bytearray()
    truncated = False
    while True:
        chunk = os.read(rfd, 65536)
        if not chunk:
            break
        out += chunk
        if len(out) > cap:
            truncated = True
            del out[cap:]
            os.kill(pid, 9)
            break
    os.close(rfd)
    _, status = os.waitpid(pid, 0)
    code = 128 + os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)
    return {"stdout": out.decode("latin-1"), "status": code, "truncated": truncated, "input_bytes": given}


def _verdict(cfg: dict[str, Any]) -> None:
    """Fork the candidate, then judge it. Never returns.

    Started as root, the candidate runs as ``candidate_uid`` and the tests as ``uid``: different
    users, so the candidate can neither signal the test process nor open anything of it under
    ``/proc``. Started as a user, both run as that user; the test process then makes itself
    non-dumpable, so its memory and file descriptors are closed to the candidate all the same
    (``ptrace``, ``process_vm_*`` and ``pidfd_getfd`` are denied by seccomp for both). The test
    process is the namespace's PID 1: when it ends, the kernel ends the candidate with it."""
    req_r, req_w = os.pipe()
    rep_r, rep_w = os.pipe()
    task_fd, verdict_fd = int(cfg["task_fd"]), int(cfg["verdict_fd"])
    pid = os.fork()
    if pid == 0:  # the candidate: nothing of the tests' side stays open here
        for fd in (task_fd, verdict_fd, req_w, rep_r, int(cfg.get("lifeline_fd", -1))):
            if fd >= 0:
                os.close(fd)
        _drop_privileges(cfg, "candidate_uid")
        _set_limits(cfg)
        _serve({"request_fd": req_r, "reply_fd": rep_w})
        os._exit(0)
    os.close(req_r)
    os.close(rep_w)
    _drop_privileges(cfg)
    _set_limits(cfg)
    _start_lifeline(cfg)
    if cfg.get("candidate_uid") is None:  # same uid as the candidate: close /proc/1 to it
        import ctypes

        pr_set_dumpable = 4
        if ctypes.CDLL(None, use_errno=True).prctl(pr_set_dumpable, 0, 0, 0, 0) != 0:
            os.write(2, b"sandbox agent: cannot make the test process non-dumpable; refusing to run\n")
            os._exit(125)
    os.chdir("/")  # the candidate can write in /work; the tests have no use for it
    with os.fdopen(task_fd, "rb") as f:
        task = json.loads(f.read())
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # -I leaves the script's dir out
    import judge  # type: ignore[import-not-found]

    candidate = judge.Candidate(req_w, rep_r, pid, float(cfg["deadline"]), int(cfg["output_bytes"]))
    verdict = judge.judge(task, candidate)
    body = json.dumps(verdict).encode()
    while body:
        body = body[os.write(verdict_fd, body) :]
    os._exit(0)


def _refuse(why: str) -> None:
    os.write(2, f"sandbox agent: {why}; refusing to run\n".encode())
    os._exit(125)


def _mount_work(work: dict[str, Any]) -> None:
    """Mount the program's /work (a tmpfs capped in bytes and in inodes: empty files and symlinks
    cost kernel memory that a byte cap does not count), put the launcher's files in it, then give
    up the capability that mounted it and load the whole seccomp filter.

    bubblewrap's own tmpfs takes a size only, so this process, the first to run in the sandbox,
    mounts /work itself: it holds ``CAP_SYS_ADMIN`` in the sandbox's user namespace, which owns its
    mount namespace, and bubblewrap's filter leaves ``mount`` out. Both end here, before anything
    of the program exists in the sandbox."""
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    ms_nosuid, ms_nodev = 0x2, 0x4
    opts = f"size={int(work['bytes'])},nr_inodes={int(work['inodes'])},mode=0777"
    if libc.mount(b"tmpfs", b"/work", b"tmpfs", ms_nosuid | ms_nodev, opts.encode()) != 0:
        _refuse(f"cannot mount /work (errno {ctypes.get_errno()})")
    os.chdir("/work")  # bubblewrap's --chdir points at the directory now covered
    staged = "/sandbox/files"
    for name in sorted(os.listdir(staged)) if os.path.isdir(staged) else ():
        with open(os.path.join(staged, name), "rb") as src:
            data = src.read()
        fd = os.open(os.path.join("/work", name), os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        while data:
            data = data[os.write(fd, data) :]
        os.close(fd)
    # Give up CAP_SYS_ADMIN (bit 21); started as root the setup identity keeps
    # CAP_SETUID/CAP_SETGID until it switches to the dedicated uid, which clears them too.
    header = (ctypes.c_uint32 * 2)(0x20080522, 0)  # _LINUX_CAPABILITY_VERSION_3, this process
    sets = (ctypes.c_uint32 * 6)()  # effective, permitted, inheritable: low words, then high words
    if libc.capget(header, sets) != 0:
        _refuse("cannot read its capabilities")
    for i in (0, 1):
        sets[i] &= ~(1 << 21)
    sets[2] = sets[5] = 0  # nothing inheritable either
    if libc.capset(header, sets) != 0:
        _refuse("cannot give up CAP_SYS_ADMIN")
    status = _status()
    if int(status.get("CapEff", "0"), 16) & (1 << 21) or int(status.get("CapPrm", "0"), 16) & (1 << 21):
        _refuse("still holds CAP_SYS_ADMIN")
    # The whole filter, mount included, on top of bubblewrap's (no_new_privs is already set).
    fd = int(work["seccomp_fd"])
    bpf = b""
    while chunk := os.read(fd, 65536):
        bpf += chunk
    os.close(fd)

    class _Prog(ctypes.Structure):
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]

    insns = ctypes.create_string_buffer(bpf, len(bpf))
    prog = _Prog(len(bpf) // 8, ctypes.addressof(insns))
    pr_set_seccomp, seccomp_mode_filter = 22, 2
    if libc.prctl(pr_set_seccomp, seccomp_mode_filter, ctypes.byref(prog), 0, 0) != 0:
        _refuse(f"cannot load the seccomp filter (errno {ctypes.get_errno()})")


def _probe() -> None:
    status = _status()
    keys = ("CapPrm", "CapEff", "CapAmb", "CapBnd", "NoNewPrivs", "Seccomp")
    info: dict[str, Any] = {k: status.get(k, "") for k in keys}
    info.update(uid=os.getuid(), euid=os.geteuid(), pid=os.getpid(), root=sorted(os.listdir("/")))
    work = os.statvfs("/work")
    info.update(work_bytes=work.f_blocks * work.f_frsize, work_inodes=work.f_files)
    print(json.dumps(info), flush=True)


def _start_lifeline(cfg: dict[str, Any]) -> None:
    if cfg.get("lifeline_fd") is not None:
        _watch_lifeline(int(cfg["lifeline_fd"]))


def _watch_lifeline(fd: int) -> None:
    """End this process (and with it, as its namespace's PID 1, everything the program started)
    when the launcher goes away: the write end of the lifeline pipe is the launcher's alone, so
    end-of-file means it is gone. The parent-death signal cannot do this job: changing the uid
    clears it. A program that holds the interpreter lock in C code meets its CPU limit instead."""
    import _thread

    exit_now = os._exit  # bound now: the program may replace os._exit later

    def watch() -> None:
        while True:
            try:
                if not os.read(fd, 1):
                    break
            except OSError:
                break
        exit_now(137)

    _thread.start_new_thread(watch, ())


def main() -> None:
    cfg = json.loads(sys.argv[1])
    if cfg.get("work") is not None:
        _mount_work(cfg["work"])
    mode = cfg["mode"]
    if mode == "verdict":  # each side drops to its own identity after the fork
        _verdict(cfg)
    _drop_privileges(cfg)  # one thread here: the lifeline's starts once the ids are changed
    _set_limits(cfg)
    _start_lifeline(cfg)
    if mode == "probe":
        _probe()
    elif mode == "serve":
        _serve(cfg)
    else:
        _cap_cpu_count(cfg)
        _run_script(str(cfg["program"]))
    os._exit(0)


if __name__ == "__main__":
    main()
