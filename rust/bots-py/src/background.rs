//! A pass over the pool that runs on the rayon pool while Python goes on: `start_step` returns a
//! `Pass` at once; `Pass.wait()` blocks (GIL released) until the pass is done and returns what
//! `step` would have returned. Dropping a `Pass` (garbage collection, interpreter exit) waits for
//! its work first, so no work ever outlives the arrays it reads and writes.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};

use bots_core as core;
use pyo3::exceptions::PyRuntimeError;
use pyo3::prelude::*;

use crate::errors::core_err;
use crate::views::{Keep, Views};
use crate::{selection_to_py, PySelection};

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
}

impl Slot {
    fn lock(&self) -> MutexGuard<'_, State> {
        // A panic inside the pass is caught before it reaches the lock, so poisoning cannot carry
        // a half-written state; recover the guard rather than panic again.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn finish(&self, outcome: Outcome) {
        *self.lock() = State::Done(outcome);
        self.finished.notify_all();
    }

    fn wait_finished(&self) -> MutexGuard<'_, State> {
        let mut state = self.lock();
        while matches!(*state, State::Running) {
            state = self.finished.wait(state).unwrap_or_else(|p| p.into_inner());
        }
        state
    }
}

/// A background pass started by `start_step`.
#[pyclass(module = "bots_rft._core", frozen)]
pub struct Pass {
    slot: Arc<Slot>,
    /// The arrays the pass uses, alive until it has finished (see `views.rs`).
    keep: Mutex<Keep>,
}

impl Pass {
    pub(crate) fn start(views: Views, keep: Keep, threads: Option<usize>) -> PyResult<Self> {
        let slot = Arc::new(Slot { state: Mutex::new(State::Running), finished: Condvar::new() });
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
        !matches!(*self.slot.lock(), State::Running)
    }

    /// Blocks until the pass has finished, with the GIL released, and returns what `step` returns:
    /// (ids, distance of the last selected) when the pass selected, else None. Raises the pass's
    /// error, if any. A pass's result is collected once: a second call raises RuntimeError.
    fn wait<'py>(&self, py: Python<'py>) -> PyResult<Option<PySelection<'py>>> {
        let outcome = py.detach(|| {
            let mut state = self.slot.wait_finished();
            std::mem::replace(&mut *state, State::Collected)
        });
        self.keep.lock().unwrap_or_else(|p| p.into_inner()).clear();
        match outcome {
            State::Done(Ok(result)) => Ok(result.map_err(core_err)?.map(|s| selection_to_py(py, s))),
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
