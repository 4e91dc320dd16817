//! Values whose Python type is narrower than their Rust one: a name out of
//! a fixed set (a `Literal` in `repute._types`), a `FailureKind` member, a
//! dict of known shape. Each wraps the value and names that type, so the
//! generated stubs (`stubgen.py`) give it; the Python value is the inner one.

use pyo3::inspect::PyStaticExpr;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyString};
use pyo3::{type_hint_identifier, type_hint_subscript};
use std::convert::Infallible;

/// Declares a name whose type is an alias of `repute._types`.
macro_rules! names {
    ($($(#[$doc:meta])* $name:ident = $alias:literal;)*) => {$(
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        pub(crate) struct $name(pub(crate) &'static str);

        impl<'py> IntoPyObject<'py> for $name {
            type Target = PyString;
            type Output = Bound<'py, PyString>;
            type Error = Infallible;
            const OUTPUT_TYPE: PyStaticExpr = type_hint_identifier!("repute._types", $alias);

            fn into_pyobject(self, py: Python<'py>) -> Result<Self::Output, Self::Error> {
                self.0.into_pyobject(py)
            }
        }
    )*};
}

names! {
    /// A cell's state.
    CellState = "_CellState";
    /// What a lease was granted for.
    LeaseKind = "_LeaseKind";
    /// Why a lease was lost.
    Loss = "_Loss";
    /// Why a resource's limits retired it.
    Retirement = "_Retirement";
    /// Why nothing could be granted.
    Rejection = "_Rejection";
    /// How a release found its lease.
    Release = "_Release";
}

/// Declares a Python object whose type the stubs name by `$hint`.
macro_rules! objects {
    ($($(#[$doc:meta])* $name:ident($target:ty) = $hint:expr;)*) => {$(
        $(#[$doc])*
        pub(crate) struct $name<'py>(pub(crate) Bound<'py, $target>);

        impl<'py> IntoPyObject<'py> for $name<'py> {
            type Target = $target;
            type Output = Bound<'py, $target>;
            type Error = Infallible;
            const OUTPUT_TYPE: PyStaticExpr = $hint;

            fn into_pyobject(self, _py: Python<'py>) -> Result<Self::Output, Self::Error> {
                Ok(self.0)
            }
        }
    )*};
}

objects! {
    /// A member of `repute.FailureKind`.
    Failure(PyAny) = type_hint_identifier!("repute._types", "FailureKind");
    /// A resource's labels.
    Labels(PyDict) = type_hint_subscript!(
        type_hint_identifier!("builtins", "dict"),
        type_hint_identifier!("builtins", "str"),
        type_hint_identifier!("builtins", "str")
    );
    /// A resource's limits, by `register`'s keyword names.
    LimitsDict(PyDict) = type_hint_identifier!("repute._types", "Limits");
    /// A quota group's limits, by `set_group`'s keyword names.
    GroupLimitsDict(PyDict) = type_hint_identifier!("repute._types", "GroupLimits");
}
