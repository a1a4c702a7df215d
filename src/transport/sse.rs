//! The legacy HTTP+SSE transport (protocol 2024-11-05): one long GET event stream carries everything the
//! server sends; its first `endpoint` event names the URL the client POSTs its messages to. An endpoint
//! on another origin is refused, since it would send our requests (and headers) somewhere else; so is a
//! redirect of a POST to another origin, on any hop.

use super::event_stream::{EventStreamParser, DEFAULT_EVENT_TYPE};
use super::http::{self, side_queue, HttpBase, HttpSpec, Presented, SideQueue, APPLICATION_JSON, EVENT_STREAM};
use super::{describe_garbage, MessageSink, Outbound, Transport, TransportOptions};
use crate::egress::Exchange;
use crate::error::{McpError, Result};
use futures_util::future::BoxFuture;
use reqwest::header::{HeaderValue, ACCEPT, CONTENT_TYPE};
use reqwest::Method;
use std::ops::ControlFlow;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use tokio::sync::watch;
use url::Url;

pub const ENDPOINT_EVENT: &str = "endpoint";

pub struct SseTransport {
    shared: Arc<SseCore>,
}

/// What the transport handle and its reading and posting tasks share.
struct SseCore {
    base: HttpBase,
    endpoint: watch::Sender<Option<Url>>,
    /// Notifications and replies: bounded, see `http::SideQueue`.
    side_posts: SideQueue,
}

impl std::ops::Deref for SseCore {
    type Target = HttpBase;
    fn deref(&self) -> &HttpBase {
        &self.base
    }
}

impl SseTransport {
    pub fn open(spec: &HttpSpec, sink: Arc<dyn MessageSink>, options: TransportOptions) -> Result<Arc<Self>> {
        let (side_posts, side_queue) = side_queue();
        let shared = Arc::new(SseCore {
            base: HttpBase::new(spec, sink, options)?,
            endpoint: watch::channel(None).0,
            side_posts,
        });
        let poster = shared.clone();
        side_queue.serve(&shared.tasks, shared.deadline(), move |body| {
            let shared = poster.clone();
            async move {
                let _ = shared.post(body, true).await;
            }
        });
        shared.tasks.spawn(shared.clone().read_stream());
        Ok(Arc::new(SseTransport { shared }))
    }
}

impl Transport for SseTransport {
    fn may_be_modern(&self) -> bool {
        false
    }

    fn send(&self, message: Outbound) -> Result<()> {
        if self.shared.closed.load(Ordering::SeqCst) {
            return Err(McpError::Closed);
        }
        let body = bytes::Bytes::from(message.json);
        let Some(id) = message.request_id else {
            self.shared.side_posts.push(body);
            return Ok(());
        };
        let shared = self.shared.clone();
        let resendable = message.resendable;
        self.shared.tasks.spawn(async move {
            if let Err(error) = shared.post_within_deadline(body, resendable).await {
                shared.sink.on_request_failed(id, error);
            }
        });
        Ok(())
    }

    fn complete_handshake(
        &self,
        initialized: Outbound,
        _protocol_version: &'static str,
    ) -> BoxFuture<'static, Result<()>> {
        let shared = self.shared.clone();
        Box::pin(async move { shared.post_within_deadline(bytes::Bytes::from(initialized.json), true).await })
    }

    fn close(&self) -> BoxFuture<'static, ()> {
        let shared = self.shared.clone();
        Box::pin(async move {
            if !shared.closed.swap(true, Ordering::SeqCst) {
                shared.tasks.shutdown().await;
            }
        })
    }
}

impl Drop for SseTransport {
    fn drop(&mut self) {
        // Dropped without close(): end the stream and every POST.
        self.shared.closed.store(true, Ordering::SeqCst);
        self.shared.tasks.cancel();
    }
}

impl SseCore {
    /// `post`, waiting for the endpoint included, within the transport's deadline.
    async fn post_within_deadline(&self, body: bytes::Bytes, resendable: bool) -> Result<()> {
        let deadline = self.deadline();
        tokio::time::timeout(deadline, self.post(body, resendable))
            .await
            .unwrap_or(Err(McpError::Timeout { after_ms: deadline.as_millis() as u64 }))
    }

    async fn post(&self, body: bytes::Bytes, resendable: bool) -> Result<()> {
        let mut endpoint = self.endpoint.subscribe();
        let url =
            endpoint.wait_for(Option::is_some).await.map_err(|_| McpError::Closed)?.clone().expect("waited for it");
        // Every hop stays on the stream's origin, as the announced endpoint must.
        let post = |bearer| {
            self.exchange_as(Method::POST, url.clone(), bearer)
                .protocol_header(CONTENT_TYPE, HeaderValue::from_static(APPLICATION_JSON))
                .body(body.clone())
                .same_origin_only()
        };
        let response = self.send_authorized(post, resendable).await?;
        // The answer comes on the event stream; the POST's own body carries nothing we need.
        if response.status().is_success() {
            Ok(())
        } else {
            Err(McpError::Transport(self.error_excerpt(response).await))
        }
    }

    /// Send an exchange with the OAuth token in use (when the entry has `oauth`); after a refusal for
    /// authorization, get a new token and send it again once — unless it is a tool call, which fails
    /// saying a new token is in place.
    async fn send_authorized(
        &self,
        exchange: impl Fn(Option<Presented>) -> Exchange,
        resendable: bool,
    ) -> Result<reqwest::Response> {
        let Some(authorization) = &self.spec.authorization else {
            return self.egress.send(exchange(self.spec.credential.current())).await;
        };
        authorization.before_request().await?;
        let (presented, sent_token) = self.spec.credential.snapshot();
        let proof = presented.as_ref().and_then(|p| p.proof.clone());
        let mut response = self.egress.send(exchange(presented)).await?;
        // A DPoP nonce refusal (the request was not processed): sent again once with the new nonce, a
        // tool call too, unlike a refusal that needs a new token: see `use_dpop_nonce` in transport/mod.rs.
        if proof.as_ref().is_some_and(|p| p.on_answer(response.url(), response.status(), response.headers())) {
            response = self.egress.send(exchange(self.spec.credential.current())).await?;
            if proof.as_ref().is_some_and(|p| p.on_answer(response.url(), response.status(), response.headers())) {
                return Err(McpError::Auth(
                    "the server refused a DPoP proof carrying the nonce it had just given (use_dpop_nonce again)"
                        .into(),
                ));
            }
        }
        let Some(authorizing) = authorization.on_response(response.status(), response.headers(), sent_token) else {
            return Ok(response);
        };
        authorizing.await?;
        if !resendable {
            return Err(http::call_not_resent());
        }
        self.egress.send(exchange(self.spec.credential.current())).await
    }

    async fn read_stream(self: Arc<Self>) {
        let reason = self.stream_until_end().await;
        if !self.closed.load(Ordering::SeqCst) {
            self.sink.on_closed(reason);
        }
    }

    async fn stream_until_end(&self) -> McpError {
        let open = |bearer| {
            self.exchange_as(Method::GET, self.spec.url.clone(), bearer)
                .protocol_header(ACCEPT, HeaderValue::from_static(EVENT_STREAM))
                .held_open()
        };
        let mut response = match self.send_authorized(open, true).await {
            Ok(response) => response,
            Err(e) => return e,
        };
        if !response.status().is_success() || !http::is_event_stream(&response) {
            return McpError::Transport(format!(
                "the SSE stream could not be opened: {}",
                self.error_excerpt(response).await
            ));
        }
        // The one stream carries every answer: an oversized one fails its call, not the stream.
        let mut parser = EventStreamParser::skipping_oversized(self.options.max_message_bytes);
        let limit = self.options.max_message_bytes;
        let ended = http::read_events(
            &mut response,
            &mut parser,
            None,
            |event| {
                if let Some(skipped) = &event.oversized {
                    super::oversized::refuse_event(&*self.sink, skipped, limit);
                } else if event.event == ENDPOINT_EVENT {
                    match self.resolve_endpoint(&event.data) {
                        Ok(url) => {
                            self.endpoint.send_replace(Some(url));
                        }
                        Err(e) => return ControlFlow::Break(Err(e)),
                    }
                } else if event.event == DEFAULT_EVENT_TYPE && !self.sink.on_message(event.data.as_bytes()) {
                    return ControlFlow::Break(Err(McpError::Protocol(describe_garbage(
                        event.data.as_bytes(),
                        &self.options.secrets,
                    ))));
                }
                ControlFlow::Continue(())
            },
            limit,
        )
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
