//! Rayon pools by size, built once and reused: building a pool per call would cost more than
//! a whole update at common pool sizes.
//!
//! Background passes (`background`) run on pools of their own whose threads have a lower scheduling
//! priority (nice +10 on Linux): a pass started after `update()` must not take CPU from the
//! trainer's own threads while they work, only use what they leave idle. When the trainer waits
//! for the result, the pass has the machine to itself.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

use pyo3::PyResult;
use rayon::ThreadPool;

use crate::errors::invalid_argument;

type Pools = OnceLock<Mutex<HashMap<usize, Arc<ThreadPool>>>>;

static POOLS: Pools = OnceLock::new();
static BACKGROUND_POOLS: Pools = OnceLock::new();

/// How much lower than the caller's a background thread's priority is (Linux nice increment).
const BACKGROUND_NICENESS: i32 = 10;

fn pool(threads: usize) -> PyResult<Arc<ThreadPool>> {
    cached(&POOLS, threads, false)
}

fn cached(pools: &Pools, threads: usize, background: bool) -> PyResult<Arc<ThreadPool>> {
    let mut pools = pools.get_or_init(Default::default).lock().unwrap_or_else(|p| p.into_inner());
    if let Some(p) = pools.get(&threads) {
        return Ok(p.clone());
    }
    let mut builder = rayon::ThreadPoolBuilder::new().num_threads(threads);
    builder = if background {
        builder.thread_name(|i| format!("bots-rft-bg-{i}")).start_handler(|_| lower_priority())
    } else {
        builder.thread_name(|i| format!("bots-rft-{i}"))
    };
    let p = builder.build().map_err(|e| invalid_argument("threads", format!("could not start {threads} threads: {e}")))?;
    let p = Arc::new(p);
    pools.insert(threads, p.clone());
    Ok(p)
}

/// Lowers the calling thread's scheduling priority (best effort: a refusal changes nothing but
/// who gets the CPU first).
fn lower_priority() {
    #[cfg(target_os = "linux")]
    // SAFETY: setpriority on the calling thread (who = 0 names it on Linux, where each thread has
    // its own nice value); it reads and writes no memory of ours.
    unsafe {
        let now = libc::getpriority(libc::PRIO_PROCESS, 0);
        libc::setpriority(libc::PRIO_PROCESS, 0, now + BACKGROUND_NICENESS);
    }
}

/// Runs `f` in the global pool (`None`) or in the cached pool of `threads` threads.
pub fn run<T: Send>(threads: Option<usize>, f: impl FnOnce() -> T + Send) -> PyResult<T> {
    match threads {
        None => Ok(f()),
        Some(0) => Err(invalid_argument("threads", "must be >= 1, got 0".to_string())),
        Some(t) => Ok(pool(t)?.install(f)),
    }
}

/// The low-priority pool of `threads` threads (`None`: as many as the global pool) that
/// background passes are spawned on.
pub fn background(threads: Option<usize>) -> PyResult<Arc<ThreadPool>> {
    let threads = match threads {
        None => rayon::current_num_threads(),
        Some(0) => return Err(invalid_argument("threads", "must be >= 1, got 0".to_string())),
        Some(t) => t,
    };
    cached(&BACKGROUND_POOLS, threads, true)
}
