//! Where tenants live, named the same way by every front end: `memory`,
//! `sqlite:PATH`, a `postgres://` or a `redis://` URL (the names of the
//! backends in [`BACKENDS`]), plus how processes share a tenant.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use crate::error::{Error, Result};
use crate::ownership::Ownership;
use crate::providers::{Backend, Registration, BACKENDS};

/// A parsed store name: the backend it names, and the address to open.
#[derive(Clone)]
pub struct StoreSpec {
    backend: &'static Registration,
    address: String,
}

impl StoreSpec {
    /// Parses a name of one of the [`BACKENDS`] this build has; anything
    /// else, and the name of a backend the build left out, is refused
    /// naming the `store` field.
    pub fn parse(s: &str) -> Result<StoreSpec> {
        let found = BACKENDS.iter().find_map(|backend| Some((backend, (backend.address)(s)?)));
        let Some((backend, address)) = found else {
            let names: Vec<_> = BACKENDS.iter().map(|b| b.syntax).collect();
            let (last, rest) = names.split_last().expect("at least one backend");
            return Err(Error::invalid("store", &format!("must be {} or {last}", rest.join(", "))));
        };
        if backend.open.is_none() {
            let name = backend.name;
            let rule = format!("{name} stores need a build with the `{name}` feature (cargo build --features {name})");
            return Err(Error::invalid("store", &rule));
        }
        Ok(StoreSpec { backend, address: address.to_owned() })
    }

    /// The store that keeps nothing beyond the process.
    pub fn memory() -> StoreSpec {
        StoreSpec::parse("memory").expect("memory is always built")
    }

    /// The backend's name, as in [`BACKENDS`].
    pub fn backend(&self) -> &'static str {
        self.backend.name
    }

    /// See [`Backend::durable`].
    pub fn durable(&self) -> bool {
        self.backend.durable
    }

    /// The file of a store that one server at a time may serve (SQLite), so
    /// the server can lock it before it opens any tenant.
    pub fn local_file(&self) -> Option<&Path> {
        (self.backend.name == "sqlite").then(|| Path::new(&self.address))
    }

    /// Connects (PostgreSQL: and migrates the schema) once per process.
    pub fn open(&self) -> Result<Arc<dyn Backend>> {
        let open = self.backend.open.expect("parse refuses a backend the build left out");
        open(&self.address)
    }
}

impl PartialEq for StoreSpec {
    fn eq(&self, other: &Self) -> bool {
        self.backend.name == other.backend.name && self.address == other.address
    }
}

impl Eq for StoreSpec {}

impl std::fmt::Debug for StoreSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StoreSpec")
            .field("backend", &self.backend.name)
            .field("address", &redacted(&self.address))
            .finish()
    }
}

/// The address with a URL's password replaced, so that logging a store
/// (the server logs the one it serves) never writes a database credential.
fn redacted(address: &str) -> std::borrow::Cow<'_, str> {
    let Some(scheme_end) = address.find("://").map(|i| i + 3) else { return address.into() };
    let authority_end = address[scheme_end..].find(['/', '?', '#']).map_or(address.len(), |i| scheme_end + i);
    let authority = &address[scheme_end..authority_end];
    let Some(at) = authority.rfind('@') else { return address.into() };
    let Some(colon) = authority[..at].find(':') else { return address.into() };
    let (start, end) = (scheme_end + colon + 1, scheme_end + at);
    format!("{}***{}", &address[..start], &address[end..]).into()
}

impl std::str::FromStr for StoreSpec {
    type Err = Error;

    fn from_str(s: &str) -> Result<Self> {
        StoreSpec::parse(s)
    }
}

/// How processes share a tenant on PostgreSQL.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Mode {
    /// Each tenant has one owner process at a time, under an owner lease
    /// with an epoch; the others answer "not owner".
    #[default]
    Sharded,
    /// Every process serves the tenant; the database is the lease authority
    /// and the command log is folded by all.
    Shared,
}

impl Mode {
    pub fn parse(s: &str) -> Result<Mode> {
        match s {
            "sharded" => Ok(Mode::Sharded),
            "shared" => Ok(Mode::Shared),
            _ => Err(Error::InvalidInput { field: "mode".into(), rule: "must be \"sharded\" or \"shared\"".into() }),
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Mode::Sharded => "sharded",
            Mode::Shared => "shared",
        }
    }
}

/// Where sharded mode keeps its owner leases.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum OwnersSpec {
    /// In the store itself (PostgreSQL).
    #[default]
    Store,
    /// In an etcd cluster, named by its client endpoints (`http://host:port`).
    /// The data stays in the store, which refuses the writes of every owner
    /// older than the epoch etcd handed out.
    Etcd(Vec<String>),
}

impl OwnersSpec {
    /// Parses `store` or `etcd://HOST:PORT[,HOST:PORT…]`; anything else is
    /// refused naming the `owners` field.
    pub fn parse(s: &str) -> Result<OwnersSpec> {
        if s == "store" {
            return Ok(OwnersSpec::Store);
        }
        let bad = || Error::invalid("owners", "must be \"store\" or etcd://HOST:PORT[,HOST:PORT...]");
        let list = s.strip_prefix("etcd://").ok_or_else(bad)?;
        let endpoints = list
            .split(',')
            .map(|hp| {
                let (host, port) = hp.rsplit_once(':').ok_or_else(bad)?;
                let port: u16 = port.parse().map_err(|_| bad())?;
                let clean = |c: char| c.is_ascii_alphanumeric() || "-._[]:".contains(c);
                if host.is_empty() || port == 0 || !host.chars().all(clean) {
                    return Err(bad());
                }
                Ok(format!("http://{host}:{port}"))
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(OwnersSpec::Etcd(endpoints))
    }

    /// Owner leases for sharded mode on `store` (`None`: the store serves
    /// tenants from one process and needs none). etcd is connected to here;
    /// it is refused beside a store that cannot fence writes by epoch.
    pub fn ownership(&self, store: &dyn Backend, address: &str, ttl: Duration) -> Result<Option<Ownership>> {
        match self {
            OwnersSpec::Store => Ok(store.ownership(address, ttl)),
            #[cfg(not(feature = "etcd"))]
            OwnersSpec::Etcd(_) => Err(Error::invalid(
                "owners",
                "etcd owner leases need a build with the `etcd` feature (cargo build --features etcd; it needs protoc)",
            )),
            #[cfg(feature = "etcd")]
            OwnersSpec::Etcd(_) if !store.is_shared() => Err(Error::invalid(
                "owners",
                "etcd owner leases need a postgres:// or redis:// store: memory and SQLite cannot refuse an older owner's writes",
            )),
            #[cfg(feature = "etcd")]
            OwnersSpec::Etcd(endpoints) => {
                let owners = crate::providers::EtcdOwners::connect(endpoints)?;
                Ok(Some(Ownership::new(Box::new(owners), address, ttl)))
            }
        }
    }
}

impl std::str::FromStr for OwnersSpec {
    type Err = Error;

    fn from_str(s: &str) -> Result<Self> {
        OwnersSpec::parse(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Without the `etcd` feature an etcd owners URL still parses (it is a
    /// valid name), and opening it is refused naming the field.
    #[cfg(not(feature = "etcd"))]
    #[test]
    fn etcd_owners_without_the_feature_are_refused_naming_the_field() {
        let spec = OwnersSpec::parse("etcd://127.0.0.1:2379").unwrap();
        match spec.ownership(&crate::providers::Memory, "http://127.0.0.1:7070", Duration::from_secs(10)) {
            Err(Error::InvalidInput { field, rule }) => {
                assert_eq!(field, "owners");
                assert!(rule.contains("`etcd` feature"), "{rule}");
            }
            other => panic!("expected invalid_input on owners, got {other:?}"),
        }
    }

    /// A store name of a backend the build left out is refused naming the
    /// field and the feature to build with; an unknown one lists them all.
    #[test]
    fn store_names_are_refused_naming_the_field() {
        let refused = |name: &str| match StoreSpec::parse(name) {
            Err(Error::InvalidInput { field, rule }) => {
                assert_eq!(field, "store");
                rule
            }
            other => panic!("expected invalid_input on store, got {other:?}"),
        };
        assert!(refused("sqlite:").contains("\"sqlite:PATH\""));
        assert!(refused("mysql://db").contains("a redis:// URL"));
        for (name, built) in [("postgres://db", cfg!(feature = "postgres")), ("redis://db", cfg!(feature = "redis"))] {
            if !built {
                assert!(refused(name).contains("feature"), "{name}");
            }
        }
    }

    #[test]
    fn a_logged_store_shows_no_password() {
        assert_eq!(redacted("postgres://repute:s3cret@db:5432/repute?x=1"), "postgres://repute:***@db:5432/repute?x=1");
        assert_eq!(redacted("redis://:s3cret@127.0.0.1:6379/0"), "redis://:***@127.0.0.1:6379/0");
        assert_eq!(redacted("postgres://repute@db/repute"), "postgres://repute@db/repute");
        assert_eq!(redacted("repute.db"), "repute.db");
        let spec = StoreSpec::parse("sqlite:a@b:c").unwrap();
        assert_eq!(format!("{spec:?}"), r#"StoreSpec { backend: "sqlite", address: "a@b:c" }"#);
    }
}
