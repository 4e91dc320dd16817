//! A repute client that behaves like a careful user of a cluster: it follows
//! "not the owner" (421) answers to the named owner and moves on to another
//! server when one does not answer.

use std::collections::HashMap;
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use serde_json::Value;

/// The base URLs of a cluster's servers. A test replaces a killed server's
/// URL with its successor's, and every client sees the change.
#[derive(Clone)]
pub struct Cluster(Arc<RwLock<Vec<String>>>);

impl Cluster {
    pub fn new(servers: Vec<String>) -> Cluster {
        assert!(!servers.is_empty(), "a cluster needs a server");
        Cluster(Arc::new(RwLock::new(servers)))
    }

    pub fn replace(&self, index: usize, base: String) {
        self.0.write().unwrap_or_else(|e| e.into_inner())[index] = base;
    }

    fn len(&self) -> usize {
        self.0.read().unwrap_or_else(|e| e.into_inner()).len()
    }

    /// The server at `index`, counting round the cluster.
    pub fn get(&self, index: usize) -> String {
        let servers = self.0.read().unwrap_or_else(|e| e.into_inner());
        servers[index % servers.len()].clone()
    }
}

/// A status reply (any status) and its body.
pub struct Reply {
    pub status: u16,
    pub body: String,
}

impl Reply {
    pub fn json(&self) -> Value {
        serde_json::from_str(&self.body)
            .unwrap_or_else(|e| panic!("status {}: not JSON ({e}): {}", self.status, self.body))
    }

    /// The owner a 421 names: the server to ask instead.
    fn owner(&self) -> Option<String> {
        (self.status == 421)
            .then(|| self.json()["owner"].as_str().map(|o| o.trim_end_matches('/').to_owned()))
            .flatten()
    }
}

/// A request that got no status reply.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unanswered {
    /// No connection was made: the server cannot have seen the request.
    Unsent,
    /// The request may have been received and acted on.
    Unknown,
}

/// How long a suspect server is left alone after it failed to answer, so
/// 421s that still name a paused or dead owner are not followed into the
/// same timeout again and again.
const SUSPECT_FOR: Duration = Duration::from_secs(1);

/// One client's view of the cluster. Not shared: each worker has its own,
/// like each process of a real service.
pub struct Client {
    agent: ureq::Agent,
    tenant: String,
    cluster: Cluster,
    /// Index of the server tried next when the current one fails.
    next: usize,
    target: String,
    suspects: HashMap<String, Instant>,
}

impl Client {
    /// A client that starts with server `home` of the cluster. A request
    /// without an answer within `timeout` counts as unanswered.
    pub fn new(cluster: &Cluster, tenant: &str, home: usize, timeout: Duration) -> Client {
        let agent = ureq::AgentBuilder::new().timeout_connect(timeout).timeout(timeout).build();
        Client {
            agent,
            tenant: tenant.to_owned(),
            cluster: cluster.clone(),
            next: home + 1,
            target: cluster.get(home),
            suspects: HashMap::new(),
        }
    }

    /// Sends to the current server, following 421 answers to the owner they
    /// name; returns the server that answered and its reply. When a server
    /// does not answer, the next request goes to another one.
    pub fn send(&mut self, method: &str, path: &str, body: Option<&Value>) -> Result<(String, Reply), Unanswered> {
        let mut hops = 0;
        loop {
            let server = self.target.clone();
            let reply = match self.call(method, &format!("{server}{path}"), body) {
                Ok(reply) => reply,
                Err(e) => {
                    self.suspects.insert(server, Instant::now());
                    self.move_on();
                    return Err(e);
                }
            };
            match reply.owner() {
                Some(owner) if hops < 3 && !self.suspect(&owner) => {
                    self.target = owner;
                    hops += 1;
                }
                // A suspect owner, or owners pointing at each other during a
                // takeover: the caller retries, elsewhere.
                Some(_) => {
                    self.move_on();
                    return Ok((server, reply));
                }
                None => return Ok((server, reply)),
            }
        }
    }

    /// Tries another server next time, e.g. after a 5xx from this one;
    /// one that did not answer lately only when every other did not either.
    pub fn move_on(&mut self) {
        let current = std::mem::take(&mut self.target);
        for _ in 0..self.cluster.len() {
            let candidate = self.cluster.get(self.next);
            self.next += 1;
            let usable = candidate != current && !self.suspect(&candidate);
            self.target = candidate;
            if usable {
                return;
            }
        }
    }

    fn suspect(&mut self, server: &str) -> bool {
        match self.suspects.get(server) {
            Some(at) if at.elapsed() < SUSPECT_FOR => true,
            Some(_) => {
                self.suspects.remove(server);
                false
            }
            None => false,
        }
    }

    fn call(&self, method: &str, url: &str, body: Option<&Value>) -> Result<Reply, Unanswered> {
        let req = self.agent.request(method, url).set("Repute-Tenant", &self.tenant);
        let res = match body {
            Some(b) => req.send_json(b),
            None => req.call(),
        };
        let res = match res {
            Ok(r) | Err(ureq::Error::Status(_, r)) => r,
            Err(ureq::Error::Transport(t)) => {
                return Err(match t.kind() {
                    ureq::ErrorKind::ConnectionFailed => Unanswered::Unsent,
                    _ => Unanswered::Unknown,
                })
            }
        };
        let status = res.status();
        let body = res.into_string().map_err(|_| Unanswered::Unknown)?;
        Ok(Reply { status, body })
    }
}
