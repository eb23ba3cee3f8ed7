//! `bots_rft._core`: thin PyO3 wrappers over `bots-core`.
//!
//! Arrays cross as zero-copy numpy views; every kernel runs with the GIL released, inside a rayon
//! pool of the requested size. Errors are mapped to Python exceptions in `errors.rs` only.

mod errors;
mod pools;

use bots_core as core;
use numpy::{PyArray1, PyReadonlyArray1, PyReadwriteArray1};
use pyo3::prelude::*;

use errors::{core_err, not_contiguous};

/// A prior given as one value or one value per task.
#[derive(FromPyObject)]
enum PriorArg<'py> {
    Scalar(f64),
    Array(PyReadonlyArray1<'py, f64>),
}

/// One step's rollout results, validated, with repeated task ids summed (sorted by id).
#[pyclass(module = "bots_rft._core", frozen)]
struct Batch {
    inner: core::Batch,
}

#[pymethods]
impl Batch {
    /// Distinct task ids, ascending.
    #[getter]
    fn ids<'py>(&self, py: Python<'py>) -> Bound<'py, PyArray1<i64>> {
        PyArray1::from_iter(py, self.inner.ids.iter().map(|&k| k as i64))
    }
    /// Summed successes per distinct task.
    #[getter]
    fn successes<'py>(&self, py: Python<'py>) -> Bound<'py, PyArray1<f64>> {
        PyArray1::from_slice(py, &self.inner.successes)
    }
    /// Summed trials per distinct task.
    #[getter]
    fn trials<'py>(&self, py: Python<'py>) -> Bound<'py, PyArray1<f64>> {
        PyArray1::from_slice(py, &self.inner.trials)
    }
    fn __len__(&self) -> usize {
        self.inner.len()
    }
}

fn slice<'a, T: numpy::Element>(a: &'a PyReadonlyArray1<'_, T>, name: &'static str) -> PyResult<&'a [T]> {
    a.as_slice().map_err(|_| not_contiguous(name))
}

fn prior_view<'a>(p: &'a PriorArg<'_>, name: &'static str) -> PyResult<core::Prior<'a>> {
    Ok(match p {
        PriorArg::Scalar(v) => core::Prior::Scalar(*v),
        PriorArg::Array(a) => core::Prior::PerTask(slice(a, name)?),
    })
}

/// Validate one step's results and sum repeated ids. `trials` has length 1 or len(task_ids).
#[pyfunction]
fn aggregate(
    num_tasks: usize,
    task_ids: PyReadonlyArray1<'_, i64>,
    successes: PyReadonlyArray1<'_, f64>,
    trials: PyReadonlyArray1<'_, f64>,
) -> PyResult<Batch> {
    let inner = core::aggregate(num_tasks, slice(&task_ids, "task_ids")?, slice(&successes, "successes")?, slice(&trials, "trials")?)
        .map_err(core_err)?;
    Ok(Batch { inner })
}

/// The interpolation estimator's capability coefficient on a batch, or None (no task with both
/// references, or |St - W| < min_gap).
#[pyfunction]
// The literal (core::DEFAULT_MIN_GAP) so that the signature Python sees shows the value.
#[pyo3(signature = (batch, weak, strong, min_gap = 1e-6))]
fn batch_capability(
    batch: &Batch,
    weak: PyReadonlyArray1<'_, f32>,
    strong: PyReadonlyArray1<'_, f32>,
    min_gap: f64,
) -> PyResult<Option<f64>> {
    core::batch_capability(&batch.inner, slice(&weak, "weak")?, slice(&strong, "strong")?, min_gap).map_err(core_err)
}

/// Checks a prediction array (length, values in [0, 1] or NaN) without using it.
#[pyfunction]
fn check_predicted(py: Python<'_>, predicted: PyReadonlyArray1<'_, f64>, num_tasks: usize) -> PyResult<()> {
    let p = slice(&predicted, "predicted")?;
    py.detach(|| core::update::check_evidence(&core::Evidence::Predicted(p), num_tasks)).map_err(core_err)
}

fn evidence_view<'a>(
    predicted: &'a Option<PyReadonlyArray1<'_, f64>>,
    weak: &'a Option<PyReadonlyArray1<'_, f32>>,
    strong: &'a Option<PyReadonlyArray1<'_, f32>>,
    capability: Option<f64>,
) -> PyResult<core::Evidence<'a>> {
    Ok(match (predicted, weak, strong, capability) {
        (Some(p), None, None, None) => core::Evidence::Predicted(slice(p, "predicted")?),
        (None, Some(w), Some(s), Some(mu)) => core::Evidence::Interpolation { weak: slice(w, "weak")?, strong: slice(s, "strong")? , mu },
        (None, _, _, None) => core::Evidence::None,
        _ => {
            return Err(errors::invalid_argument(
                "predicted",
                "give either predicted, or weak, strong and capability together".to_string(),
            ))
        }
    })
}

fn exclusion_ids(exclude_ids: &Option<PyReadonlyArray1<'_, i64>>) -> PyResult<Option<Vec<usize>>> {
    match exclude_ids {
        Some(e) => {
            let raw = slice(e, "exclude")?;
            if let Some(bad) = raw.iter().find(|&&x| x < 0) {
                return Err(errors::invalid_argument("exclude", format!("id {bad} is negative")));
            }
            Ok(Some(raw.iter().map(|&x| x as usize).collect()))
        }
        None => Ok(None),
    }
}

fn exclusion<'a>(mask: &'a Option<PyReadonlyArray1<'_, bool>>, ids: &'a Option<Vec<usize>>) -> PyResult<core::Exclude<'a>> {
    Ok(match (mask, ids) {
        (Some(m), None) => core::Exclude::Mask(slice(m, "exclude")?),
        (None, Some(ids)) => core::Exclude::Ids(ids),
        (None, None) => core::Exclude::None,
        _ => return Err(errors::invalid_argument("exclude", "give a mask or ids, not both".to_string())),
    })
}

/// One pass over the pool: apply an update (when `batch` is given), then select `k` tasks from the
/// updated posterior (when `k` is given), fused chunk by chunk. Returns (ids, distance of the
/// last selected) or None. `bound_hint` (e.g. the last k-th distance, loosened) prunes from the
/// start and never changes the result.
/// Everything is validated first: on error nothing is written.
#[pyfunction]
#[pyo3(signature = (alpha, beta, *, prior_alpha=PriorArg::Scalar(1.0), prior_beta=PriorArg::Scalar(1.0), batch=None, lam=0.0, rho=0.0, n_rollouts=1.0,
                    predicted=None, weak=None, strong=None, capability=None,
                    k=None, target=0.5, thompson=true, seed=0, counter=0, exclude_mask=None, exclude_ids=None, bound_hint=None, threads=None))]
#[allow(clippy::too_many_arguments)]
fn step<'py>(
    py: Python<'py>,
    mut alpha: PyReadwriteArray1<'py, f64>,
    mut beta: PyReadwriteArray1<'py, f64>,
    prior_alpha: PriorArg<'py>,
    prior_beta: PriorArg<'py>,
    batch: Option<PyRef<'py, Batch>>,
    lam: f64,
    rho: f64,
    n_rollouts: f64,
    predicted: Option<PyReadonlyArray1<'py, f64>>,
    weak: Option<PyReadonlyArray1<'py, f32>>,
    strong: Option<PyReadonlyArray1<'py, f32>>,
    capability: Option<f64>,
    k: Option<usize>,
    target: f64,
    thompson: bool,
    seed: u64,
    counter: u64,
    exclude_mask: Option<PyReadonlyArray1<'py, bool>>,
    exclude_ids: Option<PyReadonlyArray1<'py, i64>>,
    bound_hint: Option<f64>,
    threads: Option<usize>,
) -> PyResult<Option<(Bound<'py, PyArray1<i64>>, f64)>> {
    let pa = prior_view(&prior_alpha, "prior_alpha")?;
    let pb = prior_view(&prior_beta, "prior_beta")?;
    let evidence = evidence_view(&predicted, &weak, &strong, capability)?;
    let update = batch.as_ref().map(|b| core::UpdateArgs {
        prior_alpha: pa,
        prior_beta: pb,
        batch: &b.inner,
        evidence,
        params: core::UpdateParams { lam, rho, n_rollouts },
    });
    let ids = exclusion_ids(&exclude_ids)?;
    let exclude = exclusion(&exclude_mask, &ids)?;
    let select = k.map(|k| core::SelectArgs { k, target, scoring: scoring(thompson, seed, counter), exclude, hint: bound_hint });
    let a = alpha.as_slice_mut().map_err(|_| not_contiguous("alpha"))?;
    let b = beta.as_slice_mut().map_err(|_| not_contiguous("beta"))?;
    let chosen = py.detach(|| pools::run(threads, || core::step(a, b, update, select)))?.map_err(core_err)?;
    Ok(chosen.map(|c| selection_to_py(py, c)))
}

fn scoring(thompson: bool, seed: u64, counter: u64) -> core::Scoring {
    if thompson {
        core::Scoring::Thompson { seed, counter }
    } else {
        core::Scoring::Greedy
    }
}

/// (ids as int64, distance of the last selected task).
fn selection_to_py(py: Python<'_>, selection: core::Selection) -> (Bound<'_, PyArray1<i64>>, f64) {
    (PyArray1::from_iter(py, selection.ids.into_iter().map(|k| k as i64)), selection.kth_distance)
}

/// The `k` tasks nearest the target, best first, from a read-only posterior, and the
/// distance of the last one. `bound_hint` as in `step`.
#[pyfunction]
#[pyo3(signature = (alpha, beta, k, target, thompson, seed, counter, exclude_mask=None, exclude_ids=None, bound_hint=None, threads=None))]
#[allow(clippy::too_many_arguments)]
fn select<'py>(
    py: Python<'py>,
    alpha: PyReadonlyArray1<'py, f64>,
    beta: PyReadonlyArray1<'py, f64>,
    k: usize,
    target: f64,
    thompson: bool,
    seed: u64,
    counter: u64,
    exclude_mask: Option<PyReadonlyArray1<'py, bool>>,
    exclude_ids: Option<PyReadonlyArray1<'py, i64>>,
    bound_hint: Option<f64>,
    threads: Option<usize>,
) -> PyResult<(Bound<'py, PyArray1<i64>>, f64)> {
    let a = slice(&alpha, "alpha")?;
    let b = slice(&beta, "beta")?;
    let ids = exclusion_ids(&exclude_ids)?;
    let exclude = exclusion(&exclude_mask, &ids)?;
    let args = core::SelectArgs { k, target, scoring: scoring(thompson, seed, counter), exclude, hint: bound_hint };
    let chosen = py.detach(|| pools::run(threads, || core::step::select_only(a, b, args)))?.map_err(core_err)?;
    Ok(selection_to_py(py, chosen))
}

fn parse_backend(name: &str) -> PyResult<core::Backend> {
    let b = core::Backend::from_name(name)
        .ok_or_else(|| errors::invalid_argument("backend", format!("unknown backend {name:?}; expected portable, avx2 or avx512")))?;
    if !b.is_available() {
        return Err(errors::invalid_argument("backend", format!("{name} is not supported by this CPU")));
    }
    Ok(b)
}

/// The Thompson draws p̂ a selection with `(seed, counter)` makes for every task (float32).
#[pyfunction]
#[pyo3(signature = (alpha, beta, seed, counter, backend=None, threads=None))]
fn thompson_draws<'py>(
    py: Python<'py>,
    alpha: PyReadonlyArray1<'py, f64>,
    beta: PyReadonlyArray1<'py, f64>,
    seed: u64,
    counter: u64,
    backend: Option<&str>,
    threads: Option<usize>,
) -> PyResult<Bound<'py, PyArray1<f32>>> {
    let a = slice(&alpha, "alpha")?;
    let b = slice(&beta, "beta")?;
    if b.len() != a.len() {
        return Err(errors::invalid_argument("beta", format!("has length {}, alpha has {}", b.len(), a.len())));
    }
    if let Some((i, x)) = a.iter().chain(b.iter()).enumerate().find(|(_, x)| !(x.is_finite() && **x > 0.0)) {
        return Err(errors::invalid_argument("alpha", format!("shapes must be finite and > 0, got {x} at flat index {i}")));
    }
    let backend = match backend {
        Some(name) => parse_backend(name)?,
        None => core::backend(),
    };
    let mut out = vec![0f32; a.len()];
    py.detach(|| pools::run(threads, || core::kernel::thompson_draws(backend, a, b, seed, counter, &mut out)))?;
    Ok(PyArray1::from_vec(py, out))
}

/// Backends this CPU can run, slowest first.
#[pyfunction]
fn available_backends() -> Vec<&'static str> {
    core::available_backends().into_iter().map(|b| b.name()).collect()
}

/// The backend kernels use now.
#[pyfunction]
fn backend() -> &'static str {
    core::backend().name()
}

/// Forces a backend by name (tests, benchmarks), or automatic choice with None.
#[pyfunction]
#[pyo3(signature = (name=None))]
fn set_backend(name: Option<&str>) -> PyResult<()> {
    let b = name.map(parse_backend).transpose()?;
    core::set_backend(b);
    Ok(())
}

/// `size` Beta(a, b) draws from the core's sampler (for distribution tests).
#[pyfunction]
fn beta_draws<'py>(py: Python<'py>, a: f64, b: f64, size: usize, seed: u64) -> PyResult<Bound<'py, PyArray1<f64>>> {
    if !(a.is_finite() && a > 0.0) {
        return Err(errors::invalid_argument("a", format!("must be finite and > 0, got {a}")));
    }
    if !(b.is_finite() && b > 0.0) {
        return Err(errors::invalid_argument("b", format!("must be finite and > 0, got {b}")));
    }
    let mut out = vec![0.0; size];
    py.detach(|| core::sampler::beta_draws(a, b, seed, &mut out));
    Ok(PyArray1::from_vec(py, out))
}

/// Number of threads rayon would use for `threads` (None: all cores).
#[pyfunction]
#[pyo3(signature = (threads=None))]
fn thread_count(threads: Option<usize>) -> PyResult<usize> {
    pools::run(threads, rayon::current_num_threads)
}

#[pymodule(gil_used = false)]
fn _core(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("CHUNK", core::CHUNK)?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add_class::<Batch>()?;
    m.add_function(wrap_pyfunction!(aggregate, m)?)?;
    m.add_function(wrap_pyfunction!(batch_capability, m)?)?;
    m.add_function(wrap_pyfunction!(check_predicted, m)?)?;
    m.add_function(wrap_pyfunction!(step, m)?)?;
    m.add_function(wrap_pyfunction!(select, m)?)?;
    m.add_function(wrap_pyfunction!(thompson_draws, m)?)?;
    m.add_function(wrap_pyfunction!(available_backends, m)?)?;
    m.add_function(wrap_pyfunction!(backend, m)?)?;
    m.add_function(wrap_pyfunction!(set_backend, m)?)?;
    m.add_function(wrap_pyfunction!(beta_draws, m)?)?;
    m.add_function(wrap_pyfunction!(thread_count, m)?)?;
    Ok(())
}
