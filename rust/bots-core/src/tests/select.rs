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
    assert_eq!(select(&a, &b, 1, 1.0, Scoring::Greedy, Exclude::None).unwrap_err().argument, "target");
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
