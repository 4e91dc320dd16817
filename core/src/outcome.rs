//! What a holder reports back about one use of a resource.

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};

/// Why a use failed. The order is the wire order used by the WIT and the bindings.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FailureKind {
    ConnectionReset,
    TlsHandshake,
    Timeout,
    Blocked,
    Slow,
}

impl FailureKind {
    pub const ALL: [FailureKind; 5] = [
        FailureKind::ConnectionReset,
        FailureKind::TlsHandshake,
        FailureKind::Timeout,
        FailureKind::Blocked,
        FailureKind::Slow,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            FailureKind::ConnectionReset => "connection_reset",
            FailureKind::TlsHandshake => "tls_handshake",
            FailureKind::Timeout => "timeout",
            FailureKind::Blocked => "blocked",
            FailureKind::Slow => "slow",
        }
    }

    /// Parses the snake_case name used by every front end.
    pub fn parse(s: &str) -> Result<Self> {
        FailureKind::ALL.into_iter().find(|k| k.as_str() == s).ok_or(Error::invalid(
            "failure.kind",
            "must be one of connection_reset, tls_handshake, timeout, blocked, slow",
        ))
    }
}

/// One observed use. Latency is in milliseconds.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "result")]
pub enum Outcome {
    Success { latency_ms: f64 },
    Failure { kind: FailureKind, latency_ms: f64 },
}

impl Outcome {
    pub fn success(latency_ms: f64) -> Result<Self> {
        check_latency(latency_ms)?;
        Ok(Outcome::Success { latency_ms })
    }

    pub fn failure(kind: FailureKind, latency_ms: f64) -> Result<Self> {
        check_latency(latency_ms)?;
        Ok(Outcome::Failure { kind, latency_ms })
    }

    pub fn latency_ms(&self) -> f64 {
        match *self {
            Outcome::Success { latency_ms } | Outcome::Failure { latency_ms, .. } => latency_ms,
        }
    }

    pub fn is_success(&self) -> bool {
        matches!(self, Outcome::Success { .. })
    }

    pub(crate) fn revalidate(&self) -> Result<()> {
        check_latency(self.latency_ms())
    }
}

fn check_latency(latency_ms: f64) -> Result<()> {
    if !latency_ms.is_finite() {
        return Err(Error::invalid("latency", "must be a finite number"));
    }
    if latency_ms < 0.0 {
        return Err(Error::invalid("latency", "must be >= 0"));
    }
    Ok(())
}
