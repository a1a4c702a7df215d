//! The trace context of a request `createMcpServer` serves: read from its `params._meta` where the
//! request is taken apart (`server::dispatch`), carried as a task-local value to where the host's
//! `execute` is called (`server::calls`), so the functions between need no extra argument. A value that
//! is not a W3C trace context is ignored, not refused: tracing never fails a call.

use super::TraceContext;
use std::future::Future;
use std::sync::Arc;

tokio::task_local! {
    static INCOMING: Option<Arc<TraceContext>>;
}

/// The trace context of a request's `_meta` members, if they make a well-formed one.
pub fn read(traceparent: Option<String>, tracestate: Option<String>, baggage: Option<String>) -> Option<TraceContext> {
    TraceContext::new(traceparent?, tracestate, baggage).ok()
}

/// Runs `work` with `context` as the request's trace context.
pub async fn scope<F: Future>(context: Option<TraceContext>, work: F) -> F::Output {
    INCOMING.scope(context.map(Arc::new), work).await
}

/// `work` with the trace context of the task that makes it, for a task spawned on its behalf.
pub fn inherit<F: Future>(work: F) -> impl Future<Output = F::Output> {
    INCOMING.scope(current(), work)
}

/// The trace context of the request this task serves, if it carried one.
pub fn current() -> Option<Arc<TraceContext>> {
    INCOMING.try_with(Clone::clone).ok().flatten()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn the_context_reaches_spawned_work_and_nothing_else() {
        let parent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01".to_owned();
        let context = read(Some(parent), Some("a=b".into()), None);
        assert!(context.is_some());
        assert!(read(Some("junk".into()), None, None).is_none());
        assert!(read(None, Some("a=b".into()), None).is_none());
        let seen = scope(context, async { tokio::spawn(inherit(async { current() })).await.unwrap() }).await;
        assert_eq!(seen.unwrap().traceparent(), "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01");
        assert!(current().is_none());
        assert!(tokio::spawn(async { current() }).await.unwrap().is_none());
    }
}
