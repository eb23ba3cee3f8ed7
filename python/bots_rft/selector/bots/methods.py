"""The methods :class:`~bots_rft.BOTS` implements, each a :class:`~bots_rft.selector.method.Method`:
BOTS itself (implicit evidence from the weak and strong references' interpolation), the paper's
BOTS-MoPPS and BOTS-DOTS presets (appendix E.6), and BOTS with implicit evidence from k references
(bots-multiref), from similar tasks (bots-sim) or from a regression on task embeddings
(bots-embed). They share one class and its parameters (the catalogue's
:data:`~bots_rft.parameters.BOTS_PARAMS`), so they are declared together; what builds
each is the estimator it gives BOTS.
"""

from __future__ import annotations

from typing import Any

from ...errors import InvalidArgumentError
from ...estimators import EmbeddingRegression, Interpolation, MultiReference, Similarity
from ...parameters import (
    BOTS_PARAMS,
    DOTS_FIXED,
    LAM,
    MIN_GAP,
    MOMENTUM,
    MOPPS_FIXED,
    PRIOR_PRECISION,
    PSEUDO_ROLLOUTS,
    RHO,
    RULE_PARAMS,
    SEED,
    TARGET,
    THOMPSON,
)
from ..method import Method, RolloutMode, needs_rollout, references
from ..plan import N_MAX, N_MIN, PlannedBOTS
from .bots import BOTS

__all__ = [
    "BOTS_METHOD",
    "PLAN",
    "MOPPS",
    "DOTS",
    "MULTIREF",
    "SIMILARITY",
    "EMBEDDING_REGRESSION",
    "bots_selector",
    "interpolation",
]


def interpolation(m: Method, weak: Any, strong: Any, p: dict[str, Any]) -> Interpolation | None:
    """The weak/strong interpolation of implicit evidence, or None where no references were given."""
    refs = references(m, weak, strong)
    return None if refs is None else Interpolation(refs[0], refs[1], p["momentum"], min_gap=p["min_gap"])


def bots_selector(n: int, p: dict[str, Any], evidence: Any, threads: Any) -> BOTS:
    """BOTS with a method's checked parameters ``p`` and an estimator (or None)."""
    return BOTS(
        n,
        lam=p["lam"],
        rho=p["rho"],
        target=p["target"],
        n_rollouts=p["n_rollouts"],
        thompson=p["thompson"],
        tau=p["tau"],
        adaptive_rho=p["adaptive_rho"],
        adaptive_lam=p["adaptive_lam"],
        lag_discount=p["lag_discount"],
        evidence=evidence,
        seed=p["seed"],
        threads=threads,
    )


def _build_bots(m: Method, n: int, weak: Any, strong: Any, rollout: Any, threads: Any, p: dict[str, Any]) -> BOTS:
    return bots_selector(n, p, interpolation(m, weak, strong, p), threads)


def _build_mopps(m: Method, n: int, weak: Any, strong: Any, rollout: Any, threads: Any, p: dict[str, Any]) -> BOTS:
    return BOTS.mopps(n, target=p["target"], n_rollouts=p["n_rollouts"], seed=p["seed"], threads=threads)


def _build_dots(m: Method, n: int, weak: Any, strong: Any, rollout: Any, threads: Any, p: dict[str, Any]) -> BOTS:
    evidence = interpolation(m, weak, strong, p)
    return BOTS.dots(n, evidence, target=p["target"], n_rollouts=p["n_rollouts"], seed=p["seed"], threads=threads)  # type: ignore[arg-type]


def _build_multiref(
    m: Method, n: int, weak: Any, strong: Any, rollout: Any, threads: Any, p: dict[str, Any], references: Any = None
) -> BOTS:
    if references is None:  # the two columns every pool with references has
        refs = _references(m, weak, strong)
        assert refs is not None  # required
        references = list(refs)
    evidence = MultiReference(references, momentum=p["momentum"], min_gap=p["min_gap"])
    return bots_selector(n, p, evidence, threads)


def _build_similarity(
    m: Method, n: int, weak: Any, strong: Any, rollout: Any, threads: Any, p: dict[str, Any], embeddings: Any = None
) -> BOTS:
    evidence = Similarity(_embeddings_signal(m, n, embeddings))
    return bots_selector(n, p, evidence, threads)


def _build_embedding_regression(
    m: Method, n: int, weak: Any, strong: Any, rollout: Any, threads: Any, p: dict[str, Any], embeddings: Any = None
) -> BOTS:
    # The regression forgets at BOTS's own λ, so its evidence fades as the posteriors' does.
    rows = _embeddings_signal(m, n, embeddings)
    evidence = EmbeddingRegression(rows, forgetting=p["lam"], prior_precision=p["prior_precision"])
    return bots_selector(n, p, evidence, threads)


def _build_plan(
    m: Method, n: int, weak: Any, strong: Any, rollout: Any, threads: Any, p: dict[str, Any]
) -> PlannedBOTS:
    needs_rollout(m, rollout)
    if p["n_max"] < p["n_min"]:
        raise InvalidArgumentError(f"n_max: must be >= n_min={p['n_min']}, got {p['n_max']}", "n_max")
    per_task = max(1, round(p["n_rollouts"]))  # the rollouts BOTS gives a task: the plan's budget per batch slot
    bots = bots_selector(n, p, interpolation(m, weak, strong, p), threads)
    return PlannedBOTS(bots, rollout, n_rollouts=per_task, n_min=p["n_min"], n_max=p["n_max"])


def _unrolled_plan(m: Method, n: int, weak: Any, strong: Any, threads: Any, p: dict[str, Any]) -> BOTS:
    """BOTS-Plan without its callback: the BOTS posterior the plans draw from (a trainer plans each
    step itself, :meth:`bots_rft.BOTS.plan`, and rolls the plan out)."""
    return bots_selector(n, p, interpolation(m, weak, strong, p), threads)


# `references` is also the name of bots-multiref's signal, which its builder takes as a keyword.
_references = references


def _embeddings_signal(m: Method, n: int, embeddings: Any) -> Any:
    """The ``embeddings`` signal a method reads: present, and one row per task."""
    if embeddings is None:
        raise InvalidArgumentError(
            f"signals: the {m.name} method needs signals['embeddings'], an [N, d] matrix", "signals"
        )
    rows = len(embeddings) if hasattr(embeddings, "__len__") else None  # else the estimator's type check
    if rows is not None and rows != n:
        raise InvalidArgumentError(f"embeddings: has {rows} rows, expected num_tasks={n}", "embeddings")
    return embeddings


BOTS_METHOD = Method(
    name="bots",
    label="BOTS",
    summary="Bayesian online task selection: explicit and implicit evidence, Thompson sampling",
    params=BOTS_PARAMS,
    references="optional",
    implementation="bots_rft.selector.bots:BOTS",
    builder=_build_bots,
)
# BOTS-Plan is declared here rather than beside PlannedBOTS: BOTS.plan uses the planning module,
# which therefore sits below BOTS and may not import it.
PLAN = Method(
    name="bots-plan",
    label="BOTS-Plan",
    summary="BOTS choosing tasks and rollout counts together: the plan with the most expected informative "
    "groups under a budget of batch × n rollouts (BOTS.plan)",
    params=(*BOTS_PARAMS, N_MIN, N_MAX),
    references="optional",
    rollout_mode=RolloutMode.PLANNED,
    implementation="bots_rft.selector.plan:PlannedBOTS",
    builder=_build_plan,
    unrolled=_unrolled_plan,
)
MOPPS = Method(
    name="mopps",
    label="BOTS-MoPPS",
    summary="BOTS on explicit evidence only, without discount (appendix E.6)",
    params=(TARGET, PSEUDO_ROLLOUTS, SEED),
    references="unused",
    fixed=MOPPS_FIXED,
    implementation="bots_rft.selector.bots:BOTS.mopps",
    builder=_build_mopps,
)
DOTS = Method(
    name="dots",
    label="BOTS-DOTS",
    summary="BOTS on the latest evidence only, greedy on the mean (appendix E.6)",
    params=(TARGET, PSEUDO_ROLLOUTS, MOMENTUM, MIN_GAP, SEED),
    references="required",
    fixed=DOTS_FIXED,
    implementation="bots_rft.selector.bots:BOTS.dots",
    builder=_build_dots,
)
MULTIREF = Method(
    name="bots-multiref",
    label="BOTS-MultiRef",
    summary="BOTS with implicit evidence from k reference pass rates, weights "
    "fitted online (weak and strong alone: the interpolation)",
    params=(LAM, RHO, TARGET, THOMPSON, PSEUDO_ROLLOUTS, MOMENTUM, MIN_GAP, SEED, *RULE_PARAMS),
    references="required",
    signals=("references",),
    implementation="bots_rft.selector.bots:BOTS",
    builder=_build_multiref,
)
SIMILARITY = Method(
    name="bots-sim",
    label="BOTS-Sim",
    summary="BOTS with implicit evidence spread to similar tasks through task embeddings (top-k neighbour kernel)",
    params=(LAM, RHO, TARGET, THOMPSON, PSEUDO_ROLLOUTS, SEED, *RULE_PARAMS),
    references="unused",
    signals=("embeddings",),
    implementation="bots_rft.selector.bots:BOTS",
    builder=_build_similarity,
)
EMBEDDING_REGRESSION = Method(
    name="bots-embed",
    label="BOTS-Embed",
    summary="BOTS without reference models: implicit evidence for every task from an online logistic "
    "regression of the run's own success rates on task embeddings",
    params=(LAM, RHO, TARGET, THOMPSON, PSEUDO_ROLLOUTS, PRIOR_PRECISION, SEED, *RULE_PARAMS),
    references="unused",
    signals=("embeddings",),
    implementation="bots_rft.selector.bots:BOTS",
    builder=_build_embedding_regression,
)
