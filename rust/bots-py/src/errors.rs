//! The one place where core errors become Python exceptions: the classes of `bots_rft.errors`
//! (a hierarchy with multiple inheritance, e.g. `InvalidArgumentError(BotsError, ValueError)`,
//! that PyO3 cannot declare), imported by PyO3 once and raised with (message, argument).

use bots_core::{CoreError, ErrorKind};
use pyo3::prelude::*;

pyo3::import_exception!(bots_rft.errors, InvalidArgumentError);
pyo3::import_exception!(bots_rft.errors, InvalidTypeError);

pub fn core_err(e: CoreError) -> PyErr {
    let message = e.to_string();
    match e.kind {
        ErrorKind::Value => InvalidArgumentError::new_err((message, e.argument)),
        ErrorKind::Type => InvalidTypeError::new_err((message, e.argument)),
    }
}

pub fn invalid_argument(argument: &'static str, message: String) -> PyErr {
    InvalidArgumentError::new_err((format!("{argument}: {message}"), argument))
}

pub fn not_contiguous(argument: &'static str) -> PyErr {
    InvalidTypeError::new_err((format!("{argument}: must be a C-contiguous array"), argument))
}
