//! API keys: each bound to one tenant, stored only as a SHA-256 hash, checked
//! in constant time. The key file has one `TENANT SHA256-HEX` line per key.

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::RwLock;
use std::time::SystemTime;

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

/// What says a key file changed: its modification time and length.
type Stamp = (Option<SystemTime>, u64);

fn stamp(path: &Path) -> Option<Stamp> {
    fs::metadata(path).ok().map(|m| (m.modified().ok(), m.len()))
}

/// The key file a server checks keys against, re-read when it changes so a
/// key made with `repute key new` while the server runs works at once (the
/// server looks every second; see `reload_if_changed`).
#[derive(Debug)]
pub struct KeyFile {
    path: PathBuf,
    ring: RwLock<(KeyRing, Option<Stamp>)>,
}

impl KeyFile {
    pub fn load(path: &Path) -> Result<KeyFile, String> {
        let seen = stamp(path);
        let ring = KeyRing::load(path)?;
        Ok(KeyFile { path: path.to_owned(), ring: RwLock::new((ring, seen)) })
    }

    pub fn is_empty(&self) -> bool {
        self.ring.read().unwrap_or_else(|p| p.into_inner()).0.is_empty()
    }

    pub fn tenant_of(&self, key: &str) -> Option<String> {
        self.ring.read().unwrap_or_else(|p| p.into_inner()).0.tenant_of(key).map(str::to_owned)
    }

    /// Re-reads the file if its time or length moved. A file that no longer
    /// parses keeps the keys last read (and says why), so a half-written
    /// edit does not lock every client out.
    pub fn reload_if_changed(&self) -> Result<bool, String> {
        let now = stamp(&self.path);
        if self.ring.read().unwrap_or_else(|p| p.into_inner()).1 == now {
            return Ok(false);
        }
        let ring = KeyRing::load(&self.path)?;
        *self.ring.write().unwrap_or_else(|p| p.into_inner()) = (ring, now);
        Ok(true)
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

    #[test]
    fn a_key_file_is_re_read_when_it_changes() {
        let path = std::env::temp_dir().join(format!("repute-keyfile-{}", std::process::id()));
        let _ = fs::remove_file(&path);
        let a = new_key("acme", &path).unwrap();
        let file = KeyFile::load(&path).unwrap();
        assert_eq!(file.reload_if_changed(), Ok(false));
        let b = new_key("globex", &path).unwrap();
        assert_eq!(file.tenant_of(&b), None);
        assert_eq!(file.reload_if_changed(), Ok(true));
        assert_eq!((file.tenant_of(&a).as_deref(), file.tenant_of(&b).as_deref()), (Some("acme"), Some("globex")));
        fs::write(&path, "acme not-hex\n").unwrap();
        assert!(file.reload_if_changed().unwrap_err().contains("line 1"));
        assert_eq!(file.tenant_of(&b).as_deref(), Some("globex"), "a bad file keeps the keys last read");
        fs::remove_file(&path).unwrap();
    }
}
