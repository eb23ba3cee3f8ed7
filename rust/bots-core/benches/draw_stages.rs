//! Per-stage cost of a Thompson step on one thread, for every SIMD path this CPU runs: one JSON
//! object per line (ns per task; see `bots_core::profile`).
//!
//! `cargo bench -p bots-core --bench draw_stages [-- TASKS [REPS]]` (defaults: 1,000,000 tasks,
//! best of 7 passes).

use bots_core::available_simd_paths;
use bots_core::profile::thompson_stages;

fn main() {
    // cargo bench passes `--bench`; numbers are the positional arguments.
    let numbers: Vec<usize> = std::env::args().skip(1).filter_map(|a| a.parse().ok()).collect();
    let tasks = numbers.first().copied().unwrap_or(1_000_000);
    let reps = numbers.get(1).copied().unwrap_or(7);
    for simd in available_simd_paths() {
        println!("{}", thompson_stages(simd, tasks, reps).to_json());
    }
}
