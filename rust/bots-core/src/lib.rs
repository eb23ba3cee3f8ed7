//! Pure Rust core of bots-rft: Bayesian Online Task Selection (BOTS).
//!
//! Each task keeps a Beta(alpha, beta) posterior over its success probability. [`update`] folds a
//! step's rollout results (explicit evidence) and predictions for the other tasks (implicit
//! evidence) into every posterior; [`select`] picks the tasks whose (sampled or mean) success
//! rate is nearest a target. The crate has no Python dependency; `bots-py` binds it.
//!
//! Determinism contract: task j's Thompson draw in a selection is a function of
//! `(seed, selection counter, j, alpha_j, beta_j)` only (counter-based Philox4x32-10 streams, see
//! `kernel.rs`), so results do not depend on the number of threads, the chunking, the instruction
//! set or the other tasks, and a restored selection counter reproduces the same draws.

pub mod error;
pub mod kernel;
pub mod lanes;
pub mod rng;
pub mod sampler;
pub mod select;
pub mod step;
pub mod update;

pub use error::{CoreError, ErrorKind};
pub use kernel::{available_backends, backend, set_backend, Backend};
pub use select::{select, Exclude, Scoring, SelectArgs, Selection};
pub use step::step;
pub use update::{aggregate, batch_capability, update, Batch, Evidence, Prior, UpdateArgs, UpdateParams, DEFAULT_MIN_GAP};

/// Tasks per unit of parallel work (and per fused update + select pass over cache-resident data).
/// Draws do not depend on it.
pub const CHUNK: usize = 1024;
