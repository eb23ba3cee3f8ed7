//! The update rule through the public entry points.

use crate::{aggregate, update, Batch, Evidence, Prior, UpdateParams};

fn params(lam: f64, rho: f64) -> UpdateParams {
    UpdateParams { lam, rho, n_rollouts: 16.0 }
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
    update(
        &mut a,
        &mut b,
        Prior::Scalar(1.0),
        Prior::Scalar(1.0),
        &batch,
        Evidence::Interpolation { weak: &weak, strong: &strong, mu: 2.0 },
        params(0.0, 1.0),
    )
    .unwrap();
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
    let err =
        update(&mut a, &mut b, Prior::Scalar(1.0), Prior::Scalar(1.0), &batch, Evidence::Predicted(&pred), params(0.1, 0.1)).unwrap_err();
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
        update(
            &mut a,
            &mut b,
            Prior::Scalar(1.0),
            Prior::Scalar(1.0),
            &batch,
            Evidence::Predicted(&pred),
            UpdateParams { lam, rho, n_rollouts: n },
        )
        .unwrap();
        let g = 1.0 - (1.0 - lam).powi(t as i32);
        let (lo, hi) = (n0 + rho * n / lam * g, n0 + n / lam * g);
        for k in 0..tasks {
            let nt = a[k] + b[k];
            assert!(nt >= lo - 1e-9 && nt <= hi + 1e-9, "t={t} k={k}: {nt} not in [{lo}, {hi}]");
        }
    }
}

#[test]
fn a_batch_built_by_hand_is_checked() {
    let (mut a, mut b) = (vec![1.0; 4], vec![1.0; 4]);
    let p = params(0.1, 0.1);
    let run = |batch: Batch, a: &mut Vec<f64>, b: &mut Vec<f64>| {
        update(a, b, Prior::Scalar(1.0), Prior::Scalar(1.0), &batch, Evidence::None, p).unwrap_err().argument
    };
    // Before these checks, mismatched lengths panicked and unsorted ids updated the wrong tasks.
    assert_eq!(run(Batch { ids: vec![1, 2], successes: vec![1.0], trials: vec![2.0, 2.0] }, &mut a, &mut b), "batch");
    assert_eq!(run(Batch { ids: vec![2, 1], successes: vec![1.0; 2], trials: vec![2.0; 2] }, &mut a, &mut b), "batch");
    assert_eq!(run(Batch { ids: vec![4], successes: vec![1.0], trials: vec![2.0] }, &mut a, &mut b), "task_ids");
    assert_eq!(run(Batch { ids: vec![1], successes: vec![3.0], trials: vec![2.0] }, &mut a, &mut b), "successes");
    assert_eq!(run(Batch { ids: vec![1], successes: vec![1.0], trials: vec![f64::NAN] }, &mut a, &mut b), "trials");
    assert_eq!((a, b), (vec![1.0; 4], vec![1.0; 4]));
}
