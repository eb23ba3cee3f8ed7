//! Typed descriptions of one pass over the pool, built in Python and read by `step`, `select` and
//! `start_step`: what to update (`UpdateSpec`) and what to select (`SelectSpec`).
//!
//! A spec holds references to the numpy arrays it names, never copies: references can be tens of
//! megabytes. Values are range-checked by the core when the pass runs (before anything is
//! written); a spec only checks what Python's types cannot say (contiguity, which evidence form).

use bots_core as core;
use numpy::{PyArray1, PyArrayMethods, PyUntypedArrayMethods};
use pyo3::prelude::*;

use crate::errors::{invalid_argument, not_contiguous};
use crate::Batch;

/// A prior given as one value or one value per task.
#[derive(FromPyObject)]
pub(crate) enum PriorArg<'py> {
    Scalar(f64),
    Array(Bound<'py, PyArray1<f64>>),
}

pub(crate) enum PriorSpec {
    Scalar(f64),
    Array(Py<PyArray1<f64>>),
}

pub(crate) enum EvidenceSpec {
    None,
    Predicted(Py<PyArray1<f64>>),
    Interpolation { weak: Py<PyArray1<f32>>, strong: Py<PyArray1<f32>>, mu: f64 },
}

pub(crate) enum ExcludeSpec {
    None,
    Mask(Py<PyArray1<bool>>),
    /// Sorted and distinct ids are checked by the core.
    Ids(Vec<usize>),
}

fn contiguous<T: numpy::Element>(a: &Bound<'_, PyArray1<T>>, name: &'static str) -> PyResult<Py<PyArray1<T>>> {
    if !(a.is_contiguous() && a.is_aligned()) {
        return Err(not_contiguous(name));
    }
    Ok(a.clone().unbind())
}

/// One step's posterior update: the batch's explicit evidence, the priors the posterior decays
/// toward, λ, ρ, n, and the implicit evidence for the other tasks (a prediction per task, or
/// the interpolation estimator's references and capability).
#[pyclass(module = "bots_rft._core", frozen)]
pub struct UpdateSpec {
    pub(crate) batch: Py<Batch>,
    pub(crate) prior_alpha: PriorSpec,
    pub(crate) prior_beta: PriorSpec,
    pub(crate) params: core::UpdateParams,
    pub(crate) evidence: EvidenceSpec,
}

#[pymethods]
impl UpdateSpec {
    #[new]
    #[pyo3(signature = (batch, *, prior_alpha=PriorArg::Scalar(1.0), prior_beta=PriorArg::Scalar(1.0), lam=0.0, rho=0.0, n_rollouts=1.0,
                        predicted=None, weak=None, strong=None, capability=None))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        batch: Py<Batch>,
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
                PriorArg::Array(a) => PriorSpec::Array(contiguous(&a, name)?),
            })
        };
        let evidence = match (predicted, weak, strong, capability) {
            (Some(p), None, None, None) => EvidenceSpec::Predicted(contiguous(&p, "predicted")?),
            (None, Some(w), Some(s), Some(mu)) => {
                EvidenceSpec::Interpolation { weak: contiguous(&w, "weak")?, strong: contiguous(&s, "strong")?, mu }
            }
            (None, None, None, None) => EvidenceSpec::None,
            _ => return Err(invalid_argument("predicted", "give either predicted, or weak, strong and capability together".to_string())),
        };
        Ok(Self {
            batch,
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
/// `first_index`: the arrays hold tasks `first_index..` of a larger pool (one shard of it); draws
/// are keyed by global index and the selected ids are global, so merging the shards' selections
/// (`step_ranked`) by (distance, id) gives the whole pool's. Exclusions stay slice positions.
#[pyclass(module = "bots_rft._core", frozen)]
pub struct SelectSpec {
    pub(crate) k: usize,
    pub(crate) target: f64,
    pub(crate) scoring: core::Scoring,
    pub(crate) exclude: ExcludeSpec,
    pub(crate) bound_hint: Option<f64>,
    pub(crate) first_index: usize,
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
            (Some(m), None) => ExcludeSpec::Mask(contiguous(&m, "exclude")?),
            (None, Some(ids)) => {
                let ro = ids.try_readonly().map_err(|_| not_contiguous("exclude"))?;
                let raw = ro.as_slice().map_err(|_| not_contiguous("exclude"))?;
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

    /// Global index of the arrays' first task.
    #[getter]
    fn first_index(&self) -> usize {
        self.first_index
    }
}
