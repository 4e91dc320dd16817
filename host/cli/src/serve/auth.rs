//! API keys: each bound to one tenant, stored only as a SHA-256 hash, checked
//! in constant time. The key file has one `TENANT SHA256-HEX` line per key.

use std::fs;
use std::io::Write;
use std::path::Path;

use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

/// Keys look like `rpt_` + 32 hex characters (128 random bits).
const PREFIX: &str = "rpt_";

#[derive(Debug, Clone, Default)]
pub struct KeyRing {
    keys: Vec<(String, [u8; 32])>,
}

fn digest(key: &str) -> [u8; 32] {
    Sha256::digest(key.as_bytes()).into()
}

impl KeyRing {
    /// Reads a key file; a missing file is an empty ring.
    pub fn load(path: &Path) -> Result<KeyRing, String> {
        let text = match fs::read_to_string(path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(KeyRing::default()),
            Err(e) => return Err(format!("key file {}: {e}", path.display())),
        };
        let mut keys = Vec::new();
        for (n, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let bad = || format!("key file {} line {}: expected \"TENANT SHA256-HEX\"", path.display(), n + 1);
            let (tenant, hash) = line.split_once(char::is_whitespace).ok_or_else(bad)?;
            let bytes = hex::decode(hash.trim()).map_err(|_| bad())?;
            let hash: [u8; 32] = bytes.try_into().map_err(|_| bad())?;
            keys.push((tenant.to_owned(), hash));
        }
        Ok(KeyRing { keys })
    }

    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }

    /// The tenant a presented key belongs to. Every stored hash is compared,
    /// in constant time, so timing says nothing about which key was close.
    pub fn tenant_of(&self, key: &str) -> Option<&str> {
        let d = digest(key);
        let mut found = None;
        for (tenant, hash) in &self.keys {
            if bool::from(hash.ct_eq(&d)) {
                found = Some(tenant.as_str());
            }
        }
        found
    }
}

/// Makes a new key for `tenant`, appends its hash to the key file and returns the key.
pub fn new_key(tenant: &str, path: &Path) -> Result<String, String> {
    crate::serve::tenant::check(tenant).map_err(|rule| format!("tenant {tenant:?}: {rule}"))?;
    let mut raw = [0u8; 16];
    getrandom::fill(&mut raw).map_err(|e| format!("no randomness for a key: {e}"))?;
    let key = format!("{PREFIX}{}", hex::encode(raw));
    let mut file = fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .map_err(|e| format!("key file {}: {e}", path.display()))?;
    writeln!(file, "{tenant} {}", hex::encode(digest(&key)))
        .map_err(|e| format!("key file {}: {e}", path.display()))?;
    Ok(key)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_round_trip_through_the_file() {
        let dir = std::env::temp_dir().join(format!("repute-keys-{}", std::process::id()));
        let _ = fs::remove_file(&dir);
        let a = new_key("acme", &dir).unwrap();
        let b = new_key("globex", &dir).unwrap();
        assert!(a.starts_with(PREFIX) && a.len() == PREFIX.len() + 32);
        let ring = KeyRing::load(&dir).unwrap();
        assert_eq!(ring.tenant_of(&a), Some("acme"));
        assert_eq!(ring.tenant_of(&b), Some("globex"));
        assert_eq!(ring.tenant_of("rpt_00000000000000000000000000000000"), None);
        let text = fs::read_to_string(&dir).unwrap();
        assert!(!text.contains(&a), "the key itself is never stored");
        fs::remove_file(&dir).unwrap();
    }
}
