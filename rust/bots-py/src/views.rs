//! Raw views of every array one pass reads or writes, detached from the borrow checker so that the
//! pass can run with the GIL released, or on a background thread after the call that started it
//! has returned.
//!
//! Safety contract (upheld by `bots_rft.BOTS`, which owns the posterior arrays and never hands
//! them out): while a pass runs, nothing writes the arrays it reads, and nothing reads or writes
//! the two it writes (alpha and beta). The `Py` references in [`Keep`] keep every array alive
//! for as long as the views are used. What can be checked here is: contiguity, alpha and beta
//! writeable, and no overlap between the written arrays and any other input.

use bots_core as core;
use numpy::{PyArray1, PyArrayMethods};
use pyo3::prelude::*;

use crate::errors::{invalid_argument, not_contiguous};
use crate::specs::{EvidenceSpec, ExcludeSpec, PriorSpec, SelectSpec, UpdateSpec};

/// References that keep a pass's arrays alive; dropped only after the pass has finished.
pub(crate) type Keep = Vec<Py<PyAny>>;

/// The posterior and everything a pass needs, as views with no lifetime tie to Python.
pub(crate) struct Views {
    alpha: &'static mut [f64],
    beta: &'static mut [f64],
    update: Option<UpdateViews>,
    select: Option<SelectViews>,
}

struct UpdateViews {
    prior_alpha: core::Prior<'static>,
    prior_beta: core::Prior<'static>,
    batch: core::Batch,
    evidence: core::Evidence<'static>,
    params: core::UpdateParams,
}

struct SelectViews {
    k: usize,
    target: f64,
    scoring: core::Scoring,
    mask: Option<&'static [bool]>,
    ids: Option<Vec<usize>>,
    hint: Option<f64>,
    first_index: usize,
}

impl Views {
    /// Runs the pass: the update (if any), then the selection (if any) from the updated posterior.
    pub(crate) fn run(self) -> Result<Option<core::Selection>, core::CoreError> {
        let Views { alpha, beta, update, select } = self;
        let update_args = update.as_ref().map(|u| core::UpdateArgs {
            prior_alpha: u.prior_alpha,
            prior_beta: u.prior_beta,
            batch: &u.batch,
            evidence: u.evidence,
            params: u.params,
        });
        let select_args = select.as_ref().map(|s| core::SelectArgs {
            k: s.k,
            target: s.target,
            scoring: s.scoring,
            exclude: match (s.mask, &s.ids) {
                (Some(m), _) => core::Exclude::Mask(m),
                (None, Some(ids)) => core::Exclude::Ids(ids),
                (None, None) => core::Exclude::None,
            },
            hint: s.hint,
        });
        let first_index = select.as_ref().map_or(0, |s| s.first_index);
        core::step_shard(alpha, beta, first_index, update_args, select_args)
    }
}

/// Byte range of a slice, for overlap checks.
fn span<T>(s: &[T]) -> (usize, usize) {
    let start = s.as_ptr() as usize;
    (start, start + std::mem::size_of_val(s))
}

fn overlap(x: (usize, usize), y: (usize, usize)) -> bool {
    x.0 < y.1 && y.0 < x.1
}

/// A read-only view with its lifetime detached (see the module's safety contract).
fn view<T: numpy::Element>(py: Python<'_>, a: &Py<PyArray1<T>>, name: &'static str, keep: &mut Keep) -> PyResult<&'static [T]> {
    let bound = a.bind(py);
    keep.push(bound.clone().into_any().unbind());
    // SAFETY: see the module doc; the array stays alive through `keep`.
    let s = unsafe { bound.as_slice() }.map_err(|_| not_contiguous(name))?;
    Ok(unsafe { std::slice::from_raw_parts(s.as_ptr(), s.len()) })
}

/// A writeable view with its lifetime detached (see the module's safety contract).
// A mutable slice out of a shared `Bound` is the point: the array is a Python object, and its
// exclusive use while the pass runs is what the safety contract above guarantees.
#[allow(clippy::mut_from_ref)]
fn view_mut(a: &Bound<'_, PyArray1<f64>>, name: &'static str, keep: &mut Keep) -> PyResult<&'static mut [f64]> {
    // A borrow taken and released at once: it checks the array is writeable and that no Rust
    // code holds a view of it now.
    drop(a.try_readwrite().map_err(|e| invalid_argument(name, format!("cannot be written ({e})")))?);
    keep.push(a.clone().into_any().unbind());
    // SAFETY: see the module doc; the array stays alive through `keep`.
    let s = unsafe { a.as_slice_mut() }.map_err(|_| not_contiguous(name))?;
    Ok(unsafe { std::slice::from_raw_parts_mut(s.as_mut_ptr(), s.len()) })
}

fn prior_view(
    py: Python<'_>,
    p: &PriorSpec,
    name: &'static str,
    keep: &mut Keep,
    inputs: &mut Vec<(usize, usize)>,
) -> PyResult<core::Prior<'static>> {
    Ok(match p {
        PriorSpec::Scalar(v) => core::Prior::Scalar(*v),
        PriorSpec::Array(a) => {
            let s = view(py, a, name, keep)?;
            inputs.push(span(s));
            core::Prior::PerTask(s)
        }
    })
}

/// Detaches everything a pass over `alpha`/`beta` needs from `update` and `select`.
pub(crate) fn detach(
    py: Python<'_>,
    alpha: &Bound<'_, PyArray1<f64>>,
    beta: &Bound<'_, PyArray1<f64>>,
    update: Option<&UpdateSpec>,
    select: Option<&SelectSpec>,
) -> PyResult<(Views, Keep)> {
    let mut keep = Keep::new();
    let mut inputs: Vec<(usize, usize)> = Vec::new();
    let a = view_mut(alpha, "alpha", &mut keep)?;
    let b = view_mut(beta, "beta", &mut keep)?;
    let update = match update {
        None => None,
        Some(u) => {
            let prior_alpha = prior_view(py, &u.prior_alpha, "prior_alpha", &mut keep, &mut inputs)?;
            let prior_beta = prior_view(py, &u.prior_beta, "prior_beta", &mut keep, &mut inputs)?;
            let evidence = match &u.evidence {
                EvidenceSpec::None => core::Evidence::None,
                EvidenceSpec::Predicted(p) => {
                    let s = view(py, p, "predicted", &mut keep)?;
                    inputs.push(span(s));
                    core::Evidence::Predicted(s)
                }
                EvidenceSpec::Interpolation { weak, strong, mu } => {
                    let (w, s) = (view(py, weak, "weak", &mut keep)?, view(py, strong, "strong", &mut keep)?);
                    inputs.push(span(w));
                    inputs.push(span(s));
                    core::Evidence::Interpolation { weak: w, strong: s, mu: *mu }
                }
            };
            let batch = u.batch.get().inner.clone();
            Some(UpdateViews { prior_alpha, prior_beta, batch, evidence, params: u.params })
        }
    };
    let select = match select {
        None => None,
        Some(s) => {
            let (mask, ids) = match &s.exclude {
                ExcludeSpec::None => (None, None),
                ExcludeSpec::Mask(m) => {
                    let v = view(py, m, "exclude", &mut keep)?;
                    inputs.push(span(v));
                    (Some(v), None)
                }
                ExcludeSpec::Ids(ids) => (None, Some(ids.clone())),
            };
            Some(SelectViews { k: s.k, target: s.target, scoring: s.scoring, mask, ids, hint: s.bound_hint, first_index: s.first_index })
        }
    };
    let (sa, sb) = (span(a), span(b));
    if overlap(sa, sb) {
        return Err(invalid_argument("beta", "shares memory with alpha".to_string()));
    }
    if inputs.iter().any(|&r| overlap(r, sa) || overlap(r, sb)) {
        return Err(invalid_argument("alpha", "shares memory with another input of the pass".to_string()));
    }
    Ok((Views { alpha: a, beta: b, update, select }, keep))
}
