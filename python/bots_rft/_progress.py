"""Progress bars that import tqdm only when one is shown: the core installs without tqdm (it comes
with the ``[cli]`` extra), and a run with its bar turned off (``bots demo --no-progress``) never
imports it."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any, Generic, TypeVar

T = TypeVar("T")


class NoBar(Generic[T]):
    """What a disabled ``tqdm`` does: iterates, and takes ``update``/``set_postfix_str`` calls."""

    def __init__(self, iterable: Iterable[T] | None = None) -> None:
        self._iterable: Iterable[T] = iterable if iterable is not None else ()

    def __iter__(self) -> Iterator[T]:
        return iter(self._iterable)

    def __enter__(self) -> NoBar[T]:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def update(self, n: float = 1) -> None:
        pass

    def set_postfix_str(self, s: str = "", refresh: bool = True) -> None:
        pass

    def close(self) -> None:
        pass


def progress_bar(iterable: Iterable[T] | None = None, *, disable: bool = False, **kwargs: Any) -> Any:
    """``tqdm.auto.tqdm(iterable, **kwargs)``, or a :class:`NoBar` without importing tqdm when
    ``disable``."""
    if disable:
        return NoBar(iterable)
    from tqdm.auto import tqdm

    return tqdm(iterable, **kwargs)
