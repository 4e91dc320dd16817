//! The one place where host errors become Python exceptions.
//!
//! Every exception derives from `repute.ReputeError` and carries `code`, the
//! host's stable machine-readable code, so callers can branch on a string as
//! the CLI and the Node binding do. Cases with data carry it as attributes
//! (`field`/`rule`, `retry_after`, `owner`, ...); durations are float seconds.

use std::convert::Infallible;

use pyo3::exceptions::PyException;
use pyo3::prelude::*;
use pyo3::{create_exception, intern, BoundObject, PyTypeInfo};
use repute_host::{Error, Refusal, SnapshotError, StoreError as HostStoreError};

use crate::time::ns_to_secs;

create_exception!(repute, ReputeError, PyException, "Base class of every error repute raises.");
create_exception!(repute, InvalidInput, ReputeError, "An argument broke a validation rule.");
create_exception!(repute, UnknownResource, ReputeError, "The resource is not registered.");
create_exception!(repute, UnknownLease, ReputeError, "No live lease has that id.");
create_exception!(repute, StaleLease, ReputeError, "The fencing token is not the lease's current one.");
create_exception!(repute, LeaseExpired, ReputeError, "The lease ran out or was lost.");
create_exception!(repute, Blocked, ReputeError, "The resource is blocklisted.");
create_exception!(repute, NoResourceAvailable, ReputeError, "Nothing could be granted in time.");
create_exception!(repute, ResourceLeased, ReputeError, "The resource still has live leases.");
create_exception!(repute, BudgetExhausted, ReputeError, "A configured budget would be exceeded.");
create_exception!(repute, RateLimited, ReputeError, "The acquire rate limit has no token.");
create_exception!(repute, InvalidSnapshot, ReputeError, "A snapshot was refused; the pool is unchanged.");
create_exception!(repute, StoreError, ReputeError, "The storage or fencing backend refused or failed.");
create_exception!(repute, NotOwner, ReputeError, "Another pool or process owns the tenant.");
create_exception!(repute, PoolClosed, ReputeError, "The pool was closed, or opened before os.fork().");
create_exception!(repute, InternalError, ReputeError, "The pool's runtime failed; the shard was rebuilt.");

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

/// The exception class, message and attributes of one failure.
pub(crate) fn to_py(py: Python<'_>, failure: Failure) -> PyErr {
    let e = match failure {
        Failure::Forked { opened_in } => {
            let message = format!(
                "this Pool was opened in process {opened_in}, before os.fork(); open a new Pool in this process"
            );
            return raise::<PoolClosed>(py, message, "forked", &[]);
        }
        Failure::Python(e) => return e,
        Failure::Host(e) => e,
    };
    let code = e.code();
    let message = e.to_string();
    match e {
        Error::InvalidInput { field, rule } => {
            raise::<InvalidInput>(py, message, code, &[("field", any(py, field)), ("rule", any(py, rule))])
        }
        Error::UnknownResource => raise::<UnknownResource>(py, message, code, &[]),
        Error::UnknownLease => raise::<UnknownLease>(py, message, code, &[]),
        Error::StaleLease => raise::<StaleLease>(py, message, code, &[]),
        Error::LeaseExpired => raise::<LeaseExpired>(py, message, code, &[]),
        Error::Blocked => raise::<Blocked>(py, message, code, &[]),
        Error::NoResourceAvailable(r) => {
            let retry_after = r.retry_after.map(ns_to_secs);
            let message = match retry_after {
                Some(s) => format!("no resource available ({}; retry after {s} s)", Refusal { retry_after: None, ..r }),
                None => format!("no resource available ({r})"),
            };
            let attrs = [
                ("retry_after", any(py, retry_after)),
                ("none_registered", any(py, r.registered == 0)),
                ("blocked", any(py, r.blocked)),
                ("rate_limited", any(py, r.rate_limited)),
                ("cooling", any(py, r.cooling)),
                ("leased", any(py, r.leased)),
            ];
            raise::<NoResourceAvailable>(py, message, code, &attrs)
        }
        Error::Leased { live } => raise::<ResourceLeased>(py, message, code, &[("live", any(py, live))]),
        Error::BudgetExhausted { budget, limit } => {
            raise::<BudgetExhausted>(py, message, code, &[("budget", any(py, budget)), ("limit", any(py, limit))])
        }
        Error::RateLimited { retry_after } => {
            let retry_after = ns_to_secs(retry_after);
            let message = format!("rate limited (retry after {retry_after} s)");
            raise::<RateLimited>(py, message, code, &[("retry_after", any(py, retry_after))])
        }
        Error::Snapshot(reason) => {
            let field = match &reason {
                SnapshotError::Invalid { field, .. } => Some(field.clone()),
                _ => None,
            };
            raise::<InvalidSnapshot>(py, message, code, &[("field", any(py, field))])
        }
        Error::Store(store) => {
            let attrs = match store {
                HostStoreError::Conflict { expected, found } => {
                    vec![("expected", any(py, expected)), ("found", any(py, found))]
                }
                HostStoreError::StaleEpoch { mine, stored } => {
                    vec![("mine", any(py, mine)), ("stored", any(py, stored))]
                }
                HostStoreError::Unavailable(_) => Vec::new(),
            };
            raise::<StoreError>(py, message, code, &attrs)
        }
        Error::NotOwner { owner } => raise::<NotOwner>(py, message, code, &[("owner", any(py, owner))]),
        Error::Closed => raise::<PoolClosed>(py, message, code, &[]),
        // `Trap`, `Runtime` and any case a newer host adds.
        _ => raise::<InternalError>(py, message, code, &[]),
    }
}

/// An `InvalidInput` raised by the binding itself, for arguments that only
/// exist in Python (seconds, the renew margin), with the host's field/rule shape.
pub(crate) fn invalid(field: &str, rule: &str) -> Failure {
    Failure::Host(Error::InvalidInput { field: field.to_owned(), rule: rule.to_owned() })
}

fn any<'py, T: IntoPyObject<'py, Error = Infallible>>(py: Python<'py>, value: T) -> Bound<'py, PyAny> {
    let Ok(object) = value.into_pyobject(py);
    object.into_bound().into_any()
}

fn raise<E: PyTypeInfo>(py: Python<'_>, message: String, code: &str, attrs: &[(&str, Bound<'_, PyAny>)]) -> PyErr {
    let err = PyErr::new::<E, _>(message);
    let value = err.value(py);
    let set = || -> PyResult<()> {
        value.setattr(intern!(py, "code"), code)?;
        for (name, attr) in attrs {
            value.setattr(*name, attr)?;
        }
        Ok(())
    };
    match set() {
        Ok(()) => err,
        Err(e) => e,
    }
}
