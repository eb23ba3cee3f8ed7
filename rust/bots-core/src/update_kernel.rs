//! The posterior update of one chunk of tasks:
//!
//! alpha <- (1 - lam)·alpha + lam·prior_alpha + rho·n·p,  beta <- (1 - lam)·beta + lam·prior_beta + rho·n·(1 - p)
//!
//! for every task not rolled out this step (p its implicit evidence; no term when it has none),
//! and the precomputed values for the rolled-out ones. Monomorphised per (prior, prior, evidence)
//! kind so that the inner loop has no branch on kind and vectorises.

use crate::types::{Evidence, Prior};

/// Values the update reads per task.
trait PerTask: Copy {
    fn at(&self, k: usize) -> f64;
}

#[derive(Clone, Copy)]
struct Same(f64);
impl PerTask for Same {
    #[inline(always)]
    fn at(&self, _: usize) -> f64 {
        self.0
    }
}

#[derive(Clone, Copy)]
struct Each<'a>(&'a [f64]);
impl PerTask for Each<'_> {
    #[inline(always)]
    fn at(&self, k: usize) -> f64 {
        self.0[k]
    }
}

/// No prediction for any task.
#[derive(Clone, Copy)]
struct NoPrediction;
impl PerTask for NoPrediction {
    #[inline(always)]
    fn at(&self, _: usize) -> f64 {
        f64::NAN
    }
}

/// The interpolation estimator evaluated in place.
#[derive(Clone, Copy)]
struct Interp<'a> {
    weak: &'a [f32],
    strong: &'a [f32],
    mu: f64,
}
impl PerTask for Interp<'_> {
    #[inline(always)]
    fn at(&self, k: usize) -> f64 {
        (self.mu * self.strong[k] as f64 + (1.0 - self.mu) * self.weak[k] as f64).clamp(0.0, 1.0)
    }
}

/// Parameters of a chunk's update, derived once per step from its `UpdateArgs`.
#[derive(Clone, Copy)]
pub(crate) struct ChunkUpdate<'a> {
    pub prior_alpha: Prior<'a>,
    pub prior_beta: Prior<'a>,
    pub evidence: Evidence<'a>,
    /// 1 - lam.
    pub decay: f64,
    pub lam: f64,
    /// rho · n_rollouts: the weight of one task's implicit evidence.
    pub weight: f64,
    /// New (alpha, beta) of the rolled-out tasks, sorted by task id.
    pub rolled: &'a [(usize, f64, f64)],
}

/// The update rule over one chunk (tasks `base..base + a.len()`), rolled-out tasks included as
/// if not rolled out (they are overwritten afterwards).
#[inline(always)]
#[allow(clippy::too_many_arguments)] // one monomorphised loop per (prior, prior, evidence) kind
fn update_rule<A: PerTask, B: PerTask, E: PerTask>(
    a: &mut [f64],
    b: &mut [f64],
    base: usize,
    pa: A,
    pb: B,
    ev: E,
    decay: f64,
    lam: f64,
    weight: f64,
) {
    for i in 0..a.len() {
        let k = base + i;
        let p = ev.at(k);
        let has = !p.is_nan();
        // Adding exactly 0.0 leaves the value bit-identical, so the no-prediction case needs
        // no branch.
        let add_a = if has { weight * p } else { 0.0 };
        let add_b = if has { weight * (1.0 - p) } else { 0.0 };
        a[i] = decay * a[i] + lam * pa.at(k) + add_a;
        b[i] = decay * b[i] + lam * pb.at(k) + add_b;
    }
}

/// Updates tasks `base..base + a.len()` in place.
#[inline(always)]
pub(crate) fn update_chunk(a: &mut [f64], b: &mut [f64], base: usize, u: &ChunkUpdate) {
    macro_rules! with_evidence {
        ($pa:expr, $pb:expr) => {
            match u.evidence {
                Evidence::None => update_rule(a, b, base, $pa, $pb, NoPrediction, u.decay, u.lam, u.weight),
                Evidence::Predicted(p) => update_rule(a, b, base, $pa, $pb, Each(p), u.decay, u.lam, u.weight),
                Evidence::Interpolation { weak, strong, mu } => {
                    update_rule(a, b, base, $pa, $pb, Interp { weak, strong, mu }, u.decay, u.lam, u.weight)
                }
            }
        };
    }
    match (u.prior_alpha, u.prior_beta) {
        (Prior::Scalar(x), Prior::Scalar(y)) => with_evidence!(Same(x), Same(y)),
        (Prior::Scalar(x), Prior::PerTask(y)) => with_evidence!(Same(x), Each(y)),
        (Prior::PerTask(x), Prior::Scalar(y)) => with_evidence!(Each(x), Same(y)),
        (Prior::PerTask(x), Prior::PerTask(y)) => with_evidence!(Each(x), Each(y)),
    }
    let lo = u.rolled.partition_point(|r| r.0 < base);
    let hi = u.rolled.partition_point(|r| r.0 < base + a.len());
    for &(k, na, nb) in &u.rolled[lo..hi] {
        a[k - base] = na;
        b[k - base] = nb;
    }
}
