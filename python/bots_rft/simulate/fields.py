"""Config fields that carry their own doc: what ``bots simulate`` shows and takes for each.

A field declared with :func:`documented` holds, besides its default, the sentence its flag's help
shows and what checks a value given on the command line: the catalogue parameter (its range and
type) or, for a count, its least value. ``bots simulate`` builds its flags from these, so a new
:class:`~bots_rft.simulate.SimConfig` field is one declaration here and nothing in the parser.
"""

from __future__ import annotations

from dataclasses import MISSING, field
from typing import Any

from ..parameters import Parameter

__all__ = ["documented"]


def documented(
    doc: str,
    default: Any = MISSING,
    *,
    param: Parameter | None = None,
    minimum: int | None = None,
    flag: str | None = None,
    choices: tuple[str, ...] | None = None,
) -> Any:
    """A dataclass field with its doc.

    ``doc``: what the field sets, as the flag's help says it (the default is added there);
    ``default``: the field's default, the default of ``param`` when left out; ``param``: the
    catalogue parameter each value must satisfy (a float, or each value of a tuple); ``minimum``:
    an int's least value; ``flag``: the flag's name where it is not ``--`` and the field's name
    with dashes; ``choices``: a string's allowed values."""
    if default is MISSING:
        if param is None:
            raise TypeError(f"documented({doc!r}): a default or a param to take it from")
        default = param.default
    metadata = {"doc": doc, "param": param, "minimum": minimum, "flag": flag, "choices": choices}
    return field(default=default, metadata=metadata)
