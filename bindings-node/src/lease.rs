//! `NativeLease`: the JavaScript `Lease`'s engine, over the host's
//! [`HeldLease`] (the local deadline of invariant I7, auto-renewal, the loss
//! signal, a release that revokes a lost grant). `NativeWaiting` is the
//! host's waiting plan for `Pool.acquire`, which sleeps on the event loop.

use std::sync::Arc;

use napi::bindgen_prelude::{AsyncTask, BigInt};
use napi::threadsafe_function::{ThreadsafeFunction, ThreadsafeFunctionCallMode};
use napi::Status;
use napi_derive::napi;
use repute_host::holder::{hold, Field, Hint, Released, Waiting};
use repute_host::{Error, HeldLease, Holder, Wall};

use crate::args::{field_name, u64_arg};
use crate::errors::OrThrow;
use crate::outcome::{self, OutcomeSpec, Report};
use crate::task::Job;
use crate::units::ms_to_ns;
use crate::views::LeaseData;

/// The loss callback, called with the loss's name on the JS thread. It
/// keeps the process alive while the lease may still be lost, as a renewal
/// timer would: until the lease is released or lost (the host then drops it).
type LostCallback = ThreadsafeFunction<String, (), String, Status, false>;

#[napi]
pub struct NativeLease {
    held: Arc<HeldLease>,
}

impl NativeLease {
    pub(crate) fn new(held: Arc<HeldLease>) -> Self {
        NativeLease { held }
    }

    pub(crate) fn held(&self) -> &Arc<HeldLease> {
        &self.held
    }
}

/// How `release` ended, by name: `held`, `lost` or `lost_unseen`.
pub(crate) fn released_name(r: Released) -> &'static str {
    match r {
        Released::Held => "held",
        Released::Lost => "lost",
        Released::LostUnseen => "lost_unseen",
    }
}

#[napi]
impl NativeLease {
    /// Checks `{ autoRenew, maxHoldMs }` by the host's rule before an acquire.
    #[napi]
    pub fn check_hold(auto_renew: bool, max_hold_ms: Option<f64>) -> napi::Result<()> {
        let max_hold = max_hold_ms.map(|ms| ms_to_ns(field_name(Field::MaxHold), ms)).transpose().or_throw()?;
        hold(auto_renew, max_hold, field_name).map(drop).or_throw()
    }

    /// The lease's fields, with its current expiry and local deadline.
    #[napi]
    pub fn data(&self) -> LeaseData {
        let mut lease = self.held.lease().clone();
        lease.expires_at = self.held.expires_at();
        LeaseData::new(&lease, Some(self.held.deadline()), &Wall::now(&**self.held.holder().clock()))
    }

    /// The secret the resource was registered with, or null: read from the
    /// pool once, then kept. No view, event or error carries it.
    #[napi]
    pub fn secret(&self) -> napi::Result<Option<String>> {
        Ok(self.held.secret().or_throw()?.map(|s| s.expose().to_owned()))
    }

    #[napi]
    pub fn valid(&self) -> bool {
        self.held.valid()
    }

    #[napi]
    pub fn released(&self) -> bool {
        self.held.released()
    }

    /// How `release` found the lease (`held`, `lost`, `lost_unseen`), once it ran.
    #[napi]
    pub fn released_as(&self) -> Option<&'static str> {
        self.held.released_as().map(released_name)
    }

    /// Why the lease was lost, or null.
    #[napi]
    pub fn loss(&self) -> Option<&'static str> {
        self.held.lost().map(|l| l.as_str())
    }

    #[napi]
    pub fn renew(&self) -> napi::Result<()> {
        self.held.renew().or_throw()
    }

    #[napi(ts_return_type = "Promise<void>")]
    pub fn renew_async(&self) -> AsyncTask<Job<()>> {
        let held = self.held.clone();
        AsyncTask::new(Job::new(move || held.renew().or_throw()))
    }

    /// Ends the lease: `held`, `lost` or `lost_unseen` (see the host's `Released`).
    #[napi]
    pub fn release(&self) -> napi::Result<&'static str> {
        self.held.release().map(released_name).or_throw()
    }

    #[napi(ts_return_type = "Promise<string>")]
    pub fn release_async(&self) -> AsyncTask<Job<String>> {
        let held = self.held.clone();
        AsyncTask::new(Job::new(move || held.release().map(|r| released_name(r).to_owned()).or_throw()))
    }

    /// Renewed by the pool's watcher until released or lost, for at most
    /// `maxHoldMs` when given.
    #[napi]
    pub fn auto_renew(&self, max_hold_ms: Option<f64>) -> napi::Result<()> {
        let max_hold = max_hold_ms.map(|ms| ms_to_ns(field_name(Field::MaxHold), ms)).transpose();
        if let Some(max_hold) = hold(true, max_hold.or_throw()?, field_name).or_throw()? {
            self.held.auto_renew(max_hold);
        }
        Ok(())
    }

    /// Calls `callback(loss)` once when the lease is lost.
    #[napi(ts_args_type = "callback: (loss: string) => void")]
    pub fn on_lost(&self, callback: LostCallback) {
        self.held.on_lost(Box::new(move |loss| {
            callback.call(loss.as_str().to_owned(), ThreadsafeFunctionCallMode::NonBlocking);
        }));
    }

    /// The lease used `used` tokens of its resource's `tpm` instead of its cost.
    #[napi]
    pub fn reconcile(&self, used: BigInt) -> napi::Result<()> {
        let used = u64_arg("used", &used).or_throw()?;
        self.held.reconcile(used).or_throw()
    }

    #[napi(ts_return_type = "Promise<void>")]
    pub fn reconcile_async(&self, used: BigInt) -> napi::Result<AsyncTask<Job<()>>> {
        let used = u64_arg("used", &used).or_throw()?;
        let held = self.held.clone();
        Ok(AsyncTask::new(Job::new(move || held.reconcile(used).or_throw())))
    }

    /// Reports the outcome, first reconciling the lease to `usage` tokens if given.
    #[napi]
    pub fn report(&self, spec: OutcomeSpec, usage: Option<BigInt>) -> napi::Result<()> {
        let (report, usage) = report_args(&spec, usage).or_throw()?;
        send(&self.held, &report, usage).or_throw()
    }

    #[napi(ts_return_type = "Promise<void>")]
    pub fn report_async(&self, spec: OutcomeSpec, usage: Option<BigInt>) -> napi::Result<AsyncTask<Job<()>>> {
        let (report, usage) = report_args(&spec, usage).or_throw()?;
        let held = self.held.clone();
        Ok(AsyncTask::new(Job::new(move || send(&held, &report, usage).or_throw())))
    }
}

/// A lease report and its usage as the host takes them.
fn report_args(spec: &OutcomeSpec, usage: Option<BigInt>) -> Result<(Report, Option<u64>), Error> {
    Ok((outcome::report(spec)?, usage.map(|u| u64_arg("usage", &u)).transpose()?))
}

fn send(held: &HeldLease, report: &Report, usage: Option<u64>) -> Result<(), Error> {
    match report {
        Report::Named(outcome) => held.report(outcome, usage),
        Report::Http(answer) => held.report_http(answer, usage),
    }
}

/// One waiting acquire's plan.
#[napi]
pub struct NativeWaiting {
    holder: Arc<Holder>,
    plan: Waiting,
}

impl NativeWaiting {
    pub(crate) fn new(holder: Arc<Holder>, plan: Waiting) -> Self {
        NativeWaiting { holder, plan }
    }
}

#[napi]
impl NativeWaiting {
    /// After a refusal whose hint is `retryAfterMs`, `settled` if nothing
    /// can free a resource sooner, and whose `expectedAfterMs`
    /// (`retryAfterMs` when not given) is when one is expected to: the ms to
    /// sleep before the next attempt, or null once the time is up or is not
    /// expected to bring one.
    #[napi]
    pub fn next(
        &mut self,
        retry_after_ms: Option<f64>,
        settled: Option<bool>,
        expected_after_ms: Option<f64>,
    ) -> napi::Result<Option<f64>> {
        let ns = |field, ms: Option<f64>| ms.map(|ms| ms_to_ns(field, ms)).transpose().or_throw();
        let retry_after = ns("retryAfterMs", retry_after_ms)?;
        let hint = Hint::from_fields(retry_after, ns("expectedAfterMs", expected_after_ms)?, settled.unwrap_or(false));
        Ok(self.plan.next(hint, self.holder.now()).map(|d| d.as_secs_f64() * 1e3))
    }
}
