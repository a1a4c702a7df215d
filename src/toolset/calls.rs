//! The call router. A call is admitted against the current route table, waits at its gates if it has
//! any (`policy.decide`/`ask`, `auth`, the server still connecting), and is then checked once more,
//! against the table current at that moment, while holding the publication lock for reading: nothing
//! can be published between that last check and the write of the call's bytes.
//!
//! Every call completes exactly once: an outcome from its server, a refusal, or — if the task carrying
//! it panics or is dropped — `mcp_internal_error` from [`CallCompletion`]'s `Drop`.

use super::local;
use super::routes::{Route, RouteTable};
use super::supervisor::{State, Supervisor};
use super::ToolsetState;
use crate::diagnostics::Diagnostic;
use crate::error::{McpError, Result};
use crate::guard::policy;
use crate::guard::server_text;
use crate::limits::MAX_PARAM_HEADER_VALUE_BYTES;
use crate::projection::ProjectedTool;
use crate::protocol::call_context::CallContext;
use crate::protocol::param_headers::{self, ParamHeader, ParamHeaders};
use crate::schema::SchemaError;
use crate::session::connection::{AbortHandle, Completion, Connection, HeaderMismatch, Headers, Reply, StartCall};
use crate::session::outcome::{raw_outcome, tool_outcome};
use reqwest::header::{HeaderName, HeaderValue};
use serde_json::value::RawValue;
use std::collections::HashMap;
use std::sync::{Arc, Weak};

/// One server's share of a batch of calls: its live connection and the calls admitted to it.
type ServerBatch = (Arc<Connection>, Vec<(CallRequest, Route)>);

/// One tool call as the caller hands it over.
pub struct CallRequest {
    pub call_id: u32,
    /// Non-zero when the caller may abort it with [`super::Toolset::abort`].
    pub abort_id: u32,
    pub name: String,
    /// The arguments, checked as JSON once, here; `None` if they are not JSON (refused by `admit`).
    arguments: Option<Box<RawValue>>,
    /// The run, tool call and idempotency key it belongs to; a bad context is refused by `admit`.
    context: Result<CallContext>,
    /// The caller listens to its progress (`onProgress`).
    pub progress: bool,
    /// A measured call's JSON-RPC id, once it was sent (the last sending's, after a resend to a server
    /// that came back), for its report (`CallReport::request_id`).
    sent_id: Option<Arc<std::sync::atomic::AtomicU64>>,
}

impl CallRequest {
    pub fn new(call_id: u32, abort_id: u32, name: String, arguments_json: String) -> Self {
        // Validates without copying: the text becomes the RawValue.
        let arguments = RawValue::from_string(arguments_json).ok();
        CallRequest {
            call_id,
            abort_id,
            name,
            arguments,
            context: Ok(CallContext::default()),
            progress: false,
            sent_id: None,
        }
    }

    /// With its progress delivered to the sink ([`CallSink::progress`]).
    pub fn with_progress(mut self) -> Self {
        self.progress = true;
        self
    }

    /// With the caller's `{ runId?, toolCallId?, idempotencyKey? }` (JSON).
    pub fn with_context(mut self, context_json: &str) -> Self {
        self.context = CallContext::parse(context_json);
        if self.context.as_ref().is_ok_and(|c| c.measured) {
            self.sent_id = Some(Arc::default());
        }
        self
    }

    fn context(&self) -> &CallContext {
        self.context.as_ref().expect("admitted calls have a valid context")
    }

    /// Its `params._meta` members (idempotency key, trace context unless `propagate_trace` is false).
    fn caller_meta(&self, propagate_trace: bool) -> Option<Box<str>> {
        self.context().meta_members(propagate_trace)
    }

    /// The caller records it: the moment the engine took it, to report its time with the outcome.
    fn measured_from(&self) -> Option<std::time::Instant> {
        self.context.as_ref().is_ok_and(|c| c.measured).then(std::time::Instant::now)
    }

    fn arguments(&self) -> &RawValue {
        self.arguments.as_deref().expect("admitted calls have JSON arguments")
    }

    /// The call again, with copies of its arguments and context: what an HTTP call keeps, so that one an
    /// unreachable server never received can go to what comes back.
    fn unsent_copy(&self) -> CallRequest {
        CallRequest {
            call_id: self.call_id,
            abort_id: self.abort_id,
            name: self.name.clone(),
            arguments: self.arguments.clone(),
            context: Ok(self.context().clone()),
            progress: self.progress,
            sent_id: self.sent_id.clone(),
        }
    }

    /// The arguments, handed over to be sent (once).
    fn take_arguments(&mut self) -> Box<RawValue> {
        self.arguments.take().expect("admitted calls have JSON arguments, sent once")
    }
}

/// Receives every call's outcome: the raw result JSON, or the error.
pub trait CallSink: Send + Sync + 'static {
    fn complete(&self, call_id: u32, outcome: Result<Box<str>>);
    /// The outcome of a call its caller measures (`CallContext::measured`), with the engine's report.
    fn complete_measured(&self, call_id: u32, outcome: Result<Box<str>>, _report: &crate::telemetry::CallReport) {
        self.complete(call_id, outcome);
    }
    /// A progress update of a call whose caller listens (`{"progress", "total"?, "message"?}` as JSON,
    /// validated, redacted and bounded: `progress::Progress::to_json`). Not after its completion was handed
    /// over, but for a race between two of an HTTP session's streams (JavaScript drops such a late one).
    fn progress(&self, _call_id: u32, _update_json: String) {}
}

/// One listening call's progress, on its way to the sink under the call's id, the message redacted with
/// its server's secrets.
struct CallProgress {
    call_id: u32,
    secrets: Arc<crate::guard::redact::Secrets>,
    sink: Arc<dyn CallSink>,
}

impl crate::progress::ProgressListener for CallProgress {
    fn progress(&self, update: crate::progress::Progress) {
        self.sink.progress(self.call_id, update.to_json(&self.secrets));
    }
}

#[derive(Clone, Copy)]
enum ModelTool {
    Skills,
    Resources,
}

enum Admitted {
    /// Answered without a server (`mcp__describe_tool`, `mcp__search_tools`).
    Local,
    /// `mcp__skills` (`exposeSkills`) or `mcp__resources` (`exposeResources`): answered by the toolset,
    /// with requests to the servers concerned.
    ForModel(ModelTool),
    Remote(Route),
}

/// A call's completion that cannot be lost: completed explicitly, handed to the connection as its
/// reply, or — when dropped unused, which only a panic or a runtime shutdown does — failed with
/// `mcp_internal_error`.
struct CallCompletion {
    done: Option<Completion>,
    inner: Arc<ToolsetState>,
    server: Option<usize>,
    /// Where the call's outcome (and progress) goes.
    sink: Arc<dyn CallSink>,
}

impl CallCompletion {
    fn finish(mut self, outcome: Result<Box<RawValue>>) {
        (self.done.take().expect("completed once"))(outcome);
    }

    fn into_reply(mut self) -> Reply {
        Reply::Callback(self.done.take().expect("completed once"))
    }
}

impl Drop for CallCompletion {
    fn drop(&mut self) {
        let Some(done) = self.done.take() else { return };
        let doing = if std::thread::panicking() { "panicked" } else { "stopped" };
        let message = format!("the engine {doing} while handling this call; this is a bug in mcpferry");
        let server =
            self.server.map_or_else(|| super::LOCAL_SERVER.to_owned(), |i| self.inner.servers[i].entry.name.clone());
        self.inner.report(Diagnostic::InternalError { server, message: message.clone() });
        done(Err(McpError::Internal(message)));
    }
}

impl super::Toolset {
    /// Start tool calls; each outcome goes to `sink` under its `call_id`. Calls to one server go out in
    /// one write. With no `policy`, no `auth` and a ready server, nothing here waits or spawns: the
    /// request is written from the calling thread and answered from the transport's reader.
    pub fn start_calls(&self, calls: Vec<CallRequest>, sink: &Arc<dyn CallSink>) {
        let inner = &self.inner;
        // Held from admission to the write: the table admitted against is the one current at the write.
        let _no_publication = inner.publication.read();
        let table = inner.routes.load();
        let mut by_server: HashMap<usize, ServerBatch> = HashMap::new();
        for call in calls {
            match inner.admit(&table, &call) {
                Ok(Admitted::Local) => inner.start_local(call, sink.clone()),
                Ok(Admitted::ForModel(tool)) => inner.start_for_model(tool, call, sink.clone()),
                Ok(Admitted::Remote(route)) => {
                    let slot = &inner.servers[route.server];
                    let ungated = inner.hooks.decide.is_none() && !(slot.entry.is_http() && inner.hooks.auth.is_some());
                    // Live with its connection, read together: a server just lost waits like one reconnecting.
                    let live = if ungated { slot.live_connection() } else { None };
                    if let Some(connection) = live {
                        by_server.entry(route.server).or_insert_with(|| (connection, Vec::new())).1.push((call, route));
                    } else {
                        // Registered now, not in the task, so an abort that arrives before it runs is not lost.
                        let abort = (call.abort_id != 0).then(|| inner.register_abort(call.abort_id));
                        let done = inner.call_completion(Some(&route), &call, sink);
                        inner.tasks.spawn(inner.clone().call_gated(call, route, abort, done, Gate::All));
                    }
                }
                Err(error) => sink.complete(call.call_id, Err(error)),
            }
        }
        for (index, (connection, calls)) in by_server {
            let http = inner.servers[index].entry.is_http();
            let modern_http = http && connection.is_modern();
            let mut ready = Vec::with_capacity(calls.len());
            for (call, route) in calls {
                match mirrored_params(http, route.param_headers.as_deref(), call.arguments()) {
                    Ok(headers) => ready.push((call, route, headers)),
                    Err(error) => sink.complete(call.call_id, Err(error)),
                }
            }
            let aborts: Vec<Option<Arc<AbortHandle>>> = ready
                .iter()
                .map(|(call, ..)| (call.abort_id != 0).then(|| inner.register_abort(call.abort_id)))
                .collect();
            let starts: Vec<StartCall> = ready
                .iter_mut()
                .zip(&aborts)
                .map(|((call, route, headers), abort)| StartCall {
                    reply: Reply::Callback(match http {
                        true => inner.unless_unreachable(call, route, abort.clone(), &connection, sink),
                        false => inner.completion(Some(&*route), call, sink),
                    }),
                    remote_name: &route.remote_name,
                    arguments: call.take_arguments(),
                    abort: abort.clone(),
                    headers: std::mem::take(headers),
                    on_header_mismatch: modern_http.then(|| Relister::for_call(inner, call, route)),
                    caller_meta: call.caller_meta(inner.servers[route.server].entry.propagate_trace_context),
                    admitted: http.then(|| AdmittedRoute::for_call(inner, call, route)),
                    progress: inner.progress_listener(call, route, sink),
                    sent_id: call.sent_id.clone(),
                })
                .collect();
            connection.start_calls(starts, inner.timeout);
        }
    }
}

impl ToolsetState {
    /// The checks every call passes before anything is sent: open, known, not quarantined, arguments an object.
    fn admit(&self, table: &RouteTable, call: &CallRequest) -> Result<Admitted> {
        if self.cancel.is_cancelled() {
            return Err(McpError::Closed);
        }
        let name = call.name.as_str();
        if local::is_local(name) && table.any_abbreviated() {
            return Ok(Admitted::Local);
        }
        if name == local::MCP_SKILLS && self.expose_skills {
            return Ok(Admitted::ForModel(ModelTool::Skills));
        }
        if name == local::MCP_RESOURCES && self.expose_resources {
            return Ok(Admitted::ForModel(ModelTool::Resources));
        }
        let route = table.routes.get(name).cloned().ok_or_else(|| unavailable(name))?;
        if route.quarantined {
            return Err(quarantined(name));
        }
        let is_object = call.arguments.as_deref().is_some_and(|raw| raw.get().starts_with('{'));
        if !is_object {
            return Err(McpError::InvalidArguments("tool arguments must be a JSON object".to_owned()));
        }
        if let Err(error) = &call.context {
            return Err(McpError::InvalidArguments(error.to_string()));
        }
        if self.validation.arguments {
            let schema = route.definition.input_schema.get();
            route.schemas.check_arguments(name, schema, call.arguments(), |error| {
                self.schema_unusable(&route, "inputSchema", error)
            })?;
        }
        Ok(Admitted::Remote(route))
    }

    /// Reported once per tool definition whose schema the engine cannot use; that check is then skipped.
    fn schema_unusable(&self, route: &Route, which: &'static str, error: &SchemaError) {
        {
            let mut reported = self.schemas_reported.lock();
            // Per server too: two entries of one toolset may list the same catalogue, hence share its schemas.
            let this = |(schemas, w, server): &(std::sync::Weak<_>, &str, usize)| {
                *w == which && *server == route.server && std::ptr::eq(schemas.as_ptr(), Arc::as_ptr(&route.schemas))
            };
            if reported.iter().any(this) {
                return;
            }
            reported.retain(|(schemas, _, _)| schemas.strong_count() > 0);
            reported.push((Arc::downgrade(&route.schemas), which, route.server));
        }
        let server = &self.servers[route.server].entry.name;
        let tool = &route.remote_name;
        self.report(Diagnostic::ToolSchemaInvalid {
            server: server.clone(),
            tool: tool.to_string(),
            message: format!(
                "the {which} of tool {tool:?} of server {server:?} cannot be used for validation ({error}); that check is skipped for this tool"
            ),
        });
    }

    /// Where one call's outcome goes: the `isError` check, the output schema, withholding the server's
    /// error text, redaction, the abort registry, the sink. `route` is `None` for local tools.
    fn completion(self: &Arc<Self>, route: Option<&Route>, call: &CallRequest, sink: &Arc<dyn CallSink>) -> Completion {
        let (inner, sink, call_id, abort_id) = (self.clone(), sink.clone(), call.call_id, call.abort_id);
        // A single-server client hands the server's result over as sent: `isError` included, and not
        // checked against the tool's outputSchema (its caller judges the result).
        let raw = self.client_mode.load(std::sync::atomic::Ordering::Relaxed);
        let server = route.map(|r| r.server);
        // Only tools with an outputSchema pay for the check (and for keeping their name for its error).
        let output_check = route
            .filter(|r| !raw && self.validation.results && r.definition.output_schema.is_some())
            .map(|r| (r.clone(), call.name.clone()));
        // Only under exposeServerErrors: false, to name the call whose error text was withheld.
        let withholding = server.filter(|_| !self.validation.expose_server_errors).map(|_| call.name.clone());
        // Timed only when someone listens: the hot path pays a branch, not a clock read.
        let started = tracing::enabled!(tracing::Level::DEBUG).then(|| {
            let server_name = server.map_or(super::LOCAL_SERVER, |i| self.servers[i].entry.name.as_str());
            tracing::debug!(toolset = self.log_id, server = %server_name, tool = %call.name, call_id, "call started");
            (std::time::Instant::now(), call.name.clone())
        });
        let measured = call.measured_from();
        let sent_id = call.sent_id.clone();
        Box::new(move |outcome| {
            if abort_id != 0 {
                inner.aborts.lock().remove(&abort_id);
            }
            // Read before the error is withheld or redacted: the code is the server's, a number.
            let rpc_code = measured.and(outcome.as_ref().err()).and_then(crate::telemetry::rpc_code);
            // Local answers are ours: no `isError` to look for, no server secret to redact.
            let outcome = match server {
                Some(index) => {
                    let mut outcome = if raw { raw_outcome(outcome) } else { tool_outcome(outcome) };
                    if let (Ok(result), Some((route, name))) = (&outcome, &output_check) {
                        let schema = route.definition.output_schema.as_ref().map_or("true", |s| s.get());
                        let expose = inner.validation.expose_server_errors;
                        let checked = route.schemas.check_result(name, schema, result, expose, |e| {
                            inner.schema_unusable(route, "outputSchema", e)
                        });
                        if let Err(error) = checked {
                            outcome = Err(error);
                        }
                    }
                    let secrets = &inner.servers[index].secrets;
                    if let (Some(tool), Err(error)) = (&withholding, &outcome) {
                        if server_text::may_quote_server(error) {
                            inner.report(Diagnostic::ServerErrorWithheld {
                                server: inner.servers[index].entry.name.clone(),
                                tool: tool.clone(),
                                error_code: error.code(),
                                message: server_text::withheld_text(error, secrets),
                            });
                        }
                        outcome = outcome.map_err(server_text::withhold);
                    }
                    outcome.map(Box::<str>::from).map_err(|e| e.redacted(secrets))
                }
                None => outcome.map(Box::<str>::from),
            };
            if let Some((started, tool)) = started {
                let server_name = server.map_or(super::LOCAL_SERVER, |i| inner.servers[i].entry.name.as_str());
                let code = outcome.as_ref().err().map_or("ok", McpError::code);
                let elapsed_us = started.elapsed().as_micros() as u64;
                tracing::debug!(toolset = inner.log_id, server = %server_name, tool = %tool, call_id, code, elapsed_us, "call ended");
            }
            // No lock is taken here: this runs on whichever thread read the answer, or ended the connection.
            match measured {
                Some(started) => {
                    let request_id =
                        sent_id.map(|id| id.load(std::sync::atomic::Ordering::Relaxed)).filter(|id| *id != 0);
                    let report = crate::telemetry::CallReport { elapsed: started.elapsed(), rpc_code, request_id };
                    sink.complete_measured(call_id, outcome, &report);
                }
                None => sink.complete(call_id, outcome),
            }
        })
    }

    fn call_completion(
        self: &Arc<Self>,
        route: Option<&Route>,
        call: &CallRequest,
        sink: &Arc<dyn CallSink>,
    ) -> CallCompletion {
        CallCompletion {
            done: Some(self.completion(route, call, sink)),
            inner: self.clone(),
            server: route.map(|r| r.server),
            sink: sink.clone(),
        }
    }

    /// `mcp__describe_tool` / `mcp__search_tools`, answered on the blocking pool: building the search
    /// index of a big catalogue takes tens of milliseconds, which the JavaScript thread must not wait.
    fn start_local(self: &Arc<Self>, call: CallRequest, sink: Arc<dyn CallSink>) {
        let done = self.call_completion(None, &call, &sink);
        let table = self.routes.load_full();
        self.tasks.spawn(async move {
            let arguments = call.arguments.as_deref().map_or(String::new(), |a| a.get().to_owned());
            let answered = tokio::task::spawn_blocking(move || local::answer(&table, &call.name, &arguments)).await;
            let outcome = match answered {
                Ok(outcome) => outcome.map(|text| RawValue::from_string(text.into()).expect("local answers are JSON")),
                Err(e) => Err(super::panic_error("answering a local tool", e)),
            };
            done.finish(outcome);
        });
    }

    /// `mcp__skills` or `mcp__resources`: their loads and reads are requests to the server concerned,
    /// through the gates of `toolset::skills` and `toolset::session` (policy `kind: 'skill'` or
    /// `'resource'`, readiness, `auth`).
    fn start_for_model(self: &Arc<Self>, tool: ModelTool, call: CallRequest, sink: Arc<dyn CallSink>) {
        let done = self.call_completion(None, &call, &sink);
        let toolset = super::Toolset { inner: self.clone() };
        // An abort of the call ends its wait (policy, the server, a read) at once; what was asked is dropped.
        let abort = (call.abort_id != 0).then(|| self.register_abort(call.abort_id));
        self.tasks.spawn(async move {
            let arguments = call.arguments.as_deref().map_or("{}", |a| a.get());
            let answering = async {
                match tool {
                    ModelTool::Skills => toolset.answer_skills_tool(arguments, abort.as_deref()).await,
                    ModelTool::Resources => toolset.answer_resources_tool(arguments, abort.as_deref()).await,
                }
            };
            let outcome = match &abort {
                Some(abort) => tokio::select! {
                    biased;
                    _ = abort.wait() => Err(McpError::Aborted),
                    outcome = answering => outcome,
                },
                None => answering.await,
            };
            done.finish(outcome.map(|text| RawValue::from_string(text.into()).expect("local answers are JSON")));
        });
    }

    /// A call that must wait first: for `policy.decide`, for `auth`, or for its server to be ready.
    async fn call_gated(
        self: Arc<Self>,
        mut call: CallRequest,
        route: Route,
        abort: Option<Arc<AbortHandle>>,
        done: CallCompletion,
        gates: Gate,
    ) {
        let index = route.server;
        let slot = &self.servers[index];
        let gate = async {
            if self.hooks.decide.is_some() && gates == Gate::All {
                let request = policy::request_json(
                    &call.name,
                    &slot.entry.name,
                    &route.remote_name,
                    call.arguments(),
                    call.context(),
                );
                policy::authorize(self.hooks.decide.as_deref(), self.hooks.ask.as_deref(), &call.name, request).await?;
            }
            wait_live(slot, self.timeout).await?;
            if slot.entry.is_http() && self.hooks.auth.is_some() {
                // Re-resolved on every call, so a rotated token takes effect without reconnecting.
                slot.authenticate().await?;
            }
            Ok(())
        };
        let gated: Result<()> = tokio::select! {
            biased;
            _ = self.cancel.cancelled() => Err(McpError::Closed),
            _ = async { match &abort { Some(a) => a.wait().await, None => std::future::pending().await } } => Err(McpError::Aborted),
            gated = gate => gated,
        };
        if let Err(error) = gated {
            return done.finish(Err(error));
        }
        // The last check, against the table current now; nothing is published until the bytes are out.
        let _no_publication = self.publication.read();
        match self.recheck(&call.name, &route) {
            Ok((connection, params)) => {
                // The designated parameters of the table current now: the route admitted may have been
                // projected from storage, before the server's era was known.
                let headers = match mirrored_params(slot.entry.is_http(), params.as_deref(), call.arguments()) {
                    Ok(headers) => headers,
                    Err(error) => return done.finish(Err(error)),
                };
                let modern_http = slot.entry.is_http() && connection.is_modern();
                let progress = self.progress_listener(&call, &route, &done.sink);
                let reply = match (slot.entry.is_http(), gates) {
                    (true, Gate::All) => {
                        Reply::Callback(self.unless_unreachable_then(&call, &route, abort.clone(), &connection, done))
                    }
                    _ => done.into_reply(),
                };
                let start = StartCall {
                    remote_name: &route.remote_name,
                    arguments: call.take_arguments(),
                    abort: abort.clone(),
                    reply,
                    headers,
                    on_header_mismatch: modern_http.then(|| Relister::for_call(&self, &call, &route)),
                    caller_meta: call.caller_meta(slot.entry.propagate_trace_context),
                    admitted: slot.entry.is_http().then(|| AdmittedRoute::for_call(&self, &call, &route)),
                    progress,
                    sent_id: call.sent_id.clone(),
                };
                connection.start_calls([start], self.timeout);
            }
            Err(error) => done.finish(Err(error)),
        }
    }

    /// An HTTP call's reply: its outcome, unless the server could not be reached at all
    /// (`McpError::Unreachable`: nothing was delivered), in which case the call waits for the server to come
    /// back, like one made while it is reconnecting, and goes once to what came back — checked again, not
    /// asked of `policy` again. Once only: a second unreachable server is the call's outcome.
    fn unless_unreachable(
        self: &Arc<Self>,
        call: &CallRequest,
        route: &Route,
        abort: Option<Arc<AbortHandle>>,
        sent_on: &Arc<Connection>,
        sink: &Arc<dyn CallSink>,
    ) -> Completion {
        let done = self.call_completion(Some(route), call, sink);
        self.unless_unreachable_then(call, route, abort, sent_on, done)
    }

    fn unless_unreachable_then(
        self: &Arc<Self>,
        call: &CallRequest,
        route: &Route,
        abort: Option<Arc<AbortHandle>>,
        sent_on: &Arc<Connection>,
        done: CallCompletion,
    ) -> Completion {
        let (inner, again, route, sent_on) = (self.clone(), call.unsent_copy(), route.clone(), Arc::downgrade(sent_on));
        Box::new(move |outcome| match outcome {
            Err(McpError::Unreachable(_)) if !inner.cancel.is_cancelled() => {
                let task = inner.clone().after_unreachable(again, route, abort, sent_on, done);
                inner.tasks.spawn(task);
            }
            outcome => done.finish(outcome),
        })
    }

    async fn after_unreachable(
        self: Arc<Self>,
        call: CallRequest,
        route: Route,
        abort: Option<Arc<AbortHandle>>,
        sent_on: Weak<Connection>,
        done: CallCompletion,
    ) {
        let slot = &self.servers[route.server];
        // The transport ends the connection right after failing the call: wait for the supervisor to take it.
        let mut state = slot.state.subscribe();
        let deadline = tokio::time::Instant::now() + self.timeout;
        while slot.live_connection().is_some_and(|live| std::ptr::eq(Arc::as_ptr(&live), sent_on.as_ptr())) {
            if tokio::time::timeout_at(deadline, state.changed()).await.is_err() {
                return done.finish(Err(slot.unavailable()));
            }
        }
        self.call_gated(call, route, abort, done, Gate::ServerOnly).await
    }

    /// Whether a call admitted earlier may still go where it was admitted to: the current table must
    /// route its name to the same server tool, unquarantined and with the definition the call was
    /// approved against, and the server must be ready. Called under the publication read lock; the
    /// connection to send on and the current route's designated parameters.
    fn recheck(&self, name: &str, admitted: &Route) -> Result<(Arc<Connection>, Option<ParamHeaders>)> {
        if self.cancel.is_cancelled() {
            return Err(McpError::Closed);
        }
        let table = self.routes.load();
        let current = still_routed(&table, name, admitted.server, &admitted.remote_name, &admitted.definition)?;
        let slot = &self.servers[admitted.server];
        match slot.live_connection() {
            Some(connection) => Ok((connection, current.param_headers.clone())),
            None => Err(slot.unavailable()),
        }
    }

    /// The listener of a call's progress, if its caller listens.
    fn progress_listener(
        &self,
        call: &CallRequest,
        route: &Route,
        sink: &Arc<dyn CallSink>,
    ) -> Option<Arc<dyn crate::progress::ProgressListener>> {
        call.progress.then(|| {
            let secrets = self.servers[route.server].secrets.clone();
            Arc::new(CallProgress { call_id: call.call_id, secrets, sink: sink.clone() })
                as Arc<dyn crate::progress::ProgressListener>
        })
    }

    /// Registered synchronously when the call starts; removed by its completion.
    fn register_abort(&self, abort_id: u32) -> Arc<AbortHandle> {
        let handle = Arc::new(AbortHandle::default());
        self.aborts.lock().insert(abort_id, handle.clone());
        handle
    }
}

/// Wait while the server is being connected, reconnected or reconciled: up to the call's timeout, or
/// for a reconnecting server up to `reconnect.waitMs` if that is shorter. A server that is not live then
/// fails the call, unsent, with `mcp_server_unavailable` naming its state and last error (a `failed`
/// one at once, asking its supervisor for an early attempt).
pub(super) async fn wait_live(slot: &Supervisor, timeout: std::time::Duration) -> Result<()> {
    let mut state = slot.state.subscribe();
    let wait = match *state.borrow_and_update() {
        State::Live => return Ok(()),
        State::Reconnecting => slot
            .shared
            .reconnect
            .and_then(|r| r.wait_ms)
            .map_or(timeout, |ms| timeout.min(std::time::Duration::from_millis(ms))),
        _ => timeout,
    };
    let settled =
        tokio::time::timeout(wait, state.wait_for(|s| !s.is_pending())).await.ok().and_then(|s| s.ok().map(|s| *s));
    match settled {
        Some(State::Live) => Ok(()),
        Some(State::Failed) => {
            slot.nudge();
            Err(slot.unavailable())
        }
        _ => Err(slot.unavailable()),
    }
}

/// Which gates a call still has to pass.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Gate {
    All,
    /// Approved already (it never reached its server): only the server's readiness and `auth`.
    ServerOnly,
}

/// The current route of `name`, if it still reaches the same server tool, unquarantined and with the
/// definition the call was admitted (and approved by policy) against.
fn still_routed<'t>(
    table: &'t RouteTable,
    name: &str,
    server: usize,
    remote_name: &str,
    admitted: &Arc<ProjectedTool>,
) -> Result<&'t Route> {
    let current = table.routes.get(name).filter(|r| r.server == server && &*r.remote_name == remote_name);
    let Some(current) = current else { return Err(unavailable(name)) };
    if current.quarantined {
        return Err(quarantined(name));
    }
    if !Arc::ptr_eq(&current.definition, admitted) && current.definition != *admitted {
        return Err(McpError::ToolUnavailable(format!(
            "tool {name:?} changed its definition while this call waited; it was not sent. Read the tool's new \
             definition and call it again if it still fits."
        )));
    }
    Ok(current)
}

/// An HTTP call's route as it was admitted, checked again before the call goes on a session that replaced
/// an expired one (a restarted server's, whose tools were just vetted again): sent only if the tool is
/// still what was approved.
struct AdmittedRoute {
    inner: Weak<ToolsetState>,
    name: String,
    server: usize,
    remote_name: Arc<str>,
    definition: Arc<ProjectedTool>,
}

impl AdmittedRoute {
    fn for_call(
        inner: &Arc<ToolsetState>,
        call: &CallRequest,
        route: &Route,
    ) -> Arc<dyn crate::transport::AdmittedCall> {
        Arc::new(AdmittedRoute {
            inner: Arc::downgrade(inner),
            name: call.name.clone(),
            server: route.server,
            remote_name: route.remote_name.clone(),
            definition: route.definition.clone(),
        })
    }
}

impl crate::transport::AdmittedCall for AdmittedRoute {
    fn still_admitted(&self) -> Result<()> {
        let inner = self.inner.upgrade().ok_or(McpError::Closed)?;
        let table = inner.routes.load();
        still_routed(&table, &self.name, self.server, &self.remote_name, &self.definition).map(drop)
    }
}

/// A modern HTTP call's answer to a `-32020` HeaderMismatch (see [`HeaderMismatch`]): re-list the
/// server's tools (once for all the calls refused meanwhile), then the headers of the route current
/// now, if the tool is still published there and vetted (not quarantined, not withheld). The
/// definition may differ from the one the call was admitted against, since new `x-mcp-header`
/// annotations are the likely cause; a change that matters is what drift vetting quarantines.
struct Relister {
    inner: Weak<ToolsetState>,
    name: String,
    server: usize,
    remote_name: Arc<str>,
    /// The server's listing count when the call was sent: a listing after it is new enough.
    sent_after_listing: u64,
    /// The server's `-32020` re-list count when the call was sent: one attempted after it answers.
    sent_after_relist: u64,
    /// The definition the call was admitted (and approved by policy) against.
    admitted: Arc<ProjectedTool>,
}

impl Relister {
    fn for_call(inner: &Arc<ToolsetState>, call: &CallRequest, route: &Route) -> Arc<dyn HeaderMismatch> {
        Arc::new(Relister {
            inner: Arc::downgrade(inner),
            name: call.name.clone(),
            server: route.server,
            remote_name: route.remote_name.clone(),
            sent_after_listing: inner.servers[route.server].listings(),
            sent_after_relist: inner.servers[route.server].relist_attempts(),
            admitted: route.definition.clone(),
        })
    }
}

impl HeaderMismatch for Relister {
    fn relisted<'a>(&'a self, arguments: &'a RawValue) -> futures_util::future::BoxFuture<'a, Result<Headers>> {
        Box::pin(async move {
            let inner = self.inner.upgrade().ok_or(McpError::Closed)?;
            inner.servers[self.server].relist(self.sent_after_listing, self.sent_after_relist).await?;
            let table = inner.routes.load();
            let current =
                table.routes.get(&self.name).filter(|r| r.server == self.server && r.remote_name == self.remote_name);
            let Some(current) = current else { return Err(unavailable(&self.name)) };
            if current.quarantined {
                return Err(quarantined(&self.name));
            }
            // Sent again only as the call policy approved: new `x-mcp-header` annotations are the change
            // a -32020 is about; any other (a description, another schema) needs a new decision, as for a
            // call that waited (`recheck`). This holds without a store, where nothing is quarantined.
            if !differs_only_in_param_headers(&self.admitted, &current.definition) {
                return Err(McpError::ToolUnavailable(format!(
                    "tool {:?} changed its definition when its server refused the call (-32020, not executed); it was \
                     not sent again. Read the tool's new definition and call it again if it still fits.",
                    self.name
                )));
            }
            mirrored_params(true, current.param_headers.as_deref(), arguments)
        })
    }
}

/// Whether `current` is `admitted` but for `x-mcp-header` annotations in its input schema. Only on the
/// rare `-32020` path, so parsing the two schemas here costs nothing that matters (their depth was
/// bounded when they were listed).
fn differs_only_in_param_headers(admitted: &ProjectedTool, current: &ProjectedTool) -> bool {
    if admitted == current {
        return true;
    }
    fn strip(value: &mut serde_json::Value) {
        match value {
            serde_json::Value::Object(map) => {
                map.remove(param_headers::ANNOTATION);
                map.values_mut().for_each(strip);
            }
            serde_json::Value::Array(items) => items.iter_mut().for_each(strip),
            _ => {}
        }
    }
    let schema = |tool: &ProjectedTool| {
        let mut value: Option<serde_json::Value> = serde_json::from_str(tool.input_schema.get()).ok();
        value.as_mut().map(strip);
        value
    };
    admitted.description == current.description
        && admitted.title == current.title
        && admitted.output_schema == current.output_schema
        && admitted.annotations == current.annotations
        && schema(admitted).is_some()
        && schema(admitted) == schema(current)
}

/// The `Mcp-Param-*` headers of one call. Only HTTP sends headers; a tool without designated parameters
/// costs nothing here.
fn mirrored_params(
    http: bool,
    params: Option<&[ParamHeader]>,
    arguments: &RawValue,
) -> Result<Vec<(HeaderName, HeaderValue)>> {
    let headers = match params {
        Some(params) if http => param_headers::headers_for(arguments, params),
        _ => return Ok(Vec::new()),
    };
    // A header is no place for a large value (servers and proxies refuse a few KiB): refused here, with the
    // argument named, rather than by a server that can't say why.
    match headers.iter().find(|(_, value)| value.len() > MAX_PARAM_HEADER_VALUE_BYTES) {
        Some((name, value)) => Err(McpError::InvalidArguments(format!(
            "the argument sent in the {name} header is {} bytes once encoded, over the {MAX_PARAM_HEADER_VALUE_BYTES} a header may carry",
            value.len()
        ))),
        None => Ok(headers),
    }
}

fn unavailable(name: &str) -> McpError {
    McpError::ToolUnavailable(format!(
        "tool {name:?} is not available: its server does not (or no longer) publish it. Do not call it again; \
         choose another tool."
    ))
}

pub(super) fn quarantined(name: &str) -> McpError {
    McpError::ToolQuarantined(format!(
        "tool {name:?} is quarantined: its definition changed since it was first trusted. Do not call it; \
         tell the user the server must be re-trusted."
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::toolset::{ToolsChange, Toolset, ToolsetEvents};
    use parking_lot::Mutex;

    #[derive(Default)]
    struct Recorder {
        outcomes: Mutex<Vec<(u32, std::result::Result<String, &'static str>)>>,
        diagnostics: Mutex<Vec<Diagnostic>>,
    }

    impl CallSink for Recorder {
        fn complete(&self, call_id: u32, outcome: Result<Box<str>>) {
            self.outcomes.lock().push((call_id, outcome.map(String::from).map_err(|e| e.code())));
        }
    }

    impl ToolsetEvents for Recorder {
        fn diagnostic(&self, diagnostic: &Diagnostic) {
            self.diagnostics.lock().push(diagnostic.clone());
        }
        fn tools_changed(&self, _: &ToolsChange) {}
    }

    fn toolset(recorder: &Arc<Recorder>) -> Toolset {
        let config = crate::config::parse(r#"{"servers":[]}"#).unwrap();
        let toolset = Toolset::new(config, Default::default(), None, recorder.clone()).unwrap();
        toolset.inner.take_startup_diagnostics();
        toolset
    }

    #[test]
    fn only_http_calls_of_annotated_tools_carry_param_headers() {
        let schema = serde_json::json!({ "type": "object", "properties": { "region": { "type": "string", "x-mcp-header": "Region" } } });
        let params = param_headers::param_headers_in(&schema).unwrap();
        let call = CallRequest::new(1, 0, "srv__t".into(), r#"{"region":"us-west1"}"#.into());
        let sent = mirrored_params(true, Some(&params), call.arguments()).unwrap();
        assert_eq!(sent.len(), 1);
        assert_eq!((sent[0].0.as_str(), sent[0].1.to_str().unwrap()), ("mcp-param-region", "us-west1"));
        assert!(mirrored_params(false, Some(&params), call.arguments()).unwrap().is_empty(), "stdio sends no headers");
        assert!(mirrored_params(true, None, call.arguments()).unwrap().is_empty());
        // A value too large for a header fails the call before anything is sent, naming the header.
        let huge = CallRequest::new(
            2,
            0,
            "srv__t".into(),
            format!(r#"{{"region":"{}"}}"#, "x".repeat(MAX_PARAM_HEADER_VALUE_BYTES + 1)),
        );
        let refused = mirrored_params(true, Some(&params), huge.arguments()).unwrap_err();
        assert_eq!(refused.code(), "mcp_invalid_arguments");
        assert!(refused.to_string().contains("mcp-param-region"), "{refused}");
    }

    #[tokio::test]
    async fn a_call_whose_task_panics_still_completes_once_with_an_internal_error() {
        let recorder = Arc::new(Recorder::default());
        let toolset = toolset(&recorder);
        let sink: Arc<dyn CallSink> = recorder.clone();
        let call = CallRequest::new(7, 0, "x__y".into(), "{}".into());
        let done = toolset.inner.call_completion(None, &call, &sink);
        let task = toolset.inner.tasks.spawn(async move {
            let _owned = done;
            panic!("a bug in a gate");
        });
        assert!(task.await.unwrap_err().is_panic());
        assert_eq!(*recorder.outcomes.lock(), [(7, Err("mcp_internal_error"))]);
        assert!(matches!(recorder.diagnostics.lock().as_slice(), [Diagnostic::InternalError { .. }]));
    }

    #[tokio::test]
    async fn a_completed_call_is_not_completed_again_when_dropped() {
        let recorder = Arc::new(Recorder::default());
        let toolset = toolset(&recorder);
        let sink: Arc<dyn CallSink> = recorder.clone();
        let call = CallRequest::new(8, 0, "x__y".into(), "{}".into());
        toolset.inner.call_completion(None, &call, &sink).finish(Err(McpError::Aborted));
        assert_eq!(*recorder.outcomes.lock(), [(8, Err("mcp_aborted"))]);
        assert!(recorder.diagnostics.lock().is_empty());
    }

    #[tokio::test]
    async fn close_fails_a_call_parked_at_a_gate_and_waits_for_its_task() {
        let recorder = Arc::new(Recorder::default());
        let toolset = toolset(&recorder);
        let sink: Arc<dyn CallSink> = recorder.clone();
        let call = CallRequest::new(9, 0, "x__y".into(), "{}".into());
        let done = toolset.inner.call_completion(None, &call, &sink);
        let inner = toolset.inner.clone();
        // A gate that never opens (an `ask` nobody answers), as call_gated waits on it.
        toolset.inner.tasks.spawn(async move {
            tokio::select! {
                _ = inner.cancel.cancelled() => done.finish(Err(McpError::Closed)),
                _ = std::future::pending::<()>() => {}
            }
        });
        toolset.close().await;
        assert_eq!(*recorder.outcomes.lock(), [(9, Err("mcp_connection_closed"))]);
        assert!(toolset.inner.tasks.is_empty(), "close() waited for the call's task");
    }
}
