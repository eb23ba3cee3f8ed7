"""BOTS as a Trinity-RFT 0.6 task selector, against the real trinity-rft classes on CPU.

What runs for real: Trinity's selector registry (dotted ``selector_type``), ``FileReader`` over a
jsonl pool, ``TasksetScheduler`` (read / feedback / state, as the explorer drives it),
``StateManager`` (the ``json.dump`` of the explorer state), ``load_config`` on YAML, the
``ExperiencePipeline``'s ``process`` with the real ``pass_rate_calculator`` and
``dapo_dynamic_sampling`` operators and its JSON experience writer, built by the pipeline's own
``prepare``, and the authors' ``DifficultyBasedSelector`` as the reference. Faked: the rollouts
(rewards come from each task's fixed success pattern) and, inside ``prepare``, the module of
Trinity's model allocator, which imports vLLM (vLLM needs a GPU): a stand-in that serves no model,
as none is configured (``explorer.auxiliary_models`` is empty), so ``prepare`` never calls it.
"""

from __future__ import annotations

import asyncio
import base64
import json
import sys
import types
from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytest.importorskip("trinity")
torch = pytest.importorskip("torch")

from trinity.buffer.pipelines.experience_pipeline import ExperiencePipeline  # noqa: E402
from trinity.buffer.reader.file_reader import FileReader  # noqa: E402
from trinity.buffer.selector import SELECTORS  # noqa: E402
from trinity.buffer.selector.selector import BaseSelector, DifficultyBasedSelector  # noqa: E402
from trinity.buffer.task_scheduler import TasksetScheduler  # noqa: E402
from trinity.common.config import (  # noqa: E402
    Config,
    DataSelectorConfig,
    OperatorConfig,
    StorageConfig,
    TasksetConfig,
    load_config,
)
from trinity.common.constants import SELECTOR_METRIC  # noqa: E402
from trinity.common.experience import Experience  # noqa: E402
from trinity.manager.state_manager import StateManager  # noqa: E402

from bots_rft import BotsError, CheckpointError, ConfigError, DataError, InvalidArgumentError, InvalidTypeError  # noqa: E402
from bots_rft.integrations.trinity import AUTHOR_DEFAULTS, BOTSSelector, whole_config  # noqa: E402

pytestmark = pytest.mark.slow

DOTTED = "bots_rft.integrations.trinity.BOTSSelector"
REPO = Path(__file__).resolve().parents[2]
#: The paper's BOTS, as the authors' examples/bots/bots.yaml configures difficulty_based.
PAPER = {"m": 8, "lamb": 0.1, "rho": 0.1, "target_reward": 0.5, "tau": 0, "do_sample": True}


# ------------------------------------------------------------------------------- pools
def write_pool(folder: Path, weak: list[float | None], strong: list[float | None]) -> str:
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / "train.jsonl", "w") as f:
        for i, (w, s) in enumerate(zip(weak, strong)):
            f.write(json.dumps({"question": f"q{i}", "answer": str(i), "weak": w, "strong": s}) + "\n")
    return str(folder)


@pytest.fixture(scope="module")
def pool(tmp_path_factory: pytest.TempPathFactory) -> str:
    """40 tasks with weak/strong reference pass rates."""
    rng = np.random.default_rng(0)
    weak = (rng.random(40) * 0.5).round(4)
    return write_pool(tmp_path_factory.mktemp("pool"), weak.tolist(), np.minimum(1.0, weak + 0.3).tolist())


#: Tasks 0-7 always pass, 8-15 always fail, 16-31 pass every other rollout.
EXTREME_PASS, EXTREME_FAIL, MIDDLE = range(0, 8), range(8, 16), range(16, 32)


@pytest.fixture(scope="module")
def extremes_pool(tmp_path_factory: pytest.TempPathFactory) -> str:
    weak = [0.9] * 8 + [0.05] * 8 + [0.4] * 16
    strong = [1.0] * 8 + [0.1] * 8 + [0.6] * 16
    return write_pool(tmp_path_factory.mktemp("extremes"), weak, strong)


def rollout_rewards(task: int, n: int) -> list[float]:
    if task in EXTREME_PASS:
        return [1.0] * n
    if task in EXTREME_FAIL:
        return [0.0] * n
    return [float(r % 2) for r in range(n)]


def reader(
    path: str,
    selector_type: str = DOTTED,
    kwargs: dict[str, Any] | None = None,
    feature_keys: tuple[str, ...] = ("weak", "strong"),
    seed: int = 42,
    batch_size: int = 4,
) -> FileReader:
    """A taskset reader as Trinity builds it (the fields its config validator fills are set).
    Built outside a TasksetScheduler, with no whole config to check (whole_config(None))."""
    with whole_config(None):
        return _file_reader(path, selector_type, kwargs, feature_keys, seed, batch_size)


def _file_reader(
    path: str,
    selector_type: str,
    kwargs: dict[str, Any] | None,
    feature_keys: tuple[str, ...],
    seed: int,
    batch_size: int,
) -> FileReader:
    return FileReader(
        StorageConfig(
            name="math",
            storage_type="file",
            path=path,
            split="train",
            batch_size=batch_size,
            enable_progress_bar=False,
            default_workflow_type="math_workflow",
            total_epochs=1000,
            data_selector=DataSelectorConfig(
                selector_type=selector_type, seed=seed, feature_keys=list(feature_keys), kwargs=dict(kwargs or {})
            ),
        )
    )


def read(r: FileReader) -> list[int]:
    return [t.index["index"] for t in asyncio.run(r.read())]


def selector_of(r: FileReader) -> Any:
    return r.reader.selector


def config_for(
    path: str,
    kwargs: dict[str, Any],
    operators: list[str],
    batch_size: int,
    tmp: Path,
    feature_keys: tuple[str, ...] = (),
) -> Config:
    """A Trinity Config with one taskset on BOTS and an experience pipeline, with the fields set
    that Trinity's validator would fill (it needs a model and GPUs to run)."""
    cfg = Config()
    cfg.algorithm.repeat_times = int(kwargs.get("m", 16))  # the rollouts per task the selector assumes
    cfg.checkpoint_job_dir = str(tmp / "job")
    cfg.buffer.batch_size = batch_size
    cfg.buffer.total_epochs = 1000
    taskset = TasksetConfig(
        name="math",
        storage_type="file",
        path=path,
        split="train",
        default_workflow_type="math_workflow",
        data_selector=DataSelectorConfig(selector_type=DOTTED, feature_keys=list(feature_keys), kwargs=dict(kwargs)),
    )
    taskset.batch_size, taskset.total_epochs, taskset.enable_progress_bar = batch_size, 1000, False
    cfg.buffer.explorer_input.tasksets = [taskset]
    cfg.data_processor.experience_pipeline.operators = [OperatorConfig(name=o) for o in operators]
    cfg.data_processor.experience_pipeline.save_input = False
    cfg.buffer.trainer_input.experience_buffer = StorageConfig(
        name="exp",
        storage_type="file",
        path=str(tmp / "experiences.jsonl"),
        wrap_in_ray=False,
        schema_type="experience",
    )
    return cfg


class NoModels:
    """Trinity's ``Allocator`` (its module imports vLLM): places auxiliary models on GPUs."""

    def __init__(self, explorer_config: Any) -> None:
        pass

    def get_model(self, *args: Any, **kwargs: Any) -> Any:
        raise AssertionError("no auxiliary model is configured, so prepare() must not ask for one")


def pipeline_for(cfg: Config) -> ExperiencePipeline:
    """The pipeline as the explorer's runner builds it: Trinity's own ``prepare`` (operators from
    the config, the algorithm's appended, the output opened), the allocator module stood in."""
    assert not cfg.explorer.auxiliary_models
    pipe = ExperiencePipeline(cfg)
    allocator = types.ModuleType("trinity.common.models.allocator")
    allocator.Allocator = NoModels  # type: ignore[attr-defined]
    name = "trinity.common.models.allocator"
    previous = sys.modules.get(name)
    sys.modules[name] = allocator
    try:
        asyncio.run(pipe.prepare())
    finally:
        if previous is None:
            sys.modules.pop(name, None)
        else:
            sys.modules[name] = previous
    assert len(pipe.operators) >= len(cfg.data_processor.experience_pipeline.operators)  # built from the config
    return pipe


def explore(
    scheduler: TasksetScheduler, pipe: ExperiencePipeline, steps: int, n: int, sync_interval: int
) -> list[list[int]]:
    """The explorer's loop: read ``sync_interval`` steps, then finish each (pipeline metrics ->
    ``TasksetScheduler.feedback``), as Explorer.explore_step / _finish_explore_step do."""
    picks: list[list[int]] = []
    batches: list[list[Any]] = []
    for step in range(steps):
        tasks = asyncio.run(scheduler.read())
        picks.append([t.index["index"] for t in tasks])
        batches.append(tasks)
        if (step + 1) % sync_interval == 0:
            for tasks in batches:
                exps = [
                    Experience(
                        tokens=torch.tensor([1, 2, 3]),
                        prompt_length=1,
                        reward=reward,
                        eid={"batch": step, "task": t.index["index"], "run": run},
                        info={"task_index": dict(t.index)},
                    )
                    for t in tasks
                    for run, reward in enumerate(rollout_rewards(t.index["index"], n))
                ]
                metrics = asyncio.run(pipe.process(Experience.serialize_many(exps)))
                scheduler.feedback(metrics)
            batches = []
    return picks


# ------------------------------------------------------------------------------- registry
def test_trinity_registry_builds_the_selector_from_its_dotted_path(pool: str) -> None:
    assert SELECTORS.get(DOTTED) is BOTSSelector
    assert issubclass(BOTSSelector, BaseSelector)
    r = reader(pool)
    sel = selector_of(r)
    assert isinstance(sel, BOTSSelector)
    assert sel.bots.num_tasks == 40
    picks = read(r)
    assert len(set(picks)) == 4 and all(0 <= i < 40 for i in picks)


# ------------------------------------------------------------------------------- same meaning as difficulty_based
@pytest.mark.parametrize(
    "kwargs",
    [
        {},  # difficulty_based's defaults: softmax (tau 1) toward target 1.0 on the posterior mean
        {"m": 8, "lamb": 0.1, "rho": 0.3, "target_reward": 0.5, "tau": 0.2, "do_sample": True},
    ],
)
def test_same_kwargs_same_posterior_and_picks_as_difficulty_based(pool: str, kwargs: dict[str, Any]) -> None:
    """Switching selector_type alone: with feedback after every read (nothing pending), the
    posterior matches the authors' estimator and, under tau > 0, so does every pick."""
    ours, theirs = reader(pool, DOTTED, kwargs), reader(pool, "difficulty_based", kwargs)
    so, st = selector_of(ours), selector_of(theirs)
    assert isinstance(st, DifficultyBasedSelector)
    rng = np.random.default_rng(1)
    for _ in range(8):
        a, b = read(ours), read(theirs)
        assert a == b
        values = (rng.integers(0, 9, size=len(a)) / 8).tolist()
        ours.feedback(indices=a, values=values)
        theirs.feedback(indices=b, values=values)
    # Ours stores reference pass rates as float32 and skips (rather than damps) a zero gap:
    # agreement to about 1e-6 relative.
    np.testing.assert_allclose(so.bots.alpha, st.diff_estimator.alphas, rtol=1e-5)
    np.testing.assert_allclose(so.bots.beta, st.diff_estimator.betas, rtol=1e-5)
    assert so.bots.capability == pytest.approx(st.diff_estimator.cap_coef, rel=1e-5)


def test_parameters_map_onto_bots(pool: str) -> None:
    sel = selector_of(reader(pool, kwargs=PAPER, seed=7))
    assert sel.bots.params == {
        "lam": 0.1,
        "rho": 0.1,
        "target": 0.5,
        "n_rollouts": 8.0,
        "thompson": True,
        "seed": 7,
        "adaptive_rho": False,
        "tau": 0.0,
        "adaptive_lam": False,
        "lag_discount": 1.0,
    }
    assert sel.bots.evidence.momentum == 0.9  # difficulty_based's cap_coef_update_discount
    rows = [json.loads(line) for line in Path(pool, "train.jsonl").read_text().splitlines()]
    # feature_keys[0] is the weak reference (difficulty_based predicts it at capability 0), read raw.
    np.testing.assert_allclose(sel.bots.evidence.weak, [row["weak"] for row in rows], rtol=1e-7)
    np.testing.assert_allclose(sel.bots.evidence.strong, [row["strong"] for row in rows], rtol=1e-7)
    # Defaults are difficulty_based's; our own names are aliases.
    d = selector_of(reader(pool)).bots.params
    assert (d["lam"], d["rho"], d["n_rollouts"], d["thompson"]) == (0.2, 0.2, 16.0, False)
    own = selector_of(
        reader(
            pool, kwargs={"lam": 0.1, "rho": 0.1, "n_rollouts": 8, "thompson": True, "target": 0.5, "tau": 0}, seed=7
        )
    )
    assert own.bots.params == sel.bots.params
    assert AUTHOR_DEFAULTS == {
        "m": 16,
        "lamb": 0.2,
        "rho": 0.2,
        "adaptive_rho": False,
        "do_sample": False,
        "target_reward": 1.0,
        "tau": 1.0,
    }


def test_a_trinity_yaml_switches_by_changing_selector_type_alone(pool: str, tmp_path: Path) -> None:
    """The authors' BOTS YAML for difficulty_based, with only the selector_type line changed,
    loads through Trinity's load_config and drives the real TasksetScheduler."""
    theirs = f"""
algorithm:
  repeat_times: 16
buffer:
  batch_size: 4
  total_epochs: 1000
  explorer_input:
    taskset:
      name: math
      storage_type: file
      path: {pool}
      split: train
      default_workflow_type: math_workflow
      data_selector:
        selector_type: difficulty_based
        feature_keys: ["weak", "strong"]
        kwargs:
          m: 16
          lamb: 0.1
          rho: 0.1
          target_reward: 0.5
          tau: 0
          do_sample: true
data_processor:
  experience_pipeline:
    operators:
      - name: pass_rate_calculator
"""
    ours = theirs.replace("selector_type: difficulty_based", f"selector_type: {DOTTED}")
    assert sum(a != b for a, b in zip(theirs.splitlines(), ours.splitlines())) == 1
    (tmp_path / "bots.yaml").write_text(ours)
    cfg = load_config(str(tmp_path / "bots.yaml"))
    taskset = cfg.buffer.explorer_input.taskset
    cfg.buffer.explorer_input.tasksets, cfg.buffer.explorer_input.taskset = [taskset], None  # the validator's move
    taskset.batch_size, taskset.total_epochs, taskset.enable_progress_bar = 4, 1000, False  # filled by it too
    scheduler = TasksetScheduler({}, cfg)  # calls load_state_dict({"current_index": 0}): a fresh run
    sel = scheduler.tasksets[0].reader.selector
    assert isinstance(sel, BOTSSelector)
    assert sel.bots.params == {
        "lam": 0.1,
        "rho": 0.1,
        "target": 0.5,
        "n_rollouts": 16.0,
        "thompson": True,
        "seed": 42,
        "adaptive_rho": False,
        "tau": 0.0,
        "adaptive_lam": False,
        "lag_discount": 1.0,
    }
    tasks = asyncio.run(scheduler.read())
    assert len({t.index["index"] for t in tasks}) == 4
    scheduler.feedback(
        {SELECTOR_METRIC: {0: {"indices": [t.index["index"] for t in tasks], "values": [1.0, 0.5, 0.25, 0.0]}}}
    )
    assert sel.bots.num_updates == 1 and sel.pending == []
    json.dumps(scheduler.state_dict())


def test_the_example_config_loads(tmp_path: Path) -> None:
    cfg = load_config(str(REPO / "examples" / "trinity_bots.yaml"))
    taskset = cfg.buffer.explorer_input.taskset
    selector = taskset.data_selector
    assert selector.selector_type == DOTTED
    assert SELECTORS.get(selector.selector_type) is BOTSSelector
    assert len(selector.feature_keys) == 2
    assert {"m", "lamb", "rho", "target_reward", "tau", "do_sample", "state_dir"} <= set(selector.kwargs)
    assert selector.kwargs["m"] == cfg.algorithm.repeat_times
    assert selector.kwargs["state_dir"].startswith(cfg.checkpoint_root_dir)  # the interpolation resolved
    names = [o.name for o in cfg.data_processor.experience_pipeline.operators]
    assert names[0] == "pass_rate_calculator"


# ------------------------------------------------------------------------------- extra info
def test_extra_info_has_the_authors_structure(pool: str) -> None:
    _, want = selector_of(reader(pool, "difficulty_based")).get_indices(3, return_extra_info=True)
    for kwargs in ({}, PAPER, {**PAPER, "do_sample": False}):
        sel = selector_of(reader(pool, kwargs=kwargs))
        sel.feedback([0, 1, 2, 3], [1.0, 0.75, 0.5, 0.0])
        picks, info = sel.get_indices(3, return_extra_info=True)
        assert set(info) == set(want) == {"indices", "scores", "alphas", "betas", "point"}
        assert picks == info["indices"] and all(type(i) is int for i in picks)
        for key in want:
            assert isinstance(info[key], list) and len(info[key]) == 3
            assert {type(v) for v in info[key]} == {type(v) for v in want[key]}
        a, b = np.array(info["alphas"]), np.array(info["betas"])
        np.testing.assert_allclose(a, sel.bots.alpha[picks])
        np.testing.assert_allclose(info["point"], a / (a + b))
        scores = np.array(info["scores"])
        assert np.all(scores <= 0)
        if kwargs.get("tau") == 0:
            assert np.all(np.diff(scores) <= 1e-7)  # best first: nearest the target first
        if kwargs == {**PAPER, "do_sample": False}:
            np.testing.assert_allclose(scores, -np.abs(0.5 - a / (a + b)))


def test_extra_info_scores_are_the_draws_the_selection_used(pool: str) -> None:
    """Thompson (tau 0): the scores are of the core's own draws: no unpicked task beat them."""
    sel = selector_of(reader(pool, kwargs=PAPER, feature_keys=()))
    sel.feedback(list(range(20)), [i / 19 for i in range(20)])
    picks, info = sel.get_indices(5, return_extra_info=True)
    from bots_rft import _core

    draws = _core.thompson_draws(sel.bots.alpha, sel.bots.beta, 42, sel.bots.num_selections - 1).astype(np.float64)
    np.testing.assert_allclose(info["scores"], -np.abs(0.5 - draws[picks]), atol=1e-7)
    others = np.setdiff1d(np.arange(40), picks)
    assert np.abs(0.5 - draws[others]).min() >= -min(info["scores"]) - 1e-7


# ------------------------------------------------------------------------------- pending
def test_pending_tasks_are_not_picked_again_until_their_feedback(pool: str) -> None:
    r = reader(pool, kwargs=PAPER, batch_size=8)
    sel = selector_of(r)
    first, second = read(r), read(r)
    assert not set(first) & set(second)
    assert sel.pending == sorted(first + second)
    r.feedback(indices=first, values=[0.5] * 8)
    assert sel.pending == sorted(second)
    # Feedback for a read also releases what earlier reads handed out and never got back
    # (failed rollouts, over-rollout cuts): their results will not come.
    third = read(r)
    r.feedback(indices=third[:2], values=[1.0, 0.0])
    assert sel.pending == []


@pytest.mark.parametrize("kwargs", [PAPER, {}])
def test_when_too_few_tasks_are_free_the_batch_is_completed_from_pending_ones(
    tmp_path: Path, kwargs: dict[str, Any]
) -> None:
    path = write_pool(tmp_path, [0.2] * 10, [0.6] * 10)
    r = reader(path, kwargs=kwargs, batch_size=4)
    a, b, c = read(r), read(r), read(r)
    assert not set(a) & set(b)
    assert len(set(c)) == 4 and set(a) | set(b) | set(c) == set(range(10))  # the 2 free ones, then 2 pending


# ------------------------------------------------------------------------------- feedback
def snapshot(sel: BOTSSelector) -> str:
    return json.dumps(sel.state_dict(), sort_keys=True)


@pytest.mark.parametrize(
    "indices, values, error, names",
    [
        ([0, 40], [0.5, 0.5], InvalidArgumentError, "indices: 40"),
        ([-1], [0.5], InvalidArgumentError, "indices: -1"),
        ([0, 1], [0.5], InvalidTypeError, "values: has length 1, expected 2"),
        (
            [0, 1],
            [0.5, float("nan")],
            InvalidArgumentError,
            "values: must be finite mean rewards, got nan at position 1",
        ),
        ([0], [float("inf")], InvalidArgumentError, "values: must be finite"),
        ([0, 1], ["0.5", "x"], InvalidTypeError, "values: must be numeric"),
        ([0.5], [0.5], InvalidTypeError, "indices: must be integers"),
        (["a"], [0.5], InvalidTypeError, "indices"),
    ],
)
def test_bad_feedback_raises_a_typed_error_and_changes_nothing(
    pool: str, indices: Any, values: Any, error: type[BotsError], names: str
) -> None:
    r = reader(pool, kwargs=PAPER)
    sel = selector_of(r)
    r.feedback(indices=read(r), values=[1.0, 0.0, 0.5, 0.5])
    picked = read(r)
    before = snapshot(sel)
    with pytest.raises(error, match=names.replace("(", r"\(")) as info:
        r.feedback(indices=indices, values=values)
    assert isinstance(info.value, BotsError)
    assert snapshot(sel) == before
    assert sel.pending == sorted(picked)


def test_rewards_outside_the_range_are_clipped_and_reward_range_rescales(
    pool: str, caplog: pytest.LogCaptureFixture
) -> None:
    base = {"m": 4, "lamb": 0.0, "rho": 0.0, "target_reward": 0.5, "tau": 0}
    sel = selector_of(reader(pool, kwargs=base, feature_keys=()))
    sel.feedback([0, 1, 2], [-0.1, 1.2, 0.45])  # Trinity's math reward: accuracy - 0.1 for a bad format
    np.testing.assert_allclose(sel.bots.alpha[:3], [1.0, 5.0, 1.0 + 0.45 * 4])
    np.testing.assert_allclose(sel.bots.beta[:3], [5.0, 1.0, 1.0 + 0.55 * 4])
    assert sel.metrics()["bots/clipped_rewards"] == 2
    scaled = selector_of(reader(pool, kwargs={**base, "reward_range": [-1, 1]}, feature_keys=()))
    scaled.feedback([0, 1], [0.0, -1.0])  # mean 0 on a [-1, 1] scale is half the rollouts right
    np.testing.assert_allclose(scaled.bots.alpha[:2], [3.0, 1.0])
    assert scaled.metrics()["bots/clipped_rewards"] == 0


def test_metrics_after_feedback(pool: str) -> None:
    r = reader(pool, kwargs=PAPER)
    sel = selector_of(r)
    picks = read(r)
    r.feedback(indices=picks, values=[1.0, 0.5, 0.25, 0.0])
    m = sel.metrics()
    assert m["bots/etr"] == 0.5 and m["bots/below_one"] == 0.75 and m["bots/above_zero"] == 0.75
    assert m["bots/mean_reward_of_picks"] == 0.4375 and m["bots/groups"] == 4
    assert m["bots/inflight_tasks"] == 0 and m["bots/updates"] == 1
    for key in ("bots/capability", "bots/select_ms", "bots/update_ms", "bots/pick_mean_p10", "bots/pick_mean_p50"):
        assert key in m, key


# ------------------------------------------------------------------------------- configuration
@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"adaptive_rho": "yes"}, "kwargs.adaptive_rho: must be a bool"),
        ({"lamb": 0.1, "lam": 0.1}, "kwargs.lamb and kwargs.lam name the same parameter"),
        ({"m": 16, "n_rollouts": 16}, "kwargs.m and kwargs.n_rollouts"),
        ({"temperature": 1.0}, "kwargs.temperature: unknown option"),
        ({"seed": 3}, "kwargs.seed: unknown option .set data_selector.seed"),
        # Trinity's names mapped to ours and checked as BOTS checks them (the catalogue's ranges).
        ({"lamb": 1.5}, r"^kwargs\.lamb: must lie in \[0, 1\], got 1\.5$"),
        ({"m": 0}, r"^kwargs\.m: must lie in \(0, inf\), got 0$"),
        ({"tau": -1}, r"^kwargs\.tau: must lie in \[0, inf\), got -1$"),
        ({"momentum": 1.2}, r"^kwargs\.momentum: must lie in \[0, 1\], got 1\.2$"),
        ({"target_reward": "high"}, r"^kwargs\.target_reward: must be a real number, got 'high'$"),
        ({"do_sample": "yes"}, "kwargs.do_sample: must be a bool"),
        ({"reward_range": [1, 0]}, "kwargs.reward_range: low must be below high"),
        ({"threads": 0}, "kwargs.threads: must be >= 1"),
    ],
)
def test_unsupported_or_bad_kwargs_raise_config_errors(pool: str, kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        reader(pool, kwargs=kwargs)


def test_adaptive_rho_false_and_no_feature_keys_work(pool: str) -> None:
    sel = selector_of(reader(pool, kwargs={"adaptive_rho": False}, feature_keys=()))
    assert sel.bots.evidence is None


def test_adaptive_rho_and_a_target_of_zero_or_one_with_tau_zero_work(pool: str) -> None:
    # difficulty_based's defaults (target_reward 1.0) with the nearest-to-target rule.
    sel = selector_of(reader(pool, kwargs={"adaptive_rho": True, "tau": 0}))
    assert sel.bots.adaptive_rho and sel.bots.target == 1.0
    assert selector_of(reader(pool, kwargs={"tau": 0, "target": 0.0})).bots.target == 0.0


def test_bad_feature_columns_are_refused(tmp_path: Path, pool: str) -> None:
    with pytest.raises(ConfigError, match="feature_keys: needs exactly 2 columns"):
        reader(pool, feature_keys=("weak", "strong", "weak"))
    bad = write_pool(tmp_path, [0.1, 1.5], [0.2, 0.3])
    with pytest.raises(DataError, match=r"feature_keys\[0\] 'weak': must be in \[0, 1\] or NaN, got 1.5 at index 1"):
        reader(bad, batch_size=1)
    with pytest.raises(DataError, match="no column 'nope'"):
        reader(pool, feature_keys=("weak", "nope"))
    missing = write_pool(tmp_path / "missing", [0.1, None], [0.2, 0.3])
    sel = selector_of(reader(missing, batch_size=1))
    assert np.isnan(sel.bots.evidence.weak[1])


# ------------------------------------------------------------------------------- checkpoints
@pytest.mark.parametrize("kwargs", [PAPER, {}])
@pytest.mark.parametrize("side_file", [False, True])
def test_state_round_trips_through_trinitys_json_and_resumes_exactly(
    extremes_pool: str, tmp_path: Path, kwargs: dict[str, Any], side_file: bool
) -> None:
    """Explorer state saved by Trinity's StateManager mid-run (with picks still pending) and a
    new TasksetScheduler built from it select what the uninterrupted run selects."""
    if side_file:
        kwargs = {**kwargs, "state_dir": str(tmp_path / "bots")}
    cfg = config_for(extremes_pool, kwargs, ["pass_rate_calculator"], 4, tmp_path, feature_keys=("weak", "strong"))
    run = TasksetScheduler({}, cfg)
    pipe = pipeline_for(cfg)
    explore(run, pipe, steps=4, n=4, sync_interval=2)
    asyncio.run(run.read())  # one more read: its picks are pending when the state is saved
    manager = StateManager(path=str(tmp_path / "job"), explorer_name="explorer")
    manager.save_explorer(current_step=run.step, taskset_states=run.state_dict())
    saved = json.loads((tmp_path / "job" / "explorer_meta.json").read_text())["taskset_states"][0]
    assert saved["pending"] and ("bots_file" in saved) == side_file and ("bots_state" in saved) != side_file

    resumed = TasksetScheduler(manager.load_explorer(), cfg)
    a = run.tasksets[0].reader.selector
    b = resumed.tasksets[0].reader.selector
    assert b.pending == a.pending
    np.testing.assert_array_equal(b.bots.alpha, a.bots.alpha)
    for _ in range(3):
        assert [t.index["index"] for t in asyncio.run(resumed.read())] == [
            t.index["index"] for t in asyncio.run(run.read())
        ]
        values = {"indices": a.pending[:2], "values": [1.0, 0.25]}
        run.feedback({SELECTOR_METRIC: {0: dict(values)}})
        resumed.feedback({SELECTOR_METRIC: {0: dict(values)}})
    assert a.metrics()["bots/updates"] == b.metrics()["bots/updates"]


def test_side_files_are_pruned_and_found_after_a_move(pool: str, tmp_path: Path) -> None:
    state_dir = tmp_path / "run" / "bots"
    r = reader(pool, kwargs={**PAPER, "state_dir": str(state_dir)})
    sel = selector_of(r)
    states = []
    for _ in range(4):
        r.feedback(indices=read(r), values=[0.5] * 4)
        states.append(sel.state_dict())
    files = sorted(p.name for p in state_dir.iterdir())
    assert files == sorted(Path(s["bots_file"]).name for s in states[-2:])  # the previous file stays
    nxt = sel.get_indices(4)
    (tmp_path / "run").rename(tmp_path / "moved")
    twin = selector_of(reader(pool, kwargs={**PAPER, "state_dir": str(tmp_path / "moved" / "bots")}))
    twin.load_state_dict(json.loads(json.dumps(states[-1])))
    assert twin.get_indices(4) == nxt


def test_fresh_and_foreign_states(pool: str) -> None:
    sel = selector_of(reader(pool, kwargs=PAPER))
    sel.load_state_dict({"current_index": 0})  # what TasksetScheduler passes on a fresh run
    assert sel.state_dict()["current_index"] == 0
    sel.load_state_dict({"current_index": 12})  # difficulty_based's state: no posterior in it
    assert sel.state_dict()["current_index"] == 12 and sel.bots.num_updates == 0


def test_bad_checkpoints_are_refused_and_change_nothing(pool: str, tmp_path: Path) -> None:
    r = reader(pool, kwargs=PAPER)
    sel = selector_of(r)
    r.feedback(indices=read(r), values=[0.5, 0.0, 1.0, 0.25])
    good = sel.state_dict()
    before = snapshot(sel)
    raw = bytearray(base64.b64decode(good["bots_state"]))
    raw[-40] ^= 1
    cases: list[tuple[dict[str, Any], type[BotsError], str]] = [
        ({**good, "bots_state": base64.b64encode(bytes(raw)).decode()}, CheckpointError, "corrupt"),
        ({**good, "bots_state": "not base64!"}, CheckpointError, "not base64"),
        ({**good, "updates": 7}, CheckpointError, "after 1 updates"),
        ({**good, "pending": [[99, 1]]}, CheckpointError, "state.pending: bad entry"),
        ({**good, "version": 99}, CheckpointError, "version 99"),
        ({**good, "settings": {**good["settings"], "lam": 0.3}}, ConfigError, r"lam 0.3 -> 0.1"),
        ({k: v for k, v in good.items() if k != "bots_state"}, CheckpointError, "names neither"),
        (
            {**{k: v for k, v in good.items() if k != "bots_state"}, "bots_file": str(tmp_path / "gone.bots")},
            CheckpointError,
            "no checkpoint at",
        ),
    ]
    for state, error, message in cases:
        with pytest.raises(error, match=message):
            sel.load_state_dict(state)
        assert snapshot(sel) == before
    other = selector_of(reader(pool, kwargs=PAPER, feature_keys=()))
    with pytest.raises(CheckpointError, match="with feature_keys, the config has none"):
        other.load_state_dict(good)


# ------------------------------------------------------------------------------- evidence loss
def run_filtered(pool_path: str, tmp: Path, operators: list[str]) -> tuple[BOTSSelector, list[list[int]], list[int]]:
    """12 explore steps of 6 tasks, 16 rollouts each, feedback every 2 steps, through the real
    pipeline with DAPO's group filter (in the order ``operators``); returns the selector, its
    picks, and the tasks that got feedback. The scheduler is built with a config listing
    ``pass_rate_calculator`` first (BOTSSelector refuses the other order), the pipeline with
    ``operators``: what a pipeline configured elsewhere would do."""
    cfg = config_for(pool_path, {**PAPER, "m": 16}, operators, 6, tmp)
    checked = config_for(pool_path, {**PAPER, "m": 16}, sorted(operators, key="pass_rate_calculator".__ne__), 6, tmp)
    scheduler = TasksetScheduler({}, checked)
    pipe = pipeline_for(cfg)
    sel = scheduler.tasksets[0].reader.selector
    fed: set[int] = set()
    original = sel.feedback

    def recording(indices: Any, values: Any) -> None:
        fed.update(int(i) for i in indices)
        original(indices, values)

    sel.feedback = recording  # type: ignore[method-assign]
    picks = explore(scheduler, pipe, steps=12, n=16, sync_interval=2)
    return sel, picks, sorted(fed)


def repicks(picks: list[list[int]], tasks: set[int]) -> int:
    """How often tasks of ``tasks`` were picked again after their first pick."""
    flat = [i for batch in picks for i in batch if i in tasks]
    return len(flat) - len(set(flat))


def test_evidence_reaches_bots_when_pass_rate_calculator_runs_before_the_filter(
    extremes_pool: str, tmp_path: Path
) -> None:
    sel, picks, fed = run_filtered(extremes_pool, tmp_path, ["pass_rate_calculator", "dapo_dynamic_sampling"])
    mean = sel.bots.mean()
    rolled = {i for batch in picks[:-2] for i in batch}  # the last sync's feedback is still to come
    assert rolled <= set(fed)  # every rolled-out task reported, the filtered ones too
    seen_pass = sorted(rolled & set(EXTREME_PASS))
    seen_fail = sorted(rolled & set(EXTREME_FAIL))
    assert len(seen_pass) >= 4 and len(seen_fail) >= 4
    assert mean[seen_pass].min() > 0.8 and mean[seen_fail].max() < 0.2  # not the prior's 0.5
    assert np.abs(mean[list(MIDDLE)] - 0.5).max() < 0.05
    # Once known, extremes are not picked again: the batches go to the informative middle.
    assert repicks(picks, set(EXTREME_PASS) | set(EXTREME_FAIL)) == 0
    assert sum(i in MIDDLE for i in picks[-1]) == len(picks[-1])


def test_listed_after_the_filter_pass_rate_calculator_loses_the_extremes(extremes_pool: str, tmp_path: Path) -> None:
    """Why the docs say "list pass_rate_calculator first": after dapo_dynamic_sampling it reports
    only the surviving groups, so always-pass and always-fail tasks never get evidence, sit at
    the prior mean 0.5 (the target) and keep being picked."""
    sel, picks, fed = run_filtered(extremes_pool, tmp_path, ["dapo_dynamic_sampling", "pass_rate_calculator"])
    extremes = set(EXTREME_PASS) | set(EXTREME_FAIL)
    assert not set(fed) & extremes
    assert len({i for batch in picks for i in batch} & extremes) >= 8
    np.testing.assert_allclose(sel.bots.mean()[sorted(extremes)], 0.5)
    assert repicks(picks, extremes) >= 4


# ------------------------------------------------------------------------------- drop-in parity, refusals
def scheduler_for(path: str, tmp: Path, selector_type: str, kwargs: dict[str, Any]) -> TasksetScheduler:
    cfg = config_for(path, kwargs, ["pass_rate_calculator"], 4, tmp, feature_keys=("weak", "strong"))
    cfg.buffer.explorer_input.tasksets[0].data_selector.selector_type = selector_type
    cfg.buffer.explorer_input.tasksets[0].data_selector.seed = 11
    return TasksetScheduler({}, cfg)


@pytest.mark.parametrize("sync_interval", [1, 3])
def test_without_in_flight_exclusion_picks_equal_difficulty_based_through_trinitys_scheduler(
    extremes_pool: str, tmp_path: Path, sync_interval: int
) -> None:
    kwargs = {"m": 8, "lamb": 0.1, "rho": 0.2, "target_reward": 0.5, "tau": 0.3, "do_sample": True}
    ours = scheduler_for(extremes_pool, tmp_path / "a", DOTTED, {**kwargs, "exclude_in_flight": False})
    theirs = scheduler_for(extremes_pool, tmp_path / "b", "difficulty_based", kwargs)
    cfg = config_for(extremes_pool, kwargs, ["pass_rate_calculator"], 4, tmp_path / "p")
    a = explore(ours, pipeline_for(cfg), steps=9, n=8, sync_interval=sync_interval)
    b = explore(theirs, pipeline_for(cfg), steps=9, n=8, sync_interval=sync_interval)
    assert a == b
    assert isinstance(ours.tasksets[0].reader.selector, BOTSSelector)
    # With the exclusion (the default), reads within one sync interval never share a task.
    excl = scheduler_for(extremes_pool, tmp_path / "c", DOTTED, kwargs)
    c = explore(excl, pipeline_for(cfg), steps=9, n=8, sync_interval=3)
    for window in range(0, 9, 3):
        flat = [i for batch in c[window : window + 3] for i in batch]
        assert len(flat) == len(set(flat)) == 12
    if sync_interval == 3:
        assert c != b  # difficulty_based re-picks pending tasks: the option is what makes them equal


def test_exclude_in_flight_is_validated_and_may_change_on_resume(pool: str) -> None:
    with pytest.raises(ConfigError, match="kwargs.exclude_in_flight"):
        reader(pool, kwargs={"exclude_in_flight": "sometimes"})
    first = selector_of(reader(pool, kwargs=PAPER))
    first.feedback([0, 1], [1.0, 0.0])
    other = selector_of(reader(pool, kwargs={**PAPER, "exclude_in_flight": False}))
    other.load_state_dict(json.loads(json.dumps(first.state_dict())))
    np.testing.assert_array_equal(other.bots.alpha, first.bots.alpha)


def test_min_gap_zero_is_refused_and_equal_reference_means_do_not_crash(tmp_path: Path) -> None:
    flat = write_pool(tmp_path, [0.3] * 12, [0.3] * 12)  # every batch: equal weak and strong means
    with pytest.raises(ConfigError, match=r"^kwargs\.min_gap: must lie in \(0, 1\), got 0$"):
        reader(flat, kwargs={**PAPER, "min_gap": 0})
    r = reader(flat, kwargs=PAPER)
    for _ in range(4):
        picks = read(r)
        r.feedback(indices=picks, values=[1.0, 0.5, 0.25, 0.0])
    sel = selector_of(r)
    assert sel.bots.num_updates == 4 and np.all(np.isfinite(sel.bots.mean()))
    nan_pool = write_pool(tmp_path / "nan", [None] * 6 + [0.2] * 6, [None] * 6 + [0.6] * 6)
    r = reader(nan_pool, kwargs=PAPER)
    for _ in range(4):
        picks = read(r)
        r.feedback(indices=picks, values=[1.0, 0.5, 0.25, 0.0])
    assert np.all(np.isfinite(selector_of(r).bots.mean()))


def test_m_other_than_repeat_times_is_refused_naming_both_keys(pool: str, tmp_path: Path) -> None:
    cfg = config_for(pool, {**PAPER, "m": 16}, ["pass_rate_calculator"], 4, tmp_path)
    cfg.algorithm.repeat_times = 8
    with pytest.raises(
        ConfigError,
        match=r"buffer\.explorer_input\.tasksets\[0\]\.data_selector\.kwargs\.m: 16 rollouts per task, "
        r"but algorithm\.repeat_times is 8",
    ):
        TasksetScheduler({}, cfg)
    cfg = config_for(pool, {"n_rollouts": 4}, ["pass_rate_calculator"], 4, tmp_path)
    cfg.algorithm.repeat_times = 8
    with pytest.raises(ConfigError, match=r"kwargs\.n_rollouts: 4 rollouts per task"):
        TasksetScheduler({}, cfg)
    cfg = config_for(pool, {}, ["pass_rate_calculator"], 4, tmp_path)  # m left out: difficulty_based's 16
    cfg.algorithm.repeat_times = 8
    with pytest.raises(ConfigError, match=r"kwargs\.m: 16 rollouts per task"):
        TasksetScheduler({}, cfg)


def test_operator_order_that_hides_groups_is_refused_naming_the_keys(pool: str, tmp_path: Path) -> None:
    from bots_rft.integrations.trinity import check_config

    key = r"data_processor\.experience_pipeline\.operators"
    cfg = config_for(pool, PAPER, ["dapo_dynamic_sampling", "pass_rate_calculator"], 4, tmp_path)
    with pytest.raises(
        ConfigError, match=rf"{key}\[0\] \(dapo_dynamic_sampling\) comes before {key}\[1\] \(pass_rate_calculator\)"
    ):
        TasksetScheduler({}, cfg)
    cfg = config_for(pool, PAPER, ["dapo_dynamic_sampling"], 4, tmp_path)
    with pytest.raises(ConfigError, match=rf"{key}: has no pass_rate_calculator"):
        TasksetScheduler({}, cfg)
    cfg = config_for(pool, PAPER, ["pass_rate_calculator", "dapo_dynamic_sampling"], 4, tmp_path)
    assert check_config(cfg) == []
    cfg.data_processor.experience_pipeline.operators.insert(0, OperatorConfig(name="my_custom_op"))
    (line,) = check_config(cfg)
    assert "operators[0] (my_custom_op) runs before pass_rate_calculator" in line and "\n" not in line


# ------------------------------------------------------------------------------- task embeddings
def task_id_of_row(row: int) -> int:
    """The embeddings pool's task ids (``extra_info.index``), not in row order."""
    return (5 * row) % 32


@pytest.fixture(scope="module")
def embedded_pool(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """The extremes' 32 tasks in the GURU layout ``bots embed`` reads (``extra_info.index`` ids
    out of row order), no reference columns, and embedding files keyed by those ids: row r's
    embedding is its task's kind (always passes, always fails, mixed) one-hot plus noise."""
    from bots_rft.data.embeddings import write_embeddings

    folder = tmp_path_factory.mktemp("embedded")
    rows = range(32)
    with open(folder / "train.jsonl", "w") as f:
        for r in rows:
            f.write(
                json.dumps({"question": f"q{r}", "answer": str(r), "extra_info": {"index": task_id_of_row(r)}}) + "\n"
            )
    kind = np.array([0 if r in EXTREME_PASS else 1 if r in EXTREME_FAIL else 2 for r in rows])

    def embeddings(path: Path, keep: list[int], seed: int) -> str:
        noise = np.random.default_rng(seed).standard_normal((32, 1))
        matrix = np.concatenate([np.eye(3)[kind], noise], axis=1)[keep]
        write_embeddings(path, [task_id_of_row(r) for r in keep], matrix)
        return str(path)

    everything = list(rows)[::-1]  # file rows in another order again
    return {
        "pool": str(folder),
        "good": embeddings(folder / "emb.safetensors", everything, 0),
        "other": embeddings(folder / "other.safetensors", everything, 1),
        "missing": embeddings(folder / "missing.safetensors", [r for r in everything if r != 3], 0),
    }


def feed(r: FileReader, reads: int, n: int = 4) -> list[list[int]]:
    """``reads`` reads, each fed back at once with its tasks' mean rewards."""
    picks = []
    for _ in range(reads):
        ids = read(r)
        picks.append(ids)
        r.feedback(indices=ids, values=[float(np.mean(rollout_rewards(t, n))) for t in ids])
    return picks


def test_embeddings_build_the_configured_estimator(embedded_pool: dict[str, str]) -> None:
    from bots_rft.data.embeddings import embeddings_for
    from bots_rft.estimators import EmbeddingRegression, Similarity
    from bots_rft.parameters import PRIOR_PRECISION

    pool, emb = embedded_pool["pool"], embedded_pool["good"]
    sel = selector_of(reader(pool, kwargs={**PAPER, "embeddings": emb}, feature_keys=()))
    est = sel.bots.evidence
    assert isinstance(est, EmbeddingRegression)
    # forgetting is the selector's λ (lamb), the prior precision the documented default
    assert est.forgetting == PAPER["lamb"] == sel.bots.lam and est.prior_precision == PRIOR_PRECISION.default
    # row r (Trinity's index) holds the embedding of the task id on row r, not of id r
    np.testing.assert_array_equal(est.embeddings, embeddings_for(emb, [task_id_of_row(r) for r in range(32)]))
    own = selector_of(reader(pool, kwargs={"embeddings": emb, "prior_precision": 2}, feature_keys=()))
    assert own.bots.evidence.forgetting == AUTHOR_DEFAULTS["lamb"] and own.bots.evidence.prior_precision == 2.0
    sim = selector_of(reader(pool, kwargs={**PAPER, "embeddings": emb, "estimator": "similarity"}, feature_keys=()))
    assert isinstance(sim.bots.evidence, Similarity) and len(sim.bots.evidence) == 32


def test_embeddings_regression_learns_and_changes_the_picks(embedded_pool: dict[str, str]) -> None:
    pool, emb = embedded_pool["pool"], embedded_pool["good"]
    plain = reader(pool, kwargs=PAPER, feature_keys=())
    embedded = reader(pool, kwargs={**PAPER, "embeddings": emb}, feature_keys=())
    first = feed(embedded, 1)
    assert first == feed(plain, 1)  # drawn from the prior, as without embeddings
    sel = selector_of(embedded)
    never = [r for r in range(32) if r not in first[0]]
    mean = sel.bots.mean()
    # Tasks not rolled out, of a kind rolled out, moved toward that kind's rate (without
    # embeddings they sit at 0.5).
    seen = [kind for kind in (EXTREME_PASS, EXTREME_FAIL) if set(kind) & set(first[0])]
    assert seen and all(set(kind) & set(never) for kind in seen)
    for kind in seen:
        moved = mean[[r for r in never if r in kind]] - 0.5
        assert np.all(moved > 0.02 if kind is EXTREME_PASS else moved < -0.02), moved
    later = feed(embedded, 5)
    assert later != feed(plain, 5)
    predicted = sel.bots.evidence.predict_all()
    assert sel.bots.evidence.updates == 6 and predicted is not None
    assert predicted[list(EXTREME_PASS)].min() > 0.8 and predicted[list(EXTREME_FAIL)].max() < 0.2
    assert np.all(np.abs(predicted[list(MIDDLE)] - 0.5) < 0.2)


def test_embeddings_state_round_trips_and_other_embeddings_are_refused(embedded_pool: dict[str, str]) -> None:
    pool = embedded_pool["pool"]
    kwargs = {**PAPER, "embeddings": embedded_pool["good"]}
    r = reader(pool, kwargs=kwargs, feature_keys=())
    feed(r, 3)
    state = json.loads(json.dumps(selector_of(r).state_dict()))  # as Trinity stores it
    twin = reader(pool, kwargs=kwargs, feature_keys=())
    selector_of(twin).load_state_dict(state)
    a, b = selector_of(r), selector_of(twin)
    np.testing.assert_array_equal(b.bots.evidence.weights, a.bots.evidence.weights)
    assert feed(twin, 3) == feed(r, 3)
    np.testing.assert_array_equal(b.bots.alpha, a.bots.alpha)

    cases: list[tuple[dict[str, Any], str]] = [
        ({**PAPER, "embeddings": embedded_pool["other"]}, r"kwargs\.embeddings: the task embeddings differ"),
        ({**kwargs, "prior_precision": 1.0}, r"kwargs\.prior_precision: 1 here, 0\.25 in the checkpoint"),
        ({**kwargs, "estimator": "similarity"}, r"kwargs\.embeddings / kwargs\.estimator: .* is embedding-regression"),
        (PAPER, r"kwargs\.embeddings / kwargs\.estimator: the checkpoint's implicit evidence is embedding-regression"),
    ]
    for other_kwargs, message in cases:
        other = selector_of(reader(pool, kwargs=other_kwargs, feature_keys=()))
        with pytest.raises(CheckpointError, match=message) as info:
            other.load_state_dict(state)
        assert "\n" not in str(info.value) and other.bots.num_updates == 0


def test_embeddings_refusals_name_the_key(embedded_pool: dict[str, str], pool: str) -> None:
    emb = embedded_pool["good"]
    cases: list[tuple[str, dict[str, Any], tuple[str, ...], type[BotsError], str]] = [
        (pool, {"embeddings": emb}, ("weak", "strong"), ConfigError, r"^feature_keys and kwargs\.embeddings: "),
        (pool, {"estimator": "similarity"}, (), ConfigError, r"^kwargs\.estimator: set without kwargs\.embeddings"),
        (pool, {"task_id_column": "uid"}, (), ConfigError, r"^kwargs\.task_id_column: set without kwargs\.embed"),
        (pool, {"embeddings": emb, "estimator": "knn"}, (), ConfigError, r"^kwargs\.estimator: must be regression"),
        (pool, {"embeddings": emb, "prior_precision": 0}, (), ConfigError, r"^kwargs\.prior_precision: must lie in"),
        (
            pool,
            {"embeddings": emb, "estimator": "similarity", "prior_precision": 1},
            (),
            ConfigError,
            r"^kwargs\.prior_precision: only estimator: regression",
        ),
        (pool, {"embeddings": emb}, (), DataError, r"^kwargs\.task_id_column 'extra_info\.index': .*no column"),
        (
            embedded_pool["pool"],
            {"embeddings": embedded_pool["missing"]},
            (),
            DataError,
            r"^kwargs\.embeddings: .*missing\.safetensors' has no embedding for task id 15 \(1 of 32",
        ),
        (
            embedded_pool["pool"],
            {"embeddings": str(Path(emb).with_name("nope.safetensors"))},
            (),
            DataError,
            r"^kwargs\.embeddings: .* does not exist",
        ),
    ]
    for path, kwargs, keys, error, message in cases:
        with pytest.raises(error, match=message) as info:
            reader(path, kwargs=kwargs, feature_keys=keys)
        assert "\n" not in str(info.value)


def test_the_documented_embeddings_yaml_builds_the_regression(
    embedded_pool: dict[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """docs/integrations.md's Trinity ``data_selector`` for an embeddings file, as written (the
    file where the explorer runs, as the docs' relative path has it)."""
    import re
    import shutil

    import yaml

    from bots_rft.estimators import EmbeddingRegression

    text = (REPO / "docs" / "integrations.md").read_text(encoding="utf-8")
    section = text[text.index("## Task embeddings instead of reference models") :]
    block = re.search(r"```yaml\n(.*?)```", section, flags=re.S)
    assert block is not None
    selector = yaml.safe_load(block.group(1))["data_selector"]
    assert selector["selector_type"] == DOTTED and selector["kwargs"]["embeddings"] == "emb.safetensors"
    shutil.copy(embedded_pool["good"], tmp_path / "emb.safetensors")
    monkeypatch.chdir(tmp_path)
    r = reader(
        embedded_pool["pool"],
        selector_type=selector["selector_type"],
        kwargs=selector["kwargs"],
        feature_keys=tuple(selector["feature_keys"]),
    )
    sel = selector_of(r)
    assert isinstance(sel, BOTSSelector) and isinstance(sel.bots.evidence, EmbeddingRegression)
    assert sel.bots.n_rollouts == 16 and sel.bots.evidence.forgetting == sel.bots.lam == 0.1
    feed(r, 2)
    assert sel.bots.evidence.updates == 2
