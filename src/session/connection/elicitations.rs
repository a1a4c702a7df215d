//! The server's `elicitation/create` requests: each answered through the host in a task this connection
//! owns, at most `MAX_ELICITATIONS_IN_FLIGHT` at once, all stopped when the connection ends. The rules
//! for what may be asked and answered are `session::elicitation`'s.

use super::*;

/// Elicitations: the host's answer is awaited in a task the connection owns, never inline.
impl ConnectionCore {
    /// Answer `elicitation/create` through the host: refused at once (invalid params) when it asks for
    /// an undeclared mode or breaks the spec's schema rules, or (busy) when `MAX_ELICITATIONS_IN_FLIGHT`
    /// are open; otherwise the host is asked in a task, and its answer, checked, goes back to this
    /// server only. The request's text goes to the host and nowhere else.
    pub(super) fn elicit(&self, id: &RawValue, params: Option<&RawValue>) {
        let Some(elicitations) = &self.elicitations else { return };
        let request = match elicitation::parse_request(params, elicitations.elicitor.modes) {
            Ok(request) => request,
            Err(why) => return self.send(jsonrpc::error_response(id, INVALID_PARAMS, &why)),
        };
        let Some(shared) = self.me.upgrade() else { return };
        let key = request_key(id);
        let (ended, cancelled_by_server) = {
            let mut open = elicitations.open.lock();
            let refusal = if open.contains_key(&key) {
                Some("an elicitation with this id is already open")
            } else if open.len() >= MAX_ELICITATIONS_IN_FLIGHT {
                Some("too many elicitations in flight; try again when one is answered")
            } else {
                None
            };
            if let Some(refusal) = refusal {
                drop(open);
                return self.send(jsonrpc::error_response(id, elicitation::BUSY_ERROR_CODE, refusal));
            }
            // The server's `notifications/cancelled` stops the answer, not the slot: the slot is freed only
            // once the host's callback settles, so cancelling cannot open more than the bound of prompts.
            let cancelled_by_server = CancellationToken::new();
            open.insert(key.clone(), cancelled_by_server.clone());
            (elicitations.cancel.child_token(), cancelled_by_server)
        };
        let elicitor = &elicitations.elicitor;
        // The host is told if the question is withdrawn: ended, timed out, or cancelled by the server.
        let mut question = elicitation::Asking::new(elicitor);
        let asking = elicitor.callback.call(elicitation::host_request(&elicitor.server, question.id, &request));
        let timeout = elicitor.timeout;
        let id = id.to_owned();
        elicitations.tasks.spawn(async move {
            let answering = async {
                let mut asking = std::pin::pin!(tokio::time::timeout(timeout, asking));
                tokio::select! {
                    biased;
                    answered = &mut asking => answered,
                    _ = cancelled_by_server.cancelled() => {
                        question.withdraw();
                        asking.await
                    }
                }
            };
            let result = tokio::select! {
                biased;
                // The connection ended: nobody is left to answer.
                _ = ended.cancelled() => None,
                answered = answering => match answered {
                    // The server withdrew the request meanwhile: it gets no answer.
                    _ if cancelled_by_server.is_cancelled() => None,
                    Ok(Ok(answer)) => {
                        question.answered();
                        Some(elicitation::answer(&request, &answer))
                    }
                    // The host threw or rejected; its reason stays with the host.
                    Ok(Err(_)) => {
                        question.answered();
                        Some(elicitation::DECLINE.to_owned())
                    }
                    Err(_) => Some(elicitation::CANCEL.to_owned()),
                },
            };
            shared.elicitation_ended(&key, &id, result);
        });
    }

    fn elicitation_ended(&self, key: &str, id: &RawValue, result: Option<String>) {
        if let Some(elicitations) = &self.elicitations {
            elicitations.open.lock().remove(key);
            *elicitations.last_ended.lock() = Some(Instant::now());
        }
        let ended = {
            let mut state = self.state.lock();
            // Like progress: the server's requests get a full idle period from the answer on. Later
            // only, so the sweeper needs no wake.
            let now = Instant::now();
            for pending in state.pending.values_mut() {
                pending.deadline = pending.deadline.max(now + pending.timeout);
            }
            state.ended.is_some()
        };
        if let (Some(result), false) = (result, ended) {
            self.send(jsonrpc::result_response(id, &result));
        }
    }

    /// The server's `notifications/cancelled` for an open elicitation: stop waiting for the host and
    /// send nothing (the spec's answer to a cancelled request).
    pub(super) fn elicitation_cancelled(&self, params: Option<&RawValue>) {
        let Some(elicitations) = &self.elicitations else { return };
        let Some(request) = params.and_then(|p| serde_json::from_str::<mcp::CancelledParams>(p.get()).ok()) else {
            return;
        };
        if let Some(stop) = elicitations.open.lock().get(&request_key(request.request_id)) {
            stop.cancel();
        }
    }

    /// While the host is answering an elicitation, the server's requests are not timed out: the tool
    /// call that asked is waiting on the person, not on the server.
    pub(super) fn elicitation_open(&self) -> bool {
        self.elicitations.as_ref().is_some_and(|e| !e.open.lock().is_empty())
    }

    /// Wait until every elicitation task has stopped (after `end`, which cancels them all).
    pub(super) async fn elicitations_stopped(&self) {
        if let Some(elicitations) = &self.elicitations {
            elicitations.tasks.close();
            elicitations.tasks.wait().await;
        }
        self.rounds.close();
        self.rounds.wait().await;
    }
}
