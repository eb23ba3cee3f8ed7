"""Mark the dilution test's fillers in a strings pool: tasks the starting policy never solved in
its measured samples (``start_pass_rate`` 0) among words of at least ``--min-length`` letters.

Such groups carry no GRPO signal while the policy stays unable to reverse them: on the trial's
pool, Random's groups of 16-20-letter words that the start policy left at 0/8 were effective (some
but not all rollouts right) 5% of the time over training, against 38% for the tasks the start
policy solved 8/8, whose sampling errors keep giving signal. Writes the column ``--column`` (1.0 for
a filler, else 0.0) into the pool file in place; the trainer then takes ``filler_column`` with
``filler_min_rate: 1.0``.

    python examples/trial/dilution_fillers.py runs/dilution/train.parquet
"""

from __future__ import annotations

import argparse
import sys

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("pool", help="a strings pool's train.parquet with a start_pass_rate column")
    p.add_argument("--min-length", type=int, default=16, help="shortest filler word (default: 16)")
    p.add_argument("--column", default="zero_variance_filler", help="the column to write")
    args = p.parse_args(argv)
    try:
        table = pq.read_table(args.pool)
    except (OSError, pa.ArrowInvalid) as exc:
        print(f"dilution_fillers: pool: cannot read {args.pool!r} ({exc})", file=sys.stderr)
        return 2
    if "start_pass_rate" not in table.column_names:
        print(f"dilution_fillers: pool: {args.pool!r} has no start_pass_rate column", file=sys.stderr)
        return 2
    start = np.asarray(table.column("start_pass_rate").to_numpy(zero_copy_only=False), dtype=np.float64)
    length = np.asarray([info["length"] for info in table.column("extra_info").to_pylist()], dtype=np.int64)
    filler = ((start == 0.0) & (length >= args.min_length)).astype(np.float64)
    if args.column in table.column_names:
        table = table.drop([args.column])
    pq.write_table(table.append_column(args.column, pa.array(filler)), args.pool)
    print(f"dilution_fillers: {int(filler.sum())} of {filler.size} tasks marked in {args.column!r}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
