"""Parsing Python source to an AST from any thread.

CPython 3.11 keeps the recursion depth of its AST-to-object conversion in state shared by the
whole interpreter, not per thread. When two threads parse at once and the GIL changes hands in
the middle of a conversion (a finalizer run by a garbage collection that an allocation started
can release it), ``ast.parse`` fails with ``SystemError: AST constructor recursion depth
mismatch`` (CPython issue gh-106905). The code verifier parses prompts and tests in whatever
threads the trainer scores rewards from, so every parse of ours goes through one lock. A parse
takes microseconds to a few milliseconds; the lock never guards anything slower.
"""

from __future__ import annotations

import ast
import threading

_LOCK = threading.Lock()


def parse(source: str, filename: str = "<unknown>") -> ast.Module:
    """``ast.parse(source, filename)``, one thread at a time (see the module docstring)."""
    with _LOCK:
        return ast.parse(source, filename)
