//! The running top-B list of a selection: candidates (distance to the target, task index) with
//! an admission bound shared between threads.
//!
//! Each worker keeps up to 2B candidates and trims them to the best B with
//! `select_nth_unstable`; workers are merged the same way. The order (distance, index) is total,
//! so the result is the same for any split of the work.

use std::cmp::Ordering;
use std::sync::atomic::{AtomicU64, Ordering as AtomicOrdering};

use crate::types::Selection;

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
pub(crate) struct TopK<'a> {
    items: Vec<Candidate>,
    /// Worst distance kept at the last trim here, or published by another thread.
    bound: f64,
    k: usize,
    shared: &'a AtomicU64,
}

impl<'a> TopK<'a> {
    pub(crate) fn new(k: usize, shared: &'a AtomicU64) -> Self {
        Self { items: Vec::with_capacity(2 * k.max(1)), bound: f64::INFINITY, k, shared }
    }

    /// A shared bound starting at `hint` (infinity: no candidate seen yet). A hint that turns out
    /// tighter than the k-th distance leaves fewer than k candidates, which the caller detects.
    pub(crate) fn shared_bound(hint: Option<f64>) -> AtomicU64 {
        let start = hint.filter(|h| *h >= 0.0).unwrap_or(f64::INFINITY);
        AtomicU64::new(start.to_bits())
    }

    /// Candidates farther than this can be skipped without changing the result.
    #[inline(always)]
    pub(crate) fn bound(&self) -> f64 {
        // Distances are >= 0, so comparing the bit patterns orders them.
        self.bound.min(f64::from_bits(self.shared.load(AtomicOrdering::Relaxed)))
    }

    /// Adds a candidate (callers skip those beyond `bound()` first, for speed).
    #[inline]
    pub(crate) fn push(&mut self, distance: f64, index: usize) {
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

    pub(crate) fn merge(mut self, other: TopK<'a>) -> TopK<'a> {
        self.items.extend(other.items);
        self.bound = self.bound.min(other.bound);
        self.shrink();
        self
    }

    /// The best `k` indices shifted by `first_index` (see [`select_shard`](crate::select_shard)),
    /// best first, with their distances.
    pub(crate) fn into_selection(self, first_index: usize) -> Selection {
        let mut items = self.items;
        trim(&mut items, self.k);
        items.sort_unstable_by(order);
        let kth_distance = items.last().map_or(f64::INFINITY, |c| c.distance);
        let distances = items.iter().map(|c| c.distance).collect();
        Selection { ids: items.into_iter().map(|c| first_index + c.index).collect(), distances, kth_distance }
    }
}
