"""The trainer's configuration: one flat dataclass, read from YAML or TOML, overridden by
``key=value`` pairs from the command line, and validated with errors that name the key and value."""

from __future__ import annotations

import dataclasses
import json
import math
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, get_type_hints

from ..config_files import read_mapping
from ..errors import BotsError, ConfigError
from ..llm.models import DTYPE_NAMES
from ..methods import method, method_names
from ..parameters import (
    ADAPTIVE_LAM,
    ADAPTIVE_RHO,
    GEN_RATIO,
    KEEP,
    LAM,
    MAX_GEN_BATCHES,
    MIN_GAP,
    MOMENTUM,
    N_CONTINUE,
    N_HIGH,
    N_INIT,
    N_LOW,
    N_MAX,
    N_MIN,
    OVERSAMPLE,
    P_EASY,
    P_HARD,
    RHO,
    ROUND_REPEAT,
    ROUNDS,
    SAMPLING_RATIO,
    TARGET,
    TARGET_ZERO_VARIANCE,
    TAU,
    THOMPSON,
)

__all__ = ["TrainConfig", "METHODS", "ROLLOUT_ENGINES", "ROLLOUT_PRECISIONS", "load_config", "parse_overrides"]

#: Rollout engines (``rollout_engine``): Hugging Face ``generate``, or the shared-prefix decode loop.
ROLLOUT_ENGINES = ("hf", "fast")
#: ``rollout_precision``: sample with the policy itself, or with an int8 twin (frozen weights int8).
ROLLOUT_PRECISIONS = ("fp32", "int8")

#: Pool columns whose labels group the tasks for the guard (``guard_groups``).
GUARD_GROUPS = ("data_source", "ability")

#: What a resumed run does when the selection parameters differ from the checkpoint's.
RESUME_PARAMS = ("error", "config", "checkpoint")
#: Selection parameters a resumed BOTS run may change (see ``resume_params``).
SELECTION_PARAMS = ("lam", "rho", "target", "thompson", "tau", "adaptive_rho", "adaptive_lam")

#: The parameters of the methods that roll out inside their own selection, as config keys.
PEER_PARAMS = (
    N_INIT,
    N_CONTINUE,
    GEN_RATIO,
    MAX_GEN_BATCHES,
    ROUNDS,
    ROUND_REPEAT,
    KEEP,
    N_LOW,
    N_HIGH,
    P_EASY,
    P_HARD,
    TARGET_ZERO_VARIANCE,
    SAMPLING_RATIO,
)

#: Selection methods ``method=`` accepts (:data:`bots_rft.methods.METHODS`; their aliases too).
METHODS = method_names()


@dataclass
class TrainConfig:
    """Every knob of ``bots train``. Defaults follow the paper's GRPO setting
    except the sizes, which are CPU-friendly; the example configs in ``configs/`` scale them up."""

    # --- data
    pool: str = ""  # training pool (verl/GURU parquet or JSONL)
    eval_pool: str | None = None  # held-out pool; default: eval.parquet beside a train.parquet
    eval_limit: int | None = None  # evaluate on at most this many held-out tasks
    weak_column: str | None = None  # reference pass rates for BOTS' interpolation / offline
    strong_column: str | None = None
    system_prompt: str | None = None  # None: keep the pool's; "": drop system messages; else replace
    max_prompt_tokens: int | None = 1024
    verifiers: dict[str, str] = field(default_factory=dict)  # extra {prefix: "module:function"}
    # --- model
    model: str = "tiny"  # tiny | tiny-HxL | smollm2 | local HF directory | .gguf file
    device: str = "auto"  # auto: CUDA when present
    dtype: str = "auto"  # weights: float32 (bf16 autocast on CUDA does the rest); float64 for reference runs
    bf16: bool = True  # bf16 autocast on CUDA (ignored on CPU)
    gradient_checkpointing: bool = False  # CUDA memory saver (allowed on CPU too)
    # --- parameter-efficient training (docs/training.md): only the adapter or the top layers
    # train, and checkpoints hold only them
    lora_r: int = 0  # > 0: train LoRA adapters of this rank (peft) instead of the weights
    lora_alpha: int = 16  # LoRA scale numerator (the update is scaled by lora_alpha / lora_r)
    lora_dropout: float = 0.0
    lora_target_modules: str = "all-linear"  # or comma-separated linear-layer names ("q_proj,v_proj")
    train_top_layers: int | None = None  # train only the top k decoder layers (with lora_r: adapt only them)
    # --- selection
    method: str = "bots"  # a name of bots_rft.methods.METHODS
    lam: float = LAM.default
    rho: float = RHO.default
    target: float = TARGET.default
    thompson: bool = THOMPSON.default
    tau: float = TAU.default  # 0: the B tasks nearest the target; > 0: softmax sampling (BOTS)
    adaptive_rho: bool = ADAPTIVE_RHO.default  # halve rho when predictions miss (the authors' rule)
    adaptive_lam: bool = ADAPTIVE_LAM.default  # scale lambda by the learner's drift
    momentum: float = MOMENTUM.default
    min_gap: float = MIN_GAP.default  # interpolation: skip batches with |St - W| below this
    # DAPO's dynamic sampling on top of the method: roll out generation batches the method
    # proposes, train on the groups whose rollouts disagree; the method still learns from every
    # rolled-out group. method=dynamic is the paper's baseline (epoch order + this filter).
    dynamic_sampling: bool = False
    oversample: float = OVERSAMPLE.default  # dynamic sampling: generation batch = oversample * batch_size
    # Dynamic sampling: generation batches per step at most. Fewer than the method's 16: on a
    # trainer each round is a generation pass of the model, not a simulated one.
    max_rounds: int = 4
    # method=bots-plan: each step plans tasks and a rollout count per task (BOTS.plan) with a
    # budget of batch_size * rollouts rollouts, n_min <= count <= n_max
    n_min: int = N_MIN.default
    n_max: int = N_MAX.default
    # The methods that roll out inside their own selection (docs/peers.md), each reading its own:
    # speed / bots-screen: n_init screening rollouts per fresh prompt, n_continue more for those
    # whose screening disagrees, generation batches of gen_ratio * batch_size prompts, at most
    # max_gen_batches generation rounds per step;
    n_init: int = N_INIT.default
    n_continue: int = N_CONTINUE.default
    gen_ratio: float = GEN_RATIO.default
    max_gen_batches: int = MAX_GEN_BATCHES.default
    # reinforce-ada: at most `rounds` rounds of round_repeat rollouts per active prompt, trained on
    # a balanced subset of `keep` of them;
    rounds: int = ROUNDS.default
    round_repeat: int = ROUND_REPEAT.default
    keep: int = KEEP.default
    # knapsack: n_low <= rollouts per prompt <= n_high, rollouts * batch_size in all;
    n_low: int = N_LOW.default
    n_high: int = N_HIGH.default
    # greso: exploration probabilities, zero-variance target, generation batch (sampling_ratio *
    # batch_size) and max_rounds generation rounds per step.
    p_easy: float = P_EASY.default
    p_hard: float = P_HARD.default
    target_zero_variance: float = TARGET_ZERO_VARIANCE.default
    sampling_ratio: float = SAMPLING_RATIO.default
    # The starvation / verifier-failure guard (bots_rft.GroupGuard), on with guard=true: per group
    # of tasks (guard_groups: the pool's data_source or ability), a warning once a group's rollouts
    # all failed in guard_zero_streak updates in a row, and each batch holding at least
    # ceil(guard_min_share * batch_size) tasks of every group (0: no floor; at most 1 / groups)
    guard: bool = False
    guard_groups: str = "data_source"
    guard_min_share: float = 0.0
    guard_zero_streak: int = 3
    # --- GRPO
    steps: int = 20
    batch_size: int = 8  # tasks per step (paper: 256)
    rollouts: int = 4  # rollouts per task (paper: 16)
    mini_batch_size: int | None = None  # tasks per optimizer update (paper: 32); None: batch_size
    micro_batch_size: int = 16  # sequences per forward/backward (gradient accumulation)
    ppo_epochs: int = 1
    temperature: float = 1.0
    top_p: float = 1.0
    max_new_tokens: int = 64
    generation_batch_size: int = 64  # sequences decoded together
    # fast (default): each prompt encoded once for its n rollouts, the prompts'
    # common prefix once, finished rows leave the batch (same sampling distribution)
    rollout_engine: str = "fast"
    # fp32: sample with the policy; int8 (CPU, with lora_r or train_top_layers): with a twin whose
    # frozen linear layers are int8 (faster; the loss's log-probs still come from the policy)
    rollout_precision: str = "fp32"
    lr: float = 1e-6
    warmup_steps: int = 10
    weight_decay: float = 0.1
    grad_clip: float = 1.0
    clip_eps: float = 0.2
    kl_coef: float = 0.0  # > 0 keeps a frozen reference model and adds k3 KL
    loss_agg: str = "token-mean"  # token-mean | seq-mean-token-mean
    adv_eps: float = 1e-6
    # --- optional supervised warm-up on the pool's gold answers (before step 0)
    sft_steps: int = 0
    sft_lr: float = 1e-3
    sft_batch_size: int = 16
    sft_template: str = "<answer>{answer}</answer>"
    # --- evaluation, logging, checkpoints
    eval_every: int = 5  # 0: only at the start and the end
    eval_max_new_tokens: int | None = None  # default: max_new_tokens
    # 0: held-out accuracy is greedy decoding's; k >= 1: the mean reward of k samples per task at
    # the training temperature (avg@k), a smoother measure of the policy RL actually trains.
    eval_samples: int = 0
    out_dir: str = "runs/train"
    save_every: int = 0  # 0: only on SIGTERM and at the end
    keep_checkpoints: int = 2
    resume: bool = False
    overwrite: bool = False  # replace a previous run in out_dir (else a run there is refused unless resuming)
    extend_pool: bool = False  # resume on a pool with new tasks (they start at the prior); removed tasks: error
    # Resuming with other selection parameters (lam, rho, target, thompson, tau, adaptive_rho,
    # adaptive_lam) than the checkpoint's:
    # "error" refuses, "config" applies the new values from the resumed step on (recorded in the
    # next checkpoint), "checkpoint" keeps the saved ones.
    resume_params: str = "error"
    tensorboard: bool = True  # when the tensorboard package is installed
    progress: bool = True
    # --- misc
    seed: int = 0
    # Verifier processes: >= 1 bounds every hang by reward_timeout (about 60 us of IPC per
    # response); 0 scores in-process (a timer stops Python-level hangs only); None: 2.
    reward_workers: int | None = 1
    reward_timeout: float = 30.0
    verifier_error_stop: float = 1.0  # stop (exit 3) when this share of a step's verifications are verifier errors
    threads: int | None = None  # torch CPU threads
    distributed: str = "ddp"  # ddp | fsdp (when launched under torchrun)

    # ------------------------------------------------------------------ validation
    def validate(self) -> TrainConfig:
        def bad(key: str, why: str) -> ConfigError:
            return ConfigError(f"{key}: {why}, got {getattr(self, key)!r}")

        if not self.pool:
            raise ConfigError("pool: a training pool path is required (pool=PATH)")
        try:
            self.method = method(self.method).name  # an alias ("dapo") becomes the canonical name
            if not method(self.method).trainer:
                raise ConfigError(f"method: {self.method!r} runs in bots simulate only (docs/peers.md)")
            for param in (
                LAM,
                RHO,
                TARGET,
                THOMPSON,
                TAU,
                ADAPTIVE_RHO,
                ADAPTIVE_LAM,
                MOMENTUM,
                MIN_GAP,
                OVERSAMPLE,
                N_MIN,
                N_MAX,
                *PEER_PARAMS,
            ):
                param.check(getattr(self, param.name))
        except BotsError as exc:  # the method table's message, as the config's error class
            raise ConfigError(str(exc)) from None
        for key in (
            "steps",
            "batch_size",
            "rollouts",
            "micro_batch_size",
            "ppo_epochs",
            "max_new_tokens",
            "generation_batch_size",
            "max_rounds",
            "sft_batch_size",
            "keep_checkpoints",
        ):
            v = getattr(self, key)
            if not isinstance(v, int) or isinstance(v, bool) or v < 1:
                raise bad(key, "must be an integer >= 1")
        if self.rollouts < 2:  # a group of one has no spread: its GRPO advantage is always zero
            raise ConfigError(f"rollouts: GRPO needs at least 2 rollouts per task, got {self.rollouts}")
        if self.method == "bots-plan":
            self._validate_plan()
        if method(self.method).rolls_out and self.method not in ("bots-plan", "dynamic") and self.dynamic_sampling:
            raise ConfigError(
                f"dynamic_sampling: method {self.method!r} rolls out inside its own selection and builds its "
                "batches itself; got True"
            )
        self._validate_guard()
        for key in ("warmup_steps", "sft_steps", "eval_every", "eval_samples", "save_every", "seed"):
            v = getattr(self, key)
            if not isinstance(v, int) or isinstance(v, bool) or v < 0:
                raise bad(key, "must be an integer >= 0")
        for key in ("eval_limit", "max_prompt_tokens", "eval_max_new_tokens", "mini_batch_size", "threads"):
            v = getattr(self, key)
            if v is not None and (not isinstance(v, int) or isinstance(v, bool) or v < 1):
                raise bad(key, "must be an integer >= 1 or null")
        if self.mini_batch_size is not None and self.batch_size % self.mini_batch_size:
            raise bad("mini_batch_size", f"must divide batch_size={self.batch_size}")
        if not (self.temperature > 0 and math.isfinite(self.temperature)):
            raise bad("temperature", "must be > 0")
        if not 0.0 < self.top_p <= 1.0:
            raise bad("top_p", "must lie in (0, 1]")
        for key in ("lr", "sft_lr", "clip_eps", "grad_clip", "reward_timeout", "adv_eps"):
            v = getattr(self, key)
            if not (v > 0 and math.isfinite(v)):
                raise bad(key, "must be a finite number > 0")
        for key in ("weight_decay", "kl_coef"):
            if not getattr(self, key) >= 0:
                raise bad(key, "must be >= 0")
        if self.resume_params not in RESUME_PARAMS:
            raise bad("resume_params", f"expected one of {list(RESUME_PARAMS)}")
        if self.loss_agg not in ("token-mean", "seq-mean-token-mean"):
            raise bad("loss_agg", "expected 'token-mean' or 'seq-mean-token-mean'")
        if self.rollout_engine not in ROLLOUT_ENGINES:
            raise bad("rollout_engine", f"expected one of {list(ROLLOUT_ENGINES)}")
        if self.rollout_precision not in ROLLOUT_PRECISIONS:
            raise bad("rollout_precision", f"expected one of {list(ROLLOUT_PRECISIONS)}")
        if self.rollout_precision == "int8" and not self.lora_r and self.train_top_layers is None:
            raise bad("rollout_precision", "'int8' quantizes the frozen weights: set lora_r or train_top_layers")
        if not isinstance(self.lora_r, int) or isinstance(self.lora_r, bool) or self.lora_r < 0:
            raise bad("lora_r", "must be an integer >= 0 (0: no LoRA)")
        if not isinstance(self.lora_alpha, int) or isinstance(self.lora_alpha, bool) or self.lora_alpha < 1:
            raise bad("lora_alpha", "must be an integer >= 1")
        if not 0.0 <= self.lora_dropout < 1.0:
            raise bad("lora_dropout", "must lie in [0, 1)")
        targets = [t.strip() for t in self.lora_target_modules.split(",")]
        if not all(t.replace("_", "").replace("-", "").isalnum() for t in targets):
            raise bad("lora_target_modules", "expected 'all-linear' or comma-separated module names")
        if self.train_top_layers is not None and (
            not isinstance(self.train_top_layers, int)
            or isinstance(self.train_top_layers, bool)
            or self.train_top_layers < 1
        ):
            raise bad("train_top_layers", "must be an integer >= 1 or null")
        if self.dtype != "auto" and self.dtype not in DTYPE_NAMES:
            raise bad("dtype", f"expected 'auto' or one of {sorted(DTYPE_NAMES)}")
        if self.distributed not in ("ddp", "fsdp"):
            raise bad("distributed", "expected 'ddp' or 'fsdp'")
        if not 0.0 < self.verifier_error_stop <= 1.0:
            raise bad("verifier_error_stop", "must lie in (0, 1]")
        if self.reward_workers is not None and self.reward_workers < 0:
            raise bad("reward_workers", "must be >= 0 or null")
        if method(self.method).references == "required" and not (self.weak_column and self.strong_column):
            raise ConfigError(
                f"method: {self.method!r} needs reference pass rates ({method(self.method).summary}); "
                "set weak_column and strong_column"
            )
        if (self.weak_column is None) != (self.strong_column is None):
            raise ConfigError(
                f"weak_column/strong_column: set both or neither, got {self.weak_column!r} and {self.strong_column!r}"
            )
        if "{answer}" not in self.sft_template:
            raise bad("sft_template", "must contain '{answer}'")
        for prefix, target in self.verifiers.items():
            if not isinstance(target, str) or ":" not in target:
                raise ConfigError(f"verifiers.{prefix}: expected 'module:function', got {target!r}")
        return self

    def _validate_plan(self) -> None:
        """method=bots-plan: the plan's bounds fit GRPO and its budget of batch_size * rollouts."""
        if self.n_min < 2:  # a group of one has zero advantage: its rollout would be spent for nothing
            raise ConfigError(f"n_min: GRPO needs at least 2 rollouts per planned task, got {self.n_min}")
        if self.n_max < self.n_min:
            raise ConfigError(f"n_max: must be >= n_min={self.n_min}, got {self.n_max}")
        budget = self.batch_size * self.rollouts
        if budget < self.n_min:
            raise ConfigError(
                f"n_min: the plan's budget batch_size * rollouts = {budget} cannot give one task n_min "
                f"rollouts, got {self.n_min}"
            )
        if self.dynamic_sampling:
            raise ConfigError(
                "dynamic_sampling: method 'bots-plan' already spends its budget where groups are expected "
                "to be informative, and has no generation batches to filter; got True"
            )

    def _validate_guard(self) -> None:
        """The guard's keys (checked on or off); its share's upper bound, 1 / groups, needs the pool
        and is checked where the trainer builds it."""
        if self.guard_groups not in GUARD_GROUPS:
            raise ConfigError(f"guard_groups: expected one of {list(GUARD_GROUPS)}, got {self.guard_groups!r}")
        share = self.guard_min_share
        if isinstance(share, bool) or not isinstance(share, (int, float)) or not 0.0 <= share <= 1.0:
            raise ConfigError(f"guard_min_share: must lie in [0, 1 / groups], got {share!r}")
        streak = self.guard_zero_streak
        if not isinstance(streak, int) or isinstance(streak, bool) or streak < 1:
            raise ConfigError(f"guard_zero_streak: must be an integer >= 1, got {streak!r}")
        if self.guard and (method(self.method).rolls_out or self.method == "bots-plan" or self.dynamic_sampling):
            # These fill or plan their batches themselves: there is no single select to hold the floor.
            raise ConfigError(
                f"guard: works with methods that select a batch and then learn from it; method "
                f"{self.method!r} with dynamic_sampling={self.dynamic_sampling} builds its batches itself, got True"
            )

    @property
    def mini_batch(self) -> int:
        return self.mini_batch_size or self.batch_size

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def replace(self, **changes: Any) -> TrainConfig:
        return dataclasses.replace(self, **changes)


_HINTS: dict[str, Any] | None = None


def _hints() -> dict[str, Any]:
    global _HINTS
    if _HINTS is None:
        _HINTS = get_type_hints(TrainConfig)
    return _HINTS


def _coerce(key: str, value: Any) -> Any:
    """``value`` (from a file, or a string from the command line) as the type of ``key``."""
    raw = _hints()[key]
    hint = raw.__name__ if isinstance(raw, type) else str(raw).replace("typing.", "")
    optional = "None" in hint or "Optional" in hint
    if isinstance(value, str) and optional and value.strip().lower() in ("null", "none", "~"):
        return None
    if value is None:
        if optional:
            return None
        raise ConfigError(f"{key}: may not be null")
    base = hint.split("|")[0].strip().replace("Optional[", "").rstrip("]")
    try:
        if base.startswith("dict"):
            if isinstance(value, str):
                value = json.loads(value)
            if not isinstance(value, dict):
                raise TypeError("not a mapping")
            return {str(k): v for k, v in value.items()}
        if base == "bool":
            if isinstance(value, bool):
                return value
            text = str(value).strip().lower()
            if text in ("1", "true", "yes", "on"):
                return True
            if text in ("0", "false", "no", "off"):
                return False
            raise ValueError("not a boolean")
        if base == "int":
            if isinstance(value, bool) or (isinstance(value, float) and not value.is_integer()):
                raise ValueError("not an integer")
            return int(value) if not isinstance(value, str) else int(value.strip())
        if base == "float":
            if isinstance(value, bool):
                raise ValueError("not a number")
            return float(value)
        if base == "str":
            if not isinstance(value, (str, int, float)) or isinstance(value, bool):
                raise ValueError("not a string")
            return str(value)
    except (TypeError, ValueError, json.JSONDecodeError) as exc:
        raise ConfigError(f"{key}: expected {hint}, got {value!r} ({exc})") from None
    return value


def _check_keys(data: dict[str, Any], where: str) -> None:
    known = {f.name for f in fields(TrainConfig)}
    unknown = sorted(set(data) - known)
    if unknown:
        raise ConfigError(f"{where}: unknown key(s) {unknown}; known keys: {sorted(known)}")


def parse_overrides(pairs: list[str]) -> dict[str, Any]:
    """``["steps=10", "method=random"]`` as typed values; an unknown key or bad value is a
    :class:`ConfigError` naming it."""
    out: dict[str, Any] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        key = key.strip()
        if not sep or not key:
            raise ConfigError(f"override: expected KEY=VALUE, got {pair!r}")
        _check_keys({key: None}, "override")
        out[key] = _coerce(key, value)
    return out


def load_config(
    path: str | Path | None = None,
    overrides: list[str] | dict[str, Any] | None = None,
    *,
    skip_sections: tuple[str, ...] = (),
) -> TrainConfig:
    """A validated config from a YAML (``.yaml``/``.yml``) or TOML (``.toml``) file, then
    ``overrides``. Nested tables ``[train]``/``train:`` are accepted as the top level.
    ``skip_sections``: top-level sections another reader owns (``bots compare``'s ``compare:``)."""
    data: dict[str, Any] = {}
    if path is not None:
        p = Path(path)
        loaded = {k: v for k, v in read_mapping(p).items() if k not in skip_sections}
        if set(loaded) == {"train"} and isinstance(loaded["train"], dict):
            loaded = loaded["train"]
        _check_keys(loaded, f"config {p.name}")
        data = {k: _coerce(k, v) for k, v in loaded.items()}
        # Relative pool paths in a config file are relative to the current directory (like CLI paths).
    if isinstance(overrides, dict):
        _check_keys(overrides, "override")
        data.update({k: _coerce(k, v) for k, v in overrides.items()})
    elif overrides:
        data.update(parse_overrides(list(overrides)))
    return TrainConfig(**data).validate()
