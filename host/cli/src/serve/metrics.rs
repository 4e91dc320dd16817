//! Prometheus metrics: lease grants and refusals, occupancy, reputation
//! transitions (all counted from the pool's own events) and request latency.
//!
//! Every label comes from a fixed set, so nothing a client sends can grow
//! the page: request latency by route template and one of a few methods;
//! pool figures summed over tenants unless `--metrics-tenants` asks for one
//! series per tenant (bounded then by the tenants the operator keys).

use std::time::Duration;

use axum::http::Method;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::Registry;
use repute_host::{Event, EventKind, RejectReason, Stats};

/// A tenant label, or none when tenants are summed.
type Labels = Vec<(&'static str, String)>;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RouteLabel {
    pub method: &'static str,
    pub route: String,
    pub status: u16,
}

/// Methods the API answers get their own label value; any other is `other`.
pub fn method_label(method: &Method) -> &'static str {
    const KNOWN: [Method; 7] =
        [Method::GET, Method::HEAD, Method::POST, Method::PUT, Method::DELETE, Method::PATCH, Method::OPTIONS];
    KNOWN.iter().find(|m| *m == method).map_or("other", Method::as_str)
}

type Hist = Family<RouteLabel, Histogram, fn() -> Histogram>;

pub struct Metrics {
    registry: Registry,
    /// `--metrics-tenants`: one series per tenant rather than sums.
    per_tenant: bool,
    granted: Family<Labels, Counter>,
    rejected: Family<Labels, Counter>,
    expired: Family<Labels, Counter>,
    cooled: Family<Labels, Counter>,
    recovered: Family<Labels, Counter>,
    blocklisted: Family<Labels, Counter>,
    retired: Family<Labels, Counter>,
    live_leases: Family<Labels, Gauge>,
    available: Family<Labels, Gauge>,
    resources: Family<Labels, Gauge>,
    refused: Family<Labels, Gauge>,
    folded: Family<Labels, Counter>,
    latency: Hist,
}

fn latency_histogram() -> Histogram {
    Histogram::new(exponential_buckets(0.000_05, 2.0, 16))
}

impl Metrics {
    pub fn new(per_tenant: bool) -> Metrics {
        let mut registry = Registry::with_prefix("repute");
        let m = Metrics {
            per_tenant,
            granted: Family::default(),
            rejected: Family::default(),
            expired: Family::default(),
            cooled: Family::default(),
            recovered: Family::default(),
            blocklisted: Family::default(),
            retired: Family::default(),
            live_leases: Family::default(),
            available: Family::default(),
            resources: Family::default(),
            refused: Family::default(),
            folded: Family::default(),
            latency: Family::new_with_constructor(latency_histogram as fn() -> Histogram),
            registry: Registry::default(),
        };
        registry.register("leases_granted", "Leases granted", m.granted.clone());
        registry.register("leases_rejected", "Acquires refused, by reason", m.rejected.clone());
        registry.register("leases_expired", "Leases that ran out unreleased", m.expired.clone());
        registry.register("cells_cooled", "Cells that started a cooldown", m.cooled.clone());
        registry.register("cells_recovered", "Cells that became healthy again", m.recovered.clone());
        registry.register("resources_blocklisted", "Blocks placed", m.blocklisted.clone());
        registry.register("resources_retired", "Resources their usage limits retired, by reason", m.retired.clone());
        registry.register("leases_live", "Leases held right now (occupancy)", m.live_leases.clone());
        registry.register("resources_available", "Resources with a free permit", m.available.clone());
        registry.register("resources_registered", "Registered resources", m.resources.clone());
        registry.register(
            "log_entries_refused",
            "Log entries the tenant's pool folded or wrote that did not apply (alike in every process)",
            m.refused.clone(),
        );
        registry.register(
            "log_entries_folded",
            "Entries other processes logged that this one folded in (shared and partitioned modes)",
            m.folded.clone(),
        );
        registry.register("http_request_duration_seconds", "HTTP request latency", m.latency.clone());
        Metrics { registry, ..m }
    }

    fn tenant(&self, tenant: &str) -> Labels {
        if self.per_tenant {
            vec![("tenant", tenant.to_owned())]
        } else {
            Vec::new()
        }
    }

    pub fn observe_events(&self, tenant: &str, events: &[Event]) {
        let t = || self.tenant(tenant);
        for e in events {
            match &e.kind {
                EventKind::Leased { .. } => {
                    self.granted.get_or_create(&t()).inc();
                }
                EventKind::Rejected { reason, .. } => {
                    let reason = match reason {
                        RejectReason::NoCandidates => "no_candidates",
                        RejectReason::RateLimited => "rate_limited",
                    };
                    let mut labels = t();
                    labels.push(("reason", reason.into()));
                    self.rejected.get_or_create(&labels).inc();
                }
                EventKind::LeaseExpired { .. } => {
                    self.expired.get_or_create(&t()).inc();
                }
                EventKind::Cooled { .. } => {
                    self.cooled.get_or_create(&t()).inc();
                }
                EventKind::Recovered { .. } => {
                    self.recovered.get_or_create(&t()).inc();
                }
                EventKind::Blocklisted { .. } => {
                    self.blocklisted.get_or_create(&t()).inc();
                }
                EventKind::Retired { reason, .. } => {
                    let mut labels = t();
                    labels.push(("reason", reason.as_str().into()));
                    self.retired.get_or_create(&labels).inc();
                }
                _ => {}
            }
        }
    }

    /// The occupancy gauges from every open tenant's stats: one series per
    /// tenant, or their sums.
    pub fn observe_stats(&self, all: &[(String, Stats)]) {
        let mut totals = [0i64; 4];
        for (tenant, s) in all {
            let figures = [s.live_leases as i64, s.available as i64, s.resources as i64, s.refused_entries as i64];
            if self.per_tenant {
                let t = self.tenant(tenant);
                self.live_leases.get_or_create(&t).set(figures[0]);
                self.available.get_or_create(&t).set(figures[1]);
                self.resources.get_or_create(&t).set(figures[2]);
                self.refused.get_or_create(&t).set(figures[3]);
            }
            for (total, f) in totals.iter_mut().zip(figures) {
                *total += f;
            }
        }
        if !self.per_tenant {
            let none = Vec::new();
            self.live_leases.get_or_create(&none).set(totals[0]);
            self.available.get_or_create(&none).set(totals[1]);
            self.resources.get_or_create(&none).set(totals[2]);
            self.refused.get_or_create(&none).set(totals[3]);
        }
    }

    /// What counts the entries of other processes one of `tenant`'s pools folds.
    pub fn folded(&self, tenant: &str) -> impl Fn(u64) + Send + 'static {
        let counter = self.folded.get_or_create(&self.tenant(tenant)).clone();
        move |entries| {
            counter.inc_by(entries);
        }
    }

    pub fn observe_request(&self, method: &'static str, route: &str, status: u16, took: Duration) {
        let label = RouteLabel { method, route: route.to_owned(), status };
        self.latency.get_or_create(&label).observe(took.as_secs_f64());
    }

    pub fn render(&self) -> String {
        let mut out = String::new();
        prometheus_client::encoding::text::encode(&mut out, &self.registry).expect("writing to a String cannot fail");
        out
    }
}
