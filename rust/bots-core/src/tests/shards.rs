//! A selection over shards of a pool, merged, equals the selection over the whole pool.

use super::pool_with_ties as pool;
use crate::{select_only, select_shard, step_shard, Exclude, Scoring, SelectArgs, Selection, CHUNK};

/// Merges per-shard selections by (distance, global id) and keeps the first `k`: what a
/// driver of a sharded pool does.
fn merge(parts: Vec<Selection>, k: usize) -> (Vec<usize>, Vec<f64>) {
    let mut all: Vec<(f64, usize)> = parts.into_iter().flat_map(|s| s.distances.into_iter().zip(s.ids)).collect();
    all.sort_by(|x, y| x.0.total_cmp(&y.0).then(x.1.cmp(&y.1)));
    all.truncate(k);
    (all.iter().map(|x| x.1).collect(), all.iter().map(|x| x.0).collect())
}

/// Shard boundaries: uneven, one inside a chunk, one a single task wide.
fn bounds(n: usize) -> Vec<(usize, usize)> {
    let cuts = [0, 7, 8, CHUNK + 300, 2 * CHUNK + 1, n];
    cuts.windows(2).map(|w| (w[0], w[1])).collect()
}

#[test]
fn merged_shard_selections_equal_the_whole_pool_selection() {
    let n = 3 * CHUNK + 77;
    let (mut alpha, beta) = pool(n, 11);
    // Shapes below 1 take the scalar sampler, on its own stream keyed by the task's index.
    for i in (0..n).step_by(97) {
        alpha[i] = 0.4;
    }
    let excluded: Vec<bool> = (0..n).map(|i| i % 13 == 0 || i == 7).collect();
    let scorings = [
        Scoring::Thompson { seed: 3, counter: 5 },
        Scoring::Greedy,
        Scoring::Softmax { tau: 0.05, thompson: true, seed: 3, counter: 5 },
        Scoring::Softmax { tau: 0.2, thompson: false, seed: 9, counter: 1 },
    ];
    for scoring in scorings {
        for k in [1, 40, 300] {
            let whole =
                select_only(&alpha, &beta, SelectArgs { k, target: 0.4, scoring, exclude: Exclude::Mask(&excluded), hint: None }).unwrap();
            let mut parts = Vec::new();
            for (lo, hi) in bounds(n) {
                let mask = &excluded[lo..hi];
                let selectable = mask.iter().filter(|&&x| !x).count();
                // A shard ranks at most its selectable tasks; the ids variant of exclusion too.
                let ids: Vec<usize> = (0..hi - lo).filter(|&i| mask[i]).collect();
                let args = SelectArgs { k: k.min(selectable), target: 0.4, scoring, exclude: Exclude::Ids(&ids), hint: None };
                let part = select_shard(&alpha[lo..hi], &beta[lo..hi], lo, args).unwrap();
                assert!(part.ids.iter().all(|&j| (lo..hi).contains(&j)), "ids are global");
                // The fused pass (no update) gives the same shard selection, a hint included.
                let (mut a, mut b) = (alpha[lo..hi].to_vec(), beta[lo..hi].to_vec());
                let fused =
                    step_shard(&mut a, &mut b, lo, None, Some(SelectArgs { hint: Some(0.0), exclude: Exclude::Mask(mask), ..args }));
                assert_eq!(fused.unwrap().unwrap(), part);
                parts.push(part);
            }
            let (ids, distances) = merge(parts, k);
            assert_eq!(ids, whole.ids, "{scoring:?}, k = {k}");
            assert_eq!(distances, whole.distances, "{scoring:?}, k = {k}");
        }
    }
}

#[test]
fn shard_errors_name_slice_positions() {
    let (mut alpha, beta) = pool(2 * CHUNK, 2);
    alpha[CHUNK + 5] = f64::NAN;
    let args = SelectArgs { k: 3, target: 0.5, scoring: Scoring::Thompson { seed: 1, counter: 0 }, exclude: Exclude::None, hint: None };
    let err = select_shard(&alpha[CHUNK..], &beta[CHUNK..], CHUNK, args).unwrap_err();
    assert_eq!(err.argument, "alpha");
    assert!(err.message.contains("at index 5"), "{}", err.message);
}
