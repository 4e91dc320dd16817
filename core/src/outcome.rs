//! What a holder reports back about one use of a resource.

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::time::SECOND;

/// Longest `retry_after` an outcome may carry: 30 days. A provider that asks
/// for longer is better answered by a block, which an operator can see and lift.
pub const MAX_RETRY_AFTER: u64 = 30 * 24 * 3600 * SECOND;

/// Why a use failed. The order is the wire order used by the WIT and the bindings.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FailureKind {
    ConnectionReset,
    TlsHandshake,
    Timeout,
    Blocked,
    Slow,
    /// The provider asked to slow down (HTTP 429): only this cell pauses, for
    /// the provider's `retry_after`; not a strike toward cooling.
    RateLimited,
    /// The resource's quota is spent until a reset: it pauses everywhere.
    QuotaExhausted,
    /// The credential was refused (HTTP 401/403): the resource is blocked
    /// everywhere until someone unblocks it.
    AuthFailed,
}

impl FailureKind {
    pub const ALL: [FailureKind; 8] = [
        FailureKind::ConnectionReset,
        FailureKind::TlsHandshake,
        FailureKind::Timeout,
        FailureKind::Blocked,
        FailureKind::Slow,
        FailureKind::RateLimited,
        FailureKind::QuotaExhausted,
        FailureKind::AuthFailed,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            FailureKind::ConnectionReset => "connection_reset",
            FailureKind::TlsHandshake => "tls_handshake",
            FailureKind::Timeout => "timeout",
            FailureKind::Blocked => "blocked",
            FailureKind::Slow => "slow",
            FailureKind::RateLimited => "rate_limited",
            FailureKind::QuotaExhausted => "quota_exhausted",
            FailureKind::AuthFailed => "auth_failed",
        }
    }

    /// Parses the snake_case name used by every front end.
    pub fn parse(s: &str) -> Result<Self> {
        FailureKind::ALL.into_iter().find(|k| k.as_str() == s).ok_or(Error::invalid(
            "failure.kind",
            "must be one of connection_reset, tls_handshake, timeout, blocked, slow, rate_limited, quota_exhausted, auth_failed",
        ))
    }

    /// A strike counts toward `cool_after` and cools the cell with backoff;
    /// the provider's own signals (rate limits, quotas, refused credentials) do not.
    pub fn is_strike(self) -> bool {
        !matches!(self, FailureKind::RateLimited | FailureKind::QuotaExhausted | FailureKind::AuthFailed)
    }

    /// The failures that say the request did not get through, for reasons
    /// that come and go (a reset, a handshake, a timeout, a late answer):
    /// the kinds a context's outage can explain.
    pub fn is_transient(self) -> bool {
        matches!(
            self,
            FailureKind::ConnectionReset | FailureKind::TlsHandshake | FailureKind::Timeout | FailureKind::Slow
        )
    }

    /// The kinds that pause for a provider-given time instead of cooling.
    pub fn takes_retry_after(self) -> bool {
        matches!(self, FailureKind::RateLimited | FailureKind::QuotaExhausted)
    }
}

/// One observed use. Latency is in milliseconds.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "result")]
pub enum Outcome {
    Success {
        latency_ms: f64,
    },
    Failure {
        kind: FailureKind,
        latency_ms: f64,
        /// How long the provider asked to wait (nanoseconds), for
        /// `rate_limited` and `quota_exhausted`; `None`: the policy's base
        /// for that kind.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        retry_after: Option<u64>,
    },
}

impl Outcome {
    pub fn success(latency_ms: f64) -> Result<Self> {
        check_latency(latency_ms)?;
        Ok(Outcome::Success { latency_ms })
    }

    pub fn failure(kind: FailureKind, latency_ms: f64) -> Result<Self> {
        check_latency(latency_ms)?;
        Ok(Outcome::Failure { kind, latency_ms, retry_after: None })
    }

    /// A `rate_limited` or `quota_exhausted` failure with the wait the
    /// provider gave (nanoseconds, at most [`MAX_RETRY_AFTER`]).
    pub fn failure_retry_after(kind: FailureKind, latency_ms: f64, retry_after: u64) -> Result<Self> {
        let outcome = Outcome::Failure { kind, latency_ms, retry_after: Some(retry_after) };
        outcome.revalidate()?;
        Ok(outcome)
    }

    pub fn latency_ms(&self) -> f64 {
        match *self {
            Outcome::Success { latency_ms } | Outcome::Failure { latency_ms, .. } => latency_ms,
        }
    }

    pub fn is_success(&self) -> bool {
        matches!(self, Outcome::Success { .. })
    }

    /// The failure kind, `None` for a success.
    pub fn kind(&self) -> Option<FailureKind> {
        match *self {
            Outcome::Success { .. } => None,
            Outcome::Failure { kind, .. } => Some(kind),
        }
    }

    pub(crate) fn revalidate(&self) -> Result<()> {
        check_latency(self.latency_ms())?;
        if let Outcome::Failure { kind, retry_after: Some(wait), .. } = *self {
            check_retry_after(Some(kind), wait)?;
        }
        Ok(())
    }
}

/// The rules of a provider's wait (ns) on an outcome of `kind` (`None`: a
/// success): only `rate_limited` and `quota_exhausted` take one, of at most
/// [`MAX_RETRY_AFTER`]. Front ends that parse a wait check it here first.
pub fn check_retry_after(kind: Option<FailureKind>, wait: u64) -> Result<()> {
    if !kind.is_some_and(FailureKind::takes_retry_after) {
        return Err(Error::invalid("retry_after", "only rate_limited and quota_exhausted take one"));
    }
    if wait > MAX_RETRY_AFTER {
        return Err(Error::invalid("retry_after", "must be at most 30 days"));
    }
    Ok(())
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
