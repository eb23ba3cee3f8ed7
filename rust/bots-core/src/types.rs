//! The vocabulary of the core: what an update and a selection take and return, and the checks
//! that make each input safe before any kernel runs. Depends only on `error`.

use rayon::prelude::*;

use crate::error::{CoreError, Result};

/// Tasks per unit of parallel work (and per fused update + select pass over cache-resident data).
/// Draws do not depend on it.
pub const CHUNK: usize = 1024;

/// The default threshold below which the batch's references count as coinciding
/// (see [`batch_capability`](crate::batch_capability)).
pub const DEFAULT_MIN_GAP: f64 = 1e-6;

/// Checks that `alpha` and `beta` describe one pool and returns its size.
pub(crate) fn pool_len(alpha: &[f64], beta: &[f64]) -> Result<usize> {
    if beta.len() != alpha.len() {
        return Err(CoreError::shape("beta", format!("has length {}, alpha has {}", beta.len(), alpha.len())));
    }
    Ok(alpha.len())
}

/// Whether `x` can be the shape of a Beta draw (finite and > 0).
#[inline(always)]
pub(crate) fn is_shape(x: f64) -> bool {
    x > 0.0 && x < f64::INFINITY
}

/// The first posterior value that is not a valid Beta shape, as the error naming it.
pub(crate) fn check_shapes(alpha: &[f64], beta: &[f64]) -> Result<()> {
    for (name, v) in [("alpha", alpha), ("beta", beta)] {
        let bad =
            v.par_chunks(CHUNK).enumerate().find_map_first(|(c, chunk)| chunk.iter().position(|&x| !is_shape(x)).map(|i| c * CHUNK + i));
        if let Some(i) = bad {
            return Err(invalid_shape(name, i, v[i]));
        }
    }
    Ok(())
}

/// The error naming the first invalid value (α before β) of task `j`.
pub(crate) fn invalid_task(alpha: &[f64], beta: &[f64], j: usize) -> CoreError {
    if is_shape(alpha[j]) {
        invalid_shape("beta", j, beta[j])
    } else {
        invalid_shape("alpha", j, alpha[j])
    }
}

/// The error for a posterior value that is not a valid Beta shape.
pub(crate) fn invalid_shape(argument: &'static str, index: usize, value: f64) -> CoreError {
    CoreError::value(argument, format!("must be finite and > 0, got {value} at index {index}"))
}

/// Per-task prior parameter: one value for all tasks or one per task.
#[derive(Clone, Copy, Debug)]
pub enum Prior<'a> {
    Scalar(f64),
    PerTask(&'a [f64]),
}

impl Prior<'_> {
    #[inline]
    pub fn at(&self, k: usize) -> f64 {
        match self {
            Prior::Scalar(v) => *v,
            Prior::PerTask(v) => v[k],
        }
    }

    pub fn validate(&self, argument: &'static str, n: usize) -> Result<()> {
        match self {
            Prior::Scalar(v) => {
                if !is_shape(*v) {
                    return Err(CoreError::value(argument, format!("must be finite and > 0, got {v}")));
                }
            }
            Prior::PerTask(v) => {
                if v.len() != n {
                    return Err(CoreError::shape(argument, format!("has length {}, expected {n}", v.len())));
                }
                if let Some((i, x)) = v.iter().enumerate().find(|(_, x)| !is_shape(**x)) {
                    return Err(CoreError::value(argument, format!("must be finite and > 0, got {x} at index {i}")));
                }
            }
        }
        Ok(())
    }
}

/// Implicit evidence for the tasks not rolled out this step.
#[derive(Clone, Copy, Debug)]
pub enum Evidence<'a> {
    /// No prediction: those tasks only decay toward the prior.
    None,
    /// A prediction per task in [0, 1]; NaN means none for that task.
    Predicted(&'a [f64]),
    /// The interpolation estimator, fused: p = clip(mu·strong + (1-mu)·weak, 0, 1), NaN if a
    /// reference is NaN. References are float32: pass rates need no more, and they are the
    /// largest read of the update after the posterior itself.
    Interpolation { weak: &'a [f32], strong: &'a [f32], mu: f64 },
}

/// Checks implicit evidence against a pool of `n` tasks (predictions in [0, 1] or NaN, references
/// of length `n`, a finite capability).
pub fn check_evidence(evidence: &Evidence, n: usize) -> Result<()> {
    match evidence {
        Evidence::None => Ok(()),
        Evidence::Predicted(p) => {
            if p.len() != n {
                return Err(CoreError::shape("predicted", format!("has length {}, expected {n}", p.len())));
            }
            // Parallel scan; reports the first bad index.
            let bad = p.par_chunks(CHUNK).enumerate().find_map_first(|(c, chunk)| {
                chunk.iter().position(|x| !(x.is_nan() || (0.0..=1.0).contains(x))).map(|i| (c * CHUNK + i, chunk[i]))
            });
            match bad {
                Some((i, x)) => Err(CoreError::value("predicted", format!("must be in [0, 1] or NaN, got {x} at index {i}"))),
                None => Ok(()),
            }
        }
        Evidence::Interpolation { weak, strong, mu } => {
            if weak.len() != n || strong.len() != n {
                return Err(CoreError::shape(
                    "evidence",
                    format!("references have lengths {} and {}, expected {n}", weak.len(), strong.len()),
                ));
            }
            if !mu.is_finite() {
                return Err(CoreError::value("capability", format!("must be finite, got {mu}")));
            }
            Ok(())
        }
    }
}

/// The update's rates: `lam` pulls every posterior toward its prior, `rho` weighs implicit
/// evidence against `n_rollouts` real rollouts.
#[derive(Clone, Copy, Debug)]
pub struct UpdateParams {
    pub lam: f64,
    pub rho: f64,
    pub n_rollouts: f64,
}

impl UpdateParams {
    pub fn validate(&self) -> Result<()> {
        if !(0.0..=1.0).contains(&self.lam) {
            return Err(CoreError::value("lam", format!("must be in [0, 1], got {}", self.lam)));
        }
        if !(0.0..=1.0).contains(&self.rho) {
            return Err(CoreError::value("rho", format!("must be in [0, 1], got {}", self.rho)));
        }
        if !is_shape(self.n_rollouts) {
            return Err(CoreError::value("n_rollouts", format!("must be finite and > 0, got {}", self.n_rollouts)));
        }
        Ok(())
    }
}

/// A step's explicit evidence, one entry per distinct task, sorted by task id
/// (built by [`aggregate`](crate::aggregate)).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Batch {
    pub ids: Vec<usize>,
    pub successes: Vec<f64>,
    pub trials: Vec<f64>,
}

impl Batch {
    pub fn len(&self) -> usize {
        self.ids.len()
    }

    pub fn is_empty(&self) -> bool {
        self.ids.is_empty()
    }

    /// Checks a batch built by hand as [`aggregate`](crate::aggregate) would: one successes and
    /// trials value per id, ids sorted, distinct and in [0, n), 0 <= successes <= trials, trials
    /// finite and > 0.
    pub fn validate(&self, n: usize) -> Result<()> {
        if self.successes.len() != self.ids.len() || self.trials.len() != self.ids.len() {
            let (ids, s, t) = (self.ids.len(), self.successes.len(), self.trials.len());
            return Err(CoreError::shape("batch", format!("has {ids} ids, {s} successes and {t} trials")));
        }
        if self.ids.windows(2).any(|w| w[0] >= w[1]) {
            return Err(CoreError::value("batch", "ids must be sorted and distinct (build it with aggregate)"));
        }
        if let Some(&k) = self.ids.iter().find(|&&k| k >= n) {
            return Err(CoreError::value("task_ids", format!("{k} is out of range [0, {n})")));
        }
        for (i, (&s, &t)) in self.successes.iter().zip(&self.trials).enumerate() {
            if !is_shape(t) {
                return Err(CoreError::value("trials", format!("must be finite and > 0, got {t} at position {i}")));
            }
            if !(s.is_finite() && s >= 0.0 && s <= t) {
                return Err(CoreError::value("successes", format!("must be finite, >= 0 and <= its trials {t}, got {s} at position {i}")));
            }
        }
        Ok(())
    }
}

/// Everything one update needs besides the posterior.
#[derive(Clone, Copy, Debug)]
pub struct UpdateArgs<'a> {
    pub prior_alpha: Prior<'a>,
    pub prior_beta: Prior<'a>,
    pub batch: &'a Batch,
    pub evidence: Evidence<'a>,
    pub params: UpdateParams,
}

impl UpdateArgs<'_> {
    /// Checks everything against a pool of `n` tasks.
    pub fn validate(&self, n: usize) -> Result<()> {
        self.params.validate()?;
        self.prior_alpha.validate("prior_alpha", n)?;
        self.prior_beta.validate("prior_beta", n)?;
        self.batch.validate(n)?;
        check_evidence(&self.evidence, n)
    }

    /// New (alpha, beta) of each rolled-out task, from the current values.
    pub(crate) fn rolled_values(&self, alpha: &[f64], beta: &[f64]) -> Vec<(usize, f64, f64)> {
        let decay = 1.0 - self.params.lam;
        let lam = self.params.lam;
        self.batch
            .ids
            .iter()
            .enumerate()
            .map(|(j, &k)| {
                let s = self.batch.successes[j];
                let f = self.batch.trials[j] - s;
                (k, decay * alpha[k] + lam * self.prior_alpha.at(k) + s, decay * beta[k] + lam * self.prior_beta.at(k) + f)
            })
            .collect()
    }
}

/// How a task's success rate is estimated for selection.
#[derive(Clone, Copy, Debug)]
pub enum Scoring {
    /// Thompson sampling: one Beta draw per task, a function of `(seed, counter, task index)` and
    /// the task's posterior only.
    Thompson { seed: u64, counter: u64 },
    /// Posterior mean alpha / (alpha + beta).
    Greedy,
    /// Softmax sampling without replacement with temperature `tau` over the score
    /// −|θ − target|, θ a Thompson draw (`thompson`) or the posterior mean: the Gumbel-top-k
    /// rule, each task's key −|θ − target| / tau + G_j with G_j a Gumbel(0, 1) variate of
    /// `(seed, counter, j)` only, so the picks are an exact draw without replacement from
    /// softmax(−|θ − target| / tau) over the selectable tasks.
    Softmax { tau: f64, thompson: bool, seed: u64, counter: u64 },
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

impl Exclude<'_> {
    #[inline(always)]
    pub fn excludes(&self, index: usize) -> bool {
        match self {
            Exclude::None => false,
            Exclude::Mask(m) => m[index],
            Exclude::Ids(ids) => ids.binary_search(&index).is_ok(),
        }
    }
}

/// The result of a selection.
#[derive(Clone, Debug, PartialEq)]
pub struct Selection {
    /// Task ids, best first.
    pub ids: Vec<usize>,
    /// Each selected task's distance to the target (its sort key), in the order of `ids`: what a
    /// merge of selections over disjoint shards of one pool orders by (see
    /// [`select_shard`](crate::select_shard)).
    pub distances: Vec<f64>,
    /// Distance of the last selected task to the target (infinity when none): a good pruning hint
    /// for the next selection.
    pub kth_distance: f64,
}

impl Selection {
    pub fn empty() -> Self {
        Self { ids: Vec::new(), distances: Vec::new(), kth_distance: f64::INFINITY }
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
        if !(0.0..=1.0).contains(&self.target) {
            return Err(CoreError::value("target", format!("must be in [0, 1], got {}", self.target)));
        }
        if let Scoring::Softmax { tau, .. } = self.scoring {
            if !(tau.is_finite() && tau > 0.0) {
                return Err(CoreError::value("tau", format!("must be finite and > 0, got {tau}")));
            }
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
