//! SIMD paths (the instruction sets a kernel is compiled for): which ones this CPU runs, which
//! one the kernels use now, and [`SimdPath::dispatch`], which runs a kernel compiled for one of
//! them.
//!
//! Kernels are written once as `#[inline(always)]` generic code over plain loops; `dispatch`
//! compiles them inside `#[target_feature]` wrappers, so each SIMD path is the same algorithm
//! vectorised for its registers. No fused multiply-adds are used (Rust never contracts `a * b + c`),
//! so every SIMD path gives bit-identical results.

use std::sync::atomic::{AtomicU8, Ordering};

/// Instruction sets a kernel can be compiled for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SimdPath {
    Portable,
    Avx2,
    Avx512,
}

impl SimdPath {
    pub fn name(self) -> &'static str {
        match self {
            SimdPath::Portable => "portable",
            SimdPath::Avx2 => "avx2",
            SimdPath::Avx512 => "avx512",
        }
    }

    pub fn from_name(name: &str) -> Option<SimdPath> {
        match name {
            "portable" => Some(SimdPath::Portable),
            "avx2" => Some(SimdPath::Avx2),
            "avx512" => Some(SimdPath::Avx512),
            _ => None,
        }
    }

    pub fn is_available(self) -> bool {
        match self {
            SimdPath::Portable => true,
            #[cfg(target_arch = "x86_64")]
            SimdPath::Avx2 => std::is_x86_feature_detected!("avx2") && std::is_x86_feature_detected!("fma"),
            #[cfg(target_arch = "x86_64")]
            SimdPath::Avx512 => {
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

/// Every SIMD path this CPU can run, fastest last.
pub fn available_simd_paths() -> Vec<SimdPath> {
    [SimdPath::Portable, SimdPath::Avx2, SimdPath::Avx512].into_iter().filter(|b| b.is_available()).collect()
}

static FORCED: AtomicU8 = AtomicU8::new(0);

/// Forces a SIMD path (tests, benchmarks); `None` returns to automatic choice. An unavailable
/// SIMD path is refused (returns false).
pub fn set_simd_path(simd: Option<SimdPath>) -> bool {
    let code = match simd {
        None => 0,
        Some(b) if !b.is_available() => return false,
        Some(SimdPath::Portable) => 1,
        Some(SimdPath::Avx2) => 2,
        Some(SimdPath::Avx512) => 3,
    };
    FORCED.store(code, Ordering::Relaxed);
    true
}

/// The SIMD path kernels run with now.
pub fn simd_path() -> SimdPath {
    match FORCED.load(Ordering::Relaxed) {
        1 => SimdPath::Portable,
        2 => SimdPath::Avx2,
        3 => SimdPath::Avx512,
        _ => *available_simd_paths().last().unwrap_or(&SimdPath::Portable),
    }
}

impl SimdPath {
    /// Runs `kernel` compiled for this SIMD path's instruction set, or as portable code when this
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
            SimdPath::Avx512 if self.is_available() => unsafe { avx512(kernel) },
            // SAFETY: as above.
            #[cfg(target_arch = "x86_64")]
            SimdPath::Avx2 if self.is_available() => unsafe { avx2(kernel) },
            _ => kernel(),
        }
    }
}
