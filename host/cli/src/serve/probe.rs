//! `--probe-url`: the server runs the probe loop of `--recovery probe`
//! itself, with an HTTP GET per cell due (the host's prober decides which
//! cells and reports what the GET found).

use std::time::{Duration, Instant};

use percent_encoding::{utf8_percent_encode, NON_ALPHANUMERIC};
use repute_host::{finish_probe, start_probes, Lease, Verdict};

use super::state::AppState;

/// A GET template with `{kind}`, `{value}` and `{context}`, each filled in
/// percent-encoded; any 2xx-3xx status is healthy, others map by the host's table.
#[derive(Debug, Clone)]
pub struct ProbeUrl {
    template: String,
    agent: ureq::Agent,
    /// Probes in flight at once per tenant.
    pub concurrency: usize,
}

impl ProbeUrl {
    pub fn new(template: &str, concurrency: usize, timeout: Duration) -> Result<ProbeUrl, String> {
        if !(template.starts_with("http://") || template.starts_with("https://")) {
            return Err("--probe-url: must be an http:// or https:// URL template".into());
        }
        if concurrency == 0 {
            return Err("--probe-concurrency: must be >= 1".into());
        }
        let agent = ureq::AgentBuilder::new().timeout(timeout).redirects(0).build();
        Ok(ProbeUrl { template: template.to_owned(), agent, concurrency })
    }

    /// The URL that probes `lease`'s resource in its context.
    pub fn url(&self, lease: &Lease) -> String {
        let enc = |s: &str| utf8_percent_encode(s, NON_ALPHANUMERIC).to_string();
        self.template
            .replace("{kind}", &enc(lease.resource.kind()))
            .replace("{value}", &enc(lease.resource.value()))
            .replace("{context}", &enc(lease.context.as_str()))
    }

    fn probe(&self, lease: &Lease) -> (Verdict, f64) {
        let started = Instant::now();
        let verdict = match self.agent.get(&self.url(lease)).call() {
            Ok(r) => Verdict::Http(r.status()),
            Err(ureq::Error::Status(status, _)) => Verdict::Http(status),
            Err(ureq::Error::Transport(_)) => Verdict::Failed,
        };
        (verdict, started.elapsed().as_secs_f64() * 1e3)
    }
}

impl AppState {
    /// One round of probes for every open tenant: up to `concurrency` GETs
    /// at once per tenant, each on its own probe lease.
    pub fn probe_all(&self) {
        let Some(probe) = &self.probe else { return };
        for tenant in self.set.tenants() {
            let leases = match self.call_blocking(&tenant, |p| start_probes(p, probe.concurrency)) {
                Ok(leases) => leases,
                Err(e) => {
                    tracing::warn!(tenant, problem = ?e, "probe round failed");
                    continue;
                }
            };
            std::thread::scope(|scope| {
                for lease in &leases {
                    let tenant = tenant.as_str();
                    scope.spawn(move || {
                        let (verdict, latency_ms) = probe.probe(lease);
                        if let Err(e) =
                            self.call_blocking(tenant, |p| finish_probe(p, &self.profiles, lease, verdict, latency_ms))
                        {
                            tracing::warn!(tenant, problem = ?e, "probe result not recorded");
                        }
                    });
                }
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use repute_host::{Context, LeaseKind, ResourceId};

    #[test]
    fn the_template_is_filled_percent_encoded() {
        let probe = ProbeUrl::new("http://127.0.0.1:9/check?k={kind}&v={value}&c={context}", 2, Duration::from_secs(1))
            .unwrap();
        let lease = Lease {
            id: 1,
            resource: ResourceId::new("proxy", "10.0.0.1:8080").unwrap(),
            context: Context::new("a b/c").unwrap(),
            permit: 0,
            token: 1,
            kind: LeaseKind::Probe,
            granted_at: 0,
            expires_at: 1,
            ttl: 1,
        };
        assert_eq!(probe.url(&lease), "http://127.0.0.1:9/check?k=proxy&v=10%2E0%2E0%2E1%3A8080&c=a%20b%2Fc");
        assert_eq!(
            ProbeUrl::new("ftp://x/{value}", 1, Duration::from_secs(1)).unwrap_err(),
            "--probe-url: must be an http:// or https:// URL template"
        );
        assert_eq!(
            ProbeUrl::new("http://x/", 0, Duration::from_secs(1)).unwrap_err(),
            "--probe-concurrency: must be >= 1"
        );
    }
}
