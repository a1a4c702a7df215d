//! The legacy HTTP+SSE transport (protocol 2024-11-05): one long GET event stream carries everything the
//! server sends; its first `endpoint` event names the URL the client POSTs its messages to. An endpoint
//! on another origin is refused, since it would send our requests (and headers) somewhere else.

use super::event_stream::{EventStreamParser, DEFAULT_EVENT_TYPE};
use super::http::{self, HttpBase, HttpSpec, EVENT_STREAM};
use super::{describe_garbage, BoxFuture, MessageSink, Outbound, Transport, TransportOptions};
use crate::error::{McpError, Result};
use reqwest::header::{ACCEPT, CONTENT_TYPE};
use std::ops::ControlFlow;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use tokio::sync::watch;
use tokio::task::AbortHandle;
use url::Url;

pub const ENDPOINT_EVENT: &str = "endpoint";

pub struct SseTransport {
    shared: Arc<Shared>,
}

struct Shared {
    base: HttpBase,
    endpoint: watch::Sender<Option<Url>>,
    tasks: Mutex<Vec<AbortHandle>>,
}

impl std::ops::Deref for Shared {
    type Target = HttpBase;
    fn deref(&self) -> &HttpBase {
        &self.base
    }
}

impl SseTransport {
    pub fn open(spec: &HttpSpec, sink: Arc<dyn MessageSink>, options: TransportOptions) -> Result<Arc<Self>> {
        let shared = Arc::new(Shared {
            base: HttpBase::new(spec, sink, options)?,
            endpoint: watch::channel(None).0,
            tasks: Mutex::new(Vec::new()),
        });
        let reader = tokio::spawn(shared.clone().read_stream());
        shared.tasks.lock().unwrap().push(reader.abort_handle());
        Ok(Arc::new(SseTransport { shared }))
    }
}

impl Transport for SseTransport {
    fn send(&self, message: Outbound) -> Result<()> {
        if self.shared.closed.load(Ordering::SeqCst) {
            return Err(McpError::Closed);
        }
        let shared = self.shared.clone();
        let task = tokio::spawn(async move {
            let outcome = shared.post(message.json).await;
            if let (Err(error), Some(id)) = (outcome, message.request_id) {
                shared.sink.on_request_failed(id, error);
            }
        });
        let mut tasks = self.shared.tasks.lock().unwrap();
        tasks.retain(|t| !t.is_finished());
        tasks.push(task.abort_handle());
        Ok(())
    }

    fn complete_handshake(&self, initialized: Outbound, _protocol_version: &'static str) -> BoxFuture<'static, Result<()>> {
        let shared = self.shared.clone();
        Box::pin(async move { shared.post(initialized.json).await })
    }

    fn close(&self) -> BoxFuture<'static, ()> {
        let shared = self.shared.clone();
        Box::pin(async move {
            if !shared.closed.swap(true, Ordering::SeqCst) {
                shared.tasks.lock().unwrap().drain(..).for_each(|t| t.abort());
            }
        })
    }
}

impl Drop for SseTransport {
    fn drop(&mut self) {
        // Dropped without close(): end the stream and every POST.
        self.shared.closed.store(true, Ordering::SeqCst);
        self.shared.tasks.lock().unwrap().drain(..).for_each(|t| t.abort());
    }
}

impl Shared {
    async fn post(&self, json: String) -> Result<()> {
        let mut endpoint = self.endpoint.subscribe();
        let url = endpoint.wait_for(Option::is_some).await.map_err(|_| McpError::Closed)?.clone().expect("waited for it");
        if let Some(guard) = &self.spec.guard {
            guard.check_url(&url)?;
        }
        let response = self
            .spec
            .credential
            .apply(self.client.post(url), &self.spec.headers)
            .header(CONTENT_TYPE, "application/json")
            .body(json)
            .send()
            .await
            .map_err(http::transport_error)?;
        // The answer comes on the event stream; the POST's own body carries nothing we need.
        if response.status().is_success() {
            Ok(())
        } else {
            Err(McpError::Transport(http::error_excerpt(response, &self.options.secrets).await))
        }
    }

    async fn read_stream(self: Arc<Self>) {
        let reason = self.stream_until_end().await;
        if !self.closed.load(Ordering::SeqCst) {
            self.sink.on_closed(reason);
        }
    }

    async fn stream_until_end(&self) -> McpError {
        let request = self.spec.credential.apply(self.client.get(self.spec.url.clone()), &self.spec.headers).header(ACCEPT, EVENT_STREAM);
        let mut response = match request.send().await {
            Ok(response) => response,
            Err(e) => return http::transport_error(e),
        };
        if !response.status().is_success() || !http::is_event_stream(&response) {
            return McpError::Transport(format!("the SSE stream could not be opened: {}", http::error_excerpt(response, &self.options.secrets).await));
        }
        let mut parser = EventStreamParser::new(self.options.max_message_bytes);
        let limit = self.options.max_message_bytes;
        let ended = http::read_events(&mut response, &mut parser, None, |event| {
            if event.event == ENDPOINT_EVENT {
                match self.resolve_endpoint(&event.data) {
                    Ok(url) => {
                        self.endpoint.send_replace(Some(url));
                    }
                    Err(e) => return ControlFlow::Break(Err(e)),
                }
            } else if event.event == DEFAULT_EVENT_TYPE && !self.sink.on_message(event.data.as_bytes()) {
                return ControlFlow::Break(Err(McpError::Protocol(describe_garbage(event.data.as_bytes(), &self.options.secrets))));
            }
            ControlFlow::Continue(())
        }, limit)
        .await;
        match ended {
            Ok(_) => McpError::Transport("the server closed the SSE stream".into()),
            Err(e) => e,
        }
    }

    fn resolve_endpoint(&self, announced: &str) -> Result<Url> {
        let url = self
            .spec
            .url
            .join(announced.trim())
            .map_err(|e| McpError::Protocol(format!("the server announced an invalid endpoint: {e}")))?;
        if url.origin() != self.spec.url.origin() {
            return Err(McpError::Protocol(format!(
                "the server announced an endpoint on another origin ({}); refused",
                url.origin().ascii_serialization()
            )));
        }
        Ok(url)
    }
}
