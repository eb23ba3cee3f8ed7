"""``TaskPool``: a task pool in the verl/GURU layout, held as one (memory-mapped) Arrow table.

Row position ``k`` in the pool is task ``k`` for the selector; ``ids`` maps positions to the
pool's own task ids (``extra_info.index`` by default). Everything is columnar, so validating or
reading a difficulty column of a pool with millions of rows takes well under a second.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pa_json
import pyarrow.parquet as pq

from ..errors import DataError, InvalidArgumentError
from .schema import CHAT_ROLES, PASS_RATE_SUFFIX, PoolColumns

__all__ = ["TaskPool", "Rows", "Message"]

Message = dict[str, str]
Rows = int | Sequence[int] | npt.NDArray[np.integer[Any]] | None

_PARQUET_SUFFIXES = (".parquet", ".pq")
_JSON_SUFFIXES = (".jsonl", ".json", ".jsonl.gz", ".json.gz", ".ndjson")


def _first_null(arr: pa.ChunkedArray | pa.Array) -> int:
    """Row of the first null in ``arr`` (which has at least one)."""
    return int(np.flatnonzero(arr.is_null().to_numpy(zero_copy_only=False))[0])


def _resolve(table: pa.Table, name: str) -> pa.ChunkedArray | None:
    """The column ``name``, where dots reach into struct fields. A top-level name that itself
    contains dots (``qwen2.5_7b_pass_rate``) wins; otherwise the longest existing prefix is used."""
    if name in table.column_names:
        return table.column(name)
    dots = [i for i, ch in enumerate(name) if ch == "."]
    for i in reversed(dots):
        if name[:i] in table.column_names:
            return _struct_path(table.column(name[:i]), name[i + 1 :])
    return None


def _struct_path(arr: pa.ChunkedArray, path: str) -> pa.ChunkedArray | None:
    """Field ``path`` (dotted, longest field-name match first) of struct array ``arr``."""
    if not pa.types.is_struct(arr.type):
        return None
    names = [arr.type.field(i).name for i in range(arr.type.num_fields)]
    if path in names:
        return pc.struct_field(arr, [names.index(path)])
    for i, field_name in sorted(enumerate(names), key=lambda t: -len(t[1])):
        if path.startswith(field_name + "."):
            return _struct_path(pc.struct_field(arr, [i]), path[len(field_name) + 1 :])
    return None


def _available(table: pa.Table) -> list[str]:
    """Every column name a user could pass, struct fields as dotted names (for error messages)."""
    out: list[str] = []

    def walk(prefix: str, typ: pa.DataType) -> None:
        if pa.types.is_struct(typ):
            for i in range(typ.num_fields):
                f = typ.field(i)
                walk(f"{prefix}.{f.name}", f.type)
        else:
            out.append(prefix)

    for f in table.schema:
        walk(f.name, f.type)
    return out


def _read_json_lines(path: Path) -> pa.Table:
    """JSONL through Arrow's reader; when its type inference fails on ragged rows, through Python."""
    try:
        with pa.input_stream(str(path), compression="detect") as stream:
            return pa_json.read_json(stream)
    except pa.ArrowInvalid:
        pass
    records: list[dict[str, Any]] = []
    with pa.input_stream(str(path), compression="detect") as stream:
        text = stream.read().decode("utf-8")
    for lineno, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as exc:
            raise DataError(f"{path}: line {lineno} is not valid JSON ({exc.msg})") from exc
        if not isinstance(record, dict):
            raise DataError(
                f"{path}: line {lineno} is a JSON {type(record).__name__}, not an object "
                "(a JSONL pool holds one JSON object per line, one task each)"
            )
        records.append(record)
    try:
        return pa.Table.from_pylist(records)
    except (pa.ArrowInvalid, pa.ArrowTypeError) as exc:
        raise DataError(f"{path}: rows do not share one schema ({exc})") from exc


def _as_messages(value: Any, row: int, column: str = "prompt") -> list[Message]:
    """A prompt cell as chat messages: a list of {role, content}, or a plain string (one user turn,
    or a JSON-encoded message list as some exports store it). An empty prompt or an unknown chat
    role is a :class:`DataError` naming the column and row."""
    if isinstance(value, str) and not value.strip():
        raise DataError(f"column {column!r} row {row}: empty prompt")
    if isinstance(value, str):
        text = value.strip()
        if text.startswith("[") and text.endswith("]"):
            try:
                decoded = json.loads(text)
            except json.JSONDecodeError:
                decoded = None
            if isinstance(decoded, list) and all(isinstance(m, dict) for m in decoded):
                value = decoded
            else:
                return [{"role": "user", "content": value}]
        else:
            return [{"role": "user", "content": value}]
    if isinstance(value, (list, tuple)):
        messages: list[Message] = []
        for m in value:
            if not isinstance(m, Mapping) or "content" not in m:
                raise DataError(f"prompt of row {row}: message {m!r} lacks 'role'/'content'")
            role = str(m.get("role") or "user")
            if role not in CHAT_ROLES:
                raise DataError(
                    f"column {column!r} row {row}, message {len(messages)}: unknown chat role {role!r}; "
                    f"expected one of {list(CHAT_ROLES)}"
                )
            messages.append({"role": role, "content": str(m["content"])})
        if not messages:
            raise DataError(f"column {column!r} row {row}: empty prompt (no messages)")
        return messages
    raise DataError(f"prompt of row {row}: expected chat messages or a string, got {value!r}")


class TaskPool:
    """A pool of tasks with verifiable rewards, in the verl/GURU layout.

    >>> pool = TaskPool.load("train.parquet")              # doctest: +SKIP
    >>> pool.prompts([0, 5]); pool.pass_rate("qwen2.5_7b_pass_rate")  # doctest: +SKIP
    """

    def __init__(
        self,
        table: pa.Table,
        columns: PoolColumns | Mapping[str, Any] | None = None,
        *,
        source: str | None = None,
        validate: bool = True,
    ) -> None:
        if not isinstance(table, pa.Table):
            raise InvalidArgumentError(f"table: expected a pyarrow.Table, got {type(table).__name__}", "table")
        if columns is None:
            columns = PoolColumns()
        elif not isinstance(columns, PoolColumns):
            columns = PoolColumns.from_mapping(columns)
        self._table = table
        self._columns = columns
        self._source = source or "<table>"
        self._ids: npt.NDArray[Any] | None = None
        self._id_order: npt.NDArray[np.int64] | None = None
        if validate:
            self.validate()

    # ----------------------------------------------------------------- construction and I/O
    @classmethod
    def load(
        cls,
        path: str | os.PathLike[str],
        columns: PoolColumns | Mapping[str, Any] | None = None,
        *,
        validate: bool = True,
    ) -> TaskPool:
        """Load a parquet file (or a directory of them, memory-mapped) or a JSONL file."""
        p = Path(path)
        if not p.exists():
            raise DataError(f"path: pool file {str(p)!r} does not exist")
        name = p.name.lower()
        try:
            if p.is_dir() or name.endswith(_PARQUET_SUFFIXES):
                table = pq.read_table(str(p), memory_map=True)
            elif name.endswith(_JSON_SUFFIXES):
                table = _read_json_lines(p)
            else:
                raise DataError(
                    f"path: cannot tell the format of {str(p)!r}; expected one of "
                    f"{_PARQUET_SUFFIXES + _JSON_SUFFIXES} or a directory of parquet files"
                )
        except (pa.ArrowInvalid, OSError) as exc:
            raise DataError(f"path: cannot read pool {str(p)!r}: {exc}") from exc
        return cls(table, columns, source=str(p), validate=validate)

    @classmethod
    def from_records(
        cls,
        records: Iterable[Mapping[str, Any]],
        columns: PoolColumns | Mapping[str, Any] | None = None,
        *,
        validate: bool = True,
    ) -> TaskPool:
        """A pool from row dicts (e.g. :func:`bots_rft.data.schema.make_row`)."""
        rows = list(records)
        if not rows:
            raise DataError("records: a pool needs at least one row, got none")
        try:
            table = pa.Table.from_pylist(rows)
        except (pa.ArrowInvalid, pa.ArrowTypeError) as exc:
            raise DataError(f"records: rows do not share one schema ({exc})") from exc
        return cls(table, columns, source="<records>", validate=validate)

    def to_parquet(self, path: str | os.PathLike[str], *, compression: str = "zstd") -> None:
        """Write the pool atomically (a temporary file renamed over ``path``)."""
        p = Path(path)
        p.parent.mkdir(parents=True, exist_ok=True)
        tmp = p.with_name(f".{p.name}.tmp-{os.getpid()}")
        try:
            pq.write_table(self._table, str(tmp), compression=compression)
            os.replace(tmp, p)
        finally:
            if tmp.exists():
                tmp.unlink()

    def to_jsonl(self, path: str | os.PathLike[str]) -> None:
        """Write the pool as JSON lines (NaN pass rates become null)."""
        p = Path(path)
        p.parent.mkdir(parents=True, exist_ok=True)
        tmp = p.with_name(f".{p.name}.tmp-{os.getpid()}")
        with open(tmp, "w", encoding="utf-8") as f:
            for batch in self._table.to_batches(max_chunksize=4096):
                for rec in batch.to_pylist():
                    f.write(json.dumps(_json_safe(rec), ensure_ascii=False) + "\n")
        os.replace(tmp, p)

    # ----------------------------------------------------------------------- validation
    def validate(self) -> None:
        """Raise :class:`DataError` naming the column and value when the pool is malformed."""
        t = self._table
        if t.num_rows == 0:
            raise DataError(f"{self._source}: the pool has no rows")
        missing = [
            f"{role} (column {col!r})" for role, col in self._columns.required().items() if _resolve(t, col) is None
        ]
        if missing:
            raise DataError(
                f"{self._source}: missing required column(s): {', '.join(missing)}; available columns: {_available(t)}"
            )
        for role in ("prompt", "ground_truth", "data_source"):
            col = getattr(self._columns, role)
            arr = _resolve(t, col)
            assert arr is not None
            if arr.null_count:
                raise DataError(
                    f"{self._source}: column {col!r} ({role}) has {arr.null_count} missing "
                    f"value(s), first at row {_first_null(arr)}"
                )
        self._validate_prompts()
        self._validate_ids()
        for col in self.difficulty_columns:
            self.pass_rate(col)  # validates the range

    def _validate_prompts(self) -> None:
        """Empty prompts and unknown chat roles, columnar (prompts stored as JSON text are
        checked when read)."""
        col = self._columns.prompt
        arr = _resolve(self._table, col)
        assert arr is not None
        start = 0
        for chunk in arr.chunks:
            typ = chunk.type
            if pa.types.is_string(typ) or pa.types.is_large_string(typ):
                empty = pc.equal(pc.utf8_length(pc.utf8_trim_whitespace(chunk)), 0)
                rows = np.flatnonzero(empty.to_numpy(zero_copy_only=False))
                if rows.size:
                    raise DataError(f"{self._source}: column {col!r} row {start + int(rows[0])}: empty prompt")
            elif pa.types.is_list(typ) or pa.types.is_large_list(typ):
                lengths = pc.list_value_length(chunk).to_numpy(zero_copy_only=False)
                rows = np.flatnonzero(lengths == 0)
                if rows.size:
                    raise DataError(
                        f"{self._source}: column {col!r} row {start + int(rows[0])}: empty prompt (no messages)"
                    )
                value_type = typ.value_type
                if pa.types.is_struct(value_type) and value_type.get_field_index("role") >= 0:
                    flat = pc.list_flatten(chunk)
                    roles = pc.struct_field(flat, [value_type.get_field_index("role")])
                    known = pc.or_kleene(pc.is_in(roles, value_set=pa.array(list(CHAT_ROLES))), pc.is_null(roles))
                    bad = np.flatnonzero(~known.to_numpy(zero_copy_only=False))
                    if bad.size:
                        parents = pc.list_parent_indices(chunk).to_numpy(zero_copy_only=False)
                        row = int(parents[bad[0]])
                        message = int(bad[0]) - int(np.flatnonzero(parents == row)[0])
                        raise DataError(
                            f"{self._source}: column {col!r} row {start + row}, message {message}: unknown chat "
                            f"role {roles[int(bad[0])].as_py()!r}; expected one of {list(CHAT_ROLES)}"
                        )
            start += len(chunk)

    def identity(self) -> dict[str, Any]:
        """What makes this pool this pool, for checking a resumed run: the task count, a hash of
        the task ids in row order and a hash of the tasks' content (prompt, ground truth,
        data_source, extra_info; not the difficulty columns, which reference runs add later)."""
        ids = self.ids
        h_ids = hashlib.sha256()
        if ids.dtype == object:
            h_ids.update(b"str\0" + "\0".join(str(i) for i in ids.tolist()).encode("utf-8", "surrogatepass"))
        else:
            h_ids.update(b"int\0" + np.ascontiguousarray(ids, dtype="<i8").tobytes())
        names = [self._columns.id, self._columns.prompt, self._columns.ground_truth, self._columns.data_source]
        if self._columns.extra_info is not None and _resolve(self._table, self._columns.extra_info) is not None:
            names.append(self._columns.extra_info)
        h_content = hashlib.sha256()
        step = 65536
        for name in names:
            arr = _resolve(self._table, name)
            assert arr is not None
            h_content.update(f"\0{name}\0".encode())
            # The values as JSON: the same tasks hash alike however the file stored them (parquet
            # or JSONL, row groups, validity bitmaps), which Arrow's own buffers do not.
            for begin in range(0, len(arr), step):
                values = arr.slice(begin, step).to_pylist()
                h_content.update(json.dumps(values, sort_keys=True, default=str, ensure_ascii=False).encode())
        return {"tasks": len(self), "ids_sha256": h_ids.hexdigest(), "content_sha256": h_content.hexdigest()}

    def _validate_ids(self) -> None:
        col = self._columns.id
        arr = _resolve(self._table, col)
        assert arr is not None
        if arr.null_count:
            raise DataError(
                f"{self._source}: id column {col!r} has {arr.null_count} missing id(s), first at row {_first_null(arr)}"
            )
        typ = arr.type
        if pa.types.is_integer(typ):
            ids: npt.NDArray[Any] = np.asarray(pc.cast(arr, pa.int64()).to_numpy())
        elif pa.types.is_string(typ) or pa.types.is_large_string(typ):
            ids = np.asarray(arr.to_numpy(zero_copy_only=False), dtype=object)
        elif pa.types.is_floating(typ):
            vals = arr.to_numpy(zero_copy_only=False)
            if not np.all(np.isfinite(vals)) or not np.all(vals == np.round(vals)):
                bad = vals[~(np.isfinite(vals) & (vals == np.round(vals)))][0]
                raise DataError(f"{self._source}: id column {col!r} holds a non-integer id {float(bad)!r}")
            ids = vals.astype(np.int64)
        else:
            raise DataError(f"{self._source}: id column {col!r} must hold integers or strings, got {typ}")
        order = np.argsort(ids, kind="stable")
        sorted_ids = ids[order]
        dup = np.flatnonzero(sorted_ids[1:] == sorted_ids[:-1])
        if dup.size:
            examples = sorted({_py(sorted_ids[i]) for i in dup[:5].tolist()}, key=str)
            raise DataError(f"{self._source}: id column {col!r} has {dup.size} duplicate id(s), e.g. {examples}")
        self._ids = ids
        self._id_order = order.astype(np.int64)

    # ------------------------------------------------------------------------ accessors
    def __len__(self) -> int:
        return int(self._table.num_rows)

    def __repr__(self) -> str:
        return f"TaskPool({len(self)} tasks from {self._source}, difficulty columns {self.difficulty_columns})"

    @property
    def table(self) -> pa.Table:
        """The underlying Arrow table (read-only by convention)."""
        return self._table

    @property
    def columns(self) -> PoolColumns:
        return self._columns

    @property
    def source(self) -> str:
        return self._source

    @property
    def ids(self) -> npt.NDArray[Any]:
        """Task id of every row (int64, or object array of str for string ids)."""
        if self._ids is None:
            self._validate_ids()
        assert self._ids is not None
        return self._ids

    def rows_of(self, ids: Sequence[Any] | npt.NDArray[Any]) -> npt.NDArray[np.int64]:
        """Row positions of the given task ids; an unknown id is an error naming it."""
        all_ids = self.ids
        assert self._id_order is not None
        query = np.asarray(ids, dtype=all_ids.dtype if all_ids.dtype != object else object)
        sorted_ids = all_ids[self._id_order]
        pos = np.searchsorted(sorted_ids, query)
        pos_clipped = np.minimum(pos, len(sorted_ids) - 1)
        found = sorted_ids[pos_clipped] == query
        if not np.all(found):
            bad = np.asarray(query)[~found][:5].tolist()  # tolist gives plain Python values
            raise InvalidArgumentError(f"ids: unknown task id(s) {bad}", "ids")
        return self._id_order[pos_clipped]

    def _rows(self, rows: Rows) -> npt.NDArray[np.int64]:
        n = len(self)
        if rows is None:
            return np.arange(n, dtype=np.int64)
        arr = np.atleast_1d(np.asarray(rows))
        if arr.size and not np.issubdtype(arr.dtype, np.integer):
            raise InvalidArgumentError(f"rows: expected integer row positions, got dtype {arr.dtype}", "rows")
        arr = arr.astype(np.int64, copy=False)
        bad = (arr < 0) | (arr >= n)
        if np.any(bad):
            raise InvalidArgumentError(f"rows: row position {int(arr[bad][0])} is outside [0, {n})", "rows")
        return arr

    def _take(self, name: str, rows: Rows) -> list[Any]:
        arr = _resolve(self._table, name)
        if arr is None:
            raise DataError(f"{self._source}: no column {name!r}; available: {_available(self._table)}")
        return _take_rows(arr, self._rows(rows))

    def prompts(self, rows: Rows = None, *, system_prompt: str | None = None) -> list[list[Message]]:
        """Chat messages of the given rows (all rows when ``rows`` is None), with the system
        message kept (``system_prompt=None``), dropped (``""``) or replaced (any other text).
        Training and reference evaluation must prompt alike for pass rates to transfer."""
        idx = self._rows(rows)
        col = self._columns.prompt
        chats = [_as_messages(v, int(r), col) for v, r in zip(self._take(col, idx), idx)]
        if system_prompt is None:
            return chats
        head: list[Message] = [{"role": "system", "content": system_prompt}] if system_prompt else []
        return [head + [m for m in c if m["role"] != "system"] for c in chats]

    def ground_truths(self, rows: Rows = None) -> list[Any]:
        return self._take(self._columns.ground_truth, rows)

    def extra_infos(self, rows: Rows = None) -> list[dict[str, Any]]:
        """``extra_info`` of the given rows ({} where the pool has none)."""
        col = self._columns.extra_info
        if col is None or _resolve(self._table, col) is None:
            return [{} for _ in self._rows(rows)]
        return [dict(v) if isinstance(v, Mapping) else {} for v in self._take(col, rows)]

    def data_sources(self, rows: Rows = None) -> npt.NDArray[np.object_]:
        """``data_source`` of the given rows as an object array of str."""
        arr = _resolve(self._table, self._columns.data_source)
        assert arr is not None
        if rows is None:
            return np.asarray(arr.to_numpy(zero_copy_only=False), dtype=object)
        return np.asarray(_take_rows(arr, self._rows(rows)), dtype=object)

    def abilities(self, rows: Rows = None) -> list[str | None]:
        col = self._columns.ability
        if col is None or _resolve(self._table, col) is None:
            return [None for _ in self._rows(rows)]
        return self._take(col, rows)

    def row(self, i: int) -> dict[str, Any]:
        """Row ``i`` as a nested dict (all columns)."""
        idx = int(self._rows([i])[0])
        return self._table.slice(idx, 1).to_pylist()[0]  # type: ignore[no-any-return]

    def take(self, rows: Rows) -> TaskPool:
        """A new pool holding only the given rows, in that order."""
        return TaskPool(self._table.take(pa.array(self._rows(rows))), self._columns, source=self._source)

    # ---------------------------------------------------------------- difficulty columns
    @property
    def difficulty_columns(self) -> list[str]:
        """Top-level ``*_pass_rate`` columns plus the ones named in ``columns.difficulty``."""
        names = [c for c in self._table.column_names if c.endswith(PASS_RATE_SUFFIX)]
        names += [c for c in self._columns.difficulty if c not in names]
        return names

    def pass_rate(self, column: str) -> npt.NDArray[np.float64]:
        """Column ``column`` as float64 with NaN where missing; values must lie in [0, 1]."""
        arr = _resolve(self._table, column)
        if arr is None:
            raise DataError(
                f"{self._source}: no difficulty column {column!r}; "
                f"difficulty columns present: {self.difficulty_columns}"
            )
        if not (pa.types.is_floating(arr.type) or pa.types.is_integer(arr.type) or pa.types.is_null(arr.type)):
            raise DataError(f"{self._source}: difficulty column {column!r} must be numeric, got {arr.type}")
        values = np.asarray(pc.cast(arr, pa.float64()).to_numpy(zero_copy_only=False), dtype=np.float64)
        _check_rates(values, f"{self._source}: difficulty column {column!r}", self.ids)
        return values

    def with_pass_rate(self, column: str, values: npt.ArrayLike) -> TaskPool:
        """A new pool with difficulty column ``column`` set (added or replaced); NaN = unknown."""
        if not column:
            raise InvalidArgumentError("column: a difficulty column needs a non-empty name", "column")
        vals = np.asarray(values, dtype=np.float64)
        if vals.shape != (len(self),):
            raise InvalidArgumentError(
                f"values: expected {len(self)} pass rates for column {column!r}, got shape {vals.shape}",
                "values",
            )
        _check_rates(vals, f"values for column {column!r}", self.ids, error=InvalidArgumentError)
        # Store NaN as null too, the way GURU marks a missing evaluation.
        arr = pa.array(vals, type=pa.float64(), from_pandas=True)
        t = self._table
        if column in t.column_names:
            t = t.set_column(t.column_names.index(column), column, arr)
        else:
            t = t.append_column(column, arr)
        columns = self._columns
        if not column.endswith(PASS_RATE_SUFFIX) and column not in columns.difficulty:
            columns = PoolColumns(**{**columns.__dict__, "difficulty": columns.difficulty + (column,)})
        return TaskPool(t, columns, source=self._source, validate=False)


def _take_rows(arr: pa.ChunkedArray, idx: npt.NDArray[np.int64]) -> list[Any]:
    """``arr[idx]`` as Python values, chunk by chunk: ``ChunkedArray.take`` may first concatenate
    the whole column, which costs a full copy of a memory-mapped prompt column per call."""
    if arr.num_chunks <= 1:
        return arr.take(pa.array(idx)).to_pylist()  # type: ignore[no-any-return]
    lengths = np.array([len(c) for c in arr.chunks], dtype=np.int64)
    starts = np.concatenate([[0], np.cumsum(lengths)[:-1]])
    which = np.searchsorted(starts, idx, side="right") - 1
    out: list[Any] = [None] * len(idx)
    for c in np.unique(which).tolist():
        sel = np.flatnonzero(which == c)
        values = arr.chunk(c).take(pa.array(idx[sel] - starts[c])).to_pylist()
        for j, v in zip(sel.tolist(), values):
            out[j] = v
    return out


def _check_rates(
    values: npt.NDArray[np.float64],
    what: str,
    ids: npt.NDArray[Any],
    error: type[Exception] = DataError,
) -> None:
    bad = ~np.isnan(values) & ((values < 0.0) | (values > 1.0))
    if np.any(bad):
        first = int(np.flatnonzero(bad)[0])
        raise error(
            f"{what}: pass rates must lie in [0, 1] (NaN = unknown); {int(bad.sum())} do not, "
            f"first {float(values[first])!r} at row {first} (id {_py(ids[first])!r})"
        )


def _py(value: Any) -> Any:
    """A numpy scalar as the plain Python value (for readable messages)."""
    return value.item() if isinstance(value, np.generic) else value


def _json_safe(value: Any) -> Any:
    if isinstance(value, float) and value != value:
        return None
    if isinstance(value, dict):
        return {k: _json_safe(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_json_safe(v) for v in value]
    return value
