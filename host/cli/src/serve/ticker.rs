//! The background work of a running server.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;

use super::state::AppState;

/// How often tenants whose owner let go (as the coordination store's watch
/// saw it) are claimed: often, as it costs nothing while none are reported.
const TAKEOVER: Duration = Duration::from_millis(200);

/// How often the background work runs.
pub(super) struct Timers {
    pub(super) checkpoint: Duration,
    /// Owner lease renewal (sharded and partitioned modes).
    pub(super) renew: Duration,
    /// Log folding (shared and partitioned modes).
    pub(super) sync: Option<Duration>,
    /// Probe rounds (with --probe-url).
    pub(super) probe: Duration,
}

/// Publishes time-driven events every second, checkpoints on schedule,
/// renews owner leases (sharded) and folds other processes' log entries
/// (shared). Each runs on its own task so a slow store does not hold up the
/// others; renewal above all must not wait behind a checkpoint.
pub(super) async fn background(state: Arc<AppState>, timers: Timers, stop: watch::Receiver<bool>) {
    let every = |period: Duration, job: fn(&AppState)| {
        let state = state.clone();
        let mut stop = stop.clone();
        tokio::spawn(async move {
            let mut interval = tokio::time::interval(period);
            interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            interval.tick().await;
            loop {
                tokio::select! {
                    _ = interval.tick() => {
                        let s = state.clone();
                        let _ = tokio::task::spawn_blocking(move || job(&s)).await;
                    }
                    _ = stop.changed() => return,
                }
            }
        })
    };
    let mut jobs = vec![every(Duration::from_secs(1), AppState::tick)];
    if state.keys.is_some() {
        jobs.push(every(Duration::from_secs(1), AppState::reload_keys));
    }
    if state.store.durable() {
        jobs.push(every(timers.checkpoint, AppState::checkpoint_all));
    }
    if state.ownership.is_some() {
        jobs.push(every(timers.renew, AppState::renew_ownership));
        jobs.push(every(TAKEOVER, AppState::take_over_vacated));
    }
    if let Some(period) = timers.sync {
        jobs.push(every(period, AppState::sync_all));
    }
    if state.probe.is_some() {
        jobs.push(every(timers.probe, AppState::probe_all));
    }
    for job in jobs {
        let _ = job.await;
    }
}
