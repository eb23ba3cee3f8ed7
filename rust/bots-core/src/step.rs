//! One pass over the pool: the posterior update and the top-B selection, fused so each
//! chunk is updated and then sampled while it is still in cache.

use rayon::prelude::*;

use crate::error::{CoreError, Result};
use crate::kernel::{self, ChunkScore, ChunkUpdate, Worker};
use crate::select::{SelectArgs, Selection, TopK};
use crate::update::UpdateArgs;
use crate::CHUNK;

/// Applies `update` (if any) to every task, then selects (if asked) from the updated posterior.
/// Everything is validated before anything is written: on error the posterior is unchanged.
pub fn step(alpha: &mut [f64], beta: &mut [f64], update: Option<UpdateArgs>, select: Option<SelectArgs>) -> Result<Option<Selection>> {
    let n = pool_len(alpha, beta)?;
    if let Some(u) = &update {
        u.validate(n)?;
    }
    if let Some(s) = &select {
        s.validate(n)?;
    }
    let rolled = update.as_ref().map(|u| u.rolled_values(alpha, beta)).unwrap_or_default();
    let chunk_update = update.as_ref().map(|u| ChunkUpdate {
        prior_alpha: u.prior_alpha,
        prior_beta: u.prior_beta,
        evidence: u.evidence,
        decay: 1.0 - u.params.lam,
        lam: u.params.lam,
        weight: u.params.rho * u.params.n_rollouts,
        rolled: &rolled,
    });
    let chunk_score = select.as_ref().filter(|s| s.k > 0).map(|s| ChunkScore { target: s.target, scoring: s.scoring, exclude: s.exclude });
    if chunk_update.is_none() && chunk_score.is_none() {
        return Ok(select.map(|_| Selection::empty()));
    }
    let k = select.as_ref().map_or(0, |s| s.k);
    let backend = kernel::backend();
    let shared = TopK::shared_bound(select.and_then(|s| s.hint));
    let best = alpha
        .par_chunks_mut(CHUNK)
        .zip(beta.par_chunks_mut(CHUNK))
        .enumerate()
        .fold(
            || Worker::new(k, &shared),
            |mut worker, (c, (a, b))| {
                kernel::run_chunk(backend, a, b, c * CHUNK, chunk_update.as_ref(), chunk_score.as_ref(), &mut worker);
                worker
            },
        )
        .reduce(|| Worker::new(k, &shared), Worker::merge);
    match select {
        None => Ok(None),
        Some(s) => {
            let chosen = best.into_selection();
            if chosen.ids.len() < s.k {
                // The hint was tighter than the k-th distance: select again, without it, from the
                // posterior this pass has just updated (same draws, so the same result as one pass).
                return select_only(alpha, beta, SelectArgs { hint: None, ..s }).map(Some);
            }
            Ok(Some(chosen))
        }
    }
}

fn pool_len(alpha: &[f64], beta: &[f64]) -> Result<usize> {
    if beta.len() != alpha.len() {
        return Err(CoreError::shape("beta", format!("has length {}, alpha has {}", beta.len(), alpha.len())));
    }
    Ok(alpha.len())
}

/// Selection from a read-only posterior.
pub fn select_only(alpha: &[f64], beta: &[f64], args: SelectArgs) -> Result<Selection> {
    let n = pool_len(alpha, beta)?;
    args.validate(n)?;
    if args.k == 0 {
        return Ok(Selection::empty());
    }
    let score = ChunkScore { target: args.target, scoring: args.scoring, exclude: args.exclude };
    let backend = kernel::backend();
    let shared = TopK::shared_bound(args.hint);
    let best = alpha
        .par_chunks(CHUNK)
        .zip(beta.par_chunks(CHUNK))
        .enumerate()
        .fold(
            || Worker::new(args.k, &shared),
            |mut worker, (c, (a, b))| {
                kernel::run_score(backend, a, b, c * CHUNK, &score, &mut worker);
                worker
            },
        )
        .reduce(|| Worker::new(args.k, &shared), Worker::merge);
    let chosen = best.into_selection();
    if chosen.ids.len() < args.k {
        // See `step`: a too-tight hint; the full selection without it.
        return select_only(alpha, beta, SelectArgs { hint: None, ..args });
    }
    Ok(chosen)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::Xoshiro256pp;
    use crate::{Exclude, Scoring};

    #[test]
    fn a_hint_never_changes_the_result() {
        let n = 6 * CHUNK + 9;
        let mut r = Xoshiro256pp::from_seed(4);
        let a: Vec<f64> = (0..n).map(|_| 1.0 + 20.0 * r.open01()).collect();
        let b: Vec<f64> = (0..n).map(|_| 1.0 + 20.0 * r.open01()).collect();
        for scoring in [Scoring::Greedy, Scoring::Thompson { seed: 3, counter: 1 }] {
            let args = SelectArgs { k: 200, target: 0.5, scoring, exclude: Exclude::None, hint: None };
            let exact = select_only(&a, &b, args).unwrap();
            // Loose, exact and far too tight hints (the last forces the fallback).
            for hint in [1.0, exact.kth_distance, exact.kth_distance * 1.5, exact.kth_distance * 0.5, 0.0] {
                let got = select_only(&a, &b, SelectArgs { hint: Some(hint), ..args }).unwrap();
                assert_eq!(got, exact, "{scoring:?} hint {hint}");
                let (mut a2, mut b2) = (a.clone(), b.clone());
                let fused = step(&mut a2, &mut b2, None, Some(SelectArgs { hint: Some(hint), ..args })).unwrap().unwrap();
                assert_eq!(fused, exact);
            }
        }
    }
}
