//! Tenant names: which pool a request is for.

/// Tenants appear in key files, logs and metric labels, so they are kept to a safe alphabet.
pub fn check(name: &str) -> Result<(), &'static str> {
    if name.is_empty() || name.len() > 64 {
        return Err("must be 1 to 64 bytes");
    }
    if !name.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.')) {
        return Err("may contain only ASCII letters, digits, '-', '_' and '.'");
    }
    Ok(())
}
