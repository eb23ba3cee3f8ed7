//! A pass over the pool that runs on the rayon pool while Python goes on: `start_step` returns a
//! `Pass` at once; `Pass.wait()` blocks (GIL released) until the pass is done and returns what
//! `step` would have returned; `Pass.wait_take(k)` returns only the first k selected ids, so
//! that a selector hands out a prefetched selection in one call. Dropping a `Pass` (garbage
//! collection, interpreter exit) waits for its work first, so no work ever outlives the arrays
//! it reads and writes.
//!
//! A waiter whose pass is already done takes the result without releasing the GIL or touching
//! the condition variable; one whose pass is about to finish spins for a short while before it
//! parks, because waking a parked thread costs tens of microseconds on a VM.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use bots_core as core;
use numpy::PyArray1;
use pyo3::exceptions::PyRuntimeError;
use pyo3::prelude::*;

use crate::errors::core_err;
use crate::views::{Keep, Views};
use crate::{selection_to_py, PySelection};

/// How long a waiter spins on a running pass before it parks: about what waking a parked
/// thread costs, so a pass that ends within it is collected without a wake-up, and a long one
/// wastes at most this much of one core.
const SPIN: Duration = Duration::from_micros(50);

type Outcome = std::thread::Result<Result<Option<core::Selection>, core::CoreError>>;

enum State {
    Running,
    Done(Outcome),
    Collected,
}

/// Where the worker leaves its result and the waiter finds it.
struct Slot {
    state: Mutex<State>,
    finished: Condvar,
    /// Set once the state is `Done` (read without the lock by spinning waiters).
    done: AtomicBool,
}

impl Slot {
    fn lock(&self) -> MutexGuard<'_, State> {
        // A panic inside the pass is caught before it reaches the lock, so poisoning cannot carry
        // a half-written state; recover the guard rather than panic again.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn finish(&self, outcome: Outcome) {
        *self.lock() = State::Done(outcome);
        self.done.store(true, Ordering::Release);
        self.finished.notify_all();
    }

    fn is_done(&self) -> bool {
        self.done.load(Ordering::Acquire)
    }

    fn wait_finished(&self) -> MutexGuard<'_, State> {
        if !self.is_done() {
            let start = Instant::now();
            while !self.is_done() && start.elapsed() < SPIN {
                std::hint::spin_loop();
            }
        }
        let mut state = self.lock();
        while matches!(*state, State::Running) {
            state = self.finished.wait(state).unwrap_or_else(|p| p.into_inner());
        }
        state
    }
}

/// The first k ids of a pass's selection (None when it selected fewer) and its k-th distance.
type FirstIds<'py> = (Option<Bound<'py, PyArray1<i64>>>, f64);

/// A background pass started by `start_step`.
#[pyclass(module = "bots_rft._core", frozen)]
pub struct Pass {
    slot: Arc<Slot>,
    /// The arrays the pass uses, alive until it has finished (see `views.rs`).
    keep: Mutex<Keep>,
}

impl Pass {
    pub(crate) fn start(views: Views, keep: Keep, threads: Option<usize>) -> PyResult<Self> {
        let slot = Arc::new(Slot { state: Mutex::new(State::Running), finished: Condvar::new(), done: AtomicBool::new(false) });
        let worker_slot = Arc::clone(&slot);
        crate::pools::spawn(threads, move || {
            let outcome = catch_unwind(AssertUnwindSafe(|| views.run()));
            worker_slot.finish(outcome);
        })?;
        Ok(Self { slot, keep: Mutex::new(keep) })
    }
}

#[pymethods]
impl Pass {
    /// Whether the pass has finished (never blocks).
    fn done(&self) -> bool {
        self.slot.is_done()
    }

    /// Blocks until the pass has finished, with the GIL released, and returns what `step` returns:
    /// (ids, distance of the last selected) when the pass selected, else None. Raises the pass's
    /// error, if any. A pass's result is collected once: a second call raises RuntimeError.
    fn wait<'py>(&self, py: Python<'py>) -> PyResult<Option<PySelection<'py>>> {
        Ok(self.collect(py, true)?.map(|s| selection_to_py(py, s)))
    }

    /// `wait()` for a caller that needs only the first `k` selected ids: (those ids, or None when
    /// the pass selected fewer than k; the distance of the last task the pass selected), or None
    /// when the pass did not select. Collects the result as `wait()` does.
    /// Unlike `wait()`, it keeps its references to the pass's arrays until the `Pass` itself is
    /// dropped: releasing them touches their (cold) reference counts, which a selector leaves to
    /// a later, warm moment.
    fn wait_take<'py>(&self, py: Python<'py>, k: usize) -> PyResult<Option<FirstIds<'py>>> {
        Ok(self.collect(py, false)?.map(|s| {
            let first = (s.ids.len() >= k).then(|| PyArray1::from_iter(py, s.ids[..k].iter().map(|&j| j as i64)));
            (first, s.kth_distance)
        }))
    }
}

impl Pass {
    /// Waits for the pass (without releasing the GIL when it is already done: nothing to wait
    /// for) and takes its result; `release`: drop the references to its arrays now.
    fn collect(&self, py: Python<'_>, release: bool) -> PyResult<Option<core::Selection>> {
        let take = || std::mem::replace(&mut *self.slot.wait_finished(), State::Collected);
        let outcome = if self.slot.is_done() { take() } else { py.detach(take) };
        if release {
            self.keep.lock().unwrap_or_else(|p| p.into_inner()).clear();
        }
        match outcome {
            State::Done(Ok(result)) => result.map_err(core_err),
            State::Done(Err(_)) => Err(PyRuntimeError::new_err("the background pass panicked; the posterior may be partly updated")),
            State::Collected => Err(PyRuntimeError::new_err("this pass's result was already collected")),
            State::Running => unreachable!("wait_finished returns only when the pass is no longer running"),
        }
    }
}

impl Drop for Pass {
    fn drop(&mut self) {
        // The worker writes alpha and beta until it finishes: wait for it before the references in
        // `keep` can let those arrays go. It never needs the GIL, so waiting while holding it is safe.
        drop(self.slot.wait_finished());
    }
}
