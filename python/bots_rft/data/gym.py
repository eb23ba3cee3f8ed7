"""Pools from reasoning-gym generators, at several difficulty levels of each generator's
curriculum (``bots data gym``). The scorer needs the generator entry, so each row keeps it.
Level L uses the curriculum's inclusive ranges up to L (reasoning-gym's default), so tasks get
harder on average as L rises while still mixing in easier ones."""

from __future__ import annotations

import json
import logging
import signal
import threading
import zlib
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from tqdm.auto import tqdm

from ..errors import DataError, InvalidArgumentError
from ..rewards.gym import import_reasoning_gym
from .schema import chat, make_row
from .split import PoolPaths, split_rows, write_split

log = logging.getLogger("bots_rft.data")

__all__ = ["DEFAULT_GYM_DATASETS", "GYM_SYSTEM_PROMPT", "gym_rows", "build_gym_pool"]

DEFAULT_GYM_DATASETS = (
    "basic_arithmetic",
    "chain_sum",
    "countdown",
    "gsm_symbolic",
    "knights_knaves",
    "propositional_logic",
    "arc_1d",
)
GYM_SYSTEM_PROMPT = (
    "Given a problem, your task is to answer the question by thinking step-by-step in a clear and "
    "specific manner.\nOnce you have thought about the reasoning process, provide the answer in the "
    "following format:\n<answer>answer here</answer>\nDo not explain your reasoning inside the answer "
    "tags, provide only the final answer. When an example is provided, you should strictly follow "
    "the format of the output/answer in that example."
)


def _json_default(value: Any) -> Any:
    if hasattr(value, "tolist"):  # numpy arrays and scalars
        return value.tolist()
    if isinstance(value, (set, frozenset)):
        return sorted(value, key=str)
    return str(value)


@contextmanager
def _time_limit(seconds: float | None) -> Iterator[None]:
    """Raise TimeoutError in the block after ``seconds`` (SIGALRM: main thread only; elsewhere no
    limit). Some generators loop forever on rare seeds (arc_1d at level 3)."""
    if not seconds or threading.current_thread() is not threading.main_thread():
        yield
        return

    def expire(signum: int, frame: Any) -> None:
        raise TimeoutError(f"generation took more than {seconds:g}s")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def _top_level(name: str) -> int:
    """The highest curriculum level of a generator (0 for one without a curriculum)."""
    factory = import_reasoning_gym()
    if not factory.has_curriculum(name):
        return 0
    curriculum = factory.create_curriculum(name)
    return max(len(a.levels) for a in curriculum.attributes.values()) - 1


def _level_span(top: int) -> str:
    return "level 0 only" if top == 0 else f"levels 0-{top}"


def _level_configs(name: str, levels: Sequence[int], size: int, seed: int) -> list[tuple[int, dict[str, Any]]]:
    """(level, dataset config) per requested level the generator has; a generator without a
    curriculum has level 0 only. Each level is its own band of the curriculum (not cumulative)."""
    factory = import_reasoning_gym()
    DATASETS, create_curriculum, has_curriculum = factory.DATASETS, factory.create_curriculum, factory.has_curriculum

    if name not in DATASETS:
        raise InvalidArgumentError(f"datasets: unknown reasoning-gym generator {name!r}", "datasets")
    top = _top_level(name)
    missing = [level for level in levels if level > top]
    if len(missing) == len(levels):
        raise InvalidArgumentError(
            f"levels: generator {name!r} has none of levels {list(levels)} (it has {_level_span(top)})", "levels"
        )
    if missing:
        log.warning("reasoning-gym: %s has %s; skipping level(s) %s", name, _level_span(top), missing)
    out: list[tuple[int, dict[str, Any]]] = []
    for level in levels:
        level_seed = (seed * 1_000_003 + zlib.crc32(f"{name}/{level}".encode())) % (2**31)
        if level > top:
            continue
        if not has_curriculum(name):
            out.append((0, {"seed": level_seed, "size": size}))
            continue
        curriculum = create_curriculum(name)
        curriculum.set_global_level(level)
        # The library's default (inclusive) ranges: level L spans the curriculum's values up to
        # L, so difficulty rises with L. Single-level bands give degenerate configs for some
        # generators (countdown level 0 would only use the number 1).
        cfg = curriculum.generate_configuration({"seed": level_seed, "size": size})
        out.append((level, dict(vars(cfg))))
    return out


def gym_rows(
    datasets: Iterable[str] = DEFAULT_GYM_DATASETS,
    levels: Sequence[int] = (0, 1, 2, 3),
    per_level: int = 200,
    seed: int = 0,
    system_prompt: str | None = GYM_SYSTEM_PROMPT,
    item_timeout: float | None = 5.0,
) -> list[dict[str, Any]]:
    """Pool rows (split not yet set): ``per_level`` tasks per generator and level, questions
    deduplicated; a task whose generation fails or takes over ``item_timeout`` seconds is
    skipped (counted in a warning). ``data_source`` is ``reasoning_gym/<name>``; ``extra_info`` has ``rg_dataset``,
    ``rg_level`` and ``rg_entry`` (the generator entry as JSON, which its scorer reads)."""
    factory = import_reasoning_gym()
    DATASETS = factory.DATASETS

    names = list(dict.fromkeys(datasets))  # in order, once each
    if not names:
        raise InvalidArgumentError("datasets: no generator given", "datasets")
    if per_level < 1:
        raise InvalidArgumentError(f"per_level: must be at least 1, got {per_level!r}", "per_level")
    if not levels or any(level < 0 for level in levels):
        raise InvalidArgumentError(f"levels: expected one or more levels >= 0, got {list(levels)}", "levels")
    levels = list(dict.fromkeys(levels))  # once each, in the order given (it orders the rows)
    plan = [(name, level, cfg) for name in names for level, cfg in _level_configs(name, levels, per_level, seed)]
    rows: list[dict[str, Any]] = []
    seen: set[str] = set()
    failures = 0
    for name, level, cfg in tqdm(plan, desc="reasoning-gym", unit="level"):
        ds = factory.create_dataset(name, **cfg)
        ability = DATASETS[name][0].__module__.split(".")[1]  # arithmetic, logic, games, arc, ...
        for i in range(len(ds)):
            try:
                with _time_limit(item_timeout):
                    entry = ds[i]
            except Exception as exc:  # noqa: BLE001 - a generator's rare failure costs one task
                failures += 1
                log.debug("reasoning-gym %s level %d item %d failed: %s", name, level, i, exc)
                continue
            if entry["question"] in seen:
                continue
            seen.add(entry["question"])
            answer = entry.get("answer")
            if answer is None:  # open-ended generators (propositional_logic): one valid answer
                answer = entry.get("metadata", {}).get("example_answer", "")
            rows.append(
                make_row(
                    index=len(rows),
                    prompt=chat(entry["question"], system=system_prompt),
                    ground_truth=str(answer),
                    data_source=f"reasoning_gym/{name}",
                    ability=ability,
                    split="train",
                    extra={
                        "rg_dataset": name,
                        "rg_level": level,
                        "rg_entry": json.dumps(
                            {k: entry.get(k) for k in ("question", "answer", "metadata")},
                            default=_json_default,
                        ),
                    },
                )
            )
    if failures:
        log.warning("reasoning-gym: %d of the requested tasks failed to generate and were skipped", failures)
    if not rows:
        raise DataError(
            f"reasoning-gym: no task could be generated ({failures} failed); try another --item-timeout or --seed"
        )
    return rows


def build_gym_pool(
    out_dir: str | Path,
    datasets: Iterable[str] = DEFAULT_GYM_DATASETS,
    levels: Sequence[int] = (0, 1, 2, 3),
    per_level: int = 200,
    eval_fraction: float = 0.1,
    seed: int = 0,
    item_timeout: float | None = 5.0,
) -> PoolPaths:
    """Build and write ``out_dir/train.parquet`` and ``out_dir/eval.parquet``; the evaluation
    split holds out ``eval_fraction`` of every (generator, level)."""
    rows = gym_rows(datasets, levels, per_level, seed, item_timeout=item_timeout)
    train, evaluation = split_rows(
        rows, eval_fraction, seed, group=lambda r: (r["data_source"], r["extra_info"]["rg_level"])
    )
    return write_split(train, evaluation, out_dir)
