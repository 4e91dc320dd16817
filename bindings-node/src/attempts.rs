//! `NativeAttempts`: one request's attempts over the host's attempt
//! protocol (`repute_host::attempt`), for `lib/attempts.js` and the undici
//! dispatcher built on it. It only converts: the plan's options (ms to ns,
//! names as this API spells them), a refusal back to the host's error, the
//! route and the next step to names. `lib/pool.js` acquires for it with
//! the pool's own waiting acquire (on the event loop, over the link on
//! Redis), on the selector and time left this gives.

use napi::bindgen_prelude::Uint8Array;
use napi_derive::napi;
use repute_host::attempt::{context_of, Attempts, CheckedPlan, Plan, Refused, Route, Step};
use repute_host::{Error, FailureKind, Refusal, Selector};

use crate::errors::{invalid, OrThrow};
use crate::lease::NativeLease;
use crate::pool::NativePool;
use crate::selector::SelectorSpec;
use crate::units::{ms_to_ns, ns_to_ms};

/// A request plan's options but its context, as `lib/attempts.js` checked them.
#[napi(object, object_to_js = false)]
pub struct PlanSpec {
    pub selector: SelectorSpec,
    /// 1..=16; 3 when absent.
    pub attempts: Option<u32>,
    /// For the whole request, waits included; without limit when absent.
    pub timeout_ms: Option<f64>,
}

/// The fields of a refused acquire's error (`NoResourceAvailableError`,
/// `RateLimitedError`) the protocol reads.
#[napi(object, object_to_js = false)]
pub struct RefusalSpec {
    pub code: String,
    pub registered: Option<u32>,
    pub blocked: Option<u32>,
    pub rate_limited: Option<u32>,
    pub cooling: Option<u32>,
    pub leased: Option<u32>,
    pub limited: Option<u32>,
    pub retry_after_ms: Option<f64>,
    pub expected_after_ms: Option<f64>,
    pub settled: Option<bool>,
}

/// What to do after a refused acquire: `wait` (at most `hintMs` when
/// known) and acquire again, acquire `again` at once, or `give_up`.
#[napi(object, object_from_js = false)]
pub struct RefusedStep {
    #[napi(ts_type = "'wait' | 'again' | 'give_up'")]
    pub step: &'static str,
    pub hint_ms: Option<f64>,
}

/// How to send an attempt: `proxy` through the proxy at `proxy` (the
/// lease's value); `header`: set header `name` to `value` (the key's
/// credential), replacing the request's; `as_is`.
#[napi(object, object_from_js = false)]
pub struct RouteData {
    #[napi(ts_type = "'proxy' | 'header' | 'as_is'")]
    pub via: &'static str,
    pub proxy: Option<String>,
    pub name: Option<&'static str>,
    pub value: Option<String>,
}

/// A plan checked once, when an adapter (or `new Attempts`) is made; each
/// request's attempts start from it with their context, so a request
/// converts no options.
#[napi]
pub struct NativePlan {
    plan: CheckedPlan,
}

#[napi]
impl NativePlan {
    #[napi(constructor)]
    pub fn new(pool: &NativePool, spec: PlanSpec) -> napi::Result<Self> {
        let timeout = match spec.timeout_ms {
            Some(ms) if ms <= 0.0 => return Err(invalid("timeoutMs", "must be > 0")).or_throw(),
            ms => ms.map(|ms| ms_to_ns("timeoutMs", ms)).transpose().or_throw()?,
        };
        let mut plan = Plan::default();
        plan.selector = Selector::try_from(spec.selector).or_throw()?;
        plan.attempts = spec.attempts.unwrap_or(plan.attempts);
        plan.timeout = timeout;
        Ok(NativePlan { plan: plan.checked(pool.holder.clone()).or_throw()? })
    }

    /// One request's attempts, counted in `context`.
    #[napi]
    pub fn start(&self, context: String) -> NativeAttempts {
        NativeAttempts { attempts: self.plan.start(context) }
    }
}

#[napi]
pub struct NativeAttempts {
    attempts: Attempts,
}

fn step_name(step: Step) -> &'static str {
    match step {
        Step::Stream => "stream",
        Step::Deliver => "deliver",
        Step::Retry => "retry",
    }
}

/// The host's error behind a refusal's fields, for [`Attempts::refused`].
fn refusal(spec: &RefusalSpec) -> Result<Error, Error> {
    let retry_after = spec.retry_after_ms.map(|ms| ms_to_ns("retryAfterMs", ms)).transpose()?;
    let expected_after = spec.expected_after_ms.map(|ms| ms_to_ns("expectedAfterMs", ms)).transpose()?.or(retry_after);
    Ok(match spec.code.as_str() {
        "rate_limited" => Error::RateLimited { retry_after: retry_after.unwrap_or(0) },
        "no_resource_available" => Error::NoResourceAvailable(Refusal {
            registered: spec.registered.unwrap_or(0),
            blocked: spec.blocked.unwrap_or(0),
            rate_limited: spec.rate_limited.unwrap_or(0),
            cooling: spec.cooling.unwrap_or(0),
            leased: spec.leased.unwrap_or(0),
            limited: spec.limited.unwrap_or(0),
            retry_after,
            expected_after,
            settled: spec.settled.unwrap_or(false),
        }),
        _ => return Err(invalid("error", "must be a refused acquire's error")),
    })
}

#[napi]
impl NativeAttempts {
    #[napi(getter)]
    pub fn context(&self) -> String {
        self.attempts.context().to_owned()
    }

    /// Attempts begun so far.
    #[napi(getter)]
    pub fn made(&self) -> u32 {
        self.attempts.made()
    }

    /// What the next try asks the pool for, as a key: tries with the same
    /// wish are refused or granted alike (a wake is handed on only to a
    /// sleeper that wishes otherwise).
    #[napi(getter)]
    pub fn wish(&self) -> String {
        format!("{:016x}", self.attempts.wish())
    }

    /// Time left for the request (ms); null: no limit.
    #[napi]
    pub fn remaining_ms(&self) -> Option<f64> {
        self.attempts.remaining().map(ns_to_ms)
    }

    /// The next acquire's selector: the caller's, without what was tried.
    #[napi]
    pub fn selector(&self) -> SelectorSpec {
        SelectorSpec::from(self.attempts.selector())
    }

    /// The next attempt's lease now, on this request's context and selector
    /// (the refusal is thrown): for a pool whose acquire runs on the JS
    /// thread, without handing the selector through JavaScript.
    #[napi]
    pub fn acquire_now(&self) -> napi::Result<NativeLease> {
        let a = &self.attempts;
        a.holder().acquire_now(a.context(), a.selector()).map(NativeLease::new).or_throw()
    }

    /// An acquire for the next attempt was refused with this error.
    #[napi]
    pub fn refused(&mut self, error: RefusalSpec) -> napi::Result<RefusedStep> {
        let e = refusal(&error).or_throw()?;
        Ok(match self.attempts.refused(&e) {
            Refused::Wait(hint) => RefusedStep { step: "wait", hint_ms: hint.map(ns_to_ms) },
            Refused::Again => RefusedStep { step: "again", hint_ms: None },
            Refused::GiveUp => RefusedStep { step: "give_up", hint_ms: None },
        })
    }

    /// Begins an attempt on `lease`: how to send it.
    #[napi]
    pub fn begin(&mut self, lease: &NativeLease) -> napi::Result<RouteData> {
        let route = self.attempts.begin(lease.held().clone()).or_throw()?;
        Ok(self.route_data(route))
    }

    /// `acquireNow` then `begin`, in one call (the refusal is thrown): for
    /// a pool whose acquire runs on the JS thread, the next attempt's route.
    #[napi]
    pub fn next_now(&mut self) -> napi::Result<RouteData> {
        let route = self.attempts.next_now().or_throw()?;
        Ok(self.route_data(route))
    }

    fn route_data(&self, route: Route) -> RouteData {
        match route {
            Route::Proxy => {
                let proxy = self.attempts.resource().map(|r| r.value().to_owned());
                RouteData { via: "proxy", proxy, name: None, value: None }
            }
            Route::Header { name, value } => {
                RouteData { via: "header", proxy: None, name: Some(name), value: Some(value) }
            }
            Route::AsIs => RouteData { via: "as_is", proxy: None, name: None, value: None },
        }
    }

    /// The attempt's answer: status, headers as pairs, and for an error
    /// status its whole body as text.
    #[napi(ts_return_type = "'stream' | 'deliver' | 'retry'")]
    pub fn answered(
        &mut self,
        status: u32,
        headers: Vec<Vec<String>>,
        body: Option<String>,
    ) -> napi::Result<&'static str> {
        let status = u16::try_from(status).map_err(|_| invalid("status", "must be an HTTP status code in 100..=599"));
        if headers.iter().any(|p| p.len() != 2) {
            return Err(invalid("headers", "must be [name, value] pairs")).or_throw();
        }
        let headers = headers.into_iter().map(|mut p| (p.swap_remove(0), p.swap_remove(0))).collect();
        self.attempts.answered(status.or_throw()?, headers, body).map(step_name).or_throw()
    }

    /// The attempt got no answer: `kind` is what failed.
    #[napi(ts_return_type = "'stream' | 'deliver' | 'retry'")]
    pub fn failed(&mut self, kind: String) -> napi::Result<&'static str> {
        let kind = FailureKind::parse(&kind).map_err(Error::from).or_throw()?;
        self.attempts.failed(kind).map(step_name).or_throw()
    }

    /// The delivered success's body ended (or was closed), or was cut by `broken`.
    #[napi]
    pub fn finished(&mut self, broken: Option<String>) -> napi::Result<()> {
        let broken = broken.as_deref().map(FailureKind::parse).transpose().map_err(Error::from).or_throw()?;
        self.attempts.finished(broken).or_throw()
    }

    /// The request is over: reports a held-back result, releases a lease in flight.
    #[napi]
    pub fn end(&mut self) -> napi::Result<()> {
        self.attempts.end().or_throw()
    }
}

#[napi]
impl NativePool {
    /// The context a request counts in by default: for an API key of
    /// `kind`'s profile the model its JSON body asks for, else the host.
    #[napi]
    pub fn context_of(&self, kind: Option<String>, host: String, path: String, body: Option<Uint8Array>) -> String {
        match kind {
            Some(kind) => context_of(self.holder.profiles().of(&kind), &host, &path, body.as_deref()),
            None => host.to_ascii_lowercase(),
        }
    }
}

/// The response headers a profile reads, lower case: of an answer's
/// headers, `answered` is given only these, so no other is converted.
#[napi]
pub fn read_headers() -> Vec<&'static str> {
    repute_host::profile::READ_HEADERS.to_vec()
}
