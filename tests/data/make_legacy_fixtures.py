"""How the legacy checkpoint fixtures in this folder were written: by bots-rft at commit fd55f4b,
the last version whose checkpoint.py wrote the BOTSRFT v1 format (``python make_legacy_fixtures.py
tests/data`` there). It cannot run on later versions, which no longer write that format; it is kept
so the fixtures' contents are known. ``legacy_tree/`` is the trainer's old layout (``tree.json`` +
``tree.safetensors``), written by that version's ``bots_rft.train.run_checkpoint.save_tree`` with::

    obj = {"weights": {"layer.weight": torch.arange(12, dtype=torch.float32).reshape(3, 4) / 7,
                       "layer.bias": torch.tensor([1.5, -2.0], dtype=torch.bfloat16)},
           "optimizer": {"state": {0: {"step": torch.tensor(3.0), "exp_avg": torch.ones(2)}},
                         "param_groups": [{"lr": 0.1, "params": [0]}]},
           "rng": {"python": random.getstate(), "numpy": np.random.get_state()},  # after seed(3)
           "steps": (1, 2, 3), "note": "legacy", "none": None}
"""

import hashlib
import json
import sys
from pathlib import Path

import numpy as np

from bots_rft import BOTS, Interpolation, checkpoint
from bots_rft.selector.multipool import MultiPool

out = Path(sys.argv[1])


def scenario():
    n = 300
    rng = np.random.default_rng(5)
    weak = rng.random(n)
    weak[::13] = np.nan
    strong = np.clip(weak + 0.2, 0, 1)
    sel = BOTS(
        n,
        prior_alpha=np.linspace(0.5, 2.0, n),
        prior_beta=np.linspace(2.0, 0.5, n),
        evidence=Interpolation(weak, strong),
        seed=42,
    )
    for t in range(4):
        ids = sel.select(32)
        r = np.random.default_rng(100 + t)
        sel.update(ids, r.binomial(8, 0.4, len(ids)), 8)
    return sel, weak, strong


def arrays(node, path="", acc=None):
    acc = {} if acc is None else acc
    if isinstance(node, dict):
        for k, v in node.items():
            arrays(v, f"{path}/{k}", acc)
    elif isinstance(node, (list, tuple)):
        for i, v in enumerate(node):
            arrays(v, f"{path}/{i}", acc)
    elif isinstance(node, np.ndarray):
        acc[path] = [node.dtype.str, list(node.shape), hashlib.sha256(np.ascontiguousarray(node).tobytes()).hexdigest()]
    return acc


sel, weak, strong = scenario()
sel.save(out / "legacy_selector.bots")
state = sel.state_dict()
mixed = {
    "selector": state,
    "ids": np.array(["task-a", "b", "ç"]),
    "mask": np.arange(7) % 3 == 0,
    "counts": np.arange(12, dtype=np.int32).reshape(3, 4),
    "empty": np.zeros((0, 2)),
    "scalar": np.float32(0.5),
    "zero_d": np.array(3.25),
    "nested": [1, (2.5, "x"), None, True, {"k": np.uint8(7)}],
}
(out / "legacy_state.bin").write_bytes(checkpoint.to_bytes(mixed))
mix = MultiPool([BOTS(40, seed=1), BOTS(25, prior_alpha=2.0, seed=2)], weights=[3, 1], names=["math", "code"])
for t in range(3):
    ids = mix.select(16)
    mix.update(ids, np.random.default_rng(t).binomial(4, 0.5, len(ids)), 4)
mix.save(out / "legacy_multipool.bots")
expected = {
    "selector": {
        "arrays": arrays(checkpoint.load_state(out / "legacy_selector.bots")),
        "next": BOTS.load(out / "legacy_selector.bots").select(32).tolist(),
    },
    "state_bytes": {"arrays": arrays(checkpoint.from_bytes((out / "legacy_state.bin").read_bytes()))},
    "multipool": {
        "arrays": arrays(checkpoint.load_state(out / "legacy_multipool.bots")),
        "next": MultiPool.load(out / "legacy_multipool.bots").select(16).tolist(),
    },
}
(out / "legacy_expected.json").write_text(json.dumps(expected, indent=1, sort_keys=True) + "\n")
print(json.dumps(expected)[:600])
