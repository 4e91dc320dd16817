//! A resource's secret payload (an API key, a proxy password): kept with
//! the resource and handed to lease holders, but never shown.

use alloc::string::String;
use core::fmt;

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};

/// Longest secret accepted, in bytes.
pub const MAX_SECRET_BYTES: usize = 4096;

/// An opaque secret. Its `Debug` prints no part of it, so no event, log line
/// or error that formats a value holding one can leak it; the binary
/// snapshot and the durable log keep it (the store holds the key, as it
/// holds the checkpoint), the JSON snapshot view leaves it out.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Secret(String);

impl Secret {
    /// A secret of 1..=4096 bytes without NUL. The log keeps a secret as
    /// JSON text, which PostgreSQL refuses to hold with a NUL in it: refused
    /// here for every store alike. A secret restored from an existing
    /// snapshot is held to `check` only, so a store that took one before
    /// keeps opening.
    pub fn new(secret: impl Into<String>) -> Result<Secret> {
        let secret = Secret(secret.into());
        secret.check()?;
        if secret.0.contains('\0') {
            return Err(Error::invalid("secret", "must not contain NUL"));
        }
        Ok(secret)
    }

    /// Re-checks a secret that arrived through deserialization, which bypasses `new`.
    pub(crate) fn check(&self) -> Result<()> {
        match self.0.len() {
            0 => Err(Error::invalid("secret", "must not be empty")),
            n if n > MAX_SECRET_BYTES => Err(Error::invalid("secret", "must be at most 4096 bytes")),
            _ => Ok(()),
        }
    }

    /// The secret itself, for the holder that uses it.
    pub fn expose(&self) -> &str {
        &self.0
    }

    pub(crate) fn heap_bytes(&self) -> usize {
        self.0.capacity()
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Secret(<redacted>)")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_shows_nothing_of_the_secret() {
        let s = Secret::new("sk-live-123").unwrap();
        assert_eq!(alloc::format!("{s:?}"), "Secret(<redacted>)");
        assert_eq!(s.expose(), "sk-live-123");
    }

    #[test]
    fn secrets_are_bounded() {
        assert_eq!(Secret::new(""), Err(Error::invalid("secret", "must not be empty")));
        let long = "x".repeat(MAX_SECRET_BYTES + 1);
        assert_eq!(Secret::new(long), Err(Error::invalid("secret", "must be at most 4096 bytes")));
        assert_eq!(Secret::new("a\0b"), Err(Error::invalid("secret", "must not contain NUL")));
        assert!(Secret::new("x".repeat(MAX_SECRET_BYTES)).is_ok());
    }
}
