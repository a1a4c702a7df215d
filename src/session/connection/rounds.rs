//! Sending a `tools/call` again: after a round of input (a 2026-07-28 `input_required` result, see
//! `session::mrtr`), and once after a `-32020` HeaderMismatch, with the headers a new listing gives.
//! Every path ends in the call's [`Reply`], so no caller waits forever.

use super::*;

pub type Headers = Vec<(reqwest::header::HeaderName, reqwest::header::HeaderValue)>;

/// The owner's side of a `-32020` HeaderMismatch on a `tools/call`: the server refused the request
/// before handling it, most likely because the client's copy of the tool's `x-mcp-header` annotations
/// is out of date. The owner re-lists the server's tools and answers with the headers the call must
/// carry now, or with why it must not be sent again (the tool is gone or failed vetting).
pub trait HeaderMismatch: Send + Sync {
    fn relisted<'a>(&'a self, arguments: &'a RawValue) -> futures_util::future::BoxFuture<'a, Result<Headers>>;
}

/// A modern-era call, kept to be sent again after a round of input (`input_required`).
pub(super) struct CallAgain {
    pub(super) name: Box<str>,
    pub(super) arguments: Box<RawValue>,
    pub(super) headers: Vec<(reqwest::header::HeaderName, reqwest::header::HeaderValue)>,
    pub(super) abort: Option<Arc<AbortHandle>>,
    pub(super) timeout: Duration,
    /// Set until the call has been sent again after a `-32020` (once at most).
    pub(super) on_header_mismatch: Option<Arc<dyn HeaderMismatch>>,
    /// This is that second sending.
    pub(super) resent_after_mismatch: bool,
    pub(super) caller_meta: Option<Box<str>>,
    pub(super) progress: Option<Arc<dyn ProgressListener>>,
}

/// The reply of round `round` of a call: a complete result (or a failure) goes to `reply`; an
/// `input_required` is fulfilled through the host (in a task the connection owns, stopped with it or
/// with the call's abort) and the call is sent again with a new id, the answers and the server's
/// `requestState` byte for byte. Every path ends in `reply`, so no caller waits forever.
pub(super) fn rounds(shared: Weak<ConnectionCore>, call: Arc<CallAgain>, reply: Reply, round: usize) -> Completion {
    Box::new(move |outcome| {
        let result = match outcome {
            Ok(result) => result,
            Err(McpError::Rpc { code: era::HEADER_MISMATCH, message, .. }) => {
                return resend_after_header_mismatch(shared, call, reply, round, message);
            }
            Err(e) => return reply.send(Err(e)),
        };
        // A nesting bomb is the depth check's to report (`tool_outcome`), not the parser's.
        if nesting::exceeds_depth(result.get().as_bytes(), MAX_JSON_DEPTH) {
            return reply.send(Ok(result));
        }
        let required = match crate::session::mrtr::input_required(&result) {
            Ok(None) => return reply.send(Ok(result)),
            Ok(Some(required)) => required,
            Err(e) => return reply.send(Err(e)),
        };
        if round >= crate::limits::MAX_INPUT_ROUNDS {
            return reply.send(Err(crate::session::mrtr::too_many_rounds()));
        }
        let Some(owner) = shared.upgrade() else { return reply.send(Err(McpError::Closed)) };
        let stop = owner.stop_rounds.clone();
        owner.rounds.spawn(async move {
            let Some(shared) = shared.upgrade() else { return reply.send(Err(McpError::Closed)) };
            let elicitor = shared.elicitations.as_ref().map(|e| e.elicitor.clone());
            let aborted = async {
                match &call.abort {
                    Some(abort) => abort.wait().await,
                    None => std::future::pending().await,
                }
            };
            let prompts = shared.round_prompts.clone();
            let fulfilling = async {
                // Rounds that ask the host nothing (state only) take no prompt slot.
                let _slot = match required.requests.is_empty() {
                    true => None,
                    false => Some(prompts.acquire_owned().await.map_err(|_| McpError::Closed)?),
                };
                crate::session::mrtr::fulfil(&required.requests, elicitor.as_deref()).await
            };
            let fulfilled = tokio::select! {
                biased;
                _ = stop.cancelled() => Err(McpError::Closed),
                _ = aborted => Err(McpError::Aborted),
                fulfilled = fulfilling => fulfilled,
            };
            let responses = match fulfilled {
                Ok(responses) => responses,
                Err(e) => return reply.send(Err(e)),
            };
            let state = required.request_state.as_deref();
            let params = |id, meta: Option<&str>| {
                Some(crate::session::mrtr::retry_params(
                    &mcp::call_tool_params(&call.name, &call.arguments, id, meta, call.caller_meta.as_deref()),
                    &responses,
                    state,
                ))
            };
            let next = Reply::Callback(rounds(Arc::downgrade(&shared), call.clone(), reply, round + 1));
            send_again(&shared, &call, params, next);
        });
    })
}

/// Send a kept call again under a new id (the params say what it carries this time).
fn send_again(
    shared: &Arc<ConnectionCore>,
    call: &CallAgain,
    params: impl FnOnce(RequestId, Option<&str>) -> Option<String>,
    next: Reply,
) {
    if let Some(mut message) =
        shared.register("tools/call", Some(&call.name), params, call.timeout, call.abort.as_deref(), next)
    {
        message.extra_headers = call.headers.clone();
        shared.listen_for_progress(&message, call.progress.clone());
        match shared.transport.get().and_then(Weak::upgrade) {
            Some(transport) => shared.dispatch(&transport, vec![message]),
            // The transport is gone: ending the connection fails this call with everything pending.
            None => {
                shared.end(McpError::Closed);
            }
        }
    }
}

/// `-32020` HeaderMismatch: the server refused the call before executing it, so sending it again is
/// not a replay of a call that ran. Once per call: the owner re-lists the tools (the annotations that
/// decide the `Mcp-Param-*` headers may have changed) and, if the tool is still published and vetted,
/// the call goes again with the headers of the new listing, under a new id and in the same round (an
/// `input_required` round's answers are not carried over: the server never saw them). A second
/// refusal fails the call.
fn resend_after_header_mismatch(
    shared: Weak<ConnectionCore>,
    call: Arc<CallAgain>,
    reply: Reply,
    round: usize,
    message: String,
) {
    let Some(hook) = call.on_header_mismatch.clone() else {
        let again = if call.resent_after_mismatch { " again, after the tools were re-listed" } else { "" };
        return reply.send(Err(McpError::Protocol(format!(
            "the server refused the call's headers{again} (-32020 HeaderMismatch: {message}); it was not executed"
        ))));
    };
    let Some(owner) = shared.upgrade() else { return reply.send(Err(McpError::Closed)) };
    let stop = owner.stop_rounds.clone();
    owner.rounds.spawn(async move {
        let aborted = async {
            match &call.abort {
                Some(abort) => abort.wait().await,
                None => std::future::pending().await,
            }
        };
        let relisted = tokio::select! {
            biased;
            _ = stop.cancelled() => Err(McpError::Closed),
            _ = aborted => Err(McpError::Aborted),
            relisted = hook.relisted(&call.arguments) => relisted,
        };
        let headers = match relisted {
            Ok(headers) => headers,
            Err(e) => return reply.send(Err(e)),
        };
        let Some(shared) = shared.upgrade() else { return reply.send(Err(McpError::Closed)) };
        let again = Arc::new(CallAgain {
            name: call.name.clone(),
            arguments: call.arguments.clone(),
            headers,
            abort: call.abort.clone(),
            timeout: call.timeout,
            on_header_mismatch: None,
            resent_after_mismatch: true,
            caller_meta: call.caller_meta.clone(),
            progress: call.progress.clone(),
        });
        let params = |id, meta: Option<&str>| {
            Some(mcp::call_tool_params(&again.name, &again.arguments, id, meta, again.caller_meta.as_deref()))
        };
        let next = Reply::Callback(rounds(Arc::downgrade(&shared), again.clone(), reply, round));
        send_again(&shared, &again, params, next);
    });
}
