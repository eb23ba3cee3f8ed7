"""Reading a YAML or TOML config file into a mapping, with one error for every way it can fail.

The trainer's config (``bots train``) and the spread pool's spec (``bots data spread``) are both
read here, so a missing file, an unknown suffix, a parse error or a file that is not a mapping is
reported the same way (:class:`~bots_rft.errors.ConfigError` naming the file) by every command.

The configs themselves are pydantic models (:class:`ConfigModel`): types, ranges and unknown keys
are checked by pydantic, and its report becomes one :class:`~bots_rft.errors.ConfigError` line
naming the key and the value (:func:`config_error`).
"""

from __future__ import annotations

import json
from pathlib import Path
from types import UnionType
from typing import Annotated, Any, ClassVar, Union, cast, get_args, get_origin

from pydantic import BaseModel, BeforeValidator, ConfigDict, TypeAdapter, ValidationError
from pydantic.fields import FieldInfo
from pydantic_core import PydanticCustomError
from typing_extensions import Self

from .errors import BotsError, ConfigError

__all__ = [
    "read_mapping",
    "ConfigModel",
    "Invalid",
    "config_error",
    "field_adapter",
    "null_text",
    "Int",
    "Float",
    "JsonDict",
]


def _toml() -> Any:
    try:
        import tomllib  # type: ignore[import-not-found,unused-ignore]  # Python >= 3.11
    except ImportError:
        try:
            import tomli as tomllib  # type: ignore[import-not-found,no-redef,unused-ignore]
        except ImportError:
            raise ConfigError("config: TOML files need Python >= 3.11 or the tomli package; use YAML") from None
    return tomllib


def read_mapping(path: str | Path) -> dict[str, Any]:
    """The top-level mapping of a ``.yaml``/``.yml`` or ``.toml`` file (an empty YAML file is an
    empty mapping); :class:`ConfigError` naming the file otherwise."""
    p = Path(path)
    if not p.is_file():
        raise ConfigError(f"config: file {str(p)!r} does not exist")
    text = p.read_text(encoding="utf-8")
    try:
        if p.suffix.lower() == ".toml":
            loaded: Any = _toml().loads(text)
        elif p.suffix.lower() in (".yaml", ".yml"):
            import yaml  # type: ignore[import-untyped]

            loaded = yaml.safe_load(text) or {}
        else:
            raise ConfigError(f"config: {str(p)!r} must end in .yaml, .yml or .toml")
    except ConfigError:
        raise
    except Exception as exc:  # noqa: BLE001 - parser errors have many types
        raise ConfigError(f"config: cannot parse {str(p)!r}: {exc}") from None
    if not isinstance(loaded, dict):
        raise ConfigError(f"config: {str(p)!r} must hold a mapping of keys, got {type(loaded).__name__}")
    return loaded


# ------------------------------------------------------------------------------ typed configs
def null_text(value: Any) -> Any:
    """``null``, ``none`` or ``~`` as text (a ``key=null`` override) means null."""
    if isinstance(value, str) and value.strip().lower() in ("null", "none", "~"):
        return None
    return value


def _no_bool(value: Any) -> Any:
    """YAML's ``true`` is not the number 1: a bool where a number belongs is refused."""
    if isinstance(value, bool):
        raise PydanticCustomError("bool_type", "a bool is not a number")
    return value


def _json_mapping(value: Any) -> Any:
    """A mapping given as JSON text (``verifiers={"x": "m:f"}`` on the command line) as a dict."""
    if isinstance(value, str):
        try:
            return json.loads(value)
        except ValueError as exc:
            raise PydanticCustomError("json_invalid", "not JSON: {error}", {"error": str(exc)}) from None
    return value


#: Numbers as the configs take them: a bool is refused; text (from the command line) is parsed.
Int = Annotated[int, BeforeValidator(_no_bool)]
Float = Annotated[float, BeforeValidator(_no_bool)]
#: A mapping that may come as JSON text.
JsonDict = Annotated[dict[str, Any], BeforeValidator(_json_mapping)]


class _ModelError(ConfigError):
    """A config model's one-line error, raised by its constructor. When that model is a value
    inside another (``compare.pool``), the outer one names the key by its whole path: ``keyed``
    says whether the text starts with a key (``tasks: must be ...``), to be prefixed ``pool.``."""

    def __init__(self, text: str, keyed: bool) -> None:
        super().__init__(text)
        self.text = text
        self.keyed = keyed


class Invalid(ValueError):
    """Raised in a config model's field validator: why the value is refused. The one-line error
    names the key and the value around it (``key: <why>, got <value>``)."""


class ConfigModel(BaseModel):
    """A config read from a file or the command line: unknown keys are refused, numbers may come as
    text, and every way construction can fail is one :class:`~bots_rft.errors.ConfigError` line
    naming the key and the value (:func:`config_error`)."""

    model_config = ConfigDict(extra="forbid", coerce_numbers_to_str=True, frozen=True)
    #: The section of a config file this model reads (``compare``): its keys are named
    #: ``compare.jobs`` in errors. None: the keys are top-level.
    section: ClassVar[str | None] = None

    def __init__(self, **data: Any) -> None:
        try:
            super().__init__(**data)
        except ValidationError as exc:
            raise config_error(exc, type(self), where=self.section) from None

    def to_dict(self) -> dict[str, Any]:
        return self.model_dump()

    def replace(self, **changes: Any) -> Self:
        """A copy with ``changes``, validated as a new config is."""
        return type(self)(**{**self.model_dump(), **changes})


def _optional(annotation: Any) -> bool:
    return type(None) in get_args(annotation)


def _type_name(annotation: Any) -> str:
    """``int``, ``int | None``: the type a key takes, without its validators."""
    if get_origin(annotation) is Annotated:
        return _type_name(get_args(annotation)[0])
    if get_origin(annotation) in (Union, UnionType):
        return " | ".join(_type_name(a) for a in get_args(annotation))
    if annotation is type(None):
        return "None"
    if get_origin(annotation) is not None and get_args(annotation):
        inner = ", ".join(_type_name(a) for a in get_args(annotation))
        return f"{getattr(get_origin(annotation), '__name__', get_origin(annotation))}[{inner}]"
    return annotation.__name__ if isinstance(annotation, type) else str(annotation).replace("typing.", "")


def _bounds_text(info: FieldInfo, ctx: dict[str, Any], integer: bool) -> str:
    """The field's numeric range as the error states it: ``must lie in (0, 1]`` when bounded on
    both sides, ``must be an integer >= 1`` or ``must be > 0`` when bounded below."""
    low: tuple[str, Any] | None = None
    high: tuple[str, Any] | None = None
    for m in info.metadata:
        for attr, side in (("gt", "("), ("ge", "["), ("lt", ")"), ("le", "]")):
            bound = getattr(m, attr, None)
            if bound is not None:
                if attr in ("gt", "ge"):
                    low = (side, bound)
                else:
                    high = (side, bound)
    if low is None and high is None:  # the constraint sits inside an optional type: the error says which
        for attr, side in (("gt", "("), ("ge", "["), ("lt", ")"), ("le", "]")):
            if attr in ctx:
                low, high = ((side, ctx[attr]), None) if attr in ("gt", "ge") else (None, (side, ctx[attr]))
    if low is not None and high is not None:
        return f"must lie in {low[0]}{low[1]:g}, {high[1]:g}{high[0]}"
    finite = any(getattr(m, "allow_inf_nan", None) is False for m in info.metadata)
    kind = "an integer " if integer else ("a finite number " if finite else "")
    if low is not None:
        return f"must be {kind}{'>' if low[0] == '(' else '>='} {low[1]:g}"
    assert high is not None
    return f"must be {kind}{'<' if high[0] == ')' else '<='} {high[1]:g}"


def _as_parsed(value: Any) -> Any:
    """A number given as text (``steps=-1``) as the number it was read as, for the message."""
    if isinstance(value, str):
        for parse in (int, float):
            try:
                return parse(value.strip())
            except ValueError:
                pass
    return value


_BOUND_ERRORS = ("greater_than", "greater_than_equal", "less_than", "less_than_equal", "finite_number")


def _nested_model(annotation: Any) -> type[BaseModel] | None:
    """The config model a field holds (``PoolSpec | None`` holds ``PoolSpec``), if any."""
    for candidate in (annotation, *get_args(annotation)):
        if isinstance(candidate, type) and issubclass(candidate, BaseModel):
            return candidate
    return None


def _field_at(model: type[BaseModel], loc: list[str]) -> tuple[type[BaseModel] | None, FieldInfo | None]:
    """The model holding the key at ``loc`` (nested models followed) and that key's field; a
    field of None where ``loc`` leads into a value that is no model (a mapping's entry)."""
    holder: type[BaseModel] | None = model
    for depth, part in enumerate(loc):
        if holder is None or part not in holder.model_fields:
            return holder, None
        info = holder.model_fields[part]
        if depth == len(loc) - 1:
            return holder, info
        holder = _nested_model(info.annotation)
    return holder, None


def config_error(
    exc: ValidationError, model: type[BaseModel], *, field: str | None = None, where: str | None = None
) -> ConfigError:
    """Pydantic's report of a config model ``model`` as one line naming the key and the value:
    ``lr: must be a finite number > 0, got -1``. A validator's own typed error (a method name, a
    selection parameter's range) is kept as it was raised; of several errors, the first is told.
    ``field``: the report is :func:`field_adapter`'s for that key. ``where``: the keys are those
    of a section (``compare``), named ``compare.jobs``."""
    errors: list[dict[str, Any]] = [{**e, "loc": (field, *e["loc"]) if field else e["loc"]} for e in exc.errors()]

    def named(loc: list[str]) -> str:
        return ".".join([where, *loc] if where else loc)

    def keyed(loc: list[str], detail: str) -> ConfigError:
        return _ModelError(f"{named(loc)}: {detail}", keyed=True)

    for err in errors:
        if err["type"] == "extra_forbidden":
            parent = [str(p) for p in err["loc"][:-1]]
            holder, _ = _field_at(model, [*parent, "?"])
            same = [e for e in errors if e["type"] == "extra_forbidden" and e["loc"][:-1] == err["loc"][:-1]]
            unknown = sorted(str(e["loc"][-1]) for e in same)
            text = f"unknown key(s) {unknown}; known keys: {sorted(holder.model_fields) if holder else []}"
            return keyed(parent, text) if parent or where else _ModelError(text, keyed=False)
    err = errors[0]
    loc = [str(p) for p in err["loc"]]
    cause = (err.get("ctx") or {}).get("error")
    if isinstance(cause, _ModelError) and loc:  # a config model inside this one: its path in this one
        return _ModelError(f"{named(loc)}{'.' if cause.keyed else ': '}{cause.text}", keyed=True)
    if isinstance(cause, BotsError):
        return _ModelError(str(cause), keyed=True)
    value = err.get("input")
    if isinstance(cause, Invalid):
        return keyed(loc, f"{cause}, got {_as_parsed(value)!r}")
    if err["type"] == "missing":
        return keyed(loc, "required")
    _, info = _field_at(model, loc)
    if info is None:
        return keyed(loc, f"{err['msg']}, got {value!r}")
    nullable = _optional(info.annotation)
    if value is None and not nullable:
        return keyed(loc, "may not be null")
    if err["type"] in _BOUND_ERRORS:
        integer = "int" in _type_name(info.annotation).split(" | ")
        why = _bounds_text(info, err.get("ctx") or {}, integer)
        return keyed(loc, f"{why}{' or null' if nullable else ''}, got {_as_parsed(value)!r}")
    if err["type"] == "literal_error":
        return keyed(loc, f"expected one of {list(get_args(info.annotation))}, got {value!r}")
    if err["type"] == "model_type":
        return keyed(loc, f"expected a mapping, got {value!r}")
    return keyed(loc, f"expected {_type_name(info.annotation)}, got {value!r} ({err['msg']})")


def field_adapter(model: type[BaseModel], key: str) -> TypeAdapter[Any]:
    """Validates one field of ``model`` alone (its type and constraints, not the model's
    cross-field checks): how a ``key=value`` override becomes a typed value."""
    info = model.model_fields[key]
    if not info.metadata:
        return TypeAdapter(cast(Any, info.annotation))
    annotated = (info.annotation, *info.metadata)
    return TypeAdapter(cast(Any, Annotated)[annotated])
