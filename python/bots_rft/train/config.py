"""The trainer's configuration: one flat pydantic model (:class:`TrainConfig`), read from YAML or
TOML, overridden by ``key=value`` pairs from the command line. Types, ranges and unknown keys are
pydantic's to check; every error is one :class:`~bots_rft.errors.ConfigError` line naming the key
and the value (``lr: must be a finite number > 0, got -1``).

The selection keys are not written here: they are generated from the method catalogue
(:data:`SELECTION_KEYS`), one key per parameter with its default and its one range check
(:meth:`bots_rft.parameters.Parameter.check`), so that every method's every parameter is
settable; a method registered later adds its own (``method_params``). The trainer reads them by
name (:meth:`TrainConfig.param`, :meth:`TrainConfig.method_values`), and reads the method's rollout
mode, never its name, to check how the keys fit together.

The training code's leaves take small typed views of it instead of the whole config:
:class:`PolicyAdaptation` (LoRA / frozen layers, :func:`.lora.adapt_policy`), :class:`SFTWarmup`
(the supervised warm-up, :func:`.sft.sft_warmup`) and :class:`GRPOUpdate` (the optimise stage,
:func:`.optimise.grpo_update`)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal, get_args

from pydantic import (
    BeforeValidator,
    Field,
    TypeAdapter,
    ValidationError,
    create_model,
    field_validator,
    model_validator,
)

from ..config_files import (
    ConfigModel,
    Float,
    Int,
    Invalid,
    JsonDict,
    config_error,
    field_adapter,
    null_text,
    read_mapping,
)
from ..errors import BotsError, ConfigError
from ..llm.models import DTYPE_NAMES
from ..parameters import BOTS_PARAMS, MAX_ROUNDS, OVERSAMPLE, PRIOR_PRECISION, Parameter
from ..selector.plan import N_MAX, N_MIN
from ..selector.registry import BUILT_IN_PARAMETERS, RolloutMode, method_names, parameter, parameters
from ..selector.registry import method as method_spec

__all__ = [
    "TrainConfig",
    "PolicyAdaptation",
    "SFTWarmup",
    "GRPOUpdate",
    "METHODS",
    "ROLLOUT_ENGINES",
    "ROLLOUT_PRECISIONS",
    "load_config",
    "parse_overrides",
]

RolloutEngine = Literal["fast", "speculative", "hf"]
RolloutPrecision = Literal["fp32", "int8"]
GuardGroups = Literal["data_source", "ability"]
ResumeParams = Literal["error", "config", "checkpoint"]
LossAgg = Literal["token-mean", "seq-mean-token-mean"]
Distributed = Literal["ddp", "fsdp"]

#: Rollout engines (``rollout_engine``): the shared-prefix decode loop; that loop with a bfloat16
#: draft proposing tokens (speculative sampling, the same distribution); Hugging Face ``generate``.
ROLLOUT_ENGINES: tuple[str, ...] = get_args(RolloutEngine)
#: ``rollout_precision``: sample with the policy itself, or with an int8 twin (frozen weights int8).
ROLLOUT_PRECISIONS: tuple[str, ...] = get_args(RolloutPrecision)

#: Pool columns whose labels group the tasks for the guard (``guard_groups``).
GUARD_GROUPS: tuple[str, ...] = get_args(GuardGroups)

#: What a resumed run does when the selection parameters differ from the checkpoint's.
RESUME_PARAMS: tuple[str, ...] = get_args(ResumeParams)
#: Selection parameters a resumed BOTS run may change (see ``resume_params``).
SELECTION_PARAMS = ("lam", "rho", "target", "thompson", "tau", "adaptive_rho", "adaptive_lam")

#: Method parameters whose value the trainer supplies from its own keys: ``n_rollouts`` is
#: ``rollouts`` (n), ``seed`` the run's ``seed``.
TRAINER_SUPPLIED = ("n_rollouts", "seed")
#: Catalogue defaults the trainer changes: dynamic sampling's generation batches per step at most
#: (fewer than the method's 16: on a trainer each round is a generation pass of the model).
_TRAINER_DEFAULTS = {"max_rounds": 4}

#: The selection keys: one per parameter of the built-in methods (the catalogue's,
#: :data:`bots_rft.parameters.PARAMETERS`, and those a method defines beside its class),
#: each with its range and default, so that every method's every parameter is settable. Parameters
#: of a method added later (:func:`bots_rft.selector.registry.register`) are keys too, held in
#: ``method_params``.
SELECTION_KEYS: dict[str, Parameter] = {n: p for n, p in BUILT_IN_PARAMETERS.items() if n not in TRAINER_SUPPLIED}

#: The parameters of the peer methods (docs/peers.md), as config keys: a resumed run refuses
#: another value of one its method takes. Not among them: BOTS's (a resumed BOTS run may change its
#: selection parameters, ``resume_params``), BOTS-Plan's bounds (checked for that method alone) and
#: dynamic sampling's generation batches.
PEER_PARAMS = tuple(
    p for p in SELECTION_KEYS.values() if p not in (*BOTS_PARAMS, PRIOR_PRECISION, N_MIN, N_MAX, OVERSAMPLE, MAX_ROUNDS)
)

#: Selection methods ``method=`` accepts (:data:`bots_rft.selector.registry.METHODS`; their aliases too).
METHODS = method_names()


# The value types of the keys; a range violated reads as the error (``must be an integer >= 1``).
Count = Annotated[Int, Field(ge=1)]
Count0 = Annotated[Int, Field(ge=0)]
Positive = Annotated[Float, Field(gt=0, allow_inf_nan=False)]
NonNegative = Annotated[Float, Field(ge=0)]
OptCount = Annotated[Count | None, BeforeValidator(null_text)]
OptCount0 = Annotated[Count0 | None, BeforeValidator(null_text)]
OptStr = Annotated[str | None, BeforeValidator(null_text)]


class PolicyAdaptation(ConfigModel):
    """Parameter-efficient training (:func:`.lora.adapt_policy`): LoRA adapters of rank ``lora_r``
    (0: none), and/or only the top ``train_top_layers`` decoder layers trained."""

    lora_r: Count0 = 0
    lora_alpha: Count = 16
    lora_dropout: Annotated[Float, Field(ge=0, lt=1)] = 0.0
    lora_target_modules: str = "all-linear"
    train_top_layers: Count | None = None


class SFTWarmup(ConfigModel):
    """The supervised warm-up on the pool's gold answers (:func:`.sft.sft_warmup`): ``steps`` AdamW
    steps at ``lr`` on ``batch_size`` random rows, each completion ``template`` with the answer."""

    steps: Count0
    lr: Positive
    batch_size: Count
    template: str
    seed: Count0
    max_prompt_tokens: Count | None
    grad_clip: Positive
    bf16: bool = True
    progress: bool = True


class GRPOUpdate(ConfigModel):
    """The optimise stage's knobs (:func:`.optimise.grpo_update`): the batch's split into
    mini-batches (one optimizer update each) and micro-batches, and the clipped surrogate's terms."""

    batch_size: Count
    mini_batch: Count  # tasks per optimizer update
    micro_batch_size: Count
    ppo_epochs: Count
    temperature: Positive
    clip_eps: Positive
    kl_coef: NonNegative
    loss_agg: LossAgg
    adv_eps: Positive
    grad_clip: Positive
    bf16: bool = True


class _DataKeys(ConfigModel):
    """The data, model and adaptation keys of :class:`TrainConfig` (first in its key order)."""

    # --- data
    pool: str = ""  # training pool (verl/GURU parquet or JSONL)
    eval_pool: OptStr = None  # held-out pool; default: eval.parquet beside a train.parquet
    eval_limit: OptCount = None  # evaluate on at most this many held-out tasks
    weak_column: OptStr = None  # reference pass rates for BOTS' interpolation / offline
    strong_column: OptStr = None
    # Task embeddings, for the methods that read them (bots-embed, bots-sim): "policy" computes
    # them from the starting policy once at start (one prefill per prompt, after the warm-up),
    # else a file `bots embed` wrote, read by task id. Methods that read none ignore it.
    embeddings: OptStr = None
    system_prompt: OptStr = None  # None: keep the pool's; "": drop system messages; else replace
    max_prompt_tokens: OptCount = 1024
    verifiers: JsonDict = Field(default_factory=dict)  # extra {prefix: "module:function"}
    # --- model
    model: str = "tiny"  # tiny | tiny-HxL | smollm2 | local HF directory | .gguf file
    device: str = "auto"  # auto: CUDA when present
    dtype: str = "auto"  # weights: float32 (bf16 autocast on CUDA does the rest); float64 for reference runs
    bf16: bool = True  # bf16 autocast on CUDA (ignored on CPU)
    gradient_checkpointing: bool = False  # CUDA memory saver (allowed on CPU too)
    # --- parameter-efficient training (docs/training.md): only the adapter or the top layers
    # train, and checkpoints hold only them
    lora_r: Count0 = 0  # > 0: train LoRA adapters of this rank (peft) instead of the weights
    lora_alpha: Count = 16  # LoRA scale numerator (the update is scaled by lora_alpha / lora_r)
    lora_dropout: Annotated[Float, Field(ge=0, lt=1)] = 0.0
    lora_target_modules: str = "all-linear"  # or comma-separated linear-layer names ("q_proj,v_proj")
    train_top_layers: OptCount = None  # train only the top k decoder layers (with lora_r: adapt only them)


def _selection_annotation(p: Parameter) -> Any:
    return {"float": Float, "int": Int, "bool": bool}[p.type]


if TYPE_CHECKING:  # the generated keys are read by name (TrainConfig.param)
    _SelectionKeys = _DataKeys
else:
    _SelectionKeys = create_model(
        "_SelectionKeys",
        __base__=_DataKeys,
        __module__=__name__,
        **{n: (_selection_annotation(p), _TRAINER_DEFAULTS.get(n, p.default)) for n, p in SELECTION_KEYS.items()},
    )


class TrainConfig(_SelectionKeys):
    """Every knob of ``bots train``. Defaults follow the paper's GRPO setting
    except the sizes, which are CPU-friendly; the example configs in ``configs/`` scale them up.
    ``method`` holds the canonical name once validated (an alias such as ``dapo`` resolves)."""

    # --- selection: the method, and one key per parameter of the catalogue (SELECTION_KEYS,
    # generated; each reaches the methods that take it)
    method: str = "bots"  # a name of bots_rft.selector.registry.METHODS
    # Parameters of methods registered after this module was imported, by name (each also
    # accepted as a top-level key, which lands here).
    method_params: JsonDict = Field(default_factory=dict)
    # DAPO's dynamic sampling on top of the method: roll out generation batches the method
    # proposes, train on the groups whose rollouts disagree; the method still learns from every
    # rolled-out group. method=dynamic is the paper's baseline (epoch order + this filter).
    dynamic_sampling: bool = False
    # The dilution test (bots_rft.train.filler): the last filler_tasks of every batch are drawn
    # uniformly from the tasks whose filler_column pass rate is >= filler_min_rate (groups that
    # carry no GRPO signal), the method choosing the other batch_size - filler_tasks. 0: off.
    filler_tasks: Count0 = 0
    filler_column: OptStr = None
    filler_min_rate: Annotated[Float, Field(ge=0.0, le=1.0)] = 1.0
    # The starvation / verifier-failure guard (bots_rft.GroupGuard), on with guard=true: per group
    # of tasks (guard_groups: the pool's data_source or ability), a warning once a group's rollouts
    # all failed in guard_zero_streak updates in a row, and each batch holding at least
    # ceil(guard_min_share * batch_size) tasks of every group (0: no floor; at most 1 / groups)
    guard: bool = False
    guard_groups: GuardGroups = "data_source"
    guard_min_share: Annotated[Float, Field(ge=0, le=1)] = 0.0
    guard_zero_streak: Count = 3
    # --- GRPO
    steps: Count = 20
    batch_size: Count = 8  # tasks per step (paper: 256)
    rollouts: Count = 4  # rollouts per task (paper: 16)
    mini_batch_size: OptCount = None  # tasks per optimizer update (paper: 32); None: batch_size
    micro_batch_size: Count = 16  # sequences per forward/backward (gradient accumulation)
    ppo_epochs: Count = 1
    temperature: Positive = 1.0
    top_p: Annotated[Float, Field(gt=0, le=1)] = 1.0
    max_new_tokens: Count = 64
    generation_batch_size: Count = 64  # sequences decoded together
    # fast (default): each prompt encoded once for its n rollouts, the prompts'
    # common prefix once, finished rows leave the batch (same sampling distribution);
    # speculative: fast + a bfloat16 draft proposing tokens the policy accepts or replaces (same
    # distribution; one bf16 copy of the weights per step)
    rollout_engine: RolloutEngine = "fast"
    # fp32: sample with the policy; int8 (CPU, with lora_r or train_top_layers): with a twin whose
    # frozen linear layers are int8 (faster; the loss's log-probs still come from the policy)
    rollout_precision: RolloutPrecision = "fp32"
    lr: Positive = 1e-6
    warmup_steps: Count0 = 10
    weight_decay: NonNegative = 0.1
    grad_clip: Positive = 1.0
    clip_eps: Positive = 0.2
    kl_coef: NonNegative = 0.0  # > 0 keeps a frozen reference model and adds k3 KL
    loss_agg: LossAgg = "token-mean"  # token-mean | seq-mean-token-mean
    adv_eps: Positive = 1e-6
    # --- optional supervised warm-up on the pool's gold answers (before step 0)
    sft_steps: Count0 = 0
    sft_lr: Positive = 1e-3
    sft_batch_size: Count = 16
    sft_template: str = "<answer>{answer}</answer>"
    # --- evaluation, logging, checkpoints
    eval_every: Count0 = 5  # 0: only at the start and the end
    eval_max_new_tokens: OptCount = None  # default: max_new_tokens
    # 0: held-out accuracy is greedy decoding's; k >= 1: the mean reward of k samples per task at
    # the training temperature (avg@k), a smoother measure of the policy RL actually trains.
    eval_samples: Count0 = 0
    # With eval_samples >= 1: also decode every evaluated task greedily, logged as
    # greedy_accuracy beside the avg@k accuracy (both measures of the same policy at each step).
    eval_greedy: bool = False
    out_dir: str = "runs/train"
    save_every: Count0 = 0  # 0: only on SIGTERM and at the end
    keep_checkpoints: Count = 2
    resume: bool = False
    overwrite: bool = False  # replace a previous run in out_dir (else a run there is refused unless resuming)
    extend_pool: bool = False  # resume on a pool with new tasks (they start at the prior); removed tasks: error
    # Resuming with other selection parameters (lam, rho, target, thompson, tau, adaptive_rho,
    # adaptive_lam) than the checkpoint's:
    # "error" refuses, "config" applies the new values from the resumed step on (recorded in the
    # next checkpoint), "checkpoint" keeps the saved ones.
    resume_params: ResumeParams = "error"
    tensorboard: bool = True  # when the tensorboard package is installed
    progress: bool = True
    # --- misc
    seed: Count0 = 0
    # Verifier processes: >= 1 bounds every hang by reward_timeout (about 60 us of IPC per
    # response); 0 scores in-process (a timer stops Python-level hangs only); None: 2.
    reward_workers: OptCount0 = 1
    reward_timeout: Positive = 30.0
    verifier_error_stop: Annotated[Float, Field(gt=0, le=1)] = (
        1.0  # stop (exit 3) when this share of a step's verifications are verifier errors
    )
    threads: OptCount = None  # torch CPU threads
    distributed: Distributed = "ddp"  # ddp | fsdp (when launched under torchrun)

    # ------------------------------------------------------------------ validation
    # Each key's type and range is in its annotation above; these are the checks pydantic cannot
    # state as a type: the method table's names and ranges, and how the keys fit together.
    @field_validator("method")
    @classmethod
    def _resolve_method(cls, name: str) -> str:
        """The canonical name of ``name`` (an alias such as ``dapo`` resolves), a trainer method."""
        try:
            m = method_spec(name)
        except BotsError as exc:  # the method table's message, as the config's error class
            raise ConfigError(str(exc)) from None
        if not m.trainer:
            raise ConfigError(f"method: {m.name!r} runs in bots simulate only (docs/peers.md)")
        return m.name

    @field_validator(*SELECTION_KEYS)
    @classmethod
    def _in_catalogue_range(cls, value: Any, info: Any) -> Any:
        try:
            return SELECTION_KEYS[info.field_name].check(value)
        except BotsError as exc:
            raise ConfigError(str(exc)) from None

    @model_validator(mode="before")
    @classmethod
    def _gather_method_params(cls, data: Any) -> Any:
        """A top-level key naming a parameter of a method registered later goes to ``method_params``."""
        if not isinstance(data, dict):
            return data
        moved = {k: v for k, v in data.items() if k not in cls.model_fields and parameter(k) is not None}
        if not moved:
            return data
        held = data.get("method_params") or {}
        return {k: v for k, v in data.items() if k not in moved} | {"method_params": {**held, **moved}}

    @field_validator("method_params")
    @classmethod
    def _method_params(cls, values: dict[str, Any]) -> dict[str, Any]:
        """Each a parameter of a registered method, checked against its range."""
        return {str(k): _checked_param(str(k), v) for k, v in values.items()}

    @field_validator("rollouts")
    @classmethod
    def _a_group(cls, n: int) -> int:
        if n < 2:  # a group of one has no spread: its GRPO advantage is always zero
            raise Invalid("GRPO needs at least 2 rollouts per task")
        return n

    @field_validator("dtype")
    @classmethod
    def _dtype(cls, name: str) -> str:
        if name != "auto" and name not in DTYPE_NAMES:
            raise Invalid(f"expected 'auto' or one of {sorted(DTYPE_NAMES)}")
        return name

    @field_validator("lora_target_modules")
    @classmethod
    def _module_names(cls, spec: str) -> str:
        if not all(t.strip().replace("_", "").replace("-", "").isalnum() for t in spec.split(",")):
            raise Invalid("expected 'all-linear' or comma-separated module names")
        return spec

    @field_validator("sft_template")
    @classmethod
    def _template(cls, template: str) -> str:
        if "{answer}" not in template:
            raise Invalid("must contain '{answer}'")
        return template

    @field_validator("verifiers")
    @classmethod
    def _verifier_targets(cls, verifiers: dict[str, Any]) -> dict[str, Any]:
        for prefix, target in verifiers.items():
            if not isinstance(target, str) or ":" not in target:
                raise ConfigError(f"verifiers.{prefix}: expected 'module:function', got {target!r}")
        return {str(k): v for k, v in verifiers.items()}

    @model_validator(mode="after")
    def _fits_together(self) -> TrainConfig:
        """The checks that involve more than one key."""
        m = method_spec(self.method)
        clash = [
            p.name
            for p in m.params
            if p.name in type(self).model_fields and p.name not in SELECTION_KEYS and p.name not in TRAINER_SUPPLIED
        ]
        if clash:  # a method added later whose parameter is named like one of the trainer's keys
            raise ConfigError(f"method: the {m.name} method's parameter {clash[0]!r} is a trainer key; rename it")
        if not self.pool:
            raise ConfigError("pool: a training pool path is required (pool=PATH)")
        if self.mini_batch_size is not None and self.batch_size % self.mini_batch_size:
            raise ConfigError(
                f"mini_batch_size: must divide batch_size={self.batch_size}, got {self.mini_batch_size!r}"
            )
        mode = m.step_mode(self.dynamic_sampling)
        if m.rollout_mode is RolloutMode.PLANNED:
            self._check_plan()
        if m.rollout_mode is RolloutMode.CALLBACK and self.dynamic_sampling:
            raise ConfigError(
                f"dynamic_sampling: method {self.method!r} rolls out inside its own selection and builds its "
                "batches itself; got True"
            )
        if self.guard and mode is not RolloutMode.PLAIN:
            # These fill or plan their batches themselves: there is no single select to hold the floor.
            raise ConfigError(
                f"guard: works with methods that select a batch and then learn from it; method "
                f"{self.method!r} with dynamic_sampling={self.dynamic_sampling} builds its batches itself, got True"
            )
        if self.rollout_precision == "int8" and not self.lora_r and self.train_top_layers is None:
            raise ConfigError(
                "rollout_precision: 'int8' quantizes the frozen weights: set lora_r or train_top_layers, got 'int8'"
            )
        if self.rollout_precision == "int8" and self.rollout_engine == "speculative":
            raise ConfigError(
                "rollout_engine: 'speculative' verifies every token with the policy itself, so it cannot sample with "
                "rollout_precision: 'int8''s twin; choose one, got 'speculative'"
            )
        if self.distributed == "fsdp" and self.rollout_engine == "speculative":
            raise ConfigError(
                "rollout_engine: 'speculative' keeps a bfloat16 copy of the whole model, which FSDP's sharding is "
                "there to avoid; use 'fast' with distributed: fsdp, got 'speculative'"
            )
        if m.reads_embeddings and not self.embeddings:
            raise ConfigError(
                f"embeddings: method {self.method!r} reads task embeddings; set embeddings: policy (the starting "
                "policy's, computed at start) or a file from bots embed, got None"
            )
        if m.references == "required" and not (self.weak_column and self.strong_column):
            raise ConfigError(
                f"method: {self.method!r} needs reference pass rates ({m.summary}); set weak_column and strong_column"
            )
        if self.filler_tasks:
            if self.filler_column is None:
                raise ConfigError(f"filler_column: filler_tasks={self.filler_tasks} needs a pass-rate column, got None")
            if self.filler_tasks >= self.batch_size:
                raise ConfigError(f"filler_tasks: must be < batch_size={self.batch_size}, got {self.filler_tasks}")
            if mode is not RolloutMode.PLAIN or self.guard:
                raise ConfigError(
                    f"filler_tasks: works with methods that select a batch and then learn from it (no guard); method "
                    f"{self.method!r} with dynamic_sampling={self.dynamic_sampling}, guard={self.guard}, got "
                    f"{self.filler_tasks}"
                )
        if (self.weak_column is None) != (self.strong_column is None):
            raise ConfigError(
                f"weak_column/strong_column: set both or neither, got {self.weak_column!r} and {self.strong_column!r}"
            )
        return self

    def _check_plan(self) -> None:
        """A planned method (bots-plan): the plan's bounds fit GRPO and its budget of
        batch_size * rollouts."""
        n_min, n_max = self.param("n_min"), self.param("n_max")
        if n_min < 2:  # a group of one has zero advantage: its rollout would be spent for nothing
            raise ConfigError(f"n_min: GRPO needs at least 2 rollouts per planned task, got {n_min}")
        if n_max < n_min:
            raise ConfigError(f"n_max: must be >= n_min={n_min}, got {n_max}")
        budget = self.batch_size * self.rollouts
        if budget < n_min:
            raise ConfigError(
                f"n_min: the plan's budget batch_size * rollouts = {budget} cannot give one task n_min "
                f"rollouts, got {n_min}"
            )
        if self.dynamic_sampling:
            raise ConfigError(
                f"dynamic_sampling: method {self.method!r} already spends its budget where groups are expected "
                "to be informative, and has no generation batches to filter; got True"
            )

    # ------------------------------------------------------------------ selection parameters
    def param(self, name: str) -> Any:
        """The value of the selection parameter ``name``: its key's, else its default (a
        parameter of a registered method not set here); a name no method takes is a KeyError."""
        if name in SELECTION_KEYS:
            return getattr(self, name)
        if name in self.method_params:
            return self.method_params[name]
        found = parameter(name)
        if found is None:
            raise KeyError(name)
        return found.default

    def method_values(self) -> dict[str, Any]:
        """The values of every parameter the method takes, as its selector is built with them:
        ``n_rollouts`` is ``rollouts`` (n), ``seed`` the run's seed, the others their keys'."""
        return {p.name: self._supplied(p.name) for p in method_spec(self.method).params}

    def _supplied(self, name: str) -> Any:
        if name == "n_rollouts":
            return self.rollouts
        if name == "seed":
            return self.seed
        return self.param(name)

    # ------------------------------------------------------------------ views for the leaves
    @property
    def mini_batch(self) -> int:
        """Tasks per optimizer update (``mini_batch_size``, default the whole batch)."""
        return self.mini_batch_size or self.batch_size

    @property
    def adaptation(self) -> PolicyAdaptation:
        return PolicyAdaptation(
            lora_r=self.lora_r,
            lora_alpha=self.lora_alpha,
            lora_dropout=self.lora_dropout,
            lora_target_modules=self.lora_target_modules,
            train_top_layers=self.train_top_layers,
        )

    @property
    def sft(self) -> SFTWarmup:
        return SFTWarmup(
            steps=self.sft_steps,
            lr=self.sft_lr,
            batch_size=self.sft_batch_size,
            template=self.sft_template,
            seed=self.seed,
            max_prompt_tokens=self.max_prompt_tokens,
            grad_clip=self.grad_clip,
            bf16=self.bf16,
            progress=self.progress,
        )

    @property
    def grpo(self) -> GRPOUpdate:
        return GRPOUpdate(
            batch_size=self.batch_size,
            mini_batch=self.mini_batch,
            micro_batch_size=self.micro_batch_size,
            ppo_epochs=self.ppo_epochs,
            temperature=self.temperature,
            clip_eps=self.clip_eps,
            kl_coef=self.kl_coef,
            loss_agg=self.loss_agg,
            adv_eps=self.adv_eps,
            grad_clip=self.grad_clip,
            bf16=self.bf16,
        )

    @classmethod
    def defaults(cls) -> dict[str, Any]:
        """Every key's default (a config without a pool is not valid, so this is no config)."""
        return {k: f.get_default(call_default_factory=True) for k, f in cls.model_fields.items()}


def _check_keys(data: dict[str, Any], where: str) -> None:
    """Unknown keys, named with where they came from (a file, or the overrides)."""
    unknown = sorted(k for k in set(data) - set(TrainConfig.model_fields) if parameter(k) is None)
    if unknown:
        known = sorted({*TrainConfig.model_fields, *parameters()} - set(TRAINER_SUPPLIED))
        raise ConfigError(f"{where}: unknown key(s) {unknown}; known keys: {known}")


def _checked_param(key: str, value: Any) -> Any:
    """``value`` of the registered method parameter ``key`` (text from the command line parsed as
    its type), checked against its range; a ConfigError naming the key and the value otherwise."""
    p = parameter(key)
    if p is None or key in TRAINER_SUPPLIED:
        raise ConfigError(f"method_params: {key!r} is not a parameter of a registered method")
    if isinstance(value, str):
        try:
            value = TypeAdapter(_selection_annotation(p)).validate_python(value)
        except ValidationError:
            raise ConfigError(f"{key}: must be {p.type} {p.span}, got {value!r}") from None
    try:
        return p.check(value, key)
    except BotsError as exc:
        raise ConfigError(str(exc)) from None


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
        if key not in TrainConfig.model_fields:  # a parameter of a method registered later
            out[key] = _checked_param(key, value)
            continue
        try:
            out[key] = field_adapter(TrainConfig, key).validate_python(value)
        except ValidationError as exc:
            raise config_error(exc, TrainConfig, field=key) from None
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
        # Relative pool paths in a config file are relative to the current directory (like CLI paths).
        data = dict(loaded)
    if isinstance(overrides, dict):
        _check_keys(overrides, "override")
        data.update(overrides)
    elif overrides:
        data.update(parse_overrides(list(overrides)))
    return TrainConfig(**data)
