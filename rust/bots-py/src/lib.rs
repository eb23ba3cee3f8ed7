//! `bots_rft._core`: thin PyO3 wrappers over `bots-core`.
//!
//! Every kernel runs with the GIL released, inside a rayon pool of the requested size. The
//! posterior is memory the binding owns (`Posterior`, `posterior.rs`): Python reads it through
//! read-only views (`frozen.rs`), and passes over it (described by typed specs that own their
//! inputs, `specs.rs`) run either at once (`Posterior.step`) or in the background
//! (`Posterior.start_step`). Read-only functions on numpy arrays (`select`, the draws) borrow
//! them for the call only. Errors are mapped to Python exceptions in `errors.rs` only.

mod errors;
mod frozen;
mod pools;
mod posterior;
mod specs;

use bots_core as core;
use numpy::{PyArray1, PyReadonlyArray1};
use pyo3::exceptions::PyDeprecationWarning;
use pyo3::prelude::*;

use errors::{core_err, not_contiguous};
use frozen::Snapshot;
use posterior::{Pass, Posterior};
use specs::{SelectSpec, UpdateSpec};

/// One step's rollout results, validated, with repeated task ids summed (sorted by id).
#[pyclass(module = "bots_rft._core", frozen)]
pub struct Batch {
    pub(crate) inner: core::Batch,
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
    py.detach(|| core::check_evidence(&core::Evidence::Predicted(p), num_tasks)).map_err(core_err)
}

/// (ids as int64, distance of the last selected task).
type PyKth<'py> = (Bound<'py, PyArray1<i64>>, f64);

/// The selection `select` describes, from a read-only posterior given as arrays.
#[pyfunction]
#[pyo3(signature = (alpha, beta, select, *, threads=None))]
fn select<'py>(
    py: Python<'py>,
    alpha: PyReadonlyArray1<'py, f64>,
    beta: PyReadonlyArray1<'py, f64>,
    select: PyRef<'py, SelectSpec>,
    threads: Option<usize>,
) -> PyResult<PyKth<'py>> {
    let a = slice(&alpha, "alpha")?;
    let b = slice(&beta, "beta")?;
    let spec: &SelectSpec = &select;
    let chosen = py.detach(|| pools::run(threads, || core::select_shard(a, b, spec.first_index, spec.args())))?.map_err(core_err)?;
    Ok((PyArray1::from_iter(py, chosen.ids.into_iter().map(|k| k as i64)), chosen.kth_distance))
}

fn parse_simd_path(name: &str) -> PyResult<core::SimdPath> {
    let p = core::SimdPath::from_name(name)
        .ok_or_else(|| errors::invalid_argument("simd_path", format!("unknown SIMD path {name:?}; expected portable, avx2 or avx512")))?;
    if !p.is_available() {
        return Err(errors::invalid_argument("simd_path", format!("{name} is not supported by this CPU")));
    }
    Ok(p)
}

/// The Thompson draws p̂ a selection with `(seed, counter)` makes for every task (float32).
#[pyfunction]
#[pyo3(signature = (alpha, beta, seed, counter, simd_path=None, threads=None))]
fn thompson_draws<'py>(
    py: Python<'py>,
    alpha: PyReadonlyArray1<'py, f64>,
    beta: PyReadonlyArray1<'py, f64>,
    seed: u64,
    counter: u64,
    simd_path: Option<&str>,
    threads: Option<usize>,
) -> PyResult<Bound<'py, PyArray1<f32>>> {
    let a = slice(&alpha, "alpha")?;
    let b = slice(&beta, "beta")?;
    let simd = match simd_path {
        Some(name) => parse_simd_path(name)?,
        None => core::simd_path(),
    };
    let mut out = vec![0f32; a.len()];
    py.detach(|| pools::run(threads, || core::thompson_draws(simd, a, b, seed, counter, &mut out)))?.map_err(core_err)?;
    Ok(PyArray1::from_vec(py, out))
}

/// The Thompson draws selection `(seed, counter)` makes for the tasks `ids` only (float32), bit
/// for bit those of the whole pass.
#[pyfunction]
fn thompson_draws_at<'py>(
    py: Python<'py>,
    alpha: PyReadonlyArray1<'py, f64>,
    beta: PyReadonlyArray1<'py, f64>,
    ids: PyReadonlyArray1<'py, i64>,
    seed: u64,
    counter: u64,
) -> PyResult<Bound<'py, PyArray1<f32>>> {
    let a = slice(&alpha, "alpha")?;
    let b = slice(&beta, "beta")?;
    let raw = slice(&ids, "ids")?;
    if let Some(bad) = raw.iter().find(|&&x| x < 0) {
        return Err(errors::invalid_argument("ids", format!("{bad} is out of range [0, {})", a.len())));
    }
    let ids: Vec<usize> = raw.iter().map(|&x| x as usize).collect();
    let mut out = vec![0f32; ids.len()];
    py.detach(|| core::thompson_draws_at(a, b, &ids, seed, counter, &mut out)).map_err(core_err)?;
    Ok(PyArray1::from_vec(py, out))
}

/// SIMD paths (instruction sets the kernels are compiled for) this CPU can run, slowest first.
#[pyfunction]
fn available_simd_paths() -> Vec<&'static str> {
    core::available_simd_paths().into_iter().map(|p| p.name()).collect()
}

/// The SIMD path the kernels use now.
#[pyfunction]
fn simd_path() -> &'static str {
    core::simd_path().name()
}

/// Forces a SIMD path by name (tests, benchmarks), or automatic choice with None.
#[pyfunction]
#[pyo3(signature = (name=None))]
fn set_simd_path(name: Option<&str>) -> PyResult<()> {
    let p = name.map(parse_simd_path).transpose()?;
    core::set_simd_path(p);
    Ok(())
}

// The names these had before "backend" came to mean only where BOTS keeps its posterior
// (`BOTS(..., backend="torch")`): kept as deprecated aliases.

/// Deprecated alias of `available_simd_paths`.
#[pyfunction]
#[pyo3(warn(message = "bots_rft._core.available_backends() is deprecated; use available_simd_paths()", category = PyDeprecationWarning))]
fn available_backends() -> Vec<&'static str> {
    available_simd_paths()
}

/// Deprecated alias of `simd_path`.
#[pyfunction]
#[pyo3(warn(message = "bots_rft._core.backend() is deprecated; use simd_path()", category = PyDeprecationWarning))]
fn backend() -> &'static str {
    simd_path()
}

/// Deprecated alias of `set_simd_path`.
#[pyfunction]
#[pyo3(signature = (name=None))]
#[pyo3(warn(message = "bots_rft._core.set_backend() is deprecated; use set_simd_path()", category = PyDeprecationWarning))]
fn set_backend(name: Option<&str>) -> PyResult<()> {
    set_simd_path(name)
}

/// `size` Beta(a, b) draws from the core's sampler (for distribution tests).
#[pyfunction]
fn beta_draws<'py>(py: Python<'py>, a: f64, b: f64, size: usize, seed: u64) -> PyResult<Bound<'py, PyArray1<f64>>> {
    let mut out = vec![0.0; size];
    py.detach(|| core::beta_draws(a, b, seed, &mut out)).map_err(core_err)?;
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
    m.add("DEFAULT_MIN_GAP", core::DEFAULT_MIN_GAP)?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add_class::<Batch>()?;
    m.add_class::<UpdateSpec>()?;
    m.add_class::<SelectSpec>()?;
    m.add_class::<Posterior>()?;
    m.add_class::<Pass>()?;
    m.add_class::<Snapshot>()?;
    m.add_function(wrap_pyfunction!(frozen::frozen, m)?)?;
    m.add_function(wrap_pyfunction!(aggregate, m)?)?;
    m.add_function(wrap_pyfunction!(batch_capability, m)?)?;
    m.add_function(wrap_pyfunction!(check_predicted, m)?)?;
    m.add_function(wrap_pyfunction!(select, m)?)?;
    m.add_function(wrap_pyfunction!(thompson_draws, m)?)?;
    m.add_function(wrap_pyfunction!(thompson_draws_at, m)?)?;
    m.add_function(wrap_pyfunction!(available_simd_paths, m)?)?;
    m.add_function(wrap_pyfunction!(simd_path, m)?)?;
    m.add_function(wrap_pyfunction!(set_simd_path, m)?)?;
    m.add_function(wrap_pyfunction!(available_backends, m)?)?;
    m.add_function(wrap_pyfunction!(backend, m)?)?;
    m.add_function(wrap_pyfunction!(set_backend, m)?)?;
    m.add_function(wrap_pyfunction!(beta_draws, m)?)?;
    m.add_function(wrap_pyfunction!(thread_count, m)?)?;
    Ok(())
}
