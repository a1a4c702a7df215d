//! The requests of `session/` (resources, prompts, completions) made through the toolset: the server
//! named, its declared capabilities checked, then the gates a tool call passes — `policy.decide` for a
//! read, a subscribe, a prompt get and a completion (see [`policy::session_request_json`]), the server's
//! readiness ([`super::calls::wait_live`]: a reconnecting server is waited for, up to `reconnect.waitMs`),
//! `auth` for HTTP — and the server's own secrets redacted from every error. Listings are not put to
//! policy, like `tools/list`. Tool calls do not come here: their path is `calls.rs`, unchanged.
//!
//! Subscriptions are kept by the server's supervisor: each has a task that keeps it on whatever
//! connection is live, so one survives the supervisor's recovery (re-subscribed on the new connection,
//! not asked of policy again). In the session era that is `resources/subscribe` once per connection;
//! in 2026-07-28 a `subscriptions/listen` held open for it.

use super::supervisor::{State, Supervisor};
use super::Toolset;
use crate::diagnostics::Diagnostic;
use crate::error::{McpError, Result};
use crate::guard::redact::shown_uri;
use crate::guard::{policy, server_text};
use crate::session::completion::{self, Completion};
use crate::session::connection::{AbortHandle, Connection, RequestOptions};
use crate::session::prompts::{self, GetPromptResult, Prompt};
use crate::session::resources::{self, ReadResult, Resource, ResourceTemplate};
use crate::session::{self as requests, Listed};
use crate::telemetry::TraceContext;
use parking_lot::Mutex;
use serde::Serialize;
use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// An item of a listing, with the server it came from.
#[derive(Debug, Serialize)]
pub struct FromServer<T> {
    pub server: String,
    #[serde(flatten)]
    pub item: T,
}

/// A server's resource subscriptions: one kept subscription per URI, however many callers hold it (the
/// server is told to stop only when the last lets go), and the callers' ids.
#[derive(Default)]
pub(crate) struct Subscriptions {
    inner: Mutex<SubscriptionsInner>,
}

#[derive(Default)]
struct SubscriptionsInner {
    /// URI → its kept subscription.
    kept: HashMap<String, KeptEntry>,
    /// URI → the lock its keeping task holds for its whole life: a new task for a URI starts (and
    /// subscribes) only after the one before it has ended (and unsubscribed), so the server's last word
    /// for a URI is always the newest task's. Weak: an entry no task holds is pruned.
    wire: HashMap<String, std::sync::Weak<tokio::sync::Mutex<()>>>,
    /// Caller's id → the URI and the keeping task it holds (a task's refusal ends what its holders hold,
    /// and their later unsubscribe must not count against a newer task's).
    ids: HashMap<u64, (String, u64)>,
    /// Kept URIs with an update passed to the owner and not yet taken (see [`Subscriptions::updated`]).
    pending: HashSet<String>,
}

/// One URI's kept subscription: the callers holding it, its keeping task's stop, and the outcome of
/// the task's first subscribe (`None` until it is known), which every caller holding it waits for.
struct KeptEntry {
    holders: usize,
    stop: CancellationToken,
    /// Which keeping task this entry is (from `NEXT_SUBSCRIPTION`): a task ending removes only its own.
    task: u64,
    first: tokio::sync::watch::Receiver<Option<Result<()>>>,
}

impl Subscriptions {
    /// `notifications/resources/updated` for `uri`: true if it is to go to the owner — the URI is kept
    /// here, and no update of it is already on its way (a flood costs a lookup each). Not kept: dropped.
    pub(crate) fn updated(&self, uri: &str) -> bool {
        let mut inner = self.inner.lock();
        inner.kept.contains_key(uri) && inner.pending.insert(uri.to_owned())
    }

    /// The owner took the update of `uri`: the next one goes out again.
    pub(crate) fn delivered(&self, uri: &str) {
        self.inner.lock().pending.remove(uri);
    }
}

/// Whether a `resources` / `prompts` change was announced and not listed since: one `ListChanged`
/// diagnostic per change, however many announcements the server sends before the owner lists again.
#[derive(Default)]
pub(crate) struct ListsPending {
    resources: AtomicBool,
    prompts: AtomicBool,
}

impl ListsPending {
    fn flag(&self, list: &str) -> Option<&AtomicBool> {
        match list {
            "prompts" => Some(&self.prompts),
            "resources" => Some(&self.resources),
            _ => None,
        }
    }

    /// An announcement: true if it is the first since the last listing (it is to be reported).
    pub(crate) fn announce(&self, list: &str) -> bool {
        self.flag(list).is_some_and(|flag| !flag.swap(true, Ordering::SeqCst))
    }

    /// `list` is being listed: the next announcement is news again.
    pub(crate) fn listed(&self, list: &str) {
        if let Some(flag) = self.flag(list) {
            flag.store(false, Ordering::SeqCst);
        }
    }
}

static NEXT_SUBSCRIPTION: AtomicU64 = AtomicU64::new(1);

/// How long a 2026-07-28 subscription waits before listening again after the server ended it.
const RELISTEN_DELAY: Duration = Duration::from_millis(1_000);

impl Toolset {
    pub(super) fn slot(&self, server: &str) -> Result<&Arc<Supervisor>> {
        if self.inner.cancel.is_cancelled() {
            return Err(McpError::Closed);
        }
        self.inner.servers.iter().find(|s| s.entry.name == server).ok_or_else(|| {
            let shown: String = server.chars().take(64).collect();
            McpError::ServerUnavailable(format!("no server named {shown:?} is configured in this toolset"))
        })
    }

    /// The live connection to `slot`'s server once its gates are passed: `policy` (the label and request
    /// for `policy.decide`, when there is a decide), readiness, then `auth`.
    pub(super) async fn gated(
        &self,
        slot: &Supervisor,
        decide: Option<(&str, String)>,
        abort: Option<&AbortHandle>,
    ) -> Result<Arc<Connection>> {
        let inner = &self.inner;
        let gate = async {
            if let (Some((label, request)), Some(_)) = (decide, &inner.hooks.decide) {
                policy::authorize(inner.hooks.decide.as_deref(), inner.hooks.ask.as_deref(), label, request).await?;
            }
            super::calls::wait_live(slot, inner.timeout).await?;
            if slot.entry.is_http() && inner.hooks.auth.is_some() {
                slot.authenticate().await?;
            }
            slot.live_connection().ok_or_else(|| slot.unavailable())
        };
        tokio::select! {
            biased;
            _ = inner.cancel.cancelled() => Err(McpError::Closed),
            _ = async { match abort { Some(a) => a.wait().await, None => std::future::pending().await } } => Err(McpError::Aborted),
            gated = gate => gated,
        }
    }

    /// A session request's error as its caller sees it: redacted of the server's secrets and, under
    /// `exposeServerErrors: false`, with the server's own text withheld (reported as
    /// `server-error-withheld`, its `tool` naming the request), as a tool call's is.
    pub(super) fn caller_error(&self, slot: &Supervisor, request: &str, error: McpError) -> McpError {
        if !self.inner.validation.expose_server_errors && server_text::may_quote_server(&error) {
            self.inner.report(Diagnostic::ServerErrorWithheld {
                server: slot.entry.name.clone(),
                tool: request.to_owned(),
                error_code: error.code(),
                message: server_text::withheld_text(&error, &slot.secrets),
            });
            return server_text::withhold(error).redacted(&slot.secrets);
        }
        error.redacted(&slot.secrets)
    }

    pub(super) fn opts<'a>(&self, abort: Option<&'a AbortHandle>) -> RequestOptions<'a> {
        RequestOptions { timeout: self.inner.timeout, abort }
    }

    /// Every server's (or `server`'s) listing by `list`, of the servers that declare `capability`. A
    /// named server must be there and reachable, and its failure is the listing's. Unnamed, the servers
    /// are listed at once, in configuration order: one that is not reachable (failed, disabled) or does not
    /// declare the capability is left out, and one whose listing fails is left out with a
    /// `listing-failed` diagnostic, so one broken server does not cost the others' entries.
    pub(super) async fn list_each<T, F>(
        &self,
        server: Option<&str>,
        capability: &str,
        list: F,
    ) -> Result<Vec<FromServer<T>>>
    where
        F: for<'c> Fn(
            &'c Supervisor,
            &'c Connection,
            RequestOptions<'c>,
        ) -> futures_util::future::BoxFuture<'c, Result<Listed<T>>>,
    {
        let slots: Vec<&Arc<Supervisor>> = match server {
            Some(name) => vec![self.slot(name)?],
            None => self.inner.servers.iter().filter(|s| s.entry.enabled).collect(),
        };
        let listed = self.list_slots(&slots, server.is_some(), capability, None, list).await?;
        Ok(listed.into_iter().map(|(slot, item)| FromServer { server: slot.entry.name.clone(), item }).collect())
    }

    /// [`Toolset::list_each`] of the servers `slots`, each entry with the server it came from; `named`:
    /// the caller named the one server, whose failure is the listing's; `abort` ends every request of it.
    pub(super) async fn list_slots<'s, T, F>(
        &self,
        slots: &[&'s Arc<Supervisor>],
        named: bool,
        capability: &str,
        abort: Option<&AbortHandle>,
        list: F,
    ) -> Result<Vec<(&'s Arc<Supervisor>, T)>>
    where
        F: for<'c> Fn(
            &'c Supervisor,
            &'c Connection,
            RequestOptions<'c>,
        ) -> futures_util::future::BoxFuture<'c, Result<Listed<T>>>,
    {
        let list = &list;
        let listings = slots.iter().map(|slot| async move {
            let connection = match self.gated(slot, None, abort).await {
                Ok(connection) => connection,
                Err(McpError::ServerUnavailable(_)) if !named => return Ok(None),
                Err(error) => return Err(error),
            };
            if !requests::declares(&connection.session, capability) {
                return Ok(None);
            }
            slot.lists_pending.listed(capability_list(capability));
            list(slot, &connection, self.opts(abort)).await.map(Some)
        });
        let mut out = Vec::new();
        for (slot, listed) in slots.iter().zip(futures_util::future::join_all(listings).await) {
            let listed = match listed.map_err(|e| self.caller_error(slot, &format!("{capability} listing"), e)) {
                Ok(Some(listed)) => listed,
                Ok(None) => continue,
                // Closed or aborted ends the whole listing, named or not.
                Err(error @ (McpError::Closed | McpError::Aborted)) => return Err(error),
                Err(error) if !named => {
                    let message =
                        format!("{}'s {capability} could not be listed and were left out: {error}", slot.entry.name);
                    self.inner.report(Diagnostic::ListingFailed {
                        server: slot.entry.name.clone(),
                        list: capability_list(capability),
                        error_code: error.code(),
                        message,
                    });
                    continue;
                }
                Err(error) => return Err(error),
            };
            if listed.skipped > 0 {
                let message = format!(
                    "{} of {}'s {capability} entries were malformed or past the bound and were left out",
                    listed.skipped, slot.entry.name
                );
                self.inner.report(Diagnostic::ListingEntriesSkipped {
                    server: slot.entry.name.clone(),
                    list: capability_list(capability),
                    skipped: listed.skipped,
                    message,
                });
            }
            out.extend(listed.items.into_iter().map(|item| (*slot, item)));
        }
        Ok(out)
    }

    pub async fn list_resources(&self, server: Option<&str>) -> Result<Vec<FromServer<Resource>>> {
        self.list_each(server, "resources", |_, c, o| Box::pin(async move { resources::list(c, &o).await })).await
    }

    pub async fn list_resource_templates(&self, server: Option<&str>) -> Result<Vec<FromServer<ResourceTemplate>>> {
        self.list_each(server, "resources", |_, c, o| Box::pin(async move { resources::list_templates(c, &o).await }))
            .await
    }

    pub async fn list_prompts(&self, server: Option<&str>) -> Result<Vec<FromServer<Prompt>>> {
        self.list_each(server, "prompts", |_, c, o| Box::pin(async move { prompts::list(c, &o).await })).await
    }

    /// `resources/read` of `uri` on `server`, put to policy first (`kind: 'resource'`, `operation: 'read'`).
    /// `trace`: the caller's trace context, for `params._meta` unless the server's entry opted out.
    pub async fn read_resource(
        &self,
        server: &str,
        uri: &str,
        abort: Option<super::ListingAbort>,
        trace: Option<&TraceContext>,
    ) -> Result<ReadResult> {
        let slot = self.slot(server)?;
        let outcome = self.read_resource_in(slot, uri, abort.as_ref().map(|a| &*a.handle), None, trace).await;
        drop(abort);
        outcome
    }

    /// [`Toolset::read_resource`] begun at once when nothing is to be waited for — no `policy.decide`, no
    /// `auth` to resolve, the server live and declaring resources — its outcome given to `done` from the
    /// thread that reads the answer: no task and no thread woken, as for a tool call. Otherwise nothing is
    /// done and `done` and `abort` come back, for [`Toolset::read_resource`].
    pub fn start_read_resource<F>(
        &self,
        server: &str,
        uri: &str,
        abort: Option<super::ListingAbort>,
        trace: Option<&TraceContext>,
        done: F,
    ) -> std::result::Result<(), (F, Option<super::ListingAbort>)>
    where
        F: FnOnce(Result<ReadResult>) + Send + 'static,
    {
        let inner = &self.inner;
        let ready = || {
            if inner.cancel.is_cancelled() || inner.hooks.decide.is_some() {
                return None;
            }
            let slot = self.slot(server).ok()?;
            if slot.entry.is_http() && inner.hooks.auth.is_some() {
                return None;
            }
            let connection = slot.live_connection().filter(|c| requests::declares(&c.session, "resources"))?;
            Some((slot.clone(), connection))
        };
        let Some((slot, connection)) = ready() else { return Err((done, abort)) };
        let toolset = Toolset { inner: self.inner.clone() };
        let handle = abort.as_ref().map(|a| a.handle.clone());
        let opts = self.opts(handle.as_deref());
        let trace = trace.filter(|_| slot.entry.propagate_trace_context);
        resources::start_read(&connection, uri, trace, &opts, move |outcome| {
            // The abort stays registered until the read ends.
            drop(abort);
            done(outcome.map_err(|e| toolset.caller_error(&slot, "resources/read", e)));
        });
        Ok(())
    }

    /// [`Toolset::read_resource`] on `slot`'s server; `origin` (`"model"`) is told to `policy.decide`
    /// when the read is not the host's own.
    pub(super) async fn read_resource_in(
        &self,
        slot: &Supervisor,
        uri: &str,
        abort: Option<&AbortHandle>,
        origin: Option<&str>,
        trace: Option<&TraceContext>,
    ) -> Result<ReadResult> {
        let server = slot.entry.name.as_str();
        let outcome = async {
            let details = with_origin(format!("\"uri\":{}", json_string(uri)), origin);
            let request = policy::session_request_json("resource", "read", server, &details);
            let connection =
                self.gated(slot, Some((&format!("the read of {}", shown_uri(uri)), request)), abort).await?;
            requests::require(&connection.session, "resources", server, "resources/read")?;
            let trace = trace.filter(|_| slot.entry.propagate_trace_context);
            resources::read(&connection, uri, trace, &self.opts(abort)).await
        };
        outcome.await.map_err(|e| self.caller_error(slot, "resources/read", e))
    }

    /// Subscribe to `uri`'s updates on `server` (put to policy first, `operation: 'subscribe'`). Updates
    /// arrive as `ToolsetEvents::resource_updated`; the id given back ends it ([`Toolset::unsubscribe_resource`]).
    pub async fn subscribe_resource(&self, server: &str, uri: &str) -> Result<u64> {
        let slot = self.slot(server)?;
        let outcome = async {
            let request =
                policy::session_request_json("resource", "subscribe", server, &format!("\"uri\":{}", json_string(uri)));
            let connection =
                self.gated(slot, Some((&format!("the subscription to {}", shown_uri(uri)), request)), None).await?;
            requests::require(&connection.session, "resources", server, "resources/subscribe")?;
            if !connection.session.resources_subscribe {
                return Err(McpError::NotSupported(format!("{server} does not declare resources.subscribe")));
            }
            let id = NEXT_SUBSCRIPTION.fetch_add(1, Ordering::Relaxed);
            let mut first = {
                let mut subscriptions = slot.subscriptions.inner.lock();
                if let Some(kept) = subscriptions.kept.get_mut(uri) {
                    kept.holders += 1;
                    let (task, first) = (kept.task, kept.first.clone());
                    subscriptions.ids.insert(id, (uri.to_owned(), task));
                    first
                } else {
                    subscriptions.ids.insert(id, (uri.to_owned(), id));
                    let stop = slot.cancel.child_token();
                    let (tell, first) = tokio::sync::watch::channel(None);
                    subscriptions.kept.insert(
                        uri.to_owned(),
                        KeptEntry { holders: 1, stop: stop.clone(), task: id, first: first.clone() },
                    );
                    subscriptions.wire.retain(|_, lock| lock.strong_count() > 0);
                    let wire = match subscriptions.wire.get(uri).and_then(std::sync::Weak::upgrade) {
                        Some(wire) => wire,
                        None => {
                            let wire = Arc::new(tokio::sync::Mutex::new(()));
                            subscriptions.wire.insert(uri.to_owned(), Arc::downgrade(&wire));
                            wire
                        }
                    };
                    let kept = Kept {
                        slot: slot.clone(),
                        uri: uri.to_owned(),
                        stop,
                        task: id,
                        wire,
                        timeout: self.inner.timeout,
                    };
                    slot.tasks.spawn(keep(kept, connection, tell));
                    first
                }
            };
            // Every holder waits for the keeping task's first `resources/subscribe` (session era), so a
            // caller hears the server's refusal (and holds nothing then), and "subscribed" means it.
            let outcome = match first.wait_for(Option::is_some).await {
                Ok(outcome) => outcome.clone().expect("waited for an outcome"),
                Err(_) => Err(McpError::Closed),
            };
            if let Err(error) = outcome {
                self.unsubscribe_resource(id);
                return Err(error);
            }
            Ok(id)
        };
        outcome.await.map_err(|e| self.caller_error(slot, "resources/subscribe", e))
    }

    /// Let go of the subscription `id`; the last holder of its URI ends it (the server is told, if it
    /// is live). Nothing for an id already let go.
    pub fn unsubscribe_resource(&self, id: u64) {
        for slot in &self.inner.servers {
            let mut subscriptions = slot.subscriptions.inner.lock();
            let Some((uri, task)) = subscriptions.ids.remove(&id) else { continue };
            if let Some(kept) = subscriptions.kept.get_mut(&uri).filter(|kept| kept.task == task) {
                kept.holders -= 1;
                if kept.holders == 0 {
                    kept.stop.cancel();
                    subscriptions.kept.remove(&uri);
                    subscriptions.pending.remove(&uri);
                }
            }
            return;
        }
    }

    /// The owner took `server`'s update of `uri` (see [`Subscriptions::updated`]).
    pub fn resource_update_delivered(&self, server: &str, uri: &str) {
        if let Some(slot) = self.inner.servers.iter().find(|s| s.entry.name == server) {
            slot.subscriptions.delivered(uri);
        }
    }

    /// `prompts/get` of `name` with `args_json` (an object of strings): checked against the prompt as
    /// the server lists it now (required present, none undeclared), after it was put to policy (`kind:
    /// 'prompt'`); a refusal sends nothing, not even the listing.
    /// `trace`: the caller's trace context, for `params._meta` unless the server's entry opted out.
    pub async fn get_prompt(
        &self,
        server: &str,
        name: &str,
        args_json: &str,
        trace: Option<&TraceContext>,
    ) -> Result<GetPromptResult> {
        let slot = self.slot(server)?;
        let outcome = async {
            let args = requests::string_map(if args_json.is_empty() { "{}" } else { args_json }, "prompt arguments")?;
            // Policy first: a refused get sends nothing (not even the listing) and asks no `auth`.
            let details =
                format!("\"name\":{},\"args\":{}", json_string(name), serde_json::Value::Object(args.clone()));
            let request = policy::session_request_json("prompt", "get", server, &details);
            let connection = self.gated(slot, Some((&format!("the prompt {}", shown(name)), request)), None).await?;
            requests::require(&connection.session, "prompts", server, "prompts/get")?;
            let listed = prompts::list(&connection, &self.opts(None)).await?;
            prompts::validate(prompts::find(&listed.items, name)?, &args)?;
            let trace = trace.filter(|_| slot.entry.propagate_trace_context);
            prompts::get(&connection, name, &args, trace, &self.opts(None)).await
        };
        outcome.await.map_err(|e| self.caller_error(slot, "prompts/get", e))
    }

    /// `completion/complete` for `reference_json` (`{type: 'ref/prompt', name}` or `{type: 'ref/resource',
    /// uri}`) and `argument_json` (`{name, value}`), with `context_json` (an object of strings) the values
    /// already chosen; put to policy (`kind: 'completion'`).
    pub async fn complete(
        &self,
        server: &str,
        reference_json: &str,
        argument_json: &str,
        context_json: &str,
    ) -> Result<Completion> {
        let slot = self.slot(server)?;
        let outcome = async {
            let (reference, argument) = completion::parse_request(reference_json, argument_json)?;
            let context = if context_json.is_empty() {
                None
            } else {
                Some(requests::string_map(context_json, "completion context arguments")?)
            };
            let mut details = format!(
                "\"ref\":{},\"argument\":{}",
                serde_json::to_string(&reference).unwrap_or_default(),
                serde_json::to_string(&argument).unwrap_or_default()
            );
            // The values already chosen go to the server too: policy sees them.
            if let Some(context) = &context {
                details.push_str(&format!(
                    ",\"context\":{{\"arguments\":{}}}",
                    serde_json::Value::Object(context.clone())
                ));
            }
            let request = policy::session_request_json("completion", "complete", server, &details);
            let connection = self.gated(slot, Some(("a completion", request)), None).await?;
            requests::require(&connection.session, "completions", server, "completion/complete")?;
            completion::complete(&connection, &reference, &argument, context.as_ref(), &self.opts(None)).await
        };
        outcome.await.map_err(|e| self.caller_error(slot, "completion/complete", e))
    }
}

/// One kept subscription: its server, URI and stop, and the URI's wire lock (see `SubscriptionsInner::wire`).
struct Kept {
    slot: Arc<Supervisor>,
    uri: String,
    stop: CancellationToken,
    task: u64,
    wire: Arc<tokio::sync::Mutex<()>>,
    timeout: Duration,
}

/// How a keeping task tells its holders the outcome of its first subscribe.
struct Told {
    slot: Arc<Supervisor>,
    uri: String,
    task: u64,
    tell: tokio::sync::watch::Sender<Option<Result<()>>>,
}

impl Told {
    fn subscribed(self) {
        self.tell.send_replace(Some(Ok(())));
    }

    /// Refused (or the server unavailable): the URI is no longer kept by this task — its entry is
    /// removed if it is still this task's — and every holder waiting hears why.
    fn refused(self, error: McpError) {
        {
            let mut subscriptions = self.slot.subscriptions.inner.lock();
            let ours = subscriptions.kept.get(&self.uri).is_some_and(|kept| kept.task == self.task);
            if ours {
                subscriptions.kept.remove(&self.uri);
                subscriptions.pending.remove(&self.uri);
            }
        }
        self.tell.send_replace(Some(Err(error)));
    }
}

/// Keep one subscription to `uri` on whatever connection of `slot` is live until `stop`: in the session
/// era `resources/subscribe` on each new connection (the first one's outcome told to `subscribed`), in
/// 2026-07-28 a `subscriptions/listen` held open. On `stop` a session-era server is sent
/// `resources/unsubscribe`; a listen is cancelled. The URI's wire lock is held throughout, so the task
/// before this one for the same URI has sent its `resources/unsubscribe` before this one subscribes.
async fn keep(kept: Kept, first: Arc<Connection>, subscribed: tokio::sync::watch::Sender<Option<Result<()>>>) {
    let Kept { slot, uri, stop, task, wire, timeout } = kept;
    let _wire = tokio::select! {
        _ = stop.cancelled() => return,
        held = wire.lock_owned() => held,
    };
    let opts = RequestOptions { timeout, abort: None };
    let mut state = slot.state.subscribe();
    // Renewals from now on: a session renewed after this task subscribed is subscribed again.
    let mut renewals = slot.renewals.subscribe();
    renewals.borrow_and_update();
    let mut first = Some(first);
    let mut subscribed = Some(Told { slot: slot.clone(), uri: uri.clone(), task, tell: subscribed });
    loop {
        let connection = match first.take() {
            // The connection the caller was gated on, unless it was replaced while this task waited.
            Some(connection) if slot.live_connection().is_some_and(|c| Arc::ptr_eq(&c, &connection)) => connection,
            // Before the first outcome, the wait is a call's (bounded, failing at once on a failed
            // server); after it, the subscription waits for the server to come back, however long.
            _ if subscribed.is_some() => {
                let live = tokio::select! {
                    _ = stop.cancelled() => return,
                    live = super::calls::wait_live(&slot, timeout) => live,
                };
                match live.map(|()| slot.live_connection()) {
                    Ok(Some(connection)) => connection,
                    unreached => {
                        let error = unreached.err().unwrap_or_else(|| slot.unavailable());
                        if let Some(told) = subscribed.take() {
                            told.refused(error);
                        }
                        return;
                    }
                }
            }
            _ => {
                let live = tokio::select! {
                    _ = stop.cancelled() => return,
                    live = state.wait_for(|s| *s == State::Live) => live.is_ok(),
                };
                if !live {
                    return; // the supervisor is gone
                }
                match slot.live_connection() {
                    Some(connection) => connection,
                    // Lost again between the state and the connection: wait for the next change, still kept.
                    None => {
                        tokio::select! {
                            _ = stop.cancelled() => return,
                            _ = state.changed() => {}
                        }
                        continue;
                    }
                }
            }
        };
        if connection.is_modern() {
            if let Some(told) = subscribed.take() {
                told.subscribed();
            }
            let abort = AbortHandle::default();
            let filter = resources::listen_filter(&uri);
            tokio::select! {
                _ = stop.cancelled() => {
                    abort.abort();
                    return;
                }
                _ = connection.listen(&filter, Some(&abort)) => {}
            }
            // Ended by the server or with the connection: listen again on what is live, after a pause.
            tokio::select! {
                _ = stop.cancelled() => return,
                _ = tokio::time::sleep(RELISTEN_DELAY) => {}
            }
            continue;
        }
        // Not raced against `stop`: a subscribe already sent is seen through (bounded by the timeout), so
        // a stop meanwhile is answered with an unsubscribe below, not left subscribed on the server.
        if stop.is_cancelled() {
            return;
        }
        let outcome = resources::subscribe(&connection, &uri, &opts).await;
        match (subscribed.take(), outcome) {
            (Some(told), Ok(())) => told.subscribed(),
            (Some(told), Err(error)) => {
                told.refused(error);
                return;
            }
            (None, Err(error)) => {
                tracing::debug!(server = %slot.entry.name, code = error.code(), "resource re-subscription failed")
            }
            (None, Ok(())) => {}
        }
        // Session era: held until the connection is replaced (the server lost and recovered), its HTTP
        // session is renewed (a new session has no subscriptions), or `stop`. Checked outside `wait_for`:
        // its predicate runs under the state watch's read lock, and `live_connection()` takes the
        // connection lock, which going live holds while it writes the state.
        let replaced = async {
            while slot.live_connection().is_some_and(|c| Arc::ptr_eq(&c, &connection)) {
                tokio::select! {
                    changed = state.changed() => if changed.is_err() { break },
                    renewed = renewals.changed() => {
                        renewals.borrow_and_update();
                        if renewed.is_err() || slot.live_connection().is_some_and(|c| Arc::ptr_eq(&c, &connection)) {
                            break;
                        }
                    }
                }
            }
        };
        tokio::select! {
            _ = stop.cancelled() => {
                if slot.live_connection().is_some_and(|c| Arc::ptr_eq(&c, &connection)) {
                    let _ = resources::unsubscribe(&connection, &uri, &opts).await;
                }
                return;
            }
            _ = replaced => {}
        }
    }
}

fn capability_list(capability: &str) -> &'static str {
    match capability {
        "prompts" => "prompts",
        "skills" => "skills",
        _ => "resources",
    }
}

/// A policy request's details with `origin` added (`"model"`: asked by the model through a local tool).
pub(super) fn with_origin(mut details: String, origin: Option<&str>) -> String {
    if let Some(origin) = origin {
        details.push_str(&format!(",\"origin\":{}", json_string(origin)));
    }
    details
}

pub(super) fn json_string(text: &str) -> String {
    serde_json::to_string(text).unwrap_or_default()
}

/// A server-given name or URI for an error message, cut short.
pub(super) fn shown(text: &str) -> String {
    let cut: String = text.chars().take(64).collect();
    format!("{cut:?}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn updates_pass_only_for_kept_uris_once_until_delivered() {
        let subscriptions = Subscriptions::default();
        assert!(!subscriptions.updated("note://a"), "not kept: dropped");
        let (_tell, first) = tokio::sync::watch::channel(None);
        subscriptions
            .inner
            .lock()
            .kept
            .insert("note://a".into(), KeptEntry { holders: 1, stop: CancellationToken::new(), task: 0, first });
        assert!(subscriptions.updated("note://a"));
        assert!(!subscriptions.updated("note://a"), "one pending at a time");
        assert!(!subscriptions.updated("note://b"));
        subscriptions.delivered("note://a");
        assert!(subscriptions.updated("note://a"));
    }

    #[test]
    fn list_announcements_coalesce_until_listed() {
        let pending = ListsPending::default();
        assert!(pending.announce("resources"));
        assert!(!pending.announce("resources"));
        assert!(pending.announce("prompts"));
        pending.listed("resources");
        assert!(pending.announce("resources"));
        assert!(!pending.announce("prompts"));
    }
}
