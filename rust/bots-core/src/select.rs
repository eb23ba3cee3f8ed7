//! Top-B selection by closeness of a (sampled or mean) success rate to the target.
//!
//! Each chunk of [`CHUNK`] tasks scores its tasks with its own random stream, then keeps the
//! candidates that can still enter the best B; per-thread candidate lists are trimmed with
//! `select_nth_unstable` and merged. The order (distance, index) is total, so the result is the
//! same for any split of the work.

use std::cmp::Ordering;
use std::sync::atomic::{AtomicU64, Ordering as AtomicOrdering};

use rayon::prelude::*;

use crate::error::{CoreError, Result};

/// How a task's success rate is estimated for selection.
#[derive(Clone, Copy, Debug)]
pub enum Scoring {
    /// Thompson sampling: one Beta draw per task from stream `(seed, counter, chunk)`.
    Thompson { seed: u64, counter: u64 },
    /// Posterior mean alpha / (alpha + beta).
    Greedy,
}

/// Tasks that may not be selected.
#[derive(Clone, Copy, Debug)]
pub enum Exclude<'a> {
    None,
    /// One flag per task; `true` excludes it.
    Mask(&'a [bool]),
    /// Sorted, distinct task ids.
    Ids(&'a [usize]),
}

#[derive(Clone, Copy, Debug)]
struct Candidate {
    distance: f64,
    index: usize,
}

#[inline]
fn order(x: &Candidate, y: &Candidate) -> Ordering {
    x.distance.total_cmp(&y.distance).then(x.index.cmp(&y.index))
}

/// Keeps the best `k` of `v` (unordered), in place.
fn trim(v: &mut Vec<Candidate>, k: usize) {
    if v.len() > k {
        if k == 0 {
            v.clear();
            return;
        }
        v.select_nth_unstable_by(k - 1, order);
        v.truncate(k);
    }
}

/// A per-thread running list of the best candidates seen, with an admission bound.
///
/// Threads share their bounds through one atomic: any published bound is the k-th best distance
/// of k real candidates, so a candidate strictly farther than it can never be selected. Pruning
/// with it changes the work, never the result.
pub struct TopK<'a> {
    items: Vec<Candidate>,
    /// Worst distance kept at the last trim here, or published by another thread.
    bound: f64,
    k: usize,
    shared: &'a AtomicU64,
}

impl<'a> TopK<'a> {
    pub fn new(k: usize, shared: &'a AtomicU64) -> Self {
        Self { items: Vec::with_capacity(2 * k.max(1)), bound: f64::INFINITY, k, shared }
    }

    /// A shared bound starting at `hint` (infinity: no candidate seen yet). A hint that turns out
    /// tighter than the k-th distance leaves fewer than k candidates, which the caller detects.
    pub fn shared_bound(hint: Option<f64>) -> AtomicU64 {
        let start = hint.filter(|h| *h >= 0.0).unwrap_or(f64::INFINITY);
        AtomicU64::new(start.to_bits())
    }

    /// Candidates farther than this can be skipped without changing the result.
    #[inline(always)]
    pub fn bound(&self) -> f64 {
        // Distances are >= 0, so comparing the bit patterns orders them.
        self.bound.min(f64::from_bits(self.shared.load(AtomicOrdering::Relaxed)))
    }

    /// Adds a candidate (callers skip those beyond `bound()` first, for speed).
    #[inline]
    pub fn push(&mut self, distance: f64, index: usize) {
        self.items.push(Candidate { distance, index });
        if self.items.len() >= 2 * self.k.max(1) {
            self.shrink();
        }
    }

    fn shrink(&mut self) {
        trim(&mut self.items, self.k);
        if self.items.len() == self.k && self.k > 0 {
            self.bound = self.items.iter().map(|c| c.distance).fold(f64::NEG_INFINITY, f64::max);
            self.shared.fetch_min(self.bound.to_bits(), AtomicOrdering::Relaxed);
        }
    }

    pub fn merge(mut self, other: TopK<'a>) -> TopK<'a> {
        self.items.extend(other.items);
        self.bound = self.bound.min(other.bound);
        self.shrink();
        self
    }

    /// The best `k` indices, best first, and the distance of the last one.
    pub fn into_selection(self) -> Selection {
        let mut items = self.items;
        trim(&mut items, self.k);
        items.sort_unstable_by(order);
        let kth_distance = items.last().map_or(f64::INFINITY, |c| c.distance);
        Selection { ids: items.into_iter().map(|c| c.index).collect(), kth_distance }
    }
}

/// The result of a selection.
#[derive(Clone, Debug, PartialEq)]
pub struct Selection {
    /// Task ids, best first.
    pub ids: Vec<usize>,
    /// Distance of the last selected task to the target (infinity when none): a good pruning hint
    /// for the next selection.
    pub kth_distance: f64,
}

impl Selection {
    pub fn empty() -> Self {
        Self { ids: Vec::new(), kth_distance: f64::INFINITY }
    }
}

/// Everything one selection needs besides the posterior.
#[derive(Clone, Copy, Debug)]
pub struct SelectArgs<'a> {
    pub k: usize,
    pub target: f64,
    pub scoring: Scoring,
    pub exclude: Exclude<'a>,
    /// A guess of the k-th distance (e.g. the last selection's, loosened) to prune with from the
    /// start. Never changes the result: if it proves too tight, the selection is redone without.
    pub hint: Option<f64>,
}

impl SelectArgs<'_> {
    /// Checks everything against a pool of `n` tasks.
    pub fn validate(&self, n: usize) -> Result<()> {
        if !(self.target > 0.0 && self.target < 1.0) {
            return Err(CoreError::value("target", format!("must be in (0, 1), got {}", self.target)));
        }
        let excluded = match self.exclude {
            Exclude::None => 0,
            Exclude::Mask(m) => {
                if m.len() != n {
                    return Err(CoreError::shape("exclude", format!("mask has length {}, expected {n}", m.len())));
                }
                m.par_iter().filter(|&&x| x).count()
            }
            Exclude::Ids(ids) => {
                if ids.windows(2).any(|w| w[0] >= w[1]) {
                    return Err(CoreError::value("exclude", "ids must be sorted and distinct"));
                }
                if let Some(&last) = ids.last() {
                    if last >= n {
                        return Err(CoreError::value("exclude", format!("id {last} is out of range [0, {n})")));
                    }
                }
                ids.len()
            }
        };
        let selectable = n - excluded;
        if self.k > selectable {
            return Err(CoreError::value("batch_size", format!("{} exceeds the selectable pool of {selectable} tasks", self.k)));
        }
        Ok(())
    }
}

/// Returns the `k` selectable tasks whose estimated success rate is nearest `target`, best
/// first, ties to the lower index. Fails if fewer than `k` tasks are selectable.
pub fn select(alpha: &[f64], beta: &[f64], k: usize, target: f64, scoring: Scoring, exclude: Exclude) -> Result<Vec<usize>> {
    crate::step::select_only(alpha, beta, SelectArgs { k, target, scoring, exclude, hint: None }).map(|s| s.ids)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::Xoshiro256pp;
    use crate::CHUNK;

    fn stable_sort_reference(alpha: &[f64], beta: &[f64], k: usize, target: f64, excluded: &[bool]) -> Vec<usize> {
        let mut idx: Vec<usize> = (0..alpha.len()).filter(|&i| !excluded[i]).collect();
        idx.sort_by(|&x, &y| {
            let dx = (alpha[x] / (alpha[x] + beta[x]) - target).abs();
            let dy = (alpha[y] / (alpha[y] + beta[y]) - target).abs();
            dx.total_cmp(&dy)
        });
        idx.truncate(k);
        idx
    }

    fn pool(n: usize, seed: u64) -> (Vec<f64>, Vec<f64>) {
        let mut r = Xoshiro256pp::from_seed(seed);
        // Small integer counts: many exact ties in the mean.
        let a = (0..n).map(|_| 1.0 + (r.next_u64() % 6) as f64).collect();
        let b = (0..n).map(|_| 1.0 + (r.next_u64() % 6) as f64).collect();
        (a, b)
    }

    #[test]
    fn greedy_equals_stable_sort_with_ties() {
        let n = 3 * CHUNK + 17;
        let (a, b) = pool(n, 5);
        let none = vec![false; n];
        for &k in &[1, 7, 256, 1000] {
            assert_eq!(select(&a, &b, k, 0.5, Scoring::Greedy, Exclude::None).unwrap(), stable_sort_reference(&a, &b, k, 0.5, &none));
        }
        assert_eq!(select(&a, &b, 50, 0.3, Scoring::Greedy, Exclude::None).unwrap(), stable_sort_reference(&a, &b, 50, 0.3, &none));
    }

    #[test]
    fn exclusion_by_mask_and_ids_agree() {
        let n = 2 * CHUNK + 3;
        let (a, b) = pool(n, 9);
        let mask: Vec<bool> = (0..n).map(|i| i % 3 == 0).collect();
        let ids: Vec<usize> = (0..n).filter(|i| i % 3 == 0).collect();
        let want = stable_sort_reference(&a, &b, 300, 0.5, &mask);
        assert_eq!(select(&a, &b, 300, 0.5, Scoring::Greedy, Exclude::Mask(&mask)).unwrap(), want);
        assert_eq!(select(&a, &b, 300, 0.5, Scoring::Greedy, Exclude::Ids(&ids)).unwrap(), want);
        let t = Scoring::Thompson { seed: 1, counter: 4 };
        assert_eq!(select(&a, &b, 300, 0.5, t, Exclude::Mask(&mask)).unwrap(), select(&a, &b, 300, 0.5, t, Exclude::Ids(&ids)).unwrap());
    }

    #[test]
    fn thompson_is_identical_across_thread_counts() {
        let n = 10 * CHUNK + 5;
        let (a, b) = pool(n, 2);
        let run = |threads: usize| {
            let pool = rayon::ThreadPoolBuilder::new().num_threads(threads).build().unwrap();
            pool.install(|| select(&a, &b, 256, 0.5, Scoring::Thompson { seed: 42, counter: 3 }, Exclude::None).unwrap())
        };
        let one = run(1);
        assert_eq!(one, run(2));
        assert_eq!(one, run(4));
        assert_eq!(one.len(), 256);
        let mut d = one.clone();
        d.sort();
        d.dedup();
        assert_eq!(d.len(), 256);
    }

    #[test]
    fn rejects_bad_arguments() {
        let (a, b) = pool(10, 1);
        assert_eq!(select(&a, &b, 11, 0.5, Scoring::Greedy, Exclude::None).unwrap_err().argument, "batch_size");
        let mask = vec![true; 10];
        assert_eq!(select(&a, &b, 1, 0.5, Scoring::Greedy, Exclude::Mask(&mask)).unwrap_err().argument, "batch_size");
        assert_eq!(select(&a, &b, 1, 1.0, Scoring::Greedy, Exclude::None).unwrap_err().argument, "target");
        assert_eq!(select(&a, &b, 1, 0.5, Scoring::Greedy, Exclude::Ids(&[3, 3])).unwrap_err().argument, "exclude");
        assert_eq!(select(&a, &b, 1, 0.5, Scoring::Greedy, Exclude::Ids(&[10])).unwrap_err().argument, "exclude");
        assert!(select(&a, &b, 0, 0.5, Scoring::Greedy, Exclude::None).unwrap().is_empty());
    }
}
