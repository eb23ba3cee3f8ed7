//! A step's explicit evidence: rollout results checked and summed per task into a [`Batch`], and
//! the interpolation estimator's capability coefficient measured on that batch.

use crate::error::{CoreError, Result};
use crate::types::Batch;
#[cfg(doc)]
use crate::types::DEFAULT_MIN_GAP;

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
    // The references cover the pool, so their length is the pool size.
    batch.validate(weak.len())?;
    let (mut obs, mut w, mut s, mut m) = (0.0, 0.0, 0.0, 0usize);
    for (j, &k) in batch.ids.iter().enumerate() {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::DEFAULT_MIN_GAP;

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
}
