//! Selection through the public entry points.

use super::pool_with_ties as pool;
use crate::{select, select_only, step, Exclude, Scoring, SelectArgs, CHUNK};

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
    assert_eq!(select(&a, &b, 1, 1.01, Scoring::Greedy, Exclude::None).unwrap_err().argument, "target");
    assert_eq!(select(&a, &b, 1, 0.5, Scoring::Greedy, Exclude::Ids(&[3, 3])).unwrap_err().argument, "exclude");
    assert_eq!(select(&a, &b, 1, 0.5, Scoring::Greedy, Exclude::Ids(&[10])).unwrap_err().argument, "exclude");
    assert!(select(&a, &b, 0, 0.5, Scoring::Greedy, Exclude::None).unwrap().is_empty());
}

#[test]
fn a_hint_never_changes_the_result() {
    let n = 6 * CHUNK + 9;
    let (a, b) = super::pool_uniform(n, 4);
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

#[test]
fn an_invalid_posterior_is_an_error_naming_it() {
    // Before the core checked the posterior it scores, a NaN shape made a Thompson selection
    // loop forever in the scalar sampler, and a greedy one recurse forever looking for k tasks.
    let n = 3 * CHUNK;
    for bad in [f64::NAN, 0.0, -2.0, f64::INFINITY] {
        for scoring in [Scoring::Greedy, Scoring::Thompson { seed: 1, counter: 2 }] {
            let (mut a, mut b) = pool(n, 3);
            a[2000] = bad;
            let err = select(&a, &b, n - 1, 0.5, scoring, Exclude::None).unwrap_err();
            assert_eq!(err.argument, "alpha", "{bad} {scoring:?}");
            assert!(err.message.contains("index 2000"), "{}", err.message);
            a[2000] = 1.0;
            b[5] = bad;
            let args = SelectArgs { k: 10, target: 0.5, scoring, exclude: Exclude::None, hint: Some(0.01) };
            assert_eq!(step(&mut a, &mut b, None, Some(args)).unwrap_err().argument, "beta", "{bad} {scoring:?}");
        }
    }
}

#[test]
fn softmax_with_a_vanishing_temperature_is_the_nearest_rule() {
    // Distinct means far apart compared with tau times the Gumbel range: the keys order as the
    // distances do, so softmax picks what the nearest rule picks, from means and from draws.
    let n = 2 * CHUNK + 9;
    let a: Vec<f64> = (0..n).map(|i| 1.0 + (i as f64 * 7919.0) % n as f64).collect();
    let b: Vec<f64> = (0..n).map(|i| 1.0 + (i as f64 * 104_729.0) % n as f64).collect();
    for k in [1, 37, 500] {
        let greedy = select(&a, &b, k, 0.4, Scoring::Greedy, Exclude::None).unwrap();
        let soft = select(&a, &b, k, 0.4, Scoring::Softmax { tau: 1e-12, thompson: false, seed: 3, counter: 1 }, Exclude::None).unwrap();
        assert_eq!(soft, greedy, "k={k}");
        let thompson = select(&a, &b, k, 0.4, Scoring::Thompson { seed: 3, counter: 1 }, Exclude::None).unwrap();
        let soft = select(&a, &b, k, 0.4, Scoring::Softmax { tau: 1e-12, thompson: true, seed: 3, counter: 1 }, Exclude::None).unwrap();
        assert_eq!(soft, thompson, "k={k}");
    }
}

#[test]
fn softmax_picks_follow_the_softmax_distribution() {
    // Three tasks with means 0.5, 0.4, 0.2 and target 0.5, tau 0.1: one pick is task i with
    // probability proportional to exp(-|m_i - 0.5| / 0.1) = 1, e^-1, e^-3.
    let a = [50.0, 40.0, 20.0];
    let b = [50.0, 60.0, 80.0];
    let trials = 40_000u64;
    let mut counts = [0u64; 3];
    for counter in 0..trials {
        let pick = select(&a, &b, 1, 0.5, Scoring::Softmax { tau: 0.1, thompson: false, seed: 9, counter }, Exclude::None).unwrap();
        counts[pick[0]] += 1;
    }
    let w = [1.0, (-1.0f64).exp(), (-3.0f64).exp()];
    let total: f64 = w.iter().sum();
    for i in 0..3 {
        let p = w[i] / total;
        let sd = (p * (1.0 - p) / trials as f64).sqrt();
        let got = counts[i] as f64 / trials as f64;
        assert!((got - p).abs() < 5.0 * sd, "task {i}: {got} vs {p}");
    }
    // Without replacement, excluded tasks never picked, and the same for any thread count.
    let two = select(&a, &b, 2, 0.5, Scoring::Softmax { tau: 0.1, thompson: true, seed: 9, counter: 5 }, Exclude::Ids(&[0])).unwrap();
    assert_eq!(two.len(), 2);
    assert!(!two.contains(&0) && two[0] != two[1]);
}

#[test]
fn softmax_is_thread_count_independent_and_checks_tau() {
    let n = 6 * CHUNK + 3;
    let (a, b) = pool(n, 8);
    let scoring = Scoring::Softmax { tau: 0.05, thompson: true, seed: 4, counter: 2 };
    let run = |threads: usize| {
        let p = rayon::ThreadPoolBuilder::new().num_threads(threads).build().unwrap();
        p.install(|| select(&a, &b, 64, 0.5, scoring, Exclude::None).unwrap())
    };
    assert_eq!(run(1), run(3));
    for tau in [0.0, -1.0, f64::NAN, f64::INFINITY] {
        let bad = Scoring::Softmax { tau, thompson: false, seed: 0, counter: 0 };
        assert_eq!(select(&a, &b, 1, 0.5, bad, Exclude::None).unwrap_err().argument, "tau");
    }
}

#[test]
fn targets_zero_and_one_are_accepted() {
    let (a, b) = pool(CHUNK, 2);
    for target in [0.0, 1.0] {
        let got = select(&a, &b, 5, target, Scoring::Greedy, Exclude::None).unwrap();
        let mut means: Vec<(f64, usize)> = (0..CHUNK).map(|i| ((a[i] / (a[i] + b[i]) - target).abs(), i)).collect();
        means.sort_by(|x, y| x.0.total_cmp(&y.0).then(x.1.cmp(&y.1)));
        assert_eq!(got, means[..5].iter().map(|m| m.1).collect::<Vec<_>>());
    }
    assert_eq!(select(&a, &b, 1, 1.5, Scoring::Greedy, Exclude::None).unwrap_err().argument, "target");
}

#[test]
fn draws_of_a_few_tasks_equal_the_whole_pass() {
    let n = 3 * CHUNK + 7;
    let (a, b) = pool(n, 6);
    let mut all = vec![0f32; n];
    crate::thompson_draws(crate::simd_path(), &a, &b, 11, 3, &mut all).unwrap();
    let ids = [0, 5, CHUNK - 1, CHUNK, 2 * CHUNK + 511, n - 1];
    let mut some = vec![0f32; ids.len()];
    crate::thompson_draws_at(&a, &b, &ids, 11, 3, &mut some).unwrap();
    for (i, &j) in ids.iter().enumerate() {
        assert_eq!(some[i].to_bits(), all[j].to_bits(), "task {j}");
    }
    assert_eq!(crate::thompson_draws_at(&a, &b, &[n], 11, 3, &mut some[..1]).unwrap_err().argument, "ids");
}
