//! The event stream of a tenant's pool.

use std::convert::Infallible;

use axum::extract::State;
use axum::http::Method;
use axum::response::sse::{Event as SseEvent, KeepAlive, Sse};
use futures_util::stream::{Stream, StreamExt as _};
use tokio_stream::wrappers::errors::BroadcastStreamRecvError;
use tokio_stream::wrappers::BroadcastStream;

use super::table::{route, Route};
use crate::serve::extract::{App, AppResult, Tenant};
use crate::serve::openapi::Doc;
use crate::serve::state::{blocking, By};
use crate::serve::units::http_view;

/// This module's rows of the routes table: each route's method, path,
/// handler and documentation, beside the handler.
pub(super) fn routes() -> Vec<Route> {
    use Method as M;
    vec![
        route(M::GET, "/v1/events", events,
            Doc::tenant("Server-Sent Events; the event name is the pool event type")
                .describe("Event names: registered, unregistered, cooled, recovered, blocklisted, unblocked, leased, renewed, released, lease_expired, revoked, rejected, retired (a resource its usage limits retired: `reason` is max_uses or max_age); `lagged` (data: how many were dropped) when the client fell behind.")
                .media(200, "text/event-stream", &["text/event-stream"])),
    ]
}

/// Server-Sent Events: the event name is the pool event's type, the data its JSON.
pub(super) async fn events(
    State(state): State<App>,
    Tenant(t): Tenant,
) -> AppResult<Sse<impl Stream<Item = Result<SseEvent, Infallible>>>> {
    // Opening may wait on the store, whose client blocks: off the runtime.
    let (opening, pool) = (state.clone(), state.pool(&t, By::Home));
    blocking(move || opening.ensure_open(&pool)).await?;
    let clock = state.clock.clone();
    let stream = BroadcastStream::new(state.subscribe(&t)).map(move |item| {
        Ok(match item {
            Ok(e) => SseEvent::default().event(e.kind.name()).data(http_view(&*e, &*clock).to_string()),
            Err(BroadcastStreamRecvError::Lagged(n)) => SseEvent::default().event("lagged").data(n.to_string()),
        })
    });
    let mut stopping = state.stopping.clone();
    let stopped = async move {
        let _ = stopping.wait_for(|s| *s).await;
    };
    Ok(Sse::new(stream.take_until(stopped)).keep_alive(KeepAlive::default()))
}
