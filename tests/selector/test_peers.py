"""The peers from the literature (bots_rft.selector.peers) and the simulator's per-task rollout counts."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from bots_rft.checkpoint import load_state, save_state
from bots_rft.errors import CheckpointError, ConfigError, InvalidArgumentError, InvalidTypeError
from bots_rft.selector.protocol import RolledBatch, RollsOut, Selector
from bots_rft.selector.registry import method
from bots_rft.simulate import LearnerConfig, SimConfig, SimulatedLearner, make_world
from bots_rft.simulate.experiment import MethodSpec, make_selector, run_method

TINY = LearnerConfig(num_tasks=600, num_groups=3, eval_tasks=200)


# ---------------------------------------------------------------------------------------------
# Per-task rollout counts in the simulated learner
# ---------------------------------------------------------------------------------------------


def test_rollout_without_counts_is_the_draw_it_always_was() -> None:
    world = make_world(TINY, 0)
    ids = np.arange(0, 600, 11)
    plain, counted = SimulatedLearner(world, 0, stream=3), SimulatedLearner(world, 0, stream=3)
    assert np.array_equal(plain.rollout(ids), counted.rollout(ids, np.full(ids.size, TINY.n_rollouts)))


def test_rollout_counts_bound_each_tasks_successes() -> None:
    learner = SimulatedLearner(make_world(TINY, 0), 0)
    ids = np.arange(50)
    counts = np.arange(50) % 7
    succ = learner.rollout(ids, counts)
    assert succ.shape == (50,) and np.all(succ >= 0) and np.all(succ <= counts)
    assert np.all(succ[counts == 0] == 0)
    with pytest.raises(InvalidTypeError, match="counts"):
        learner.rollout(ids, np.full(50, 2.5))
    with pytest.raises(InvalidTypeError, match="counts"):
        learner.rollout(ids, np.ones(49, dtype=np.int64))
    with pytest.raises(InvalidArgumentError, match="counts"):
        learner.rollout(ids, -np.ones(50, dtype=np.int64))


def test_train_takes_each_tasks_signal_from_its_own_trials() -> None:
    world = make_world(TINY, 0)
    ids = np.arange(10)
    a, b = SimulatedLearner(world, 0), SimulatedLearner(world, 0)
    # 2 of 4 and 8 of 16 are the same rate: the same step.
    assert a.train(ids, np.full(10, 2), np.full(10, 4)) == pytest.approx(1.0)
    assert b.train(ids, np.full(10, 8)) == pytest.approx(1.0)
    assert np.array_equal(a.ability, b.ability) and np.array_equal(a.memory, b.memory)
    with pytest.raises(InvalidArgumentError, match="trials"):
        a.train(ids, np.zeros(10), np.zeros(10))


def test_rolled_batch_checks_its_shapes_and_charge() -> None:
    ids = np.arange(3, dtype=np.int64)
    RolledBatch(ids, np.ones(3), np.full(3, 4.0), rollouts=20)
    with pytest.raises(InvalidArgumentError, match="rollouts"):
        RolledBatch(ids, np.ones(3), np.full(3, 4.0), rollouts=-1)
    with pytest.raises(InvalidArgumentError, match="shapes differ"):
        RolledBatch(ids, np.ones(2), np.full(3, 4.0), rollouts=12)


# ---------------------------------------------------------------------------------------------
# Every peer in the simulator: runs, charges every rollout, is deterministic, resumes exactly
# ---------------------------------------------------------------------------------------------

PEERS = ("dps", "greso", "speed", "adarft", "knapsack", "reinforce-ada", "bots-screen")
ROLLING = ("greso", "speed", "knapsack", "reinforce-ada", "bots-screen")


def _config(**kw: object) -> SimConfig:
    return SimConfig(learner=TINY, steps=6, batch_size=16, seeds=(0,), rho_sweep=(), lam_sweep=(), **kw)  # type: ignore[arg-type]


@pytest.mark.parametrize("name", PEERS)
def test_each_peer_runs_and_is_charged_every_rollout_it_generates(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    generated: list[int] = []
    original = SimulatedLearner.rollout

    def counting(self: SimulatedLearner, task_ids: np.ndarray, counts: Any = None) -> np.ndarray:
        ids = np.asarray(task_ids)
        generated.append(ids.size * TINY.n_rollouts if counts is None else int(np.sum(counts)))
        return original(self, task_ids, counts)

    monkeypatch.setattr(SimulatedLearner, "rollout", counting)
    world = make_world(TINY, 0)
    rec = run_method(MethodSpec(name), world, 0, _config())
    assert rec.rollouts.sum() == sum(generated) > 0
    assert np.all(np.isfinite(rec.perf)) and np.all(np.isfinite(rec.etr))
    assert rec.hist.sum() == 6 * 16  # every step trains on a full batch
    if name in ROLLING:
        assert method(name).rolls_out
    else:
        assert np.all(rec.rollouts == 16 * TINY.n_rollouts)


@pytest.mark.parametrize("name", PEERS)
def test_each_peer_is_deterministic_per_seed(name: str) -> None:
    world = make_world(TINY, 1)
    a, b = run_method(MethodSpec(name), world, 1, _config()), run_method(MethodSpec(name), world, 1, _config())
    assert np.array_equal(a.perf, b.perf) and np.array_equal(a.rollouts, b.rollouts) and np.array_equal(a.hist, b.hist)


def _steps(sel: Selector, learner: SimulatedLearner, steps: int) -> list[tuple[list[int], list[float], list[float]]]:
    """Run ``steps`` steps as the simulator does; each step's trained ids, successes and trials."""
    out = []
    for _ in range(steps):
        ids = sel.select(16)
        if isinstance(sel, RollsOut):
            batch = sel.take_batch()
            assert batch is not None
            ids, succ, trials = batch.task_ids, batch.successes, batch.trials
        else:
            succ, trials = learner.rollout(ids).astype(float), np.full(ids.size, float(TINY.n_rollouts))
        sel.update(ids, succ, trials)
        learner.train(ids, succ, trials)
        out.append((ids.tolist(), succ.tolist(), trials.tolist()))
    return out


@pytest.mark.parametrize("name", PEERS)
def test_each_peer_resumes_exactly_from_a_checkpoint(name: str, tmp_path: Path) -> None:
    world = make_world(TINY, 0)
    config = _config()
    learner = SimulatedLearner(world, 0, stream=9)
    sel = make_selector(MethodSpec(name), world, 0, learner, config)
    _steps(sel, learner, 4)
    save_state(tmp_path / "peer.bots", sel.state_dict())
    twin_learner = copy.deepcopy(learner)
    twin = make_selector(MethodSpec(name), world, 0, twin_learner, config)
    _steps(twin, twin_learner, 1)  # somewhere else in its stream
    twin_learner.__dict__.update(copy.deepcopy(learner.__dict__))
    twin.load_state_dict(load_state(tmp_path / "peer.bots"))
    assert _steps(twin, twin_learner, 4) == _steps(sel, learner, 4)


@pytest.mark.parametrize(
    "name,params,argument",
    [
        ("dps", {"candidate_ratio": 0.5}, "candidate_ratio"),
        ("dps", {"transition_decay": 1.5}, "transition_decay"),
        ("greso", {"p_easy": -0.1}, "p_easy"),
        ("greso", {"sampling_ratio": 0.0}, "sampling_ratio"),
        ("speed", {"n_init": 1}, "n_init"),
        ("speed", {"n_init": 4, "n_continue": 6}, "n_continue"),
        ("adarft", {"target_reward": 1.5}, "target_reward"),
        ("adarft", {"initial_difficulty": 101.0}, "initial_difficulty"),
        ("knapsack", {"n_low": 20}, "n_low"),
        ("knapsack", {"n_high": 0}, "n_high"),
        ("reinforce-ada", {"keep": 1}, "keep"),
        ("reinforce-ada", {"rounds": 0}, "rounds"),
    ],
)
def test_bad_parameters_raise_typed_errors_naming_them(name: str, params: dict[str, Any], argument: str) -> None:
    weak = np.linspace(0.0, 0.5, 40)
    with pytest.raises(InvalidArgumentError, match=argument):
        method(name).build(40, weak=weak, strong=weak + 0.3, rollout=lambda ids, counts: np.zeros(len(ids)), **params)
    wrong_type: dict[str, Any] = {argument: "3"}
    with pytest.raises(InvalidTypeError, match=argument):
        method(name).build(
            40, weak=weak, strong=weak + 0.3, rollout=lambda ids, counts: np.zeros(len(ids)), **wrong_type
        )


@pytest.mark.parametrize("name", ROLLING)
def test_rolling_peers_need_a_rollout_callback_and_refuse_a_bad_one(name: str) -> None:
    with pytest.raises(InvalidArgumentError, match="rollout"):
        method(name).build(40)
    sel = method(name).build(40, rollout=lambda ids, counts: np.zeros(len(ids) + 1))
    before = sel.state_dict()
    with pytest.raises(InvalidArgumentError, match="rollout: returned shape"):
        sel.select(8)
    after = sel.state_dict()
    assert after["rng"] == before["rng"] and after["total_rollouts"] == before["total_rollouts"] == 0
    sel = method(name).build(40, rollout=lambda ids, counts: np.asarray(counts) + 1.0)
    with pytest.raises(InvalidArgumentError, match="outside"):
        sel.select(8)


def test_peers_live_in_peers_and_the_method_table_points_there() -> None:
    """One home per peer (bots_rft.selector.peers): every peer class is defined there, and the modules the
    peers build on (the protocol, the static selectors) define none; every method's
    implementation path names a real class."""
    import importlib

    import bots_rft.selector.peers as peers
    import bots_rft.selector.protocol as protocol
    import bots_rft.selector.static as static_selectors
    from bots_rft.selector.registry import METHODS

    for name in set(peers.__all__) - {"SelfRolling"}:
        assert getattr(peers, name).__module__.startswith("bots_rft.selector.peers."), name
        assert not hasattr(protocol, name) and not hasattr(static_selectors, name), name
    for m in METHODS.values():
        module, _, qualname = m.implementation.partition(":")
        target: Any = importlib.import_module(module)
        for part in qualname.split("."):  # a class, or a preset on one ("BOTS.mopps")
            target = getattr(target, part)
        assert callable(target), m.implementation
    for name in ("dynamic", "dps", "greso", "speed", "adarft", "knapsack", "reinforce-ada"):
        assert method(name).implementation.startswith("bots_rft.selector.peers."), name


# ---------------------------------------------------------------------------------------------
# Each peer's rule, against its paper / reference code
# ---------------------------------------------------------------------------------------------


class _ReferenceDPS:
    """The published DPS sampler's arithmetic (recipe/dps/task_sampler.py), per prompt, in loops."""

    def __init__(self, prior: float, decay: float) -> None:
        self.prior, self.decay = np.ones((3, 3)) * prior, decay
        self.alphas: dict[int, np.ndarray] = {}
        self.pis: dict[int, np.ndarray] = {}
        self.before: dict[int, np.ndarray] = {}

    def meet(self, i: int) -> None:
        self.alphas.setdefault(i, self.prior)
        self.pis.setdefault(i, np.ones(3) / 3)
        self.before.setdefault(i, np.ones(3) / 3)

    def _update(self, alpha: np.ndarray, pi: np.ndarray, pi_next: np.ndarray, lr: float) -> np.ndarray:
        expected = alpha / alpha.sum(axis=0, keepdims=True)
        numerator = np.outer(pi_next, pi) * expected
        return alpha * self.decay + self.prior * (1 - self.decay) + numerator / numerator.sum() * lr

    def _predict(self, alpha: np.ndarray, pi: np.ndarray) -> np.ndarray:
        nxt = (alpha / alpha.sum(axis=0, keepdims=True)) @ pi
        return nxt / nxt.sum()

    def train(self, ids: list[int], rates: list[float]) -> None:
        for i, s in zip(ids, rates):
            self.meet(i)
            new = np.zeros(3)
            new[0 if s == 0.0 else 2 if s == 1.0 else 1] = 1.0
            alpha = self._update(self.alphas[i], self.before[i], new, 1.0)
            self.alphas[i], self.before[i], self.pis[i] = alpha, new, self._predict(alpha, new)
        for i in list(self.alphas):
            if i not in ids:
                pi = self.pis[i]
                alpha = self._update(self.alphas[i], self.before[i], pi, 0.0)
                self.alphas[i], self.before[i], self.pis[i] = alpha, pi, self._predict(alpha, pi)


def test_dps_filter_is_the_published_samplers_arithmetic() -> None:
    from bots_rft.selector.peers import DynamicsPredictiveSampling

    rng = np.random.default_rng(5)
    ours = DynamicsPredictiveSampling(30, prior_alpha=1.0, transition_decay=0.7)
    ref = _ReferenceDPS(1.0, 0.7)
    for _ in range(12):
        met = rng.choice(30, size=10, replace=False)
        ours.met[met] = True
        for i in met:
            ref.meet(int(i))
        ids = rng.choice(met, size=4, replace=False)
        succ = rng.choice([0.0, 3.0, 8.0], size=4)
        ours.update(ids, succ, 8)
        ref.train(ids.tolist(), (succ / 8).tolist())
    for i, pi in ref.pis.items():
        assert np.allclose(ours.pi[i], pi) and np.allclose(ours.alpha[i], ref.alphas[i])
        assert np.allclose(ours.pi_before[i], ref.before[i])
    untouched = np.setdiff1d(np.arange(30), list(ref.pis))
    assert np.allclose(ours.pi[untouched], 1 / 3)


def test_dps_selects_the_candidates_most_likely_partially_solved() -> None:
    from bots_rft.selector.peers import DynamicsPredictiveSampling

    sel = DynamicsPredictiveSampling(50, candidate_ratio=50.0)  # every task is a candidate
    first = sel.select(10)
    sel.update(first, np.where(np.arange(10) < 5, 4.0, 0.0), 8)  # half partial, half unsolved
    partial, unsolved = first[:5], first[5:]
    assert sel.partial_probability(partial).min() > 1 / 3 > sel.partial_probability(unsolved).max()
    assert set(partial.tolist()) <= set(sel.select(10).tolist())


def test_greso_skips_by_the_streak_of_zero_variance_groups_and_tunes_itself() -> None:
    from bots_rft.selector.peers import GRESO

    sel = GRESO(20, lambda ids, counts: np.zeros(len(ids)), n_rollouts=8, p_easy=0.5, p_hard=0.25)
    ids = np.arange(4)
    for _ in range(3):
        sel._learn(ids, np.array([8.0, 0.0, 3.0, 8.0]), np.full(4, 8.0))
    skip = sel.skip_probability(ids)
    assert skip == pytest.approx([1 - 0.5**3, 1 - 0.25**3, 0.0, 1 - 0.5**3])
    sel._learn(ids[:1], np.array([4.0]), np.array([8.0]))  # a group with variance resets the streak
    assert sel.skip_probability(ids[:1])[0] == 0.0
    for _ in range(200):  # a long all-wrong history: the floor keeps 1% exploration
        sel._learn(ids[1:2], np.zeros(1), np.full(1, 8.0))
    assert sel.skip_probability(ids[1:2])[0] == pytest.approx(0.99)
    # Past the first epoch: too many all-wrong groups so far -> explore hard prompts less; few
    # all-correct ones (6 of 215 < 0.25 / 3) -> explore easy prompts more.
    assert (sel.p_hard, sel.p_easy) == (0.25, 0.5)  # the first epoch adapts nothing
    sel.walked = 40
    sel._learn(ids[1:2], np.zeros(1), np.full(1, 8.0))
    assert sel.p_hard == pytest.approx(0.24) and sel.p_easy == pytest.approx(0.51)


def test_speed_screens_then_continues_and_charges_both() -> None:
    from bots_rft.selector.peers import SpeedRL

    calls: list[tuple[list[int], list[int]]] = []

    def rollout(ids: np.ndarray, counts: np.ndarray) -> np.ndarray:
        calls.append((ids.tolist(), counts.tolist()))
        # Even tasks pass screening (half correct); odd tasks never solve anything.
        return np.where(ids % 2 == 0, counts // 2, 0).astype(float)

    sel = SpeedRL(100, rollout, n_init=4, n_continue=12, gen_ratio=1.0)
    ids = sel.select(4)
    batch = sel.take_batch()
    assert batch is not None and np.array_equal(batch.task_ids, ids)
    assert np.all(ids % 2 == 0) and np.all(batch.trials == 16) and np.all(batch.successes == 8)
    screened = sum(c.count(4) for _, c in calls)
    continued = sum(c.count(12) for _, c in calls)
    assert batch.rollouts == 4 * screened + 12 * continued == sel.total_rollouts
    # One generation call a round: the continuation of earlier qualifiers and the screening of a
    # fresh batch go together, continuations first (the reference's data controller).
    assert all(c == sorted(c, reverse=True) for _, c in calls)
    assert calls[0][1] == [4] * 4 and any(12 in c and 4 in c for _, c in calls[1:])
    # Qualified and ready prompts beyond the batch wait for the next step, not rolled out again.
    waiting = set(sel.qualified[0].tolist()) | set(sel.ready[0].tolist())
    sel.update(ids, batch.successes, batch.trials)
    calls.clear()
    nxt = sel.select(4)
    assert set(nxt.tolist()) <= waiting | {i for c in calls for i in c[0]}


def test_reinforce_ada_stops_a_prompt_once_it_has_both_outcomes() -> None:
    from bots_rft.selector.peers import ReinforceAda

    def rollout(ids: np.ndarray, counts: np.ndarray) -> np.ndarray:
        # Task 0: half right; task 1: never; task 2: one success per 8 rollouts.
        return np.select([ids == 0, ids == 1], [counts // 2, 0], default=counts // 8).astype(float)

    sel = ReinforceAda(3, rollout, rounds=4, round_repeat=8, keep=4)
    sel.select(3)
    batch = sel.take_batch()
    assert batch is not None
    # Every round is charged: task 0 stops after one round, task 2 after two (2 correct at 1 per
    # 8), task 1 runs all four.
    assert batch.rollouts == 8 + 32 + 16
    # The step trains on the balanced subset of keep=4 the reference keeps: 2 right and 2 wrong
    # where both exist, all wrong for the never-solved task.
    trials = dict(zip(batch.task_ids.tolist(), batch.trials.tolist()))
    succ = dict(zip(batch.task_ids.tolist(), batch.successes.tolist()))
    assert trials == {0: 4.0, 1: 4.0, 2: 4.0}
    assert succ == {0: 2.0, 1: 0.0, 2: 2.0}


def test_reinforce_ada_keeps_as_balanced_a_subset_as_the_rollouts_allow() -> None:
    from bots_rft.selector.peers.reinforce_ada import kept_subset

    succ = np.array([0, 1, 2, 5, 32, 31, 30, 3, 1], dtype=float)
    seen = np.array([32, 32, 32, 8, 32, 32, 32, 8, 2], dtype=float)
    kept, size = kept_subset(succ, seen, 4)
    assert kept.tolist() == [0, 1, 2, 2, 4, 3, 2, 2, 1]
    assert size.tolist() == [4, 4, 4, 4, 4, 4, 4, 4, 2]  # never more than were generated


def test_knapsack_allocation_is_the_exact_optimum_within_its_bounds() -> None:
    from itertools import product

    from bots_rft.selector.peers.knapsack import allocate, task_value

    p = np.array([0.05, 0.5, 0.9, 0.3])
    counts = allocate(p, budget=20, n_low=2, n_high=9)
    assert counts.sum() == 20 and counts.min() >= 2 and counts.max() <= 9
    best = max(
        (c for c in product(range(2, 10), repeat=4) if sum(c) == 20),
        key=lambda c: float(task_value(np.array(c), p).sum()),
    )
    assert task_value(counts, p).sum() == pytest.approx(task_value(np.array(best), p).sum())
    # No value left anywhere: the budget goes to the never-solved prompts first.
    spare = allocate(np.array([0.0, 1.0, 0.0]), budget=12, n_low=2, n_high=8)
    assert spare.tolist() == [5, 2, 5]


def test_adarft_moves_its_target_with_the_reward_and_takes_the_nearest_tasks() -> None:
    from bots_rft.selector.peers import AdaRFT

    strong = np.linspace(1.0, 0.0, 11)  # difficulty 0, 10, ..., 100
    sel = AdaRFT(strong * 0.5, strong, step_size=50.0, sensitivity=2.0, target_reward=0.5, initial_difficulty=0.0)
    assert sorted(sel.select(2).tolist()) == [0, 1]
    sel.update([0, 1], [8, 8], 8)  # all solved: the target rises by 50 tanh(2 * 0.5)
    assert sel.target == pytest.approx(50 * np.tanh(1.0))
    assert sorted(sel.select(1).tolist()) == [4]
    sel.update([4], [0], 8)
    assert sel.target == pytest.approx(max(0.0, 50 * np.tanh(1.0) - 50 * np.tanh(1.0)))


# ---------------------------------------------------------------------------------------------
# bots simulate with the peers: tables per step and per rollout, with intervals over seeds
# ---------------------------------------------------------------------------------------------


@pytest.mark.slow
def test_cli_simulate_with_the_peers_writes_interval_tables_per_step_and_per_rollout(tmp_path: Path) -> None:
    import csv

    from bots_rft.cli import main as cli_main

    out = tmp_path / "run"
    names = "random,dapo,bots," + ",".join(PEERS)
    args = ["simulate", "--tasks", "400", "--steps", "5", "--batch", "16", "--seeds", "3", "--groups", "3"]
    args += ["--eval-tasks", "100", "--methods", names, "--rho-sweep", "none", "--lam-sweep", "none"]
    assert cli_main([*args, "--no-sampling-ablation", "--out", str(out), "--no-progress"]) == 0
    summary = (out / "summary.md").read_text(encoding="utf-8")
    assert "## Methods with 95% intervals over seeds" in summary
    assert "| Method | TTB 50% ↓ | TTB 75% ↓ | TTB 100% ↓ | BSF 25% ↑ | BSF 50% ↑ | BSF 100% ↑ | ETR ↑ |" in summary
    assert "| Rollouts/step |" in summary
    for label in ("DPS", "GRESO", "SPEED-RL", "AdaRFT", "Knapsack-RL", "Reinforce-Ada"):
        assert summary.count(f"| {label} |") == 3  # the paper's table, per step, per rollout
    # BOTS-Screen carries BOTS's estimator, so the evidence-quality table has a row for it too.
    assert summary.count("| BOTS-Screen |") == 4
    with (out / "headline_seeds.csv").open(encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    assert len(rows) == (3 + len(PEERS)) * 3 and {"ttb_rollouts_50", "bsf_100", "rollouts_per_step"} <= set(rows[0])
    random_rows = [r for r in rows if r["method"] == "Random"]
    assert all(float(r["ttb_50"]) == 1.0 or r["ttb_50"] == "nan" for r in random_rows)
    assert (out / "score_methods.png").stat().st_size > 0


def test_interval_cells_say_how_many_seeds_reached_the_target() -> None:
    from bots_rft.report.simulation import SeedInterval

    row = SeedInterval("X", "x", {"ttb_50": [0.5, 0.7, None], "bsf_25": [None, None], "bsf_50": [float("nan")]})
    assert row.cell("ttb_50") == "0.60 ± 1.27 (2/3)"
    assert row.cell("bsf_25") == "-" and row.cell("bsf_50") == "n/a"
    assert row.mean("ttb_50") == pytest.approx(0.6)


def test_rollout_weighting_lets_tasks_with_more_rollouts_weigh_more() -> None:
    ids = np.array([0, 1])
    world = make_world(TINY, 0)
    g = world.group[ids]
    flat = SimulatedLearner(make_world(TINY, 0), 0)
    weighted_world = make_world(LearnerConfig(num_tasks=600, num_groups=3, eval_tasks=200, rollout_weighting=1.0), 0)
    weighted = SimulatedLearner(weighted_world, 0)
    # Task 0: 2 of 4 (signal 1), task 1: 0 of 28 (signal 0); mean trials 16.
    flat.train(ids, np.array([2, 0]), np.array([4, 28]))
    weighted.train(ids, np.array([2, 0]), np.array([4, 28]))
    assert weighted.ability[g[0]] < flat.ability[g[0]]  # task 0 weighs 4/16 instead of 1
    a, b = SimulatedLearner(world, 0), SimulatedLearner(weighted_world, 0)
    a.train(ids, np.array([8, 3]), np.array([16, 16]))
    b.train(ids, np.array([8, 3]), np.array([16, 16]))
    assert np.array_equal(a.ability, b.ability)  # equal group sizes: the same step either way
    with pytest.raises(ConfigError, match="rollout_weighting"):
        LearnerConfig(rollout_weighting=2.0)


@pytest.mark.parametrize("name", ROLLING)
def test_bots_train_takes_the_peers_that_choose_their_own_rollouts(name: str) -> None:
    from bots_rft.train.config import TrainConfig

    # The trainer runs them through its rollout callback (tests/train/test_train_peers.py).
    assert method(name).trainer
    assert TrainConfig(pool="p.parquet", method=name).method == name
    # They build their batches themselves: DAPO's filter on top is refused, naming the key.
    with pytest.raises(ConfigError, match=rf"dynamic_sampling: method '{name}' rolls out inside its own selection"):
        TrainConfig(pool="p.parquet", method=name, dynamic_sampling=True)
    for plain in ("dps", "adarft", "dynamic"):
        assert method(plain).trainer


def test_speed_queued_ids_are_its_qualified_and_ready_prompts() -> None:
    """What a trainer must keep rollouts of between steps: the prompts qualified or ready, none else."""
    learner = SimulatedLearner(make_world(TINY, 0), 0, stream=2)
    sel = method("speed").build(600, rollout=learner.rollout, gen_ratio=8.0)
    assert sel.queued_ids().size == 0  # type: ignore[attr-defined]
    ids = sel.select(8)
    queued = sel.queued_ids()  # type: ignore[attr-defined]
    assert set(queued.tolist()) == set(sel.qualified[0].tolist()) | set(sel.ready[0].tolist())  # type: ignore[attr-defined]
    assert queued.size > 0 and not set(queued.tolist()) & set(ids.tolist())  # the trained ones left the queue


def test_speed_trains_on_a_full_queue_without_generating() -> None:
    """A large generation batch can queue more than a batch of ready prompts; the next step then
    trains on the queue and generates nothing, as the reference's data controller does, so its
    spend is what was generated (nothing charged twice, nothing charged for a forced call)."""
    learner = SimulatedLearner(make_world(TINY, 0), 0, stream=2)
    calls: list[int] = []

    def rollout(ids: np.ndarray, counts: np.ndarray) -> np.ndarray:
        calls.append(int(counts.sum()))
        return learner.rollout(ids, counts)

    sel = method("speed").build(600, rollout=rollout, gen_ratio=8.0)
    assert isinstance(sel, RollsOut)
    spent = []
    for _ in range(6):
        before = len(calls)
        sel.select(16)
        batch = sel.take_batch()
        assert batch is not None and batch.task_ids.size == 16
        assert batch.rollouts == sum(calls[before:])  # charged = generated in this step
        spent.append(batch.rollouts)
        sel.update(batch.task_ids, batch.successes, batch.trials)
    assert spent[0] > 0 and 0 in spent  # some step trained on the queue alone
    assert sel.total_rollouts == sum(calls)


# ---------------------------------------------------------------------------------------------
# The fair race: group size, per-step GRESO tuning, reference priors, information settings
# ---------------------------------------------------------------------------------------------


def test_bigger_groups_at_the_same_rate_teach_more_with_group_noise() -> None:
    """group_noise > 0: a group of n rollouts counts n / (n + group_noise) of its signal, so the
    same rates from bigger groups move the learner further; 0 keeps the group size irrelevant."""
    ids = np.arange(0, 600, 5)
    gains = {}
    for noise in (0.0, 4.0):
        # The linear rule without trajectory noise: the gain of one step is then exactly linear in
        # the weighted signal (under the default rule, S / (S + K) bends it by S / K ~ 1e-4).
        config = LearnerConfig(
            num_tasks=600, num_groups=3, eval_tasks=200, group_noise=noise, trajectory_noise=0.0, step_rule="linear"
        )
        world = make_world(config, 0)
        for n in (4.0, 32.0):
            learner = SimulatedLearner(world, 0)
            learner.train(ids, np.full(ids.size, n / 2), np.full(ids.size, n))
            gains[(noise, n)] = float(learner.ability.sum())
    assert gains[(0.0, 4.0)] == gains[(0.0, 32.0)]
    assert gains[(4.0, 4.0)] < gains[(4.0, 32.0)] < gains[(0.0, 32.0)]
    # n / (n + 4): 0.5 for 4 rollouts, 8/9 for 32 (abilities start at 0, so the gain is linear).
    assert gains[(4.0, 4.0)] == pytest.approx(0.5 * gains[(0.0, 4.0)])
    assert gains[(4.0, 32.0)] == pytest.approx(32 / 36 * gains[(0.0, 32.0)])
    with pytest.raises(ConfigError, match="group_noise"):
        LearnerConfig(group_noise=-1.0)


def test_greso_tunes_on_each_steps_share_not_the_running_total() -> None:
    """The reference resets its easy/hard counts after every step: a step with no solved group
    raises p_easy even after a step where every group was solved."""
    from bots_rft.selector.peers import GRESO

    sel = GRESO(10, lambda ids, k: np.zeros(ids.size), n_rollouts=4)
    sel.walked = 10  # past the first epoch, where the tuning starts
    ids = np.arange(10)
    sel._learn(ids, np.full(10, 4.0), np.full(10, 4.0))  # all solved: too many easy groups
    after_easy = sel.p_easy
    sel._learn(ids, np.full(10, 2.0), np.full(10, 4.0))  # none solved this step
    assert after_easy < 0.5 and sel.p_easy > after_easy
    assert sel.easy_groups == 10 and sel.total_groups == 20  # running totals kept as diagnostics


def test_dps_and_knapsack_start_from_reference_pass_rates_when_given() -> None:
    weak = np.array([0.0, 1.0, 0.5, np.nan])
    dps = method("dps").build(4, weak=weak, strong=weak, n_rollouts=4)
    assert dps.pi[0].tolist() == [1.0, 0.0, 0.0] and dps.pi[1].tolist() == [0.0, 0.0, 1.0]  # type: ignore[attr-defined]
    assert dps.pi[2] == pytest.approx([1 / 16, 14 / 16, 1 / 16])  # type: ignore[attr-defined]
    assert dps.pi[3] == pytest.approx([1 / 3] * 3)  # type: ignore[attr-defined]
    blind = method("dps").build(4)
    assert np.allclose(blind.pi, 1 / 3)  # type: ignore[attr-defined]

    def rollout(ids: np.ndarray, counts: np.ndarray) -> np.ndarray:
        return np.zeros(ids.size)

    knap = method("knapsack").build(4, weak=weak, strong=weak, rollout=rollout, n_rollouts=8, n_low=2, n_high=16)
    assert np.allclose(knap.estimate, weak, equal_nan=True)  # type: ignore[attr-defined]
    knap.select(4)
    batch = knap.take_batch()  # type: ignore[attr-defined]
    trials = dict(zip(batch.task_ids.tolist(), batch.trials.tolist()))
    # The authors' allocation applies at once: the unknown task gets the uniform 8, the others 2
    # each; of the 18 left, the 50% task's estimated cost (floor(log 0.1 / log 0.5) = 3) goes to
    # the knapsack and the other 15 to the never-solved task (the fallback, uncapped).
    assert (trials[2], trials[1], trials[0], trials[3]) == (5, 2, 17, 8)
    with pytest.raises(InvalidArgumentError, match="prior"):
        method("dps").build(4, weak=np.array([0.1, 2.0, 0.0, 0.0]), strong=weak)


def test_the_information_setting_decides_who_reads_the_references() -> None:
    from bots_rft.simulate.experiment import reads_references

    def reads(kind: str, information: str, **kw: Any) -> bool:
        return reads_references(MethodSpec(kind, **kw), information)

    assert [reads(k, "paper") for k in ("bots", "adarft", "dps", "knapsack", "speed")] == [
        True,
        True,
        False,
        False,
        False,
    ]
    assert [reads(k, "shared") for k in ("bots", "adarft", "dps", "knapsack", "speed")] == [
        True,
        True,
        True,
        True,
        False,
    ]
    assert [reads(k, "none") for k in ("bots", "dps", "knapsack", "random")] == [False] * 4
    assert reads("bots", "paper", references=False) is False and reads("dps", "paper", references=True) is True
    with pytest.raises(ConfigError, match="information"):
        SimConfig(learner=TINY, information="more")
    with pytest.raises(ConfigError, match="adarft"):
        SimConfig(learner=TINY, methods=("random", "adarft"), information="none")
    with pytest.raises(ConfigError, match="references"):
        MethodSpec("adarft", references=False)
    # A run without references is BOTS on explicit evidence alone: it reports no capability.
    config = SimConfig(learner=TINY, steps=3, batch_size=16, seeds=(0,), methods=("random",))
    rec = run_method(MethodSpec("bots", references=False), make_world(TINY, 0), 0, config)
    assert np.all(np.isnan(rec.capability))


def test_runs_record_generation_rounds_and_trained_rollouts() -> None:
    config = SimConfig(learner=TINY, steps=4, batch_size=16, seeds=(0,), methods=("random",))
    world = make_world(TINY, 0)
    plain = run_method(MethodSpec("random"), world, 0, config)
    assert plain.rounds.tolist() == [1] * 4 and plain.trained.tolist() == [16.0 * 16] * 4
    ada = run_method(MethodSpec("reinforce-ada"), world, 0, config)
    assert np.all(ada.rounds >= 1) and np.all(ada.rounds <= 4) and ada.trained.tolist() == [16.0 * 4] * 4
    dapo1 = run_method(MethodSpec("dynamic", extra=(("oversample", 1.0),)), world, 0, config)
    assert np.all(dapo1.rounds * 16 * 16 == dapo1.rollouts)  # rounds of one batch each
    with pytest.raises(ConfigError, match="not a parameter"):
        MethodSpec("dynamic", extra=(("gen_ratio", 2.0),))


# ---------------------------------------------------------------------------------------------
# BOTS-Screen: BOTS proposing, SPEED-RL's screen filtering
# ---------------------------------------------------------------------------------------------


def test_bots_screen_trains_on_disagreeing_groups_and_learns_from_every_rollout() -> None:
    world = make_world(TINY, 0)
    config = _config()
    learner = SimulatedLearner(world, 0, stream=5)
    calls: list[tuple[np.ndarray, np.ndarray]] = []

    def rollout(ids: np.ndarray, counts: np.ndarray) -> np.ndarray:
        calls.append((ids.copy(), np.asarray(counts).copy()))
        return learner.rollout(ids, counts)

    sel = make_selector(MethodSpec("bots-screen"), world, 0, learner, config, rollout=rollout)
    bots = sel.bots  # type: ignore[attr-defined]
    prior = bots.alpha + bots.beta
    for _ in range(5):
        sel.select(16)
        batch = sel.take_batch()  # type: ignore[attr-defined]
        assert batch is not None and batch.task_ids.size == 16
        screened_in = (batch.successes > 0) & (batch.successes < batch.trials)
        assert screened_in.all() and np.all(batch.trials == 16)  # 4 screening + 12 more
        sel.update(batch.task_ids, batch.successes, batch.trials)
    # Every rollout generated (failed screenings included) became explicit evidence for BOTS; the
    # implicit evidence may add pseudo-counts on top, never take any away.
    rolled = sum(int(c.sum()) for _, c in calls)
    assert rolled == sel.total_rollouts  # type: ignore[attr-defined]
    gained = (bots.alpha + bots.beta - prior).sum()
    assert gained >= rolled - 1e-6
    # The screen's candidates come from BOTS: a first selection equals BOTS's own first pick.
    fresh = make_selector(MethodSpec("bots"), world, 0, SimulatedLearner(world, 0), config)
    first = calls[0][0]
    assert set(first.tolist()) == set(fresh.select(first.size).tolist())


def test_bots_screen_refuses_a_checkpoint_without_its_bots_state() -> None:
    world = make_world(TINY, 0)
    learner = SimulatedLearner(world, 0)
    sel = make_selector(MethodSpec("bots-screen"), world, 0, learner, _config())
    state = sel.state_dict()
    del state["bots"]
    with pytest.raises(CheckpointError, match="BOTS state"):
        sel.load_state_dict(state)


def test_knapsack_allocates_as_the_authors_code() -> None:
    """sampling_budget against hand-computed allocations of the authors' rule
    (exploration_utils.sampling_budget_by_knapsack): base counts, the cost-bounded knapsack, the
    uncapped fallback to the never-solved prompts, and the all-unsolved case."""
    from bots_rft.selector.peers.knapsack import allocate, sampling_budget

    nan = np.nan
    p = np.array([0.0, 1.0, 0.5, 0.9, nan])
    known = ~np.isnan(p)
    counts = sampling_budget(p, known, 16, 2, 128)
    assert counts.sum() == 5 * 16 and counts[4] == 16 and counts[1] == 2
    # Costs: floor(log .1 / log .5) = 3, floor(log .1 / log .9) = 21: 24 to the knapsack, and
    # 80 - 16 - 8 - 24 = 32 to the never-solved prompt.
    assert counts[0] == 2 + 32
    assert list(counts[2:4]) == list(allocate(np.array([0.5, 0.9]), 4 + 24, 2, 128))
    # No prompt at 0 < p < 1: what is left goes to the never-solved ones, or everyone gets n.
    assert list(sampling_budget(np.array([0.0, 1.0, 0.0]), np.ones(3, bool), 8, 2, 128)) == [11, 2, 11]
    assert list(sampling_budget(np.array([1.0, 1.0]), np.ones(2, bool), 8, 2, 128)) == [8, 8]


def test_knapsack_estimates_from_a_buffer_of_the_last_16_rewards() -> None:
    from bots_rft.selector.peers import KnapsackAllocation

    sel = KnapsackAllocation(3, lambda ids, k: np.zeros(ids.size))
    ids = np.array([0, 1, 2])
    sel._learn(ids, np.array([2.0, 16.0, 0.0]), np.array([4.0, 16.0, 2.0]))
    # Task 0 has 4 rewards (< 8: no estimate yet), task 1 a full group, task 2 only 2.
    assert np.isnan(sel.estimate[0]) and sel.estimate[1] == 1.0 and np.isnan(sel.estimate[2])
    sel._learn(ids, np.array([0.0, 1.0, 0.0]), np.array([4.0, 2.0, 2.0]))
    # Task 0: 8 rewards, 2 right; task 1: the 2 newest (1 right) and 14 of the older 16 at rate 1.
    assert sel.estimate[0] == pytest.approx(2 / 8) and sel.estimate[1] == pytest.approx(15 / 16)
    assert np.isnan(sel.estimate[2])  # 4 rewards
