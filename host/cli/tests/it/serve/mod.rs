//! `repute serve` started for real on a free loopback port and driven over HTTP.

mod console;
mod groups;
mod leases;
mod limits;
mod observe;
mod partitions;
mod profiles;
mod refusals;
mod secrets;
mod selectors;
mod shared;
mod usage;

use std::io::{BufRead, BufReader, Read};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use serde_json::{json, Value};

use crate::tempdir;

struct Server {
    child: Child,
    base: String,
}

impl Server {
    fn start(args: &[&str], dir: &Path) -> Server {
        Server::spawn(args, dir, "warn", Stdio::inherit())
    }

    /// `start` at log level `level`, each line it logs sent to the receiver
    /// (which ends once the server has exited).
    fn start_logged(args: &[&str], dir: &Path, level: &str) -> (Server, mpsc::Receiver<String>) {
        let mut server = Server::spawn(args, dir, level, Stdio::piped());
        let stderr = BufReader::new(server.child.stderr.take().unwrap());
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || stderr.lines().map_while(Result::ok).try_for_each(|l| tx.send(l)));
        (server, rx)
    }

    fn spawn(args: &[&str], dir: &Path, level: &str, stderr: Stdio) -> Server {
        let mut child = Command::new(env!("CARGO_BIN_EXE_repute"))
            .arg("serve")
            .args(["--listen", "127.0.0.1:0", "--log", level])
            .args(args)
            .current_dir(dir)
            .stdout(Stdio::piped())
            .stderr(stderr)
            .spawn()
            .expect("repute starts");
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
        let addr =
            line.trim().strip_prefix("listening on ").unwrap_or_else(|| panic!("unexpected first line {line:?}"));
        Server { child, base: format!("http://{addr}") }
    }

    fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    /// SIGTERM, then the exit status.
    fn terminate(mut self) -> std::process::ExitStatus {
        let pid = self.child.id().to_string();
        assert!(Command::new("kill").args(["-TERM", &pid]).status().unwrap().success());
        let status = self.child.wait().unwrap();
        std::mem::forget(self);
        status
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

struct Reply {
    status: u16,
    content_type: String,
    location: Option<String>,
    retry_after: Option<String>,
    body: String,
}

impl Reply {
    fn json(&self) -> Value {
        serde_json::from_str(&self.body).unwrap_or_else(|e| panic!("not JSON ({e}): {}", self.body))
    }

    /// Asserts an RFC 9457 problem with this status and code; returns it.
    fn problem(&self, status: u16, code: &str) -> Value {
        assert_eq!(self.status, status, "body: {}", self.body);
        assert_eq!(self.content_type, "application/problem+json");
        let p = self.json();
        assert_eq!(p["type"], format!("urn:repute:problem:{code}"));
        assert_eq!(p["status"], status);
        p
    }
}

fn call(method: &str, url: &str, headers: &[(&str, &str)], body: Option<Value>) -> Reply {
    let mut req = ureq::request(method, url);
    for (k, v) in headers {
        req = req.set(k, v);
    }
    let res = match body {
        Some(b) => req.send_json(b),
        None => req.call(),
    };
    reply(method, url, res)
}

/// The answer, whatever its status; only a failed exchange is a panic.
fn reply(method: &str, url: &str, res: Result<ureq::Response, ureq::Error>) -> Reply {
    let res = match res {
        Ok(r) => r,
        Err(ureq::Error::Status(_, r)) => r,
        Err(e) => panic!("{method} {url}: {e}"),
    };
    Reply {
        status: res.status(),
        content_type: res.header("content-type").unwrap_or_default().to_owned(),
        location: res.header("location").map(str::to_owned),
        retry_after: res.header("retry-after").map(str::to_owned),
        body: res.into_string().unwrap(),
    }
}

const NONE: &[(&str, &str)] = &[];

/// The database of `scripts/services.sh`, for the modes that share a store.
fn pg_url() -> String {
    std::env::var("REPUTE_TEST_PG_URL").unwrap_or_else(|_| {
        panic!("REPUTE_TEST_PG_URL is not set: run `scripts/services.sh start` and export `scripts/services.sh env`")
    })
}

/// The Redis server of `scripts/services.sh`.
fn redis_url() -> String {
    std::env::var("REPUTE_TEST_REDIS_URL").unwrap_or_else(|_| {
        panic!("REPUTE_TEST_REDIS_URL is not set: run `scripts/services.sh start` and export `scripts/services.sh env`")
    })
}

/// A tenant name no other run of the tests uses on the shared database.
fn unique(prefix: &str) -> String {
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos();
    format!("{prefix}-{}-{nanos:x}", std::process::id())
}

/// `repute key new --tenant TENANT --keys keys` in `dir`: the key it prints.
fn new_key(dir: &Path, tenant: &str) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_repute"))
        .args(["key", "new", "--tenant", tenant, "--keys", "keys"])
        .current_dir(dir)
        .output()
        .unwrap();
    assert!(out.status.success());
    String::from_utf8(out.stdout).unwrap().trim().to_owned()
}

/// One request over a fresh TCP connection, as sent; the whole answer back.
fn raw(base: &str, request: &str) -> String {
    let mut stream = std::net::TcpStream::connect(base.trim_start_matches("http://")).unwrap();
    std::io::Write::write_all(&mut stream, request.as_bytes()).unwrap();
    let mut out = String::new();
    stream.read_to_string(&mut out).unwrap();
    out
}

/// A problem's `field` and `rule`.
fn field_rule(p: &Value) -> (Option<String>, Option<String>) {
    (p["field"].as_str().map(str::to_owned), p["rule"].as_str().map(str::to_owned))
}

fn some(field: &str, rule: &str) -> (Option<String>, Option<String>) {
    (Some(field.to_owned()), Some(rule.to_owned()))
}

/// `call` with a raw body of this content type.
fn send(method: &str, url: &str, content_type: &str, body: &[u8]) -> Reply {
    reply(method, url, ureq::request(method, url).set("Content-Type", content_type).send_bytes(body))
}

/// The values each label of a metric takes on the page.
fn label_values(page: &str, metric: &str, label: &str) -> std::collections::BTreeSet<String> {
    let prefix = format!("{metric}{{");
    page.lines()
        .filter_map(|l| l.strip_prefix(&prefix))
        .filter_map(|l| {
            let start = l.find(&format!("{label}=\""))? + label.len() + 2;
            Some(l[start..start + l[start..].find('"')?].to_owned())
        })
        .collect()
}
