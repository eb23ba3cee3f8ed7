//! The posterior (α, β of every task) as memory this module owns, and the passes that update it
//! and select from it, at once (`Posterior.step`) or in the background (`Posterior.start_step`,
//! which returns a `Pass`).
//!
//! Why this is sound without any promise from Python code:
//! - α and β are `Arc<Vec<f64>>`s that only Rust writes. Python sees them through read-only
//!   numpy views (`Posterior.alpha`/`.beta`, made in `frozen.rs`) whose base object holds one
//!   more reference to the same `Arc`, and which numpy refuses to make writeable again.
//! - A pass writes through `frozen::writable`: while any view of the arrays is alive it writes a
//!   fresh copy instead, so a view is a consistent snapshot that no pass ever changes, and stays
//!   valid after the posterior itself is gone. With no view alive (the selector's usual case)
//!   the pass writes in place, as before.
//! - A background pass takes the arrays (and owned copies of its specs, see `specs.rs`) with it,
//!   so it holds everything it reads or writes; the posterior takes them back when it next needs
//!   them, waiting for the pass if it is still running.
//! - Methods take `&mut self`: PyO3's borrow flag makes a second call on the same posterior
//!   while one runs (e.g. from another thread while the GIL is released) a `RuntimeError`
//!   ("Already borrowed"), never a data race.
//!
//! A waiter whose pass is already done takes the result without releasing the GIL or touching
//! the condition variable; one whose pass is still running parks at once (see `wait_finished`).

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};

use bots_core as core;
use numpy::{PyArray1, PyArrayMethods, PyReadonlyArray1, PyUntypedArrayMethods};
use pyo3::exceptions::PyRuntimeError;
use pyo3::prelude::*;

use crate::errors::{core_err, invalid_argument, not_contiguous};
use crate::frozen::{copy_of, view, writable};
use crate::specs::{SelectSpec, UpdateSpec};

/// α and β, shared with the snapshots Python holds (see the module doc).
struct Arrays {
    alpha: Arc<Vec<f64>>,
    beta: Arc<Vec<f64>>,
}

type PassResult = Result<Option<core::Selection>, core::CoreError>;
type Outcome = std::thread::Result<PassResult>;

/// The specs of one pass, owned, so that the pass can outlive the Python objects.
struct Work {
    update: Option<UpdateSpec>,
    select: Option<SelectSpec>,
}

impl Work {
    fn new(update: Option<&UpdateSpec>, select: Option<&SelectSpec>) -> Self {
        Work { update: update.cloned(), select: select.cloned() }
    }

    fn run(&self, arrays: &mut Arrays) -> PassResult {
        run_pass(arrays, self.update.as_ref(), self.select.as_ref())
    }
}

/// The update (if any), then the selection (if any) from the updated posterior, fused.
fn run_pass(arrays: &mut Arrays, update: Option<&UpdateSpec>, select: Option<&SelectSpec>) -> PassResult {
    let first_index = select.map_or(0, |s| s.first_index);
    match update {
        // Nothing to write: read the arrays as they are (a copy would be wasted on a live view).
        None => select.map(|s| core::select_shard(&arrays.alpha, &arrays.beta, first_index, s.args())).transpose(),
        Some(u) => {
            let alpha = writable(&mut arrays.alpha);
            let beta = writable(&mut arrays.beta);
            core::step_shard(alpha, beta, first_index, Some(u.args()), select.map(SelectSpec::args))
        }
    }
}

/// What a background pass has produced, as its `Pass` sees it.
enum PassState {
    Running,
    Done(Outcome),
    Collected,
}

/// Where a background pass leaves its result (for its `Pass`) and the arrays (for its posterior).
struct Slot {
    state: Mutex<SlotState>,
    finished: Condvar,
    /// Set once the pass is done (read without the lock by waiters that find it done).
    done: AtomicBool,
}

struct SlotState {
    result: PassState,
    arrays: Option<Arrays>,
}

impl Slot {
    fn lock(&self) -> MutexGuard<'_, SlotState> {
        // A panic inside the pass is caught before it reaches the lock, so poisoning cannot carry
        // a half-written state; recover the guard rather than panic again.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn finish(&self, outcome: Outcome, arrays: Arrays) {
        {
            let mut state = self.lock();
            state.result = PassState::Done(outcome);
            state.arrays = Some(arrays);
        }
        self.done.store(true, Ordering::Release);
        self.finished.notify_all();
    }

    fn is_done(&self) -> bool {
        self.done.load(Ordering::Acquire)
    }

    fn wait_finished(&self) -> MutexGuard<'_, SlotState> {
        // No spinning first: the pass's threads may hold every core, and a spinning waiter (at a
        // higher priority than they run at) would slow the pass it waits for.
        let mut state = self.lock();
        while !self.is_done() {
            state = self.finished.wait(state).unwrap_or_else(|p| p.into_inner());
        }
        state
    }

    /// Waits (with the GIL released unless the pass is already done) and applies `take`.
    fn when_done<T: Send>(&self, py: Python<'_>, take: impl FnOnce(&mut SlotState) -> T + Send) -> T {
        let run = || take(&mut self.wait_finished());
        if self.is_done() {
            run()
        } else {
            py.detach(run)
        }
    }
}

/// (ids as int64, distance of the last selected task, each selected task's distance to the
/// target as float64), best first: the distances are what a merge of shard selections orders by.
pub(crate) type PySelection<'py> = (Bound<'py, PyArray1<i64>>, f64, Bound<'py, PyArray1<f64>>);

fn selection_to_py(py: Python<'_>, selection: core::Selection) -> PySelection<'_> {
    let ids = PyArray1::from_iter(py, selection.ids.into_iter().map(|k| k as i64));
    (ids, selection.kth_distance, PyArray1::from_vec(py, selection.distances))
}

/// α and β of every task (or of one shard's tasks), owned here. Read through read-only views
/// (`alpha`, `beta`), changed only by passes (`step`, `start_step`) and `assign`.
#[pyclass(module = "bots_rft._core")]
pub struct Posterior {
    /// None while a background pass has them (then `running` is set).
    arrays: Option<Arrays>,
    running: Option<Arc<Slot>>,
}

impl Posterior {
    /// The arrays, taken back from a background pass first if one has them.
    fn arrays(&mut self, py: Python<'_>) -> &mut Arrays {
        if let Some(slot) = self.running.take() {
            let back = slot.when_done(py, |state| state.arrays.take());
            self.arrays = Some(back.expect("a finished pass leaves the arrays in its slot"));
        }
        self.arrays.as_mut().expect("the arrays are here when no pass has them")
    }
}

fn copy_in(a: &PyReadonlyArray1<'_, f64>, name: &'static str) -> PyResult<Vec<f64>> {
    Ok(copy_of(a.as_slice().map_err(|_| not_contiguous(name))?))
}

#[pymethods]
impl Posterior {
    /// A posterior holding copies of `alpha` and `beta` (equal lengths).
    #[new]
    fn new(alpha: PyReadonlyArray1<'_, f64>, beta: PyReadonlyArray1<'_, f64>) -> PyResult<Self> {
        let (alpha, beta) = (copy_in(&alpha, "alpha")?, copy_in(&beta, "beta")?);
        if alpha.len() != beta.len() {
            return Err(invalid_argument("beta", format!("length {} differs from alpha's {}", beta.len(), alpha.len())));
        }
        Ok(Self { arrays: Some(Arrays { alpha: Arc::new(alpha), beta: Arc::new(beta) }), running: None })
    }

    fn __len__(&mut self, py: Python<'_>) -> usize {
        self.arrays(py).alpha.len()
    }

    /// α of every task, with every pass started so far applied: a read-only view that later
    /// passes never change (they write a new version while it is alive).
    #[getter]
    fn alpha<'py>(&mut self, py: Python<'py>) -> PyResult<Bound<'py, PyArray1<f64>>> {
        view(py, &self.arrays(py).alpha)
    }

    /// β of every task (see `alpha`).
    #[getter]
    fn beta<'py>(&mut self, py: Python<'py>) -> PyResult<Bound<'py, PyArray1<f64>>> {
        view(py, &self.arrays(py).beta)
    }

    /// Replaces α and β with copies of the given arrays (same length as now).
    fn assign(&mut self, py: Python<'_>, alpha: PyReadonlyArray1<'_, f64>, beta: PyReadonlyArray1<'_, f64>) -> PyResult<()> {
        let (alpha, beta) = (copy_in(&alpha, "alpha")?, copy_in(&beta, "beta")?);
        let arrays = self.arrays(py);
        let n = arrays.alpha.len();
        for (name, got) in [("alpha", alpha.len()), ("beta", beta.len())] {
            if got != n {
                return Err(invalid_argument(name, format!("length {got} differs from the posterior's {n}")));
            }
        }
        *arrays = Arrays { alpha: Arc::new(alpha), beta: Arc::new(beta) };
        Ok(())
    }

    /// One pass over the posterior: apply `update` (if given), then select per `select` (if
    /// given) from the updated posterior, fused chunk by chunk. Returns (ids, distance of the
    /// last selected, every selected task's distance) or None without `select`. Everything is
    /// validated first: on error nothing is written.
    #[pyo3(signature = (update=None, select=None, *, threads=None))]
    fn step<'py>(
        &mut self,
        py: Python<'py>,
        update: Option<PyRef<'py, UpdateSpec>>,
        select: Option<PyRef<'py, SelectSpec>>,
        threads: Option<usize>,
    ) -> PyResult<Option<PySelection<'py>>> {
        let (update, select) = (update.as_deref(), select.as_deref());
        let arrays = self.arrays(py);
        let run = || run_pass(arrays, update, select);
        let chosen = py.detach(|| crate::pools::run(threads, run))?.map_err(core_err)?;
        Ok(chosen.map(|c| selection_to_py(py, c)))
    }

    /// `step` started in the background: returns a `Pass` at once; `Pass.wait()` gives `step`'s
    /// result. The pass takes the arrays with it; anything that reads them (`alpha`, `beta`,
    /// `step`, another `start_step`) waits for it first.
    ///
    /// `take`: the `k` a later `Pass.wait_take(k)` will probably ask for. Its result array is
    /// made now, so that `wait_take` (often called by a thread that has just woken, where every
    /// new code path costs tens of microseconds) only fills it.
    #[pyo3(signature = (update=None, select=None, *, threads=None, take=None))]
    fn start_step(
        &mut self,
        py: Python<'_>,
        update: Option<PyRef<'_, UpdateSpec>>,
        select: Option<PyRef<'_, SelectSpec>>,
        threads: Option<usize>,
        take: Option<usize>,
    ) -> PyResult<Pass> {
        if let Some(k) = take {
            let most = select.as_deref().map_or(0, |s| s.k);
            if k > most {
                return Err(invalid_argument("take", format!("{k} is more than the pass selects ({most})")));
            }
        }
        let work = Work::new(update.as_deref(), select.as_deref());
        // Before the arrays are taken: a pool that cannot start must leave them here.
        let pool = crate::pools::background(threads)?;
        self.arrays(py);
        let mut arrays = self.arrays.take().expect("taken back just above");
        let slot = Arc::new(Slot {
            state: Mutex::new(SlotState { result: PassState::Running, arrays: None }),
            finished: Condvar::new(),
            done: AtomicBool::new(false),
        });
        let worker_slot = Arc::clone(&slot);
        pool.spawn(move || {
            // The arrays stay outside the unwind boundary, so the posterior gets them back even
            // if the pass panics (then possibly part-updated, which `Pass.wait` reports).
            let outcome = catch_unwind(AssertUnwindSafe(|| work.run(&mut arrays)));
            worker_slot.finish(outcome, arrays);
        });
        self.running = Some(Arc::clone(&slot));
        let first = take.map(|k| PyArray1::<i64>::zeros(py, k, false).unbind());
        Ok(Pass { slot, first: Mutex::new(first) })
    }
}

/// The first k ids of a pass's selection (None when it selected fewer) and its k-th distance.
type FirstIds<'py> = (Option<Bound<'py, PyArray1<i64>>>, f64);

/// A pass started by `Posterior.start_step`, running in the background. It holds only the
/// result's slot: the arrays go back to the posterior, whether or not the result is collected.
#[pyclass(module = "bots_rft._core", frozen)]
pub struct Pass {
    slot: Arc<Slot>,
    /// The array `wait_take` fills, made when the pass started (see `Posterior.start_step`'s
    /// `take`); never seen by Python before `wait_take` returns it.
    first: Mutex<Option<Py<PyArray1<i64>>>>,
}

impl Pass {
    fn collect(&self, py: Python<'_>) -> PyResult<Option<core::Selection>> {
        let outcome = self.slot.when_done(py, |state| std::mem::replace(&mut state.result, PassState::Collected));
        match outcome {
            PassState::Done(Ok(result)) => result.map_err(core_err),
            PassState::Done(Err(_)) => Err(PyRuntimeError::new_err("the background pass panicked; the posterior may be partly updated")),
            PassState::Collected => Err(PyRuntimeError::new_err("this pass's result was already collected")),
            PassState::Running => unreachable!("when_done runs only once the pass has finished"),
        }
    }
}

#[pymethods]
impl Pass {
    /// Whether the pass has finished (never blocks).
    fn done(&self) -> bool {
        self.slot.is_done()
    }

    /// Blocks until the pass has finished, with the GIL released, and returns what
    /// `Posterior.step` returns. Raises the pass's error, if any. A pass's result is collected
    /// once: a second call raises RuntimeError.
    fn wait<'py>(&self, py: Python<'py>) -> PyResult<Option<PySelection<'py>>> {
        Ok(self.collect(py)?.map(|s| selection_to_py(py, s)))
    }

    /// `wait()` for a caller that needs only the first `k` selected ids: (those ids, or None when
    /// the pass selected fewer than k; the distance of the last task the pass selected), or None
    /// when the pass did not select. Collects the result as `wait()` does.
    fn wait_take<'py>(&self, py: Python<'py>, k: usize) -> PyResult<Option<FirstIds<'py>>> {
        let made = self.first.lock().unwrap_or_else(|p| p.into_inner()).take().map(|a| a.into_bound(py));
        Ok(self.collect(py)?.map(|s| {
            let first = (s.ids.len() >= k).then(|| match made {
                Some(array) if array.len() == k => {
                    // SAFETY: the array was made by `start_step` for this pass and has not left it
                    // (Python gets it only from this return), so nothing else reads or borrows it.
                    let out = unsafe { array.as_slice_mut() }.expect("a fresh contiguous array");
                    for (o, &j) in out.iter_mut().zip(&s.ids[..k]) {
                        *o = j as i64;
                    }
                    array
                }
                _ => PyArray1::from_iter(py, s.ids[..k].iter().map(|&j| j as i64)),
            });
            (first, s.kth_distance)
        }))
    }
}
