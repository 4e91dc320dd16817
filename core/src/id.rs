//! Resource identities and contexts, validated once at the edge so the rest of
//! the core can trust them.

use alloc::string::String;
use alloc::sync::Arc;
use core::borrow::Borrow;
use core::fmt;

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};

/// Longest kind, value or context accepted, in bytes.
pub const MAX_ID_BYTES: usize = 256;

/// The context name reserved for the resource-wide reputation layer.
pub const GLOBAL_CONTEXT: &str = "*";

pub(crate) fn check(field: &'static str, s: &str) -> Result<()> {
    if s.is_empty() {
        return Err(Error::invalid(field, "must not be empty"));
    }
    if s.len() > MAX_ID_BYTES {
        return Err(Error::invalid(field, "must be at most 256 bytes"));
    }
    if s.chars().any(char::is_control) {
        return Err(Error::invalid(field, "must not contain control characters"));
    }
    Ok(())
}

/// A resource is named by an open namespace (`kind`: "proxy", "api-key", ...)
/// and an opaque value inside it. Shared, because every lease and event
/// carries it and cloning must not allocate on the acquire path.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct ResourceId(Arc<Parts>);

#[derive(Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
struct Parts {
    kind: String,
    value: String,
}

impl ResourceId {
    /// The shared allocation behind this id (counted once however many clones share it).
    pub(crate) fn heap_bytes(&self) -> usize {
        crate::footprint::arc(core::mem::size_of::<Parts>()) + self.0.kind.capacity() + self.0.value.capacity()
    }

    pub fn new(kind: impl Into<String>, value: impl Into<String>) -> Result<Self> {
        let (kind, value) = (kind.into(), value.into());
        check("resource.kind", &kind)?;
        check("resource.value", &value)?;
        Ok(ResourceId(Arc::new(Parts { kind, value })))
    }

    pub fn kind(&self) -> &str {
        &self.0.kind
    }

    pub fn value(&self) -> &str {
        &self.0.value
    }

    /// Re-checks a value that arrived through deserialization, which bypasses `new`.
    pub(crate) fn revalidate(&self) -> Result<()> {
        check("resource.kind", &self.0.kind)?;
        check("resource.value", &self.0.value)
    }
}

impl fmt::Display for ResourceId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.0.kind, self.0.value)
    }
}

/// Where a resource is used ("example.com", "checkout-api", ...). Reputation is
/// kept per context; `"*"` is the global layer and cannot be named by callers.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Context(Arc<str>);

impl Context {
    /// The shared allocation behind this name (counted once however many clones share it).
    pub(crate) fn heap_bytes(&self) -> usize {
        crate::footprint::arc(self.0.len())
    }

    pub fn new(name: impl Into<String>) -> Result<Self> {
        let name = name.into();
        check("context", &name)?;
        if name == GLOBAL_CONTEXT {
            return Err(Error::invalid("context", "\"*\" is reserved for the global layer"));
        }
        Ok(Context(name.into()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    pub(crate) fn revalidate(&self) -> Result<()> {
        Context::new(&*self.0).map(|_| ())
    }
}

/// Lets a context be looked up by its name without building one. Sound
/// because `Arc<str>` hashes and compares exactly as the `str` it holds.
impl Borrow<str> for Context {
    fn borrow(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for Context {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}
