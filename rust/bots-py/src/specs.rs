//! Typed descriptions of one pass over the pool, built in Python and read by `Posterior.step`,
//! `Posterior.start_step` and `select`: what to update (`UpdateSpec`) and what to select
//! (`SelectSpec`).
//!
//! A spec owns what it reads, so that a pass (possibly on a background thread, after the call
//! that started it returned) never reads memory Python can write: an array made by `frozen()`
//! (memory only Rust writes; how `Interpolation` keeps its references, tens of megabytes read
//! every step) is shared, any other array is copied when the spec is built. Values are
//! range-checked by the core when the pass runs (before anything is written); a spec only checks
//! what Python's types cannot say (which evidence form, ids not negative).

use std::sync::Arc;

use bots_core as core;
use numpy::{PyArray1, PyArrayMethods, PyUntypedArrayMethods};
use pyo3::prelude::*;

use crate::errors::{invalid_argument, not_contiguous};
use crate::frozen::shared;
use crate::Batch;

/// A prior given as one value or one value per task.
#[derive(FromPyObject)]
pub(crate) enum PriorArg<'py> {
    Scalar(f64),
    Array(Bound<'py, PyArray1<f64>>),
}

#[derive(Clone)]
pub(crate) enum PriorSpec {
    Scalar(f64),
    Array(Arc<Vec<f64>>),
}

impl PriorSpec {
    pub(crate) fn as_core(&self) -> core::Prior<'_> {
        match self {
            PriorSpec::Scalar(v) => core::Prior::Scalar(*v),
            PriorSpec::Array(a) => core::Prior::PerTask(a),
        }
    }
}

#[derive(Clone)]
pub(crate) enum EvidenceSpec {
    None,
    Predicted(Arc<Vec<f64>>),
    Interpolation { weak: Arc<Vec<f32>>, strong: Arc<Vec<f32>>, mu: f64 },
}

impl EvidenceSpec {
    fn as_core(&self) -> core::Evidence<'_> {
        match self {
            EvidenceSpec::None => core::Evidence::None,
            EvidenceSpec::Predicted(p) => core::Evidence::Predicted(p),
            EvidenceSpec::Interpolation { weak, strong, mu } => core::Evidence::Interpolation { weak, strong, mu: *mu },
        }
    }
}

#[derive(Clone)]
pub(crate) enum ExcludeSpec {
    None,
    Mask(Arc<[bool]>),
    /// Sorted and distinct ids are checked by the core.
    Ids(Arc<[usize]>),
}

/// A copy of a contiguous, aligned array's elements (the small per-selection inputs).
fn copied<T: numpy::Element + Copy>(a: &Bound<'_, PyArray1<T>>, name: &'static str) -> PyResult<Arc<[T]>> {
    if !(a.is_contiguous() && a.is_aligned()) {
        return Err(not_contiguous(name));
    }
    let ro = a.try_readonly().map_err(|_| not_contiguous(name))?;
    Ok(Arc::from(ro.as_slice().map_err(|_| not_contiguous(name))?))
}

/// One step's posterior update: the batch's explicit evidence, the priors the posterior decays
/// toward, λ, ρ, n, and the implicit evidence for the other tasks (a prediction per task, or
/// the interpolation estimator's references and capability).
/// Cloned for a pass that outlives the Python object (cheap: the arrays are shared).
#[pyclass(module = "bots_rft._core", frozen)]
#[derive(Clone)]
pub struct UpdateSpec {
    pub(crate) batch: core::Batch,
    pub(crate) prior_alpha: PriorSpec,
    pub(crate) prior_beta: PriorSpec,
    pub(crate) params: core::UpdateParams,
    pub(crate) evidence: EvidenceSpec,
}

impl UpdateSpec {
    /// The core's view of this update.
    pub(crate) fn args(&self) -> core::UpdateArgs<'_> {
        core::UpdateArgs {
            prior_alpha: self.prior_alpha.as_core(),
            prior_beta: self.prior_beta.as_core(),
            batch: &self.batch,
            evidence: self.evidence.as_core(),
            params: self.params,
        }
    }
}

#[pymethods]
impl UpdateSpec {
    #[new]
    #[pyo3(signature = (batch, *, prior_alpha=PriorArg::Scalar(1.0), prior_beta=PriorArg::Scalar(1.0), lam=0.0, rho=0.0, n_rollouts=1.0,
                        predicted=None, weak=None, strong=None, capability=None))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        batch: PyRef<'_, Batch>,
        prior_alpha: PriorArg<'_>,
        prior_beta: PriorArg<'_>,
        lam: f64,
        rho: f64,
        n_rollouts: f64,
        predicted: Option<Bound<'_, PyArray1<f64>>>,
        weak: Option<Bound<'_, PyArray1<f32>>>,
        strong: Option<Bound<'_, PyArray1<f32>>>,
        capability: Option<f64>,
    ) -> PyResult<Self> {
        let prior = |p: PriorArg<'_>, name| -> PyResult<PriorSpec> {
            Ok(match p {
                PriorArg::Scalar(v) => PriorSpec::Scalar(v),
                PriorArg::Array(a) => PriorSpec::Array(shared(&a, name)?),
            })
        };
        let evidence = match (predicted, weak, strong, capability) {
            (Some(p), None, None, None) => EvidenceSpec::Predicted(shared(&p, "predicted")?),
            (None, Some(w), Some(s), Some(mu)) => {
                EvidenceSpec::Interpolation { weak: shared(&w, "weak")?, strong: shared(&s, "strong")?, mu }
            }
            (None, None, None, None) => EvidenceSpec::None,
            _ => return Err(invalid_argument("predicted", "give either predicted, or weak, strong and capability together".to_string())),
        };
        Ok(Self {
            batch: batch.inner.clone(),
            prior_alpha: prior(prior_alpha, "prior_alpha")?,
            prior_beta: prior(prior_beta, "prior_beta")?,
            params: core::UpdateParams { lam, rho, n_rollouts },
            evidence,
        })
    }
}

/// One selection: the `k` tasks whose Thompson draw (or posterior mean) is nearest `target`,
/// drawn from stream `(seed, counter)`, never an excluded task; with `tau`, `k` tasks sampled
/// without replacement from softmax(−|θ − target| / tau) instead. `bound_hint` (e.g. the last
/// selection's k-th distance, loosened) prunes from the first task and never changes the result.
/// `first_index`: the posterior holds tasks `first_index..` of a larger pool (one shard of it);
/// draws are keyed by global index and the selected ids are global, so merging the shards'
/// selections by (distance, id) gives the whole pool's. Exclusions stay slice positions.
#[pyclass(module = "bots_rft._core", frozen)]
#[derive(Clone)]
pub struct SelectSpec {
    pub(crate) k: usize,
    pub(crate) target: f64,
    pub(crate) scoring: core::Scoring,
    pub(crate) exclude: ExcludeSpec,
    pub(crate) bound_hint: Option<f64>,
    pub(crate) first_index: usize,
}

impl SelectSpec {
    /// The core's view of this selection.
    pub(crate) fn args(&self) -> core::SelectArgs<'_> {
        core::SelectArgs {
            k: self.k,
            target: self.target,
            scoring: self.scoring,
            exclude: match &self.exclude {
                ExcludeSpec::None => core::Exclude::None,
                ExcludeSpec::Mask(m) => core::Exclude::Mask(m),
                ExcludeSpec::Ids(ids) => core::Exclude::Ids(ids),
            },
            hint: self.bound_hint,
        }
    }
}

#[pymethods]
impl SelectSpec {
    #[new]
    #[pyo3(signature = (k, *, target=0.5, thompson=true, seed=0, counter=0, exclude_mask=None, exclude_ids=None, bound_hint=None, tau=None, first_index=0))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        k: usize,
        target: f64,
        thompson: bool,
        seed: u64,
        counter: u64,
        exclude_mask: Option<Bound<'_, PyArray1<bool>>>,
        exclude_ids: Option<Bound<'_, PyArray1<i64>>>,
        bound_hint: Option<f64>,
        tau: Option<f64>,
        first_index: usize,
    ) -> PyResult<Self> {
        let exclude = match (exclude_mask, exclude_ids) {
            (Some(m), None) => ExcludeSpec::Mask(copied(&m, "exclude")?),
            (None, Some(ids)) => {
                let raw = copied(&ids, "exclude")?;
                if let Some(bad) = raw.iter().find(|&&x| x < 0) {
                    return Err(invalid_argument("exclude", format!("id {bad} is negative")));
                }
                ExcludeSpec::Ids(raw.iter().map(|&x| x as usize).collect())
            }
            (None, None) => ExcludeSpec::None,
            _ => return Err(invalid_argument("exclude", "give a mask or ids, not both".to_string())),
        };
        let scoring = match (tau, thompson) {
            (Some(tau), _) => core::Scoring::Softmax { tau, thompson, seed, counter },
            (None, true) => core::Scoring::Thompson { seed, counter },
            (None, false) => core::Scoring::Greedy,
        };
        Ok(Self { k, target, scoring, exclude, bound_hint, first_index })
    }

    /// Number of tasks to select.
    #[getter]
    fn k(&self) -> usize {
        self.k
    }

    /// Global index of the posterior's first task.
    #[getter]
    fn first_index(&self) -> usize {
        self.first_index
    }
}
