//! Prometheus metrics: lease grants and refusals, occupancy, reputation
//! transitions (all counted from the pool's own events) and request latency.

use std::time::Duration;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::Registry;
use repute_host::{Event, EventKind, RejectReason, Stats};

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct TenantLabel {
    pub tenant: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RejectLabel {
    pub tenant: String,
    pub reason: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RouteLabel {
    pub method: String,
    pub route: String,
    pub status: u16,
}

type Hist = Family<RouteLabel, Histogram, fn() -> Histogram>;

pub struct Metrics {
    registry: Registry,
    granted: Family<TenantLabel, Counter>,
    rejected: Family<RejectLabel, Counter>,
    expired: Family<TenantLabel, Counter>,
    cooled: Family<TenantLabel, Counter>,
    recovered: Family<TenantLabel, Counter>,
    blocklisted: Family<TenantLabel, Counter>,
    live_leases: Family<TenantLabel, Gauge>,
    available: Family<TenantLabel, Gauge>,
    resources: Family<TenantLabel, Gauge>,
    latency: Hist,
}

fn latency_histogram() -> Histogram {
    Histogram::new(exponential_buckets(0.000_05, 2.0, 16))
}

impl Metrics {
    pub fn new() -> Metrics {
        let mut registry = Registry::with_prefix("repute");
        let m = Metrics {
            granted: Family::default(),
            rejected: Family::default(),
            expired: Family::default(),
            cooled: Family::default(),
            recovered: Family::default(),
            blocklisted: Family::default(),
            live_leases: Family::default(),
            available: Family::default(),
            resources: Family::default(),
            latency: Family::new_with_constructor(latency_histogram as fn() -> Histogram),
            registry: Registry::default(),
        };
        registry.register("leases_granted", "Leases granted", m.granted.clone());
        registry.register("leases_rejected", "Acquires refused, by reason", m.rejected.clone());
        registry.register("leases_expired", "Leases that ran out unreleased", m.expired.clone());
        registry.register("cells_cooled", "Cells that started a cooldown", m.cooled.clone());
        registry.register("cells_recovered", "Cells that became healthy again", m.recovered.clone());
        registry.register("resources_blocklisted", "Blocks placed", m.blocklisted.clone());
        registry.register("leases_live", "Leases held right now (occupancy)", m.live_leases.clone());
        registry.register("resources_available", "Resources with a free permit", m.available.clone());
        registry.register("resources_registered", "Registered resources", m.resources.clone());
        registry.register("http_request_duration_seconds", "HTTP request latency", m.latency.clone());
        Metrics { registry, ..m }
    }

    pub fn observe_events(&self, tenant: &str, events: &[Event]) {
        let t = || TenantLabel { tenant: tenant.to_owned() };
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
                    self.rejected
                        .get_or_create(&RejectLabel { tenant: tenant.to_owned(), reason: reason.into() })
                        .inc();
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
                _ => {}
            }
        }
    }

    pub fn observe_stats(&self, tenant: &str, stats: &Stats) {
        let t = TenantLabel { tenant: tenant.to_owned() };
        self.live_leases.get_or_create(&t).set(stats.live_leases as i64);
        self.available.get_or_create(&t).set(stats.available as i64);
        self.resources.get_or_create(&t).set(stats.resources as i64);
    }

    pub fn observe_request(&self, method: &str, route: &str, status: u16, took: Duration) {
        let label = RouteLabel { method: method.to_owned(), route: route.to_owned(), status };
        self.latency.get_or_create(&label).observe(took.as_secs_f64());
    }

    pub fn render(&self) -> String {
        let mut out = String::new();
        prometheus_client::encoding::text::encode(&mut out, &self.registry).expect("writing to a String cannot fail");
        out
    }
}
