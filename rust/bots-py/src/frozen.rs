//! Arrays only Rust writes, shared with Python as read-only numpy views: the posterior's α and β
//! (`posterior.rs`) and the large inputs a pass reads every step (`frozen()`: the interpolation
//! estimator's references, a step's predictions).
//!
//! A view's base object is a `Snapshot` holding one reference to the `Arc` the view's memory
//! belongs to, so the memory lives as long as any view of it. The view does not own its data and
//! its base exports no writable buffer, so numpy refuses to make it writeable again: nothing can
//! write it but Rust, and Rust writes an `Arc` only through `writable`, which copies while a
//! snapshot shares it. A spec given such a view (`shared`) takes the `Arc` instead of a copy.

use std::sync::Arc;

use numpy::ndarray::ArrayView1;
use numpy::{PyArray1, PyArrayMethods, PyReadonlyArray1, PyUntypedArrayMethods};
use pyo3::intern;
use pyo3::prelude::*;

use crate::errors::not_contiguous;

/// Below this size numpy does not ask for huge pages either (its `madvise_hugepage` threshold).
const HUGE_PAGE_MIN_BYTES: usize = 4 << 20;

/// An empty `Vec` with room for `len` elements, in memory the kernel is asked to back with
/// transparent huge pages, as numpy does for its large arrays: passes stream through α, β and
/// the references, and on 4 KiB pages the TLB misses cost them a few percent (measured with
/// THP in `madvise` mode, where only advised memory gets huge pages). Advised before the first
/// write, because pages are chosen when they are first touched.
fn huge_page_vec<T>(len: usize) -> Vec<T> {
    let v = Vec::with_capacity(len);
    #[cfg(target_os = "linux")]
    {
        const PAGE: usize = 4096;
        let bytes = len * std::mem::size_of::<T>();
        let start = (v.as_ptr() as usize).div_ceil(PAGE) * PAGE;
        let end = (v.as_ptr() as usize + bytes) / PAGE * PAGE;
        if bytes >= HUGE_PAGE_MIN_BYTES && end > start {
            // SAFETY: the range lies inside this allocation (rounded inward to whole pages);
            // MADV_HUGEPAGE changes how its pages are backed, never their contents. A refusal
            // (e.g. THP disabled) changes nothing but speed, so its result is ignored.
            unsafe { libc::madvise(start as *mut libc::c_void, end - start, libc::MADV_HUGEPAGE) };
        }
    }
    v
}

/// A copy of `data` on huge pages (see `huge_page_vec`).
pub(crate) fn copy_of<T: Copy>(data: &[T]) -> Vec<T> {
    let mut v = huge_page_vec(data.len());
    v.extend_from_slice(data);
    v
}

/// The array behind `data`, to write: itself when nothing else shares it, else (a snapshot is
/// alive) a fresh copy on huge pages that replaces it here, leaving the snapshot untouched.
pub(crate) fn writable<T: Copy>(data: &mut Arc<Vec<T>>) -> &mut [T] {
    if Arc::get_mut(data).is_none() {
        *data = Arc::new(copy_of(data));
    }
    Arc::get_mut(data).expect("unshared just above")
}

/// Element types a snapshot can hold.
pub(crate) trait Frozen: numpy::Element + Copy + Send + Sync {
    fn wrap(data: Arc<Vec<Self>>) -> SnapshotData;
    fn unwrap(data: &SnapshotData) -> Option<&Arc<Vec<Self>>>;
}

pub(crate) enum SnapshotData {
    F64(Arc<Vec<f64>>),
    F32(Arc<Vec<f32>>),
}

impl Frozen for f64 {
    fn wrap(data: Arc<Vec<f64>>) -> SnapshotData {
        SnapshotData::F64(data)
    }
    fn unwrap(data: &SnapshotData) -> Option<&Arc<Vec<f64>>> {
        match data {
            SnapshotData::F64(d) => Some(d),
            SnapshotData::F32(_) => None,
        }
    }
}

impl Frozen for f32 {
    fn wrap(data: Arc<Vec<f32>>) -> SnapshotData {
        SnapshotData::F32(data)
    }
    fn unwrap(data: &SnapshotData) -> Option<&Arc<Vec<f32>>> {
        match data {
            SnapshotData::F32(d) => Some(d),
            SnapshotData::F64(_) => None,
        }
    }
}

/// Keeps one version of an array alive for the read-only numpy views made of it (their base).
#[pyclass(module = "bots_rft._core", frozen)]
pub struct Snapshot {
    data: SnapshotData,
}

/// A read-only numpy view of `data`, which it keeps alive.
pub(crate) fn view<'py, T: Frozen>(py: Python<'py>, data: &Arc<Vec<T>>) -> PyResult<Bound<'py, PyArray1<T>>> {
    let owner = Bound::new(py, Snapshot { data: T::wrap(Arc::clone(data)) })?;
    let slice: &[T] = T::unwrap(&owner.get().data).expect("wrapped just above");
    // SAFETY: the view's memory is the `Vec` inside `owner` (the view's base object, alive as
    // long as the view), which nothing writes or reallocates while a `Snapshot` shares it
    // (see the module doc).
    let array = unsafe { PyArray1::borrow_from_array(&ArrayView1::from(slice), owner.clone().into_any()) };
    // Fresh, so no other borrow exists; the read-only borrow ends at once, the flag stays.
    drop(array.readwrite().make_nonwriteable());
    Ok(array)
}

/// The `Arc` behind `a` when `a` is exactly a view `view` made (same memory, same length,
/// contiguous); None for any other array.
fn behind<T: Frozen>(a: &Bound<'_, PyArray1<T>>) -> Option<Arc<Vec<T>>> {
    let base = a.getattr(intern!(a.py(), "base")).ok()?;
    let snapshot = base.cast::<Snapshot>().ok()?;
    let data = T::unwrap(&snapshot.get().data)?;
    (a.is_contiguous() && a.len() == data.len() && std::ptr::eq(a.data(), data.as_ptr())).then(|| Arc::clone(data))
}

/// What a pass reads from `a`, owned: shared with `a` when `a` is a frozen view, else a copy.
pub(crate) fn shared<T: Frozen>(a: &Bound<'_, PyArray1<T>>, name: &'static str) -> PyResult<Arc<Vec<T>>> {
    if let Some(data) = behind(a) {
        return Ok(data);
    }
    if !(a.is_contiguous() && a.is_aligned()) {
        return Err(not_contiguous(name));
    }
    let ro = a.try_readonly().map_err(|_| not_contiguous(name))?;
    Ok(Arc::new(copy_of(ro.as_slice().map_err(|_| not_contiguous(name))?)))
}

/// A copy of any one-dimensional array, strided ones included.
fn freeze<T: Frozen>(a: &PyReadonlyArray1<'_, T>) -> Vec<T> {
    match a.as_slice() {
        Ok(s) => copy_of(s),
        Err(_) => {
            let mut v = huge_page_vec(a.len());
            v.extend(a.as_array().iter().copied());
            v
        }
    }
}

/// An array to freeze: float64 or float32, one dimension.
#[derive(FromPyObject)]
pub(crate) enum FreezeArg<'py> {
    F64(PyReadonlyArray1<'py, f64>),
    F32(PyReadonlyArray1<'py, f32>),
}

/// A read-only copy of `array` (float64 or float32) in memory only the core writes (never, for
/// this one): numpy cannot make it writeable again, and a spec given it shares it instead of
/// copying it. For the large arrays every step passes again (references, predictions).
#[pyfunction]
pub(crate) fn frozen<'py>(py: Python<'py>, array: FreezeArg<'py>) -> PyResult<Bound<'py, PyAny>> {
    Ok(match array {
        FreezeArg::F64(a) => view(py, &Arc::new(freeze(&a)))?.into_any(),
        FreezeArg::F32(a) => view(py, &Arc::new(freeze(&a)))?.into_any(),
    })
}
