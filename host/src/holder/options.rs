//! How an embedding front end opens a pool: one set of options, one set of
//! defaults and one validation for every binding. Bindings convert their
//! language's values (seconds or milliseconds, dicts or objects) into these
//! fields, in nanoseconds, and name the fields their users wrote through
//! [`Field`], so an error names `lease_ttl` in Python and `leaseTtlMs` in
//! JavaScript while the rule is the same.

use std::hash::BuildHasher;
use std::time::Duration;

use repute_core::{Policy, RateLimit, Recovery, Strategy};

use crate::config::TenantConfig;
use crate::cooling::cooling_rule;
use crate::error::{Error, Result};
use crate::profile::Profiles;
use crate::store::{Mode, OwnersSpec, StoreSpec};

/// An option a user sets, for the binding to name in its own spelling.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Field {
    Store,
    Tenant,
    Mode,
    OwnerTtl,
    Owners,
    LeaseTtl,
    ProbeTtl,
    Strategy,
    RenewMargin,
    Recovery,
    RateLimitRate,
    RateLimitBurst,
    AutoRenew,
    MaxHold,
    Profiles,
}

/// A binding's names for the fields, e.g. `|f| match f { Field::LeaseTtl => "leaseTtlMs", .. }`.
pub type Names = fn(Field) -> &'static str;

/// One cooling rule as a user wrote it: any of the three numbers may be
/// left to the rule the pool's recovery has for that kind. The rules
/// themselves (and their field names, `policy.rules.*`) are the core's.
#[derive(Debug, Clone, PartialEq)]
pub struct Cooldown {
    pub kind: String,
    pub base: Option<u64>,
    pub cool_after: Option<u32>,
    pub max_exponent: Option<u32>,
}

/// Everything `Holder::open` takes. `None` is the documented default.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct OpenOptions {
    /// `memory` (when `None`), `sqlite:PATH`, a `postgres://` or `redis://` URL.
    pub store: Option<String>,
    /// `default` when `None`.
    pub tenant: Option<String>,
    /// `sharded` (default) or `shared`; only shared stores look at it.
    pub mode: Option<String>,
    /// The owner lease of a sharded tenant, ns; 10 s by default.
    pub owner_ttl: Option<u64>,
    /// `store` (default) or `etcd://HOST:PORT[,...]`.
    pub owners: Option<String>,
    pub lease_ttl: Option<u64>,
    pub probe_ttl: Option<u64>,
    /// `thompson` (default), `classic` or `first`.
    pub strategy: Option<String>,
    /// Without one, every pool draws its own, as users expect of an unseeded generator.
    pub seed: Option<u64>,
    pub max_resources: Option<u32>,
    pub max_cells: Option<u32>,
    /// Acquires per second, and the burst.
    pub rate_limit: Option<(f64, u32)>,
    /// Subtracted from the TTL for a lease's local deadline; a tenth of the TTL when `None`.
    pub renew_margin: Option<u64>,
    /// `traffic` (default), `probe` or `classic`.
    pub recovery: Option<String>,
    pub fail_open: bool,
    pub cooldowns: Vec<Cooldown>,
    /// `(kind, profile)` pairs: how the answers of that kind's resources
    /// are read (see [`crate::profile`]); other kinds by their name.
    pub profiles: Vec<(String, String)>,
}

/// Long enough to ride out a slow renewal or two, short enough that a dead
/// owner's tenant is taken over within seconds.
pub const DEFAULT_OWNER_TTL: Duration = Duration::from_secs(10);

/// The options, checked and resolved: what `Holder::open` needs.
pub(crate) struct Resolved {
    pub store: StoreSpec,
    pub tenant: String,
    pub config: TenantConfig,
    pub sharing: crate::embedded::Sharing,
    pub margin: Option<u64>,
    pub profiles: Profiles,
}

fn invalid(name: Names, field: Field, rule: &str) -> Error {
    Error::invalid(name(field), rule)
}

fn positive(name: Names, field: Field, ns: Option<u64>) -> Result<Option<u64>> {
    match ns {
        Some(0) => Err(invalid(name, field, "must be > 0")),
        ns => Ok(ns),
    }
}

impl OpenOptions {
    /// Applies the defaults and every rule; nothing is opened yet.
    pub(crate) fn resolve(self, name: Names) -> Result<Resolved> {
        let rename = |field: Field| move |e: Error| rename_field(e, name(field));
        let mut policy = Policy::default();
        if let Some(ttl) = positive(name, Field::LeaseTtl, self.lease_ttl)? {
            policy.lease_ttl = ttl;
        }
        if let Some(ttl) = positive(name, Field::ProbeTtl, self.probe_ttl)? {
            policy.probe_ttl = ttl;
        }
        if let Some(s) = &self.strategy {
            policy.strategy = Strategy::parse(s)
                .map_err(|_| invalid(name, Field::Strategy, "must be one of classic, thompson, first"))?;
        }
        if let Some(r) = &self.recovery {
            policy.recovery = Recovery::parse(r)
                .map_err(|_| invalid(name, Field::Recovery, "must be one of traffic, probe, classic"))?;
        }
        policy.max_resources = self.max_resources;
        policy.max_cells = self.max_cells;
        if let Some((rate, burst)) = self.rate_limit {
            if !(rate.is_finite() && rate > 0.0) {
                return Err(invalid(name, Field::RateLimitRate, "must be finite and > 0"));
            }
            if burst == 0 {
                return Err(invalid(name, Field::RateLimitBurst, "must be >= 1"));
            }
            policy.rate_limit = Some(RateLimit { rate, burst });
        }
        policy.fail_open = self.fail_open;
        // Omitted numbers come from the rule the chosen recovery has, so the
        // rules are applied after it.
        for c in &self.cooldowns {
            let rule = cooling_rule(&policy, &c.kind, c.base, c.cool_after, c.max_exponent)?;
            policy.rules.push(rule);
        }
        let margin = self.renew_margin;
        if margin.is_some_and(|m| m >= policy.lease_ttl.min(policy.probe_ttl)) {
            return Err(invalid(name, Field::RenewMargin, "must be below the lease and probe TTLs"));
        }
        let tenant = self.tenant.unwrap_or_else(|| "default".to_owned());
        if tenant.is_empty() {
            return Err(invalid(name, Field::Tenant, "must not be empty"));
        }
        let store = StoreSpec::parse(self.store.as_deref().unwrap_or("memory")).map_err(rename(Field::Store))?;
        let sharing = crate::embedded::Sharing {
            mode: self.mode.as_deref().map(Mode::parse).transpose().map_err(rename(Field::Mode))?.unwrap_or_default(),
            owner_ttl: positive(name, Field::OwnerTtl, self.owner_ttl)?.map_or(DEFAULT_OWNER_TTL, Duration::from_nanos),
            owners: self
                .owners
                .as_deref()
                .map(OwnersSpec::parse)
                .transpose()
                .map_err(rename(Field::Owners))?
                .unwrap_or_default(),
        };
        let pairs = self.profiles.iter().map(|(kind, profile)| (kind.as_str(), profile.as_str()));
        let profiles = Profiles::new(pairs, name(Field::Profiles))?;
        let seed = self.seed.unwrap_or_else(|| std::hash::RandomState::new().hash_one(std::process::id()));
        let config = TenantConfig { policy, seed, durable: store.durable() };
        Ok(Resolved { store, tenant, config, sharing, margin, profiles })
    }
}

/// How a granted lease is to be held: `Some(max_hold)` when it is
/// auto-renewed (`max_hold` in ns, `None` without a cap), `None` when the
/// holder renews it. A cap goes with auto-renewal and must be > 0.
pub fn hold(auto_renew: bool, max_hold: Option<u64>, name: Names) -> Result<Option<Option<u64>>> {
    let max_hold = positive(name, Field::MaxHold, max_hold)?;
    match (auto_renew, max_hold) {
        (false, Some(_)) => Err(invalid(name, Field::MaxHold, &format!("goes with {}", name(Field::AutoRenew)))),
        (false, None) => Ok(None),
        (true, max_hold) => Ok(Some(max_hold)),
    }
}

/// The same rule, under the binding's name for the field.
fn rename_field(e: Error, field: &str) -> Error {
    match e {
        Error::InvalidInput { rule, .. } => Error::InvalidInput { field: field.to_owned(), rule },
        e => e,
    }
}
