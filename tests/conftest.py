from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, settings

settings.register_profile("ci", max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("ci")

# The torch backend's Triton kernels are tested on CPU under Triton's interpreter, which Triton
# reads once, when it is first imported (any test may import it first, through torch or a trainer).
# On a host without an NVIDIA device the interpreter is the only way they can run, so it is set for
# the whole session there; a GPU host compiles them as usual.
if not os.path.exists("/dev/nvidiactl"):
    os.environ.setdefault("TRITON_INTERPRET", "1")


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng(12345)


@pytest.fixture(scope="module")
def toy_pool(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The trainer tests' toy pool (12 tasks, 3 held out; ``bots_rft.train.toy``), once per module."""
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from bots_rft.train.toy import write_toy_pool

    train_path, _ = write_toy_pool(tmp_path_factory.mktemp("toy"), num_tasks=12, eval_tasks=3)
    return train_path


@pytest.fixture(scope="module", autouse=True)
def _no_ray_left_running_after_a_module() -> Iterator[None]:
    """A module that starts Ray and leaves it running (the pinned selector results do, starting it
    only when needed) would make the next module's own ``ray.init`` fail; each module starts from
    no Ray."""
    yield
    ray = sys.modules.get("ray")
    if ray is not None and ray.is_initialized():
        ray.shutdown()
