//! The one place where host errors become Python exceptions.
//!
//! The class, the code and the fields come from the host's code table
//! (`repute_host::codes`), so the names are the Node binding's too. Every
//! exception derives from `repute.ReputeError` and carries `code`, the
//! host's stable machine-readable code, and every field of its class, with
//! `None` where this error has no value for it. Durations are float seconds,
//! in the attributes and in the message alike.

use std::ffi::CString;

use pyo3::exceptions::PyException;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyList, PyTuple, PyType};
use pyo3::{intern, IntoPyObjectExt};
use repute_host::{codes, Error, Field, SnapshotError, Unit};

/// The base class's docstring; each class of the table has its title.
const BASE_DOC: &str = "Base class of every error repute raises.";

/// The exception classes by name: the base first, then each class of the
/// code table once, made when the module is first imported.
static CLASSES: PyOnceLock<Vec<(&'static str, Py<PyType>)>> = PyOnceLock::new();

fn new_class<'py>(py: Python<'py>, name: &str, doc: &str, base: &Bound<'py, PyType>) -> PyResult<Py<PyType>> {
    let c = |text: String| CString::new(text).map_err(|e| PyErr::new::<PyException, _>(e.to_string()));
    PyErr::new_type(py, &c(format!("repute.{name}"))?, Some(&c(doc.to_owned())?), Some(base), None)
}

fn classes(py: Python<'_>) -> PyResult<&[(&'static str, Py<PyType>)]> {
    let classes = CLASSES.get_or_try_init(py, || -> PyResult<_> {
        let base = new_class(py, codes::BASE_CLASS, BASE_DOC, &py.get_type::<PyException>())?;
        let mut classes = vec![(codes::BASE_CLASS, base.clone_ref(py))];
        for name in codes::classes() {
            let title = codes::CODES.iter().find(|row| row.class == name).map_or(name, |row| row.title);
            classes.push((name, new_class(py, name, &format!("{title}."), base.bind(py))?));
        }
        Ok(classes)
    })?;
    Ok(classes)
}

/// The exception class of a class name in the code table; a class a newer
/// host adds is still a `ReputeError` with its code.
fn class<'py>(py: Python<'py>, name: &str) -> PyResult<Bound<'py, PyType>> {
    let classes = classes(py)?;
    let found = classes.iter().find(|(n, _)| *n == name).unwrap_or(&classes[0]);
    Ok(found.1.bind(py).clone())
}

/// Adds the base class and every class of the code table to the module.
pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    for (name, class) in classes(m.py())? {
        m.add(*name, class.bind(m.py()))?;
    }
    Ok(())
}

/// Why a call did not reach, or was refused by, the host.
#[derive(Debug)]
pub(crate) enum Failure {
    Host(Error),
    /// The pool was opened in the parent of a fork; its runtime state (locks,
    /// the wasm instance, the store's connection) belongs to that process.
    Forked {
        opened_in: u32,
    },
    /// Python raised while the call waited (Ctrl-C between waits).
    Python(PyErr),
}

impl From<Error> for Failure {
    fn from(e: Error) -> Self {
        Failure::Host(e)
    }
}

/// The exception of one failure: the host's class, code, message (in
/// seconds) and fields; `forked` takes the class of the host code it stands
/// beside (a `PoolClosedError`).
pub(crate) fn to_py(py: Python<'_>, failure: Failure) -> PyErr {
    match failure {
        Failure::Host(e) => host_error(py, &e),
        Failure::Forked { opened_in } => {
            let message = format!(
                "this Pool was opened in process {opened_in}, before os.fork(); open a new Pool in this process"
            );
            raise(py, &codes::CLOSED, message, "forked", &[])
        }
        Failure::Python(e) => e,
    }
}

fn host_error(py: Python<'_>, e: &Error) -> PyErr {
    let info = e.info();
    raise(py, info, e.message(Unit::Seconds), info.code, &e.fields())
}

/// An `InvalidInputError` raised by the binding itself, for arguments that only
/// exist in Python (seconds, the renew margin), with the host's field/rule shape.
pub(crate) fn invalid(field: &str, rule: &str) -> Failure {
    Failure::Host(Error::InvalidInput { field: field.to_owned(), rule: rule.to_owned() })
}

fn value<'py>(py: Python<'py>, field: Field<'_>) -> PyResult<Bound<'py, PyAny>> {
    match field {
        Field::Text(s) => s.into_bound_py_any(py),
        Field::Count(n) => n.into_bound_py_any(py),
        Field::Flag(b) => b.into_bound_py_any(py),
        Field::Duration(ns) => ns.map(|ns| ns as f64 / 1e9).into_bound_py_any(py),
        Field::Absent => Ok(py.None().into_bound(py)),
    }
}

fn raise(py: Python<'_>, info: &codes::Code, message: String, code: &str, fields: &[(&str, Field<'_>)]) -> PyErr {
    let made = || -> PyResult<PyErr> {
        let err = PyErr::from_type(class(py, info.class)?, message);
        let exception = err.value(py);
        exception.setattr(intern!(py, "code"), code)?;
        for (name, field) in fields {
            exception.setattr(*name, value(py, *field)?)?;
        }
        Ok(err)
    };
    made().unwrap_or_else(|e| e)
}

/// The code table as `(code, status, class, fields)` tuples, and one
/// exception of every row, for the tests that check the mapping.
#[pyfunction]
#[pyo3(signature = () -> "tuple[list[tuple[str, int, str, list[str]]], list[ReputeError]]")]
pub(crate) fn _error_table(py: Python<'_>) -> PyResult<(Bound<'_, PyList>, Bound<'_, PyList>)> {
    let rows = codes::CODES
        .iter()
        .map(|row| {
            PyTuple::new(
                py,
                [
                    row.code.into_bound_py_any(py)?,
                    row.status.into_bound_py_any(py)?,
                    row.class.into_bound_py_any(py)?,
                    row.fields.into_bound_py_any(py)?,
                ],
            )
        })
        .collect::<PyResult<Vec<_>>>()?;
    let examples = Error::examples().iter().map(|e| host_error(py, e).into_value(py)).collect::<Vec<_>>();
    Ok((PyList::new(py, rows)?, PyList::new(py, examples)?))
}

/// Errors whose fields are absent where the host's examples have them (a
/// refusal with no known wait, a snapshot refused for a reason that names no
/// field), so the stubs (`stubgen.py`) see every type a field takes.
#[pyfunction]
#[pyo3(signature = () -> "list[ReputeError]")]
pub(crate) fn _absent_fields(py: Python<'_>) -> Vec<Py<PyAny>> {
    let refusals = Error::examples().into_iter().filter_map(|e| match e {
        Error::NoResourceAvailable(mut refusal) => {
            refusal.retry_after = None;
            refusal.expected_after = None;
            Some(Error::NoResourceAvailable(refusal))
        }
        _ => None,
    });
    refusals
        .chain([Error::Snapshot(SnapshotError::Truncated)])
        .map(|e| host_error(py, &e).into_value(py).into_any())
        .collect()
}
