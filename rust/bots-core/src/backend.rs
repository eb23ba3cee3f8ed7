//! Instruction-set backends: which ones this CPU runs, which one the kernels use now, and
//! [`Backend::dispatch`], which runs a kernel compiled for one of them.
//!
//! Kernels are written once as `#[inline(always)]` generic code over plain loops; `dispatch`
//! compiles them inside `#[target_feature]` wrappers, so each backend is the same algorithm
//! vectorised for its registers. No fused multiply-adds are used (Rust never contracts `a * b + c`),
//! so every backend gives bit-identical results.

use std::sync::atomic::{AtomicU8, Ordering};

/// Instruction sets a kernel can be compiled for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Backend {
    Portable,
    Avx2,
    Avx512,
}

impl Backend {
    pub fn name(self) -> &'static str {
        match self {
            Backend::Portable => "portable",
            Backend::Avx2 => "avx2",
            Backend::Avx512 => "avx512",
        }
    }

    pub fn from_name(name: &str) -> Option<Backend> {
        match name {
            "portable" => Some(Backend::Portable),
            "avx2" => Some(Backend::Avx2),
            "avx512" => Some(Backend::Avx512),
            _ => None,
        }
    }

    pub fn is_available(self) -> bool {
        match self {
            Backend::Portable => true,
            #[cfg(target_arch = "x86_64")]
            Backend::Avx2 => std::is_x86_feature_detected!("avx2") && std::is_x86_feature_detected!("fma"),
            #[cfg(target_arch = "x86_64")]
            Backend::Avx512 => {
                std::is_x86_feature_detected!("avx512f")
                    && std::is_x86_feature_detected!("avx512vl")
                    && std::is_x86_feature_detected!("avx512bw")
                    && std::is_x86_feature_detected!("avx512dq")
                    && std::is_x86_feature_detected!("avx2")
                    && std::is_x86_feature_detected!("fma")
            }
            #[cfg(not(target_arch = "x86_64"))]
            _ => false,
        }
    }
}

/// Every backend this CPU can run, fastest last.
pub fn available_backends() -> Vec<Backend> {
    [Backend::Portable, Backend::Avx2, Backend::Avx512].into_iter().filter(|b| b.is_available()).collect()
}

static FORCED: AtomicU8 = AtomicU8::new(0);

/// Forces a backend (tests, benchmarks); `None` returns to automatic choice. An unavailable
/// backend is refused (returns false).
pub fn set_backend(backend: Option<Backend>) -> bool {
    let code = match backend {
        None => 0,
        Some(b) if !b.is_available() => return false,
        Some(Backend::Portable) => 1,
        Some(Backend::Avx2) => 2,
        Some(Backend::Avx512) => 3,
    };
    FORCED.store(code, Ordering::Relaxed);
    true
}

/// The backend kernels run with now.
pub fn backend() -> Backend {
    match FORCED.load(Ordering::Relaxed) {
        1 => Backend::Portable,
        2 => Backend::Avx2,
        3 => Backend::Avx512,
        _ => *available_backends().last().unwrap_or(&Backend::Portable),
    }
}

impl Backend {
    /// Runs `kernel` compiled for this backend's instruction set, or as portable code when this
    /// CPU lacks it: the one place kernels are dispatched. `kernel` must be an
    /// `#[inline(always)]` closure over `#[inline(always)]` code, so that all of it is compiled
    /// into the wrapper below that enables the instruction set (a closure left out of line would
    /// be compiled for the baseline CPU: same results, slower).
    #[inline(always)]
    pub(crate) fn dispatch<R>(self, kernel: impl FnOnce() -> R) -> R {
        #[cfg(target_arch = "x86_64")]
        #[target_feature(enable = "avx512f,avx512vl,avx512bw,avx512dq,avx2,fma,popcnt")]
        unsafe fn avx512<R>(kernel: impl FnOnce() -> R) -> R {
            kernel()
        }
        #[cfg(target_arch = "x86_64")]
        #[target_feature(enable = "avx2,fma,popcnt")]
        unsafe fn avx2<R>(kernel: impl FnOnce() -> R) -> R {
            kernel()
        }
        match self {
            // SAFETY: the wrapper's instruction set was detected on this CPU.
            #[cfg(target_arch = "x86_64")]
            Backend::Avx512 if self.is_available() => unsafe { avx512(kernel) },
            // SAFETY: as above.
            #[cfg(target_arch = "x86_64")]
            Backend::Avx2 if self.is_available() => unsafe { avx2(kernel) },
            _ => kernel(),
        }
    }
}
