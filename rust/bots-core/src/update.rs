//! The posterior update and the batch statistic of the interpolation estimator. `update` streams over the whole pool once; it never draws random numbers.

use rayon::prelude::*;

use crate::error::{CoreError, Result};
use crate::CHUNK;

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
                if !(v.is_finite() && *v > 0.0) {
                    return Err(CoreError::value(argument, format!("must be finite and > 0, got {v}")));
                }
            }
            Prior::PerTask(v) => {
                if v.len() != n {
                    return Err(CoreError::shape(argument, format!("has length {}, expected {n}", v.len())));
                }
                if let Some((i, x)) = v.iter().enumerate().find(|(_, x)| !(x.is_finite() && **x > 0.0)) {
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
        if !(self.n_rollouts.is_finite() && self.n_rollouts > 0.0) {
            return Err(CoreError::value("n_rollouts", format!("must be finite and > 0, got {}", self.n_rollouts)));
        }
        Ok(())
    }
}

/// A step's explicit evidence, one entry per distinct task, sorted by task id.
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
}

/// Checks one step's rollout results and sums repeated task ids.
///
/// `trials` holds either one value for every entry or one per entry.
pub fn aggregate(num_tasks: usize, task_ids: &[i64], successes: &[f64], trials: &[f64]) -> Result<Batch> {
    let b = task_ids.len();
    if successes.len() != b {
        return Err(CoreError::shape("successes", format!("has length {}, expected {b} (one per task id)", successes.len())));
    }
    if trials.len() != b && trials.len() != 1 {
        return Err(CoreError::shape("trials", format!("has length {}, expected 1 or {b} (one per task id)", trials.len())));
    }
    let trial = |i: usize| if trials.len() == 1 { trials[0] } else { trials[i] };
    for (i, &id) in task_ids.iter().enumerate() {
        if id < 0 || id as u64 >= num_tasks as u64 {
            return Err(CoreError::value("task_ids", format!("{id} at position {i} is out of range [0, {num_tasks})")));
        }
        let (s, t) = (successes[i], trial(i));
        if !(t.is_finite() && t > 0.0) {
            return Err(CoreError::value("trials", format!("must be finite and > 0, got {t} at position {i}")));
        }
        if !(s.is_finite() && s >= 0.0) {
            return Err(CoreError::value("successes", format!("must be finite and >= 0, got {s} at position {i}")));
        }
        if s > t {
            return Err(CoreError::value("successes", format!("{s} at position {i} exceeds its trials {t}")));
        }
    }
    let mut order: Vec<usize> = (0..b).collect();
    order.sort_by_key(|&i| task_ids[i]);
    let mut batch = Batch::default();
    for i in order {
        let id = task_ids[i] as usize;
        if batch.ids.last() == Some(&id) {
            *batch.successes.last_mut().unwrap() += successes[i];
            *batch.trials.last_mut().unwrap() += trial(i);
        } else {
            batch.ids.push(id);
            batch.successes.push(successes[i]);
            batch.trials.push(trial(i));
        }
    }
    Ok(batch)
}

/// The default threshold below which the batch's references count as coinciding.
pub const DEFAULT_MIN_GAP: f64 = 1e-6;

/// The interpolation estimator's capability coefficient on one batch:
/// mu = (obs - W) / (St - W) over the batch's tasks that have both references.
/// `None` when no such task exists or the references (nearly) coincide, |St - W| < `min_gap`
/// (default: [`DEFAULT_MIN_GAP`]; a larger gap also skips batches where the division would amplify
/// rollout noise).
pub fn batch_capability(batch: &Batch, weak: &[f32], strong: &[f32], min_gap: f64) -> Result<Option<f64>> {
    if !(min_gap >= 0.0 && min_gap.is_finite()) {
        return Err(CoreError::value("min_gap", format!("must be a finite number >= 0, got {min_gap}")));
    }
    if weak.len() != strong.len() {
        return Err(CoreError::shape("strong", format!("has length {}, weak has {}", strong.len(), weak.len())));
    }
    let (mut obs, mut w, mut s, mut m) = (0.0, 0.0, 0.0, 0usize);
    for (j, &k) in batch.ids.iter().enumerate() {
        if k >= weak.len() {
            return Err(CoreError::value("task_ids", format!("{k} is out of range for references of length {}", weak.len())));
        }
        let (wk, sk) = (weak[k] as f64, strong[k] as f64);
        if wk.is_nan() || sk.is_nan() {
            continue;
        }
        obs += batch.successes[j] / batch.trials[j];
        w += wk;
        s += sk;
        m += 1;
    }
    if m == 0 {
        return Ok(None);
    }
    let (obs, w, s) = (obs / m as f64, w / m as f64, s / m as f64);
    if (s - w).abs() < min_gap {
        return Ok(None);
    }
    Ok(Some((obs - w) / (s - w)))
}

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
                return Err(CoreError::shape("evidence", format!("references have lengths {} and {}, expected {n}", weak.len(), strong.len())));
            }
            if !mu.is_finite() {
                return Err(CoreError::value("capability", format!("must be finite, got {mu}")));
            }
            Ok(())
        }
    }
}

/// Applies one step's update to every task. On error nothing is modified.
pub fn update(
    alpha: &mut [f64],
    beta: &mut [f64],
    prior_alpha: Prior,
    prior_beta: Prior,
    batch: &Batch,
    evidence: Evidence,
    params: UpdateParams,
) -> Result<()> {
    let args = UpdateArgs { prior_alpha, prior_beta, batch, evidence, params };
    crate::step::step(alpha, beta, Some(args), None).map(|_| ())
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
        if let Some(&k) = self.batch.ids.iter().find(|&&k| k >= n) {
            return Err(CoreError::value("task_ids", format!("{k} is out of range [0, {n})")));
        }
        check_evidence(&self.evidence, n)
    }

    /// New (alpha, beta) of each rolled-out task, from the current values.
    pub fn rolled_values(&self, alpha: &[f64], beta: &[f64]) -> Vec<(usize, f64, f64)> {
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

#[cfg(test)]
mod tests {
    use super::*;

    fn params(lam: f64, rho: f64) -> UpdateParams {
        UpdateParams { lam, rho, n_rollouts: 16.0 }
    }

    #[test]
    fn aggregate_sums_duplicates_and_sorts() {
        let b = aggregate(10, &[5, 2, 5], &[1.0, 2.0, 3.5], &[4.0]).unwrap();
        assert_eq!(b.ids, vec![2, 5]);
        assert_eq!(b.successes, vec![2.0, 4.5]);
        assert_eq!(b.trials, vec![4.0, 8.0]);
    }

    #[test]
    fn aggregate_rejects_bad_input() {
        assert_eq!(aggregate(10, &[10], &[1.0], &[4.0]).unwrap_err().argument, "task_ids");
        assert_eq!(aggregate(10, &[-1], &[1.0], &[4.0]).unwrap_err().argument, "task_ids");
        assert_eq!(aggregate(10, &[1], &[5.0], &[4.0]).unwrap_err().argument, "successes");
        assert_eq!(aggregate(10, &[1], &[f64::NAN], &[4.0]).unwrap_err().argument, "successes");
        assert_eq!(aggregate(10, &[1], &[-1.0], &[4.0]).unwrap_err().argument, "successes");
        assert_eq!(aggregate(10, &[1], &[1.0], &[0.0]).unwrap_err().argument, "trials");
        assert_eq!(aggregate(10, &[1], &[1.0], &[f64::INFINITY]).unwrap_err().argument, "trials");
        assert_eq!(aggregate(10, &[1, 2], &[1.0], &[4.0]).unwrap_err().argument, "successes");
        assert_eq!(aggregate(10, &[1, 2], &[1.0, 1.0], &[4.0, 4.0, 4.0]).unwrap_err().argument, "trials");
    }

    #[test]
    fn update_matches_the_rule_by_hand() {
        // 3 tasks: 0 rolled out (3 of 4), 1 predicted 0.25, 2 no prediction.
        let mut a = vec![2.0, 3.0, 4.0];
        let mut b = vec![5.0, 6.0, 7.0];
        let batch = aggregate(3, &[0], &[3.0], &[4.0]).unwrap();
        let pred = [0.9, 0.25, f64::NAN];
        update(&mut a, &mut b, Prior::Scalar(1.0), Prior::Scalar(1.0), &batch, Evidence::Predicted(&pred), params(0.1, 0.1)).unwrap();
        let close = |x: f64, y: f64| (x - y).abs() < 1e-12;
        assert!(close(a[0], 0.9 * 2.0 + 0.1 + 3.0) && close(b[0], 0.9 * 5.0 + 0.1 + 1.0));
        assert!(close(a[1], 0.9 * 3.0 + 0.1 + 1.6 * 0.25) && close(b[1], 0.9 * 6.0 + 0.1 + 1.6 * 0.75));
        assert!(close(a[2], 0.9 * 4.0 + 0.1) && close(b[2], 0.9 * 7.0 + 0.1));
    }

    #[test]
    fn interpolation_is_clipped_and_nan_aware() {
        let mut a = vec![1.0; 3];
        let mut b = vec![1.0; 3];
        let weak = [0.5f32, 0.9, f32::NAN];
        let strong = [0.9f32, 1.0, 0.5];
        let batch = Batch::default();
        update(&mut a, &mut b, Prior::Scalar(1.0), Prior::Scalar(1.0), &batch, Evidence::Interpolation { weak: &weak, strong: &strong, mu: 2.0 }, params(0.0, 1.0)).unwrap();
        // task 0: 2*0.9 - 0.5 = 1.3 -> 1; task 1: 2 - 0.9 = 1.1 -> 1; task 2: NaN -> none.
        assert_eq!((a[0], b[0]), (17.0, 1.0));
        assert_eq!((a[1], b[1]), (17.0, 1.0));
        assert_eq!((a[2], b[2]), (1.0, 1.0));
    }

    #[test]
    fn errors_leave_state_untouched() {
        let mut a = vec![2.0; 5];
        let mut b = vec![3.0; 5];
        let batch = aggregate(5, &[1], &[1.0], &[2.0]).unwrap();
        let pred = [0.5, 0.5, 1.5, 0.5, 0.5];
        let err = update(&mut a, &mut b, Prior::Scalar(1.0), Prior::Scalar(1.0), &batch, Evidence::Predicted(&pred), params(0.1, 0.1)).unwrap_err();
        assert_eq!(err.argument, "predicted");
        assert!(err.message.contains("1.5") && err.message.contains("index 2"));
        assert_eq!(a, vec![2.0; 5]);
        let err = update(&mut a, &mut b, Prior::Scalar(1.0), Prior::Scalar(1.0), &batch, Evidence::None, params(1.5, 0.1)).unwrap_err();
        assert_eq!(err.argument, "lam");
        let pa = [1.0, 1.0, 0.0, 1.0, 1.0];
        let err = update(&mut a, &mut b, Prior::PerTask(&pa), Prior::Scalar(1.0), &batch, Evidence::None, params(0.1, 0.1)).unwrap_err();
        assert_eq!(err.argument, "prior_alpha");
        assert_eq!((a, b), (vec![2.0; 5], vec![3.0; 5]));
    }

    #[test]
    fn capability_skips_nan_and_coincident_references() {
        let batch = aggregate(4, &[0, 1, 2], &[8.0, 4.0, 16.0], &[16.0]).unwrap();
        let weak = [0.25f32, 0.25, f32::NAN, 0.0];
        let strong = [0.75f32, 0.75, 1.0, 1.0];
        // obs = mean(0.5, 0.25) = 0.375, W = 0.25, S = 0.75 -> mu = 0.25
        assert_eq!(batch_capability(&batch, &weak, &strong, DEFAULT_MIN_GAP).unwrap(), Some(0.25));
        let same = [0.25f32; 4];
        assert_eq!(batch_capability(&batch, &same, &same, DEFAULT_MIN_GAP).unwrap(), None);
        let nan = [f32::NAN; 4];
        assert_eq!(batch_capability(&batch, &nan, &strong, DEFAULT_MIN_GAP).unwrap(), None);
        // St - W = 0.5 here: a gap threshold above it skips the batch, one at or below keeps it.
        assert_eq!(batch_capability(&batch, &weak, &strong, 0.5).unwrap(), Some(0.25));
        assert_eq!(batch_capability(&batch, &weak, &strong, 0.5001).unwrap(), None);
        for bad in [-1e-3, f64::NAN, f64::INFINITY] {
            assert_eq!(batch_capability(&batch, &weak, &strong, bad).unwrap_err().argument, "min_gap");
        }
    }

    #[test]
    fn proposition_two_bounds_hold() {
        // n_t stays within [n0 + rho n / lam (1-(1-lam)^t), n0 + n / lam (1-(1-lam)^t)].
        let (lam, rho, n, n0) = (0.1, 0.3, 16.0, 2.0);
        let tasks = 50;
        let mut a = vec![1.0; tasks];
        let mut b = vec![1.0; tasks];
        let pred = vec![0.4; tasks];
        for t in 1..=60u32 {
            let ids: Vec<i64> = (0..tasks as i64).filter(|k| (k * 7 + t as i64) % 5 == 0).collect();
            let s = vec![3.0; ids.len()];
            let batch = aggregate(tasks, &ids, &s, &[n]).unwrap();
            update(&mut a, &mut b, Prior::Scalar(1.0), Prior::Scalar(1.0), &batch, Evidence::Predicted(&pred), UpdateParams { lam, rho, n_rollouts: n }).unwrap();
            let g = 1.0 - (1.0 - lam).powi(t as i32);
            let (lo, hi) = (n0 + rho * n / lam * g, n0 + n / lam * g);
            for k in 0..tasks {
                let nt = a[k] + b[k];
                assert!(nt >= lo - 1e-9 && nt <= hi + 1e-9, "t={t} k={k}: {nt} not in [{lo}, {hi}]");
            }
        }
    }
}
