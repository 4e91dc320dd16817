//! The PostgreSQL the tests run against, managed by `scripts/services.sh`.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::Command;

/// The server URL from `REPUTE_TEST_PG_URL`. Missing is a failure, not a
/// skip: a suite that silently skips its fault tests guards nothing.
pub fn pg_url() -> String {
    std::env::var("REPUTE_TEST_PG_URL").unwrap_or_else(|_| {
        panic!(
            "REPUTE_TEST_PG_URL is not set: run `scripts/services.sh start` and \
             `export $(scripts/services.sh env)` in the repository root, then run the tests again"
        )
    })
}

pub fn connect(url: &str) -> postgres::Client {
    postgres::Client::connect(url, postgres::NoTls).unwrap_or_else(|e| panic!("cannot connect to {url}: {e}"))
}

/// Host and port of the server behind `url`, for a proxy to forward to.
pub fn pg_addr(url: &str) -> SocketAddr {
    let (host, port) = host_port(url);
    format!("{host}:{port}").parse().unwrap_or_else(|e| panic!("{url}: host must be an IP address ({e})"))
}

/// `url` pointed at `addr` instead: how a server is made to reach PostgreSQL
/// through a proxy.
pub fn pg_url_via(url: &str, addr: SocketAddr) -> String {
    let (host, port) = host_port(url);
    url.replacen(&format!("{host}:{port}"), &addr.to_string(), 1)
}

fn host_port(url: &str) -> (String, u16) {
    let config: postgres::Config = url.parse().unwrap_or_else(|e| panic!("{url}: {e}"));
    let host = match config.get_hosts() {
        [postgres::config::Host::Tcp(h)] => h.clone(),
        _ => panic!("{url}: expected exactly one TCP host"),
    };
    let port = match config.get_ports() {
        [p] => *p,
        _ => panic!("{url}: expected an explicit port (host:port)"),
    };
    assert!(url.contains(&format!("{host}:{port}")), "{url}: expected the address written as {host}:{port}");
    (host, port)
}

/// The workspace root; `scripts/` lives there.
pub fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// Restarts PostgreSQL (fast shutdown: every open connection is dropped).
pub fn restart_postgres() {
    let status = Command::new("bash")
        .arg(repo_root().join("scripts/services.sh"))
        .arg("restart")
        .current_dir(repo_root())
        .status()
        .expect("scripts/services.sh runs");
    assert!(status.success(), "scripts/services.sh restart failed: {status}");
}
