//! Rayon pools by size, built once and reused: building a pool per call would cost more than
//! a whole update at common pool sizes.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

use pyo3::PyResult;
use rayon::ThreadPool;

use crate::errors::invalid_argument;

static POOLS: OnceLock<Mutex<HashMap<usize, Arc<ThreadPool>>>> = OnceLock::new();

fn pool(threads: usize) -> PyResult<Arc<ThreadPool>> {
    let mut pools = POOLS.get_or_init(Default::default).lock().unwrap_or_else(|p| p.into_inner());
    if let Some(p) = pools.get(&threads) {
        return Ok(p.clone());
    }
    let p = rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .thread_name(|i| format!("bots-rft-{i}"))
        .build()
        .map_err(|e| invalid_argument("threads", format!("could not start {threads} threads: {e}")))?;
    let p = Arc::new(p);
    pools.insert(threads, p.clone());
    Ok(p)
}

/// Runs `f` in the global pool (`None`) or in the cached pool of `threads` threads.
pub fn run<T: Send>(threads: Option<usize>, f: impl FnOnce() -> T + Send) -> PyResult<T> {
    match threads {
        None => Ok(f()),
        Some(0) => Err(invalid_argument("threads", "must be >= 1, got 0".to_string())),
        Some(t) => Ok(pool(t)?.install(f)),
    }
}

/// Starts `f` in the background on the global pool (`None`) or on the cached pool of `threads`
/// threads, and returns at once.
pub fn spawn(threads: Option<usize>, f: impl FnOnce() + Send + 'static) -> PyResult<()> {
    match threads {
        None => rayon::spawn(f),
        Some(0) => return Err(invalid_argument("threads", "must be >= 1, got 0".to_string())),
        Some(t) => pool(t)?.spawn(f),
    }
    Ok(())
}
