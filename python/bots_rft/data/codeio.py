"""CodeI/O problems as a code pool (``bots data codeio``), shipped offline by ``reasoning-gym``.

Each CodeI/O problem is a reference program that ends with ``def main_solution(...)`` and an
input generator. Those whose reference and generator import only the standard library (the
sandbox shows no other package) become HumanEval-style tasks:

- prompt: the reference's imports, helpers and ``def main_solution(...)`` line;
- canonical completion: the body of ``main_solution``;
- test: ``check(candidate)`` compares the answer on a few seeded inputs with the reference's
  outputs (as JSON values).

The reference outputs are computed in the code sandbox (the references are third-party code),
twice, in two processes: a reference whose output differs between them (string hashing differs
between processes, so the order of a set of strings can show) or that fails, runs over its time
or gives no JSON value is left out.
"""

from __future__ import annotations

import ast
import gzip
import json
import sys
from pathlib import Path
from typing import Any

from .._pyast import parse
from ..errors import DataError
from .humaneval import HUMANEVAL_INSTRUCTION
from .schema import chat, make_row
from .split import PoolPaths, split_rows, write_split

__all__ = ["CODEIO_DATA_SOURCE", "codeio_tasks", "codeio_rows", "build_codeio_pool"]

# A ``codegen`` source: scored by the code verifier (see rewards.registry).
CODEIO_DATA_SOURCE = "codegen__codeio"
# Seeded inputs per task; each generator call gets Random(1000 * problem + case).
CASES = 3
# Problems per sandbox run when computing the reference outputs (each sandbox run has its own
# time limit, so one slow batch costs only its own problems).
_BATCH = 100

# Each reference runs under these string-hash seeds, each in its own interpreter, and only cases
# all of them agree on are kept. A reference that iterates over a set of strings returns its
# items in an order that depends on the seed, which is random in every process (the verifier's
# included): two processes with random seeds agree by chance about half the time, so such a
# problem could be kept and then fail right answers at random. Fixed seeds make the check
# deterministic and the chance of agreeing on every seed by luck small.
HASH_SEEDS = ("0", "1", "2", "3")

# One interpreter's outputs: problems.json in, {problem: [[args, output], ...]} out.
_OUTPUTS = """
import json, os, signal, sys
from random import Random
# The references may print: only this script's one line goes to the real standard output.
result = os.fdopen(os.dup(1), 'w')
quiet = os.open(os.devnull, os.O_WRONLY)
os.dup2(quiet, 1)
sys.stdout = open(os.devnull, 'w')
def norm(v):
    return json.loads(json.dumps(v, allow_nan=False))
def alarm(*_):
    raise TimeoutError
signal.signal(signal.SIGALRM, alarm)
out = {}
for p in json.load(open('problems.json')):
    try:
        signal.alarm(2)
        gen, first, second = {'Random': Random}, {}, {}
        exec(p['input_generator'], gen)
        exec(p['code_sample'], first)
        exec(p['code_sample'], second)
        cases = []
        for seed in range(p['cases']):
            args = norm(gen['generate_inputs'](Random(1000 * p['i'] + seed)))
            want = norm(first['main_solution'](**args))
            if norm(second['main_solution'](**norm(args))) != want:
                raise ValueError('not deterministic')
            cases.append([args, want])
        out[p['i']] = cases
    except BaseException:
        pass
    finally:
        signal.alarm(0)
result.write(json.dumps(out))
result.close()
"""

# Runs outputs.py once per hash seed (environment variables are honoured: no -E) and prints the
# cases every run agrees on.
_AGREED = """
import json, os, subprocess, sys
runs = []
for seed in json.load(open('seeds.json')):
    env = {'PATH': os.environ.get('PATH', '/usr/bin:/bin'), 'PYTHONHASHSEED': seed}
    done = subprocess.run([sys.executable, '-S', '-B', 'outputs.py'], env=env, capture_output=True, text=True)
    runs.append(json.loads(done.stdout) if done.returncode == 0 and done.stdout else {})
first, rest = runs[0], runs[1:]
print(json.dumps({i: cases for i, cases in first.items() if all(r.get(i) == cases for r in rest)}))
"""


def _problems() -> list[dict[str, Any]]:
    import importlib.util

    # Found, not imported: importing reasoning_gym loads every generator it has.
    spec = importlib.util.find_spec("reasoning_gym")
    if spec is None or not spec.submodule_search_locations:
        raise DataError("bots data codeio needs reasoning-gym (part of the data extra: pip install 'bots-rft[data]')")
    path = Path(next(iter(spec.submodule_search_locations))) / "data" / "codeio.jsonl.gz"
    if not path.is_file():
        raise DataError(f"this reasoning-gym ships no CodeI/O data ({path} is missing)")
    with gzip.open(path, "rt", encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def _usable(i: int, row: dict[str, Any]) -> dict[str, Any] | None:
    """The problem if its reference and generator import only the standard library and the
    reference ends with ``def main_solution``; else None."""
    stdlib = set(sys.stdlib_module_names)
    try:
        tree = parse(row["code_sample"])
        generator = parse(row["input_generator"])
    except SyntaxError:
        return None
    modules = set()
    for node in [*ast.walk(tree), *ast.walk(generator)]:
        if isinstance(node, ast.Import):
            modules |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            modules.add((node.module or "").split(".")[0] if not node.level else "")
    last = tree.body[-1] if tree.body else None
    if not modules <= stdlib or not (isinstance(last, ast.FunctionDef) and last.name == "main_solution"):
        return None
    return {"i": i, "code_sample": row["code_sample"], "input_generator": row["input_generator"], "cases": CASES}


def _outputs(problems: list[dict[str, Any]]) -> dict[str, list[Any]]:
    """Each problem's cases ([arguments, output] pairs) that runs under every seed of
    :data:`HASH_SEEDS` agree on, computed in the sandbox."""
    from ..rewards.sandbox import SandboxLimits, run_python

    limits = SandboxLimits(timeout_s=300.0, memory_mb=1024, output_bytes=16 << 20, workdir_mb=64)
    agreed: dict[str, list[Any]] = {}
    for start in range(0, len(problems), _BATCH):
        files = {
            "problems.json": json.dumps(problems[start : start + _BATCH]),
            "outputs.py": _OUTPUTS,
            "seeds.json": json.dumps(list(HASH_SEEDS)),
        }
        run = run_python(_AGREED, files=files, limits=limits)
        if not run.ok:
            continue  # a reference that took the whole run down: the batch is left out
        agreed.update(json.loads(run.stdout))
    return agreed


def codeio_tasks(limit: int | None = None) -> list[dict[str, Any]]:
    """HumanEval-style tasks from CodeI/O, at most ``limit`` (default: every usable problem),
    spread evenly over the set. Each has ``id`` (the problem's line in reasoning-gym's file),
    ``prompt``, ``completion`` (the reference's body), ``whole`` (the reference's whole
    ``main_solution``), ``test``, ``entry_point`` and ``cases``.

    Runs the references in the code sandbox: raises
    :class:`~bots_rft.rewards.sandbox.SandboxUnavailableError` where there is none."""
    usable = [p for i, row in enumerate(_problems()) if (p := _usable(i, row)) is not None]
    if limit is not None:
        # A few more than asked: some references are left out (not deterministic, too slow).
        want = limit + max(5, limit // 5)
        usable = usable[:: max(1, len(usable) // want)][:want]
    outputs = _outputs(usable)
    tasks = []
    for p in usable:
        cases = outputs.get(str(p["i"]))
        if cases is None:
            continue
        code = p["code_sample"]
        fn = parse(code).body[-1]
        assert isinstance(fn, ast.FunctionDef)
        lines = code.splitlines()
        start = min([fn.lineno, *(d.lineno for d in fn.decorator_list)]) - 1
        body_start = fn.body[0].lineno - 1
        test = (
            "import json\nCASES = json.loads(" + repr(json.dumps(cases)) + ")\n"
            "def check(candidate):\n"
            "    for args, want in CASES:\n"
            "        assert json.loads(json.dumps(candidate(**args))) == want\n"
        )
        tasks.append(
            {
                "id": p["i"],
                "prompt": "\n".join(lines[:body_start]) + "\n",
                "completion": "\n".join(lines[body_start:]) + "\n",
                "whole": "\n".join(lines[start:]) + "\n",
                "test": test,
                "entry_point": "main_solution",
                "cases": cases,
            }
        )
    return tasks[:limit]


def codeio_rows(limit: int | None = None) -> list[dict[str, Any]]:
    """One row per task: ``data_source`` ``codegen__codeio``, ground truth the JSON
    ``{"prompt", "test", "entry_point"}`` that :func:`bots_rft.rewards.code.verify_code` runs."""
    rows = []
    for t in codeio_tasks(limit):
        rows.append(
            make_row(
                index=int(t["id"]),
                prompt=chat(HUMANEVAL_INSTRUCTION.format(prompt=t["prompt"])),
                ground_truth=json.dumps({"prompt": t["prompt"], "test": t["test"], "entry_point": t["entry_point"]}),
                data_source=CODEIO_DATA_SOURCE,
                ability="code",
                split="train",
                extra={"codeio_index": int(t["id"])},
            )
        )
    return rows


def build_codeio_pool(
    out_dir: str | Path, eval_fraction: float = 0.2, seed: int = 0, limit: int | None = None
) -> PoolPaths:
    train, evaluation = split_rows(codeio_rows(limit), eval_fraction, seed)
    return write_split(train, evaluation, out_dir)
