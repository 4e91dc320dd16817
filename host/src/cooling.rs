//! Cooling rules built from a front end's options.

use repute_core::{CoolingRule, FailureKind, Policy};

use crate::error::{Error, Result};

/// One cooling rule from a front end's options: `kind` by name, and any of
/// `base` (ns), `cool_after`, `max_exponent` given, the rest taken from the
/// rule `policy` has for that kind now. `Policy::validate` checks the result.
pub fn cooling_rule(
    policy: &Policy,
    kind: &str,
    base: Option<u64>,
    cool_after: Option<u32>,
    max_exponent: Option<u32>,
) -> Result<(FailureKind, CoolingRule)> {
    let kind = FailureKind::parse(kind).map_err(|_| unknown_kind())?;
    let rule = policy.rule(kind);
    Ok((
        kind,
        CoolingRule {
            base: base.unwrap_or(rule.base),
            cool_after: cool_after.unwrap_or(rule.cool_after),
            max_exponent: max_exponent.unwrap_or(rule.max_exponent),
        },
    ))
}

/// The refusal of a kind that has no cooling rule: every kind of the core's
/// list but `auth_failed`, which blocks instead (the core's policy refuses a
/// rule for it).
fn unknown_kind() -> Error {
    let kinds: Vec<&str> =
        FailureKind::ALL.into_iter().filter(|&k| k != FailureKind::AuthFailed).map(FailureKind::as_str).collect();
    Error::invalid("policy.rules.kind", &format!("must be one of {}", kinds.join(", ")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_unknown_kind_is_refused_naming_the_kinds_with_a_rule() {
        let e = cooling_rule(&Policy::default(), "sluggish", None, None, None).unwrap_err();
        assert_eq!(
            e,
            Error::invalid(
                "policy.rules.kind",
                "must be one of connection_reset, tls_handshake, timeout, blocked, slow, rate_limited, quota_exhausted"
            )
        );
    }
}
