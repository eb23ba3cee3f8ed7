//! The one place where core errors become Python exceptions. The exception classes live in
//! `bots_rft.errors` (a hierarchy with multiple inheritance that PyO3 cannot declare), so they are
//! looked up there when an error is raised.

use bots_core::{CoreError, ErrorKind};
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;

fn raise(class: &str, message: String, argument: &str) -> PyErr {
    Python::attach(|py| {
        let made = py.import("bots_rft.errors").and_then(|m| m.getattr(class)).and_then(|cls| cls.call1((message.clone(), argument)));
        match made {
            Ok(exc) => PyErr::from_value(exc),
            // The package is absent (the module used on its own): fall back to the builtins.
            Err(_) if class == "InvalidTypeError" => PyTypeError::new_err(message),
            Err(_) => PyValueError::new_err(message),
        }
    })
}

pub fn core_err(e: CoreError) -> PyErr {
    let class = match e.kind {
        ErrorKind::Value => "InvalidArgumentError",
        ErrorKind::Type => "InvalidTypeError",
    };
    raise(class, e.to_string(), e.argument)
}

pub fn invalid_argument(argument: &'static str, message: String) -> PyErr {
    raise("InvalidArgumentError", format!("{argument}: {message}"), argument)
}

pub fn not_contiguous(argument: &'static str) -> PyErr {
    raise("InvalidTypeError", format!("{argument}: must be a C-contiguous array"), argument)
}
