//! Property tests: the update pass against a scalar reference of the update rule, and top-B
//! selection (greedy and Thompson, with exclusions and hints) against a sort-based reference
//! built from the posterior means or from `thompson_draws`.

use proptest::prelude::*;

use crate::{
    aggregate, select_only, simd_path, step, thompson_draws, update, Batch, Evidence, Exclude, Prior, Scoring, SelectArgs, Selection,
    UpdateParams, CHUNK,
};

/// The update rule for one task, written out from its definition.
fn reference_update(
    alpha: &[f64],
    beta: &[f64],
    prior: (&Prior, &Prior),
    batch: &Batch,
    predicted: &dyn Fn(usize) -> f64,
    p: UpdateParams,
) -> (Vec<f64>, Vec<f64>) {
    let (mut a, mut b) = (alpha.to_vec(), beta.to_vec());
    for k in 0..a.len() {
        let decayed_a = (1.0 - p.lam) * alpha[k] + p.lam * prior.0.at(k);
        let decayed_b = (1.0 - p.lam) * beta[k] + p.lam * prior.1.at(k);
        if let Ok(j) = batch.ids.binary_search(&k) {
            // Rolled out: the step's own successes and failures.
            a[k] = decayed_a + batch.successes[j];
            b[k] = decayed_b + (batch.trials[j] - batch.successes[j]);
        } else {
            let q = predicted(k);
            let weight = p.rho * p.n_rollouts;
            a[k] = decayed_a + if q.is_nan() { 0.0 } else { weight * q };
            b[k] = decayed_b + if q.is_nan() { 0.0 } else { weight * (1.0 - q) };
        }
    }
    (a, b)
}

fn as_prior(p: &(bool, f64, Vec<f64>)) -> Prior<'_> {
    if p.0 {
        Prior::Scalar(p.1)
    } else {
        Prior::PerTask(&p.2)
    }
}

/// Shapes with a share below 1 (the scalar exact path of the Thompson draw).
fn shapes(n: usize) -> impl Strategy<Value = Vec<f64>> {
    prop::collection::vec(prop_oneof![3 => 1.0..60.0f64, 1 => 0.05..1.0f64], n)
}

/// A pool of 1 to 3 chunks and a bit, with its shapes.
fn pool() -> impl Strategy<Value = (Vec<f64>, Vec<f64>)> {
    (1..3 * CHUNK + 40).prop_flat_map(|n| (shapes(n), shapes(n)))
}

#[derive(Clone, Debug)]
enum EvidenceKind {
    None,
    /// Predictions, NaN (no prediction) where `missing`.
    Predicted(Vec<f64>),
    /// References (NaN sprinkled) and the capability.
    Interpolation(Vec<f32>, Vec<f32>, f64),
}

fn evidence(n: usize) -> impl Strategy<Value = EvidenceKind> {
    let maybe_nan64 = prop_oneof![5 => 0.0..=1.0f64, 1 => Just(f64::NAN)];
    let maybe_nan32 = prop_oneof![5 => 0.0..=1.0f32, 1 => Just(f32::NAN)];
    prop_oneof![
        Just(EvidenceKind::None),
        prop::collection::vec(maybe_nan64, n).prop_map(EvidenceKind::Predicted),
        (prop::collection::vec(maybe_nan32.clone(), n), prop::collection::vec(maybe_nan32, n), -3.0..3.0f64)
            .prop_map(|(w, s, mu)| EvidenceKind::Interpolation(w, s, mu)),
    ]
}

fn prior(n: usize) -> impl Strategy<Value = (bool, f64, Vec<f64>)> {
    (any::<bool>(), 0.1..5.0f64, prop::collection::vec(0.1..5.0f64, n))
}

/// A sorted exclusion set as a mask, or none.
fn exclusion(n: usize) -> impl Strategy<Value = Option<Vec<bool>>> {
    prop_oneof![Just(None), prop::collection::vec(prop::bool::weighted(0.2), n).prop_map(Some)]
}

/// Top-k of the selectable tasks by (distance, index), the distance of the last one.
fn sorted_reference(distance: &dyn Fn(usize) -> f64, n: usize, k: usize, excluded: &[bool]) -> Selection {
    let mut idx: Vec<usize> = (0..n).filter(|&i| !excluded[i]).collect();
    idx.sort_by(|&x, &y| distance(x).total_cmp(&distance(y)).then(x.cmp(&y)));
    idx.truncate(k);
    let kth_distance = idx.last().map_or(f64::INFINITY, |&i| distance(i));
    let distances = idx.iter().map(|&i| distance(i)).collect();
    Selection { ids: idx, distances, kth_distance }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn update_matches_the_scalar_rule(
        (alpha, beta, ev, pa, pb, rolled) in pool().prop_flat_map(|(a, b)| {
            let n = a.len();
            (Just(a), Just(b), evidence(n), prior(n), prior(n), prop::collection::vec((0..n as i64, 0.0..=1.0f64, 1.0..32.0f64), 0..40))
        }),
        lam in 0.0..=1.0f64,
        rho in 0.0..=1.0f64,
        n_rollouts in 1.0..64.0f64,
    ) {
        let n = alpha.len();
        let ids: Vec<i64> = rolled.iter().map(|r| r.0).collect();
        let trials: Vec<f64> = rolled.iter().map(|r| r.2.round()).collect();
        let successes: Vec<f64> = rolled.iter().zip(&trials).map(|(r, t)| (r.1 * t).round()).collect();
        let batch = aggregate(n, &ids, &successes, &trials).unwrap();
        let (prior_alpha, prior_beta) = (as_prior(&pa), as_prior(&pb));
        let params = UpdateParams { lam, rho, n_rollouts };
        let (evidence, predicted): (Evidence, Box<dyn Fn(usize) -> f64>) = match &ev {
            EvidenceKind::None => (Evidence::None, Box::new(|_| f64::NAN)),
            EvidenceKind::Predicted(p) => (Evidence::Predicted(p), Box::new(move |k| p[k])),
            EvidenceKind::Interpolation(w, s, mu) => (
                Evidence::Interpolation { weak: w, strong: s, mu: *mu },
                Box::new(move |k| (mu * s[k] as f64 + (1.0 - mu) * w[k] as f64).clamp(0.0, 1.0)),
            ),
        };
        let want = reference_update(&alpha, &beta, (&prior_alpha, &prior_beta), &batch, &*predicted, params);
        let (mut a, mut b) = (alpha.clone(), beta.clone());
        update(&mut a, &mut b, prior_alpha, prior_beta, &batch, evidence, params).unwrap();
        let bits = |v: &[f64]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        prop_assert_eq!(bits(&a), bits(&want.0));
        prop_assert_eq!(bits(&b), bits(&want.1));
    }

    #[test]
    fn selection_matches_a_sort_of_the_scores(
        (alpha, beta, excluded, k_share, by_ids) in pool().prop_flat_map(|(a, b)| {
            let n = a.len();
            (Just(a), Just(b), exclusion(n), 0.0..=1.0f64, any::<bool>())
        }),
        target in 0.02..0.98f64,
        thompson in any::<bool>(),
        seed in any::<u64>(),
        counter in any::<u64>(),
        hint_scale in prop::option::of(0.0..2.0f64),
    ) {
        let n = alpha.len();
        let mask = excluded.unwrap_or_else(|| vec![false; n]);
        let ids: Vec<usize> = (0..n).filter(|&i| mask[i]).collect();
        let selectable = n - ids.len();
        let k = (k_share * selectable as f64) as usize;
        let exclude = match (ids.is_empty(), by_ids) {
            (true, _) => Exclude::None,
            (false, true) => Exclude::Ids(&ids),
            (false, false) => Exclude::Mask(&mask),
        };
        let (scoring, want) = if thompson {
            let mut draws = vec![0f32; n];
            thompson_draws(simd_path(), &alpha, &beta, seed, counter, &mut draws).unwrap();
            // The selection compares each draw to the target in f32, as the kernel does.
            let distance = |i: usize| (draws[i] - target as f32).abs() as f64;
            (Scoring::Thompson { seed, counter }, sorted_reference(&distance, n, k, &mask))
        } else {
            let distance = |i: usize| (alpha[i] / (alpha[i] + beta[i]) - target).abs();
            (Scoring::Greedy, sorted_reference(&distance, n, k, &mask))
        };
        let args = SelectArgs { k, target, scoring, exclude, hint: None };
        let got = select_only(&alpha, &beta, args).unwrap();
        prop_assert_eq!(&got, &want);
        // A hint (loose or too tight) never changes the result, nor does the fused pass.
        let hint = hint_scale.map(|s| s * want.kth_distance.min(1.0));
        let (mut a, mut b) = (alpha.clone(), beta.clone());
        let fused = step(&mut a, &mut b, None, Some(SelectArgs { hint, ..args })).unwrap().unwrap();
        prop_assert_eq!(&fused, &want);
    }
}

/// Posteriors as a run leaves them: a share at the prior, the rest confident (large counts)
/// around random success rates, some near the target, some with a shape below 1.
fn run_pool() -> impl Strategy<Value = (Vec<f64>, Vec<f64>)> {
    let task = prop_oneof![
        1 => Just((1.0, 1.0)),
        4 => (0.0..1.0f64, 2.0..200.0f64).prop_map(|(p, n)| (1.0 + p * n, 1.0 + (1.0 - p) * n)),
        1 => (0.45..0.55f64, 10.0..2000.0f64).prop_map(|(p, n)| (p * n, (1.0 - p) * n)),
        1 => (0.05..1.0f64, 1.0..60.0f64),
    ];
    (CHUNK..6 * CHUNK).prop_flat_map(move |n| prop::collection::vec(task.clone(), n)).prop_map(|v| v.into_iter().unzip())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 40, ..ProptestConfig::default() })]

    /// A Thompson selection with a small B over pools shaped like a run's (most posteriors
    /// confident, where the admission bound prunes almost every draw), on 1 to 3 threads, with
    /// and without a hint, equals the top B of the full draw of every task.
    #[test]
    fn pruned_selections_equal_the_full_draw_on_run_like_pools(
        (alpha, beta) in run_pool(),
        k in 1..64usize,
        target in prop_oneof![Just(0.5), 0.0..=1.0f64],
        seed in any::<u64>(),
        counter in any::<u64>(),
        threads in 1..4usize,
        hint_scale in prop::option::of(0.0..2.0f64),
    ) {
        let n = alpha.len();
        let mut draws = vec![0f32; n];
        thompson_draws(simd_path(), &alpha, &beta, seed, counter, &mut draws).unwrap();
        let distance = |i: usize| (draws[i] - target as f32).abs() as f64;
        let want = sorted_reference(&distance, n, k, &vec![false; n]);
        let scoring = Scoring::Thompson { seed, counter };
        let hint = hint_scale.map(|s| s * want.kth_distance);
        let args = SelectArgs { k, target, scoring, exclude: Exclude::None, hint };
        let pool = rayon::ThreadPoolBuilder::new().num_threads(threads).build().unwrap();
        let got = pool.install(|| select_only(&alpha, &beta, args)).unwrap();
        prop_assert_eq!(&got, &want);
        let (mut a, mut b) = (alpha.clone(), beta.clone());
        let fused = pool.install(|| step(&mut a, &mut b, None, Some(args))).unwrap().unwrap();
        prop_assert_eq!(&fused, &want);
    }
}
