//! The services the tests run against, managed by `scripts/services.sh`:
//! PostgreSQL, Redis and etcd on loopback.

use std::fmt;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::Command;

/// A service a cluster depends on, and so one a test can restart or cut off.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Service {
    Postgres,
    Redis,
    Etcd,
}

impl Service {
    /// The URL from `REPUTE_TEST_{PG,REDIS,ETCD}_URL`. Missing is a failure,
    /// not a skip: a suite that silently skips its fault tests guards nothing.
    pub fn url(self) -> String {
        let var = match self {
            Service::Postgres => "REPUTE_TEST_PG_URL",
            Service::Redis => "REPUTE_TEST_REDIS_URL",
            Service::Etcd => "REPUTE_TEST_ETCD_URL",
        };
        std::env::var(var).unwrap_or_else(|_| {
            panic!(
                "{var} is not set: run `scripts/services.sh start` and \
                 `export $(scripts/services.sh env)` in the repository root, then run the tests again"
            )
        })
    }

    /// Host and port of the service, for a proxy to forward to.
    pub fn addr(self) -> SocketAddr {
        let url = self.url();
        let (_, authority) = split(&url);
        authority.parse().unwrap_or_else(|e| panic!("{url}: expected an IP address and a port ({e})"))
    }

    /// Restarts the service, keeping its data: every open connection is dropped.
    pub fn restart(self) {
        let name = match self {
            Service::Postgres => "postgres",
            Service::Redis => "redis",
            Service::Etcd => "etcd",
        };
        let status = Command::new("bash")
            .arg(repo_root().join("scripts/services.sh"))
            .args(["restart", name])
            .current_dir(repo_root())
            .status()
            .expect("scripts/services.sh runs");
        assert!(status.success(), "scripts/services.sh restart {name} failed: {status}");
    }
}

impl fmt::Display for Service {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Service::Postgres => "PostgreSQL",
            Service::Redis => "Redis",
            Service::Etcd => "etcd",
        })
    }
}

/// The PostgreSQL URL: the database every test keeps its downstream table in.
pub fn pg_url() -> String {
    Service::Postgres.url()
}

pub fn connect(url: &str) -> postgres::Client {
    postgres::Client::connect(url, postgres::NoTls).unwrap_or_else(|e| panic!("cannot connect to {url}: {e}"))
}

/// `url` pointed at `addr` instead: how a server is made to reach a service
/// through a proxy. User, database and options stay as they were.
pub fn url_via(url: &str, addr: SocketAddr) -> String {
    let (start, authority) = split(url);
    format!("{}{addr}{}", &url[..start], &url[start + authority.len()..])
}

/// Where `scheme://[user@]host:port[/rest]` has its `host:port`, and that text.
fn split(url: &str) -> (usize, &str) {
    let after_scheme = url.find("://").map_or_else(|| panic!("{url}: expected scheme://host:port"), |i| i + 3);
    let end = url[after_scheme..].find(['/', '?']).map_or(url.len(), |i| after_scheme + i);
    let start = url[after_scheme..end].rfind('@').map_or(after_scheme, |i| after_scheme + i + 1);
    (start, &url[start..end])
}

/// The workspace root; `scripts/` lives there.
pub fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_url_is_pointed_at_a_proxy_keeping_the_rest() {
        let proxy: SocketAddr = "127.0.0.1:4000".parse().unwrap();
        assert_eq!(
            url_via("postgres://repute@127.0.0.1:55432/repute", proxy),
            "postgres://repute@127.0.0.1:4000/repute"
        );
        assert_eq!(url_via("redis://127.0.0.1:56379", proxy), "redis://127.0.0.1:4000");
        assert_eq!(url_via("http://127.0.0.1:52379?x=1", proxy), "http://127.0.0.1:4000?x=1");
        assert_eq!(split("postgres://u:p@127.0.0.1:5/db").1, "127.0.0.1:5");
    }
}
