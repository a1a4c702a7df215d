//! Serving newline-delimited JSON-RPC on a byte stream: this process's stdin and stdout for
//! `listen({ stdio: true })`, any pair of streams in tests.
//!
//! stdin is read by a thread of its own with blocking reads (a pipe, a file or a terminal alike; tokio's
//! stdin does the same on its blocking pool, where a read that never returns would hold a pool
//! thread). Lines are bounded (`MAX_SERVER_MESSAGE_BYTES`; a longer one is skipped to its end and
//! answered with an error), requests in flight are bounded, and responses are written in bursts: one
//! write and flush for whatever is ready. End of input ends serving once every request read is answered.

use super::dispatch::{self, claim_of, RpcError, INVALID_REQUEST, PARSE_ERROR};
use super::McpServerCore;
use crate::error::{McpError, Result};
use crate::limits::{MAX_SERVER_MESSAGE_BYTES, MAX_STDIO_REQUESTS_IN_FLIGHT};
use crate::protocol::jsonrpc::{is_echoable_id, Message, RawMessage};
use parking_lot::Mutex;
use std::io::BufRead;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use tokio::io::{AsyncWrite, AsyncWriteExt};
use tokio::sync::{mpsc, oneshot, Semaphore};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

/// Lines read ahead of the requests being handled.
const LINES_READ_AHEAD: usize = 64;
/// Responses waiting for the writer.
const RESPONSES_QUEUED: usize = 256;

/// One line of input.
#[derive(Debug)]
pub enum Line {
    Message(Vec<u8>),
    /// Over `MAX_SERVER_MESSAGE_BYTES`: skipped.
    TooLong,
}

/// Reads `input` line by line on a thread of its own until it ends or serving stops.
pub fn read_on_thread(input: impl BufRead + Send + 'static) -> mpsc::Receiver<Line> {
    let (lines, receiver) = mpsc::channel(LINES_READ_AHEAD);
    std::thread::Builder::new()
        .name("mcpferry-server-stdin".into())
        .spawn(move || read_lines(input, MAX_SERVER_MESSAGE_BYTES, |line| lines.blocking_send(line).is_ok()))
        .expect("a thread for stdin starts");
    receiver
}

/// Splits `input` into bounded lines, handing each to `deliver` until it returns false.
fn read_lines(mut input: impl BufRead, max_bytes: usize, mut deliver: impl FnMut(Line) -> bool) {
    let mut line = Vec::new();
    let mut skipping = false;
    loop {
        let buffer = match input.fill_buf() {
            Ok(buffer) => buffer,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(_) => break,
        };
        if buffer.is_empty() {
            if skipping {
                deliver(Line::TooLong);
            } else if !line.is_empty() {
                deliver(Line::Message(line));
            }
            return;
        }
        let (taken, ended) = match memchr::memchr(b'\n', buffer) {
            Some(at) => (at, true),
            None => (buffer.len(), false),
        };
        if !skipping {
            if line.len() + taken > max_bytes {
                skipping = true;
                line = Vec::new();
            } else {
                line.extend_from_slice(&buffer[..taken]);
            }
        }
        input.consume(taken + usize::from(ended));
        if ended {
            let delivered =
                if std::mem::take(&mut skipping) { Line::TooLong } else { Line::Message(std::mem::take(&mut line)) };
            if !deliver(delivered) {
                return;
            }
        }
    }
}

/// This process has one stdin: at most one server serves it at a time.
static STDIO_SERVING: AtomicBool = AtomicBool::new(false);
/// This process's stdin reader, between one stdio serving stopped by its handle and the next.
static STDIN_LINES: Mutex<Option<mpsc::Receiver<Line>>> = parking_lot::const_mutex(None);

/// A serving of this process's stdin, from its owner's side: how to stop it, and word that it has let
/// stdin go.
pub struct StdinServing {
    pub stop: CancellationToken,
    pub released: oneshot::Receiver<()>,
}

/// The claim on this process's stdin a serving holds: let go when dropped, however the serving ends
/// (finished, stopped, or its future dropped), so the next one finds stdin free.
struct StdinClaim {
    release: Option<oneshot::Sender<()>>,
}

impl Drop for StdinClaim {
    fn drop(&mut self) {
        STDIO_SERVING.store(false, Ordering::SeqCst);
        if let Some(release) = self.release.take() {
            let _ = release.send(());
        }
    }
}

/// Claims this process's stdin for `core` now (not when the serving is first polled: a stop right after
/// must find it, and a claim right after a stop must find stdin free), and returns its handle and the
/// serving, which ends when stdin ends or the handle's `stop` is cancelled. Fails with
/// `mcp_config_invalid` while another serving holds stdin.
pub fn serve_process_stdin(
    core: Arc<McpServerCore>,
) -> Result<(StdinServing, impl std::future::Future<Output = Result<()>> + Send)> {
    if STDIO_SERVING.swap(true, Ordering::SeqCst) {
        return Err(McpError::config("listen({ stdio: true }): this process's stdin is already being served"));
    }
    let (stop, (release, released)) = (CancellationToken::new(), oneshot::channel());
    let claim = StdinClaim { release: Some(release) };
    let handle = StdinServing { stop: stop.clone(), released };
    let serving = async move {
        // One reader of stdin for the process: a blocking read cannot be interrupted, so a reader left
        // behind by a stop would take the next line from the next serving. It is kept instead.
        let kept = STDIN_LINES.lock().take();
        let mut lines = kept.unwrap_or_else(|| read_on_thread(std::io::BufReader::new(std::io::stdin())));
        if !serve(core, &mut lines, tokio::io::stdout(), stop).await {
            *STDIN_LINES.lock() = Some(lines);
        }
        drop(claim);
        Ok(())
    };
    Ok((handle, serving))
}

/// Serves `lines` until they end or `stop` is cancelled, answering on `output`.
/// Serves `lines` until they end (`true`) or `stop` (`false`: `lines` stays usable, so a later serve
/// reads on from the same reader and no line is taken by a reader nobody listens to).
pub async fn serve(
    core: Arc<McpServerCore>,
    lines: &mut mpsc::Receiver<Line>,
    output: impl AsyncWrite + Unpin + Send + 'static,
    stop: CancellationToken,
) -> bool {
    let mut ended = false;
    let (responses, queued) = mpsc::channel::<String>(RESPONSES_QUEUED);
    let writer = tokio::spawn(write_responses(queued, output));
    let tasks = TaskTracker::new();
    let in_flight = Arc::new(Semaphore::new(MAX_STDIO_REQUESTS_IN_FLIGHT));
    loop {
        let line = tokio::select! {
            _ = stop.cancelled() => break,
            line = lines.recv() => match line {
                Some(line) => line,
                None => {
                    ended = true;
                    break;
                }
            },
        };
        let permit = tokio::select! {
            _ = stop.cancelled() => break,
            permit = in_flight.clone().acquire_owned() => permit.expect("never closed"),
        };
        let (core, responses) = (core.clone(), responses.clone());
        tasks.spawn(async move {
            let _permit = permit;
            if let Some(reply) = handle_line(&core, line).await {
                let _ = responses.send(reply).await;
            }
        });
    }
    tasks.close();
    if !stop.is_cancelled() {
        tasks.wait().await;
    }
    drop(responses);
    if !stop.is_cancelled() {
        let _ = writer.await;
    }
    ended
}

async fn write_responses(mut queued: mpsc::Receiver<String>, mut output: impl AsyncWrite + Unpin) {
    let mut burst = Vec::new();
    while let Some(first) = queued.recv().await {
        burst.clear();
        burst.extend_from_slice(first.as_bytes());
        burst.push(b'\n');
        while let Ok(next) = queued.try_recv() {
            burst.extend_from_slice(next.as_bytes());
            burst.push(b'\n');
        }
        if output.write_all(&burst).await.is_err() || output.flush().await.is_err() {
            return; // the reader went away: nothing more can be answered
        }
    }
}

/// The reply to one line, if it needs one.
pub(crate) async fn handle_line(core: &Arc<McpServerCore>, line: Line) -> Option<String> {
    let bytes = match line {
        Line::Message(bytes) => bytes,
        Line::TooLong => {
            return Some(dispatch::error_response(
                None,
                &RpcError::new(
                    INVALID_REQUEST,
                    format!("message over the {MAX_SERVER_MESSAGE_BYTES} bytes this server reads"),
                ),
            ))
        }
    };
    let Ok(text) = std::str::from_utf8(&bytes) else {
        return Some(dispatch::error_response(None, &RpcError::new(PARSE_ERROR, "Parse error: not UTF-8")));
    };
    let text = text.trim();
    if text.is_empty() {
        return None;
    }
    if text.starts_with('[') {
        return Some(dispatch::error_response(
            None,
            &RpcError::new(INVALID_REQUEST, "JSON-RPC batches are not supported"),
        ));
    }
    let message = match serde_json::from_str::<RawMessage>(text) {
        Ok(message) => message,
        Err(e) => {
            return Some(dispatch::error_response(None, &RpcError::new(PARSE_ERROR, format!("Parse error: {e}"))))
        }
    };
    match message.classify() {
        Some(Message::Request { id, method, params }) => {
            if !is_echoable_id(id) {
                return Some(dispatch::error_response(
                    None,
                    &RpcError::new(INVALID_REQUEST, "the request id must be a string or a number"),
                ));
            }
            let served = dispatch::Served::start(core, id, &method, params);
            let outcome = served.answering(dispatch::reply_to(core, &method, params, claim_of(params))).await;
            Some(served.response(&outcome))
        }
        // Notifications need no answer; responses answer nothing this server asked.
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing;
    use super::*;
    use serde_json::Value;
    use tokio::io::{AsyncBufReadExt, BufReader};

    #[test]
    fn lines_are_bounded_and_a_long_one_is_skipped_to_its_end() {
        let input = b"{\"a\":1}\n0123456789abcdef\n{\"b\":2}\nlast".to_vec();
        let mut seen = Vec::new();
        read_lines(std::io::BufReader::with_capacity(4, &input[..]), 10, |line| {
            seen.push(match line {
                Line::Message(bytes) => String::from_utf8(bytes).unwrap(),
                Line::TooLong => "<too long>".into(),
            });
            true
        });
        assert_eq!(seen, ["{\"a\":1}", "<too long>", "{\"b\":2}", "last"]);
    }

    /// close() stops serving, not the reader: the next serve reads on from it, so no line is taken by a
    /// reader nobody listens to any more.
    #[tokio::test]
    async fn a_stopped_serve_leaves_its_reader_to_the_next() {
        let (core, _) = testing::server(None);
        let (lines_in, mut lines) = mpsc::channel(8);
        let stop = CancellationToken::new();
        stop.cancel();
        assert!(!serve(core.clone(), &mut lines, tokio::io::sink(), stop).await, "stopped, not ended");
        lines_in.send(Line::Message(br#"{"jsonrpc":"2.0","id":7,"method":"ping"}"#.to_vec())).await.unwrap();
        drop(lines_in);
        let (output, read_back) = tokio::io::duplex(1024);
        assert!(serve(core, &mut lines, output, CancellationToken::new()).await);
        let answered = BufReader::new(read_back).lines().next_line().await.unwrap().unwrap();
        assert_eq!(answered, r#"{"jsonrpc":"2.0","id":7,"result":{}}"#);
    }

    #[tokio::test]
    async fn serves_both_eras_over_a_pipe_and_ends_with_its_input() {
        let (core, _) = testing::server(None);
        let (lines_in, lines) = mpsc::channel(8);
        let (output, read_back) = tokio::io::duplex(64 * 1024);
        let served = tokio::spawn(async move {
            let mut lines = lines;
            serve(core, &mut lines, output, CancellationToken::new()).await
        });
        let modern = r#""_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}"#;
        for line in [
            r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#.to_owned(),
            r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#.to_owned(),
            format!(r#"{{"jsonrpc":"2.0","id":"d","method":"server/discover","params":{{{modern}}}}}"#),
            format!(r#"{{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{{"name":"echo","arguments":{{"x":1}},{modern}}}}}"#),
            "not json".to_owned(),
        ] {
            lines_in.send(Line::Message(line.into_bytes())).await.unwrap();
        }
        lines_in.send(Line::TooLong).await.unwrap();
        drop(lines_in);
        assert!(served.await.unwrap(), "serving ended with its input");
        let mut replies = Vec::new();
        let mut reader = BufReader::new(read_back).lines();
        while let Some(line) = reader.next_line().await.unwrap() {
            replies.push(serde_json::from_str::<Value>(&line).unwrap());
        }
        assert_eq!(replies.len(), 5, "{replies:?}");
        let by_id = |id: Value| replies.iter().find(|r| r["id"] == id).cloned().unwrap();
        assert_eq!(by_id(1.into())["result"]["protocolVersion"], "2025-11-25");
        assert_eq!(by_id("d".into())["result"]["resultType"], "complete");
        assert_eq!(by_id(3.into())["result"]["structuredContent"]["x"], 1);
        let errors: Vec<i64> =
            replies.iter().filter(|r| r["id"].is_null()).map(|r| r["error"]["code"].as_i64().unwrap()).collect();
        assert_eq!(errors.len(), 2);
        assert!(errors.contains(&PARSE_ERROR) && errors.contains(&INVALID_REQUEST));
    }
}
