//! Era negotiation, in one place: opening a connection (the modern era's `server/discover`, or
//! `initialize`, within one budget for the whole handshake) here; what each server was found to be,
//! remembered for the process, and when a reused answer sends an opening back to probe, in `memory.rs`.
//! The wire side (what an answer means, `_meta`) is `protocol::era`'s.

pub mod memory;

use super::*;

/// Why a connection could not be opened.
pub(super) enum Negotiation {
    Failed(McpError),
    /// The server's process ended on the modern probe: a session-based server that exits on an unknown
    /// request. Started again, it gets `initialize`.
    Restart,
}

/// How long the whole opening may take (`connectTimeoutMs`), and what aborts it: every request of the
/// handshake gets what is left, so a probe, `initialize` and a restart together take no longer.
pub(super) struct Budget<'a> {
    deadline: Instant,
    total: Duration,
    abort: Option<&'a AbortHandle>,
}

impl<'a> Budget<'a> {
    pub(super) fn new(handshake: &RequestOptions<'a>) -> Budget<'a> {
        Budget { deadline: Instant::now() + handshake.timeout, total: handshake.timeout, abort: handshake.abort }
    }

    /// What a request sent now may wait.
    fn left(&self) -> RequestOptions<'a> {
        RequestOptions { timeout: self.deadline.saturating_duration_since(Instant::now()), abort: self.abort }
    }

    /// A request that ran out of the budget timed out after the whole of it, not after what was left.
    pub(super) fn timed_out(&self, error: McpError) -> McpError {
        match error {
            McpError::Timeout { .. } => McpError::Timeout { after_ms: self.total.as_millis() as u64 },
            other => other,
        }
    }
}

/// Find the server's era and open it: `server/discover` first (unless it is known to be session-based),
/// then `initialize` if the answer was not a modern one. Over stdio both may be in flight at once (see
/// [`probe_stdio`]). A server remembered as session-based that refuses `initialize` with `-32022` naming
/// a modern version we speak has turned modern: it is asked `server/discover` at that version.
///
/// With a modern server's remembered discovery answer (`reuse`), nothing is asked over HTTP: the
/// connection is modern at once, and its first request is the check (the caller opens it again with
/// the probe if that request says the server is not what was remembered). Over stdio the probe is sent
/// anyway: the process is new each time (it may be another build of the server since), a
/// session-based child may ignore or die of a request it does not expect without `initialize` (which
/// the quiet period and the restart above are for), and asking a local pipe costs next to nothing.
pub(super) async fn negotiate(
    shared: &Arc<ConnectionCore>,
    transport: &Arc<dyn Transport>,
    budget: &Budget<'_>,
    hint: Option<Era>,
    reuse: Option<&memory::DiscoveryAnswer>,
) -> std::result::Result<SessionInfo, Negotiation> {
    let capabilities = shared.capabilities();
    if let Some(discovered) = reuse.filter(|_| transport.may_be_modern() && !transport.is_stdio()) {
        shared.modern.store(Some(ModernWire::new(discovered.version, &capabilities)));
        return Ok(SessionInfo::reusing(discovered));
    }
    let mut version = match hint {
        Some(Era::Modern(version)) => version,
        _ => era::MODERN_PROTOCOL_VERSION,
    };
    let mut refused = None;
    if hint == Some(Era::Legacy) || !transport.may_be_modern() {
        match handshake_with(shared, transport, &budget.left()).await {
            Err(e) if transport.may_be_modern() => match era::modern_version_named(&e) {
                Some(named) => {
                    version = named;
                    refused = Some(e);
                }
                None => return Err(Negotiation::Failed(e)),
            },
            done => return done.map_err(Negotiation::Failed),
        }
    }
    if transport.is_stdio() {
        return probe_stdio(shared, transport, budget, version, &capabilities, refused).await;
    }
    // Over HTTP one question at a time: a concurrent `initialize` would open a session on a modern server.
    let mut evidence = true;
    let mut retried = false;
    loop {
        shared.modern.store(Some(ModernWire::new(version, &capabilities)));
        let outcome = request(shared, transport, "server/discover", None, |_| None, &budget.left(), false).await;
        match era::classify(outcome, version) {
            era::Verdict::Modern(version, result) => return Ok(SessionInfo::discovered(version, result)),
            // Once: a server that refuses the version it just named is not worth a loop.
            era::Verdict::Retry(next) if !retried => {
                retried = true;
                version = next;
            }
            era::Verdict::Retry(_) => return Err(Negotiation::Failed(refused_again(version))),
            era::Verdict::Fatal(e) => return Err(Negotiation::Failed(e)),
            era::Verdict::Legacy => break,
            era::Verdict::Unknown => {
                evidence = false;
                break;
            }
        }
    }
    shared.modern.store(None);
    if shared.state.lock().ended.is_some() {
        return Err(Negotiation::Restart);
    }
    // `initialize` was refused as on a modern server, and the probe did not find one: nothing more to try.
    if let Some(refused) = refused {
        return Err(Negotiation::Failed(refused));
    }
    let mut session = handshake_with(shared, transport, &budget.left()).await.map_err(Negotiation::Failed)?;
    session.era_evidence = evidence;
    Ok(session)
}

fn refused_again(version: &str) -> McpError {
    McpError::Protocol(format!("the server refused protocol version {version} again after naming it as supported"))
}

/// Which request of a stdio probe an answer is for.
#[derive(Clone, Copy)]
enum Probe {
    Discover(&'static str),
    Initialize,
}

/// The requests of a stdio probe, by the index their answers come back with: what each asked, and while it
/// is pending `Some` of its id (`Some(None)`: refused before it was sent, its error on the way).
type Asked = Vec<(Probe, Option<Option<RequestId>>)>;

/// The stdio probe. A child process says nothing until it is ready, which may take a first `uvx` or
/// `docker run` download or a loaded machine's while: its silence is no evidence of an era. So
/// `server/discover` stays pending for the whole of `connectTimeoutMs`; once the server has read it (its
/// stdin pipe drained, where that can be told) and been quiet for `STDIO_PROBE_QUIET_MS` (or half the
/// budget) since, `initialize` goes out beside it, for a session-based server that ignores requests it
/// does not know. A server reads its pipe in order, so one that answers
/// `server/discover` has read it before `initialize`; the first answer that proves an era decides it:
///
/// - a discovery answer: modern, unless `initialize` is in flight too. Then its answer, read by the server
///   after the probe, says which era the connection serves from now on: refused (the Python SDK 2.x ties a
///   connection to its first request's era and answers `-32022`) or unanswered for `STDIO_PROBE_QUIET_MS`
///   more, modern; accepted (the TypeScript SDK 2.x's `serveStdio` falls back to a session when
///   `initialize` follows its probe), session-based, as below: never a session left half open;
/// - an `initialize` result: session-based, and the handshake is completed (`notifications/initialized`);
///   a discovery answer after it is dropped;
/// - `-32022` to `initialize` naming a modern version we speak: modern. `server/discover` is asked again
///   at that version, and whichever discovery answer comes first (the late one or the new) opens it;
/// - an error or a session-based answer to `server/discover`: `initialize` is sent at once if it was not.
async fn probe_stdio(
    shared: &Arc<ConnectionCore>,
    transport: &Arc<dyn Transport>,
    budget: &Budget<'_>,
    version: &'static str,
    capabilities: &serde_json::Map<String, serde_json::Value>,
    mut refused: Option<McpError>,
) -> std::result::Result<SessionInfo, Negotiation> {
    let (answers, mut answered) = tokio::sync::mpsc::unbounded_channel::<(usize, Result<Box<RawValue>>)>();
    let mut asked: Asked = Vec::new();
    let ask = |probe: Probe, asked: &mut Asked| {
        let index = asked.len();
        let answers = answers.clone();
        let opts = budget.left();
        let (method, params) = match probe {
            Probe::Discover(version) => {
                shared.modern.store(Some(ModernWire::new(version, capabilities)));
                ("server/discover", None)
            }
            Probe::Initialize => {
                shared.modern.store(None);
                ("initialize", Some(mcp::initialize_params(capabilities)))
            }
        };
        // Each probe is a request of its own for telemetry (`telemetry::operation`), told as it is answered;
        // but a JSON-RPC error only says which era the server speaks (the other probe is the handshake).
        // Nothing is timed or kept unless operations go somewhere.
        let watched = shared
            .events
            .wants_operations()
            .then(|| (shared.events.clone(), crate::telemetry::operation::Started::now(), Arc::new(AtomicU64::new(0))));
        let sent_id = watched.as_ref().map(|(_, _, sent_id)| sent_id.clone());
        let reply = Reply::Callback(Box::new(move |outcome| {
            if let Some((events, started, id_sent)) = watched {
                let id = Some(id_sent.load(Ordering::Relaxed)).filter(|id| *id != 0);
                if !matches!(outcome, Err(McpError::Rpc { .. })) {
                    let operation =
                        crate::telemetry::operation::Operation::request(method, None, id, started.stop(), &outcome);
                    events.operation(operation);
                }
            }
            let _ = answers.send((index, outcome));
        }));
        let message = shared.register(method, None, |_, meta| with_meta(params, meta), opts.timeout, opts.abort, reply);
        let id = message.as_ref().and_then(|m| m.request_id);
        if let (Some(id), Some(sent_id)) = (id, &sent_id) {
            sent_id.store(id, Ordering::Relaxed);
        }
        if let Some(message) = message {
            shared.dispatch(transport, vec![message]);
        }
        asked.push((probe, Some(id)));
    };
    let forget_all = |asked: &mut Asked| {
        for (_, pending) in asked.iter_mut() {
            if let Some(Some(id)) = pending.take() {
                shared.forget(id);
            }
        }
    };
    let quiet = Duration::from_millis(crate::limits::STDIO_PROBE_QUIET_MS).min(budget.total / 2);
    // The quiet period runs from when the child has read the probe: one still starting reads nothing.
    let mut read_at: Option<Instant> = None;
    let mut wake_at = Instant::now();
    let mut initialize_sent = refused.is_some();
    // One more `server/discover` at most: at a version the server named, by either request.
    let mut asked_again = false;
    let mut evidence = true;
    // A discovery answer, held while `initialize` (sent beside it) is answered, until `modern_by` at most.
    let mut modern: Option<(&'static str, era::DiscoverResult)> = None;
    let mut modern_by = budget.deadline;
    let open_modern = |asked: &mut Asked, modern: Option<(&'static str, era::DiscoverResult)>| {
        forget_all(asked);
        let (version, result) = modern.expect("a discovery answer is held");
        shared.modern.store(Some(ModernWire::new(version, capabilities)));
        SessionInfo::discovered(version, result)
    };
    let aborted = async {
        match budget.abort {
            Some(abort) => abort.wait().await,
            None => std::future::pending().await,
        }
    };
    tokio::pin!(aborted);
    ask(Probe::Discover(version), &mut asked);
    loop {
        let (index, outcome) = tokio::select! {
            biased;
            _ = &mut aborted => {
                forget_all(&mut asked);
                return Err(Negotiation::Failed(McpError::Aborted));
            }
            Some(answer) = answered.recv() => answer,
            _ = tokio::time::sleep_until(wake_at), if !initialize_sent => {
                let now = Instant::now();
                match read_at {
                    None if transport.input_unread() == Some(true) => {
                        wake_at = now + Duration::from_millis(crate::limits::STDIO_PROBE_READ_POLL_MS);
                    }
                    None => {
                        read_at = Some(now);
                        wake_at = now + quiet;
                    }
                    Some(_) => {
                        initialize_sent = true;
                        ask(Probe::Initialize, &mut asked);
                    }
                }
                continue;
            }
            _ = tokio::time::sleep_until(modern_by), if modern.is_some() => return Ok(open_modern(&mut asked, modern)),
        };
        let Some((probe, pending)) = asked.get_mut(index) else { continue };
        if pending.take().is_none() {
            continue; // forgotten
        }
        match *probe {
            Probe::Discover(at) => match era::classify(outcome, at) {
                era::Verdict::Modern(version, result) => {
                    let initializing =
                        asked.iter().any(|(probe, pending)| matches!(probe, Probe::Initialize) && pending.is_some());
                    if !initializing {
                        forget_all(&mut asked);
                        shared.modern.store(Some(ModernWire::new(version, capabilities)));
                        return Ok(SessionInfo::discovered(version, result));
                    }
                    // `initialize` is on its way too, and what the server makes of it says which era it
                    // serves from now on. Read in order after the probe, it is answered soon after it.
                    modern = Some((version, result));
                    modern_by = (Instant::now() + quiet).min(budget.deadline);
                }
                era::Verdict::Retry(next) if !asked_again => {
                    asked_again = true;
                    ask(Probe::Discover(next), &mut asked);
                }
                era::Verdict::Retry(_) => {
                    forget_all(&mut asked);
                    return Err(Negotiation::Failed(refused_again(at)));
                }
                era::Verdict::Fatal(e) => {
                    forget_all(&mut asked);
                    return Err(Negotiation::Failed(e));
                }
                era::Verdict::Legacy => {}
                era::Verdict::Unknown => evidence = false,
            },
            Probe::Initialize => match outcome {
                // Refused (or not answered) after the probe found a modern server: modern.
                Err(_) if modern.is_some() => return Ok(open_modern(&mut asked, modern)),
                Ok(raw) => {
                    forget_all(&mut asked);
                    shared.modern.store(None);
                    let mut session = initialized(transport, raw, &budget.left()).await.map_err(Negotiation::Failed)?;
                    session.era_evidence = evidence;
                    return Ok(session);
                }
                Err(e @ (McpError::Aborted | McpError::Closed)) => {
                    forget_all(&mut asked);
                    return Err(Negotiation::Failed(e));
                }
                Err(e) => {
                    if let Some(named) = era::modern_version_named(&e).filter(|_| !asked_again) {
                        asked_again = true;
                        ask(Probe::Discover(named), &mut asked);
                    }
                    refused = Some(e);
                }
            },
        }
        if modern.is_some() {
            continue;
        }
        // No era proven by this answer. A child that died of the probe is started again for `initialize`.
        if shared.state.lock().ended.is_some() {
            forget_all(&mut asked);
            shared.modern.store(None);
            return Err(Negotiation::Restart);
        }
        if asked.iter().any(|(_, pending)| pending.is_some()) {
            continue;
        }
        if !initialize_sent {
            initialize_sent = true;
            ask(Probe::Initialize, &mut asked);
            continue;
        }
        shared.modern.store(None);
        let failure = refused
            .unwrap_or_else(|| McpError::Protocol("the server answered neither server/discover nor initialize".into()));
        return Err(Negotiation::Failed(failure));
    }
}

async fn handshake_with(
    shared: &Arc<ConnectionCore>,
    transport: &Arc<dyn Transport>,
    opts: &RequestOptions<'_>,
) -> Result<SessionInfo> {
    let params = mcp::initialize_params(&shared.capabilities());
    let raw = request(shared, transport, "initialize", None, |_| Some(params), opts, false).await?;
    initialized(transport, raw, opts).await
}

/// Complete the session-based handshake `initialize` answered with `raw`: version check,
/// `notifications/initialized`.
async fn initialized(
    transport: &Arc<dyn Transport>,
    raw: Box<RawValue>,
    opts: &RequestOptions<'_>,
) -> Result<SessionInfo> {
    let init: InitializeResult = serde_json::from_str(raw.get())
        .map_err(|e| McpError::Protocol(format!("initialize returned a malformed result: {e}")))?;
    let protocol_version = mcp::check_negotiated_version(&init.protocol_version).map_err(McpError::Protocol)?;
    let initialized = Outbound::other(jsonrpc::notification("notifications/initialized", None));
    // Bounded like the request before it, and cancelled with it: a server that never answers the
    // `initialized` POST holds the handshake no longer than an unanswered `initialize` would.
    let completing = tokio::time::timeout(opts.timeout, transport.complete_handshake(initialized, protocol_version));
    let aborted = async {
        match opts.abort {
            Some(abort) => abort.wait().await,
            None => std::future::pending().await,
        }
    };
    tokio::select! {
        completed = completing => completed.map_err(|_| McpError::Timeout { after_ms: opts.timeout.as_millis() as u64 })??,
        _ = aborted => return Err(McpError::Aborted),
    }
    let info = init.server_info.unwrap_or_default();
    Ok(SessionInfo {
        protocol_version,
        server_name: info.name,
        server_version: info.version,
        capabilities: init.capabilities.names(),
        resources_subscribe: init.capabilities.resources_subscribe(),
        resources_list_changed: init.capabilities.list_changed("resources"),
        prompts_list_changed: init.capabilities.list_changed("prompts"),
        skills: init.capabilities.skills(),
        tools_list_changed: init.capabilities.tools.and_then(|t| t.list_changed).unwrap_or(false),
        instructions: init.instructions,
        era: Era::Legacy,
        era_evidence: true,
        discovery_reused: false,
    })
}

/// A request's params with the modern era's `_meta` members added, if it is sent in that era.
pub(super) fn with_meta(params: Option<String>, meta: Option<&str>) -> Option<String> {
    match meta {
        Some(meta) => Some(era::with_meta(params.as_deref(), meta)),
        None => params,
    }
}
