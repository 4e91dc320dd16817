//! The event stream of a tenant's pool.

use std::convert::Infallible;

use axum::extract::State;
use axum::response::sse::{Event as SseEvent, KeepAlive, Sse};
use futures_util::stream::{Stream, StreamExt as _};
use tokio_stream::wrappers::errors::BroadcastStreamRecvError;
use tokio_stream::wrappers::BroadcastStream;

use crate::serve::extract::{App, AppResult, Tenant};
use crate::serve::units::http_view;

/// Server-Sent Events: the event name is the pool event's type, the data its JSON.
pub(super) async fn events(
    State(state): State<App>,
    Tenant(t): Tenant,
) -> AppResult<Sse<impl Stream<Item = Result<SseEvent, Infallible>>>> {
    state.ensure_open(&t)?;
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
