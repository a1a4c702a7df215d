//! An MCP Streamable HTTP server inside the test process, on a loopback port: every byte it sends is
//! the test's to choose, so races (a GET stream answered 404, an `initialize` never answered, a flood of
//! notifications) happen exactly when a test wants them.

#![allow(dead_code)] // each test file uses part of it

use mcpferry::diagnostics::Diagnostic;
use mcpferry::error::McpError;
use mcpferry::toolset::{CallSink, ToolsChange, ToolsetEvents};
use parking_lot::Mutex;
use serde_json::{json, Value};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;

/// How the server answers what the test didn't script otherwise.
#[derive(Default)]
pub struct Script {
    /// Answer the session's GET stream with 404 (the session expired) instead of opening it.
    pub get_expired: bool,
    /// Never answer an `initialize` after the first one.
    pub stall_reinitialize: bool,
    /// Never answer the `notifications/initialized` POST.
    pub stall_initialized: bool,
    /// Announce `list_changed` on the GET stream right after every `tools/list`.
    pub change_after_every_list: bool,
}

pub struct FakeServer {
    pub url: String,
    pub tools: Mutex<Vec<Value>>,
    pub script: Mutex<Script>,
    /// Every JSON-RPC message POSTed, in order.
    pub received: Mutex<Vec<Value>>,
    /// Events for the open GET stream, if any.
    stream: Mutex<Option<mpsc::UnboundedSender<String>>>,
    initializes: AtomicUsize,
}

impl FakeServer {
    pub async fn start(script: Script) -> Arc<FakeServer> {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/mcp", listener.local_addr().unwrap());
        let server = Arc::new(FakeServer {
            url,
            tools: Mutex::new(vec![tool("echo", "Echo the text back."), tool("other", "Another tool.")]),
            script: Mutex::new(script),
            received: Mutex::new(Vec::new()),
            stream: Mutex::new(None),
            initializes: AtomicUsize::new(0),
        });
        let accepting = server.clone();
        tokio::spawn(async move {
            while let Ok((socket, _)) = listener.accept().await {
                tokio::spawn(accepting.clone().serve(socket));
            }
        });
        server
    }

    pub fn received_methods(&self, method: &str) -> usize {
        self.received.lock().iter().filter(|m| m["method"] == method).count()
    }

    pub fn calls_to(&self, tool: &str) -> usize {
        self.received.lock().iter().filter(|m| m["method"] == "tools/call" && m["params"]["name"] == tool).count()
    }

    /// Send a message on the GET stream. False if no stream is open.
    pub fn push(&self, message: &Value) -> bool {
        let event = format!("event: message\ndata: {message}\n\n");
        self.stream.lock().as_ref().is_some_and(|s| s.send(event).is_ok())
    }

    pub fn has_stream(&self) -> bool {
        self.stream.lock().is_some()
    }

    async fn serve(self: Arc<Self>, socket: TcpStream) {
        let mut reader = BufReader::new(socket);
        loop {
            let mut request_line = String::new();
            if reader.read_line(&mut request_line).await.unwrap_or(0) == 0 {
                return;
            }
            let mut length = 0usize;
            loop {
                let mut header = String::new();
                if reader.read_line(&mut header).await.unwrap_or(0) == 0 {
                    return;
                }
                if header == "\r\n" {
                    break;
                }
                if let Some((name, value)) = header.split_once(':') {
                    if name.eq_ignore_ascii_case("content-length") {
                        length = value.trim().parse().unwrap_or(0);
                    }
                }
            }
            let mut body = vec![0; length];
            if reader.read_exact(&mut body).await.is_err() {
                return;
            }
            let method = request_line.split(' ').next().unwrap_or("").to_owned();
            let reply = match method.as_str() {
                "POST" => self.answer_post(&body),
                "GET" if self.script.lock().get_expired => Reply::Status(404),
                "GET" => Reply::Stream,
                "DELETE" => Reply::Status(200),
                _ => Reply::Status(405),
            };
            let socket = reader.get_mut();
            match reply {
                Reply::Json(value) => {
                    let body = value.to_string();
                    let head = format!(
                        "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\nmcp-session-id: s1\r\ncontent-length: {}\r\n\r\n",
                        body.len()
                    );
                    if socket.write_all(head.as_bytes()).await.is_err()
                        || socket.write_all(body.as_bytes()).await.is_err()
                    {
                        return;
                    }
                }
                Reply::Status(code) => {
                    let head = format!("HTTP/1.1 {code} Status\r\ncontent-length: 0\r\n\r\n");
                    if socket.write_all(head.as_bytes()).await.is_err() {
                        return;
                    }
                }
                Reply::Never => {
                    // Hold the connection open and say nothing, as a stalled server does.
                    tokio::time::sleep(Duration::from_secs(3600)).await;
                    return;
                }
                Reply::Stream => {
                    let (tx, mut rx) = mpsc::unbounded_channel();
                    *self.stream.lock() = Some(tx);
                    let head = "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n\r\n";
                    if socket.write_all(head.as_bytes()).await.is_err() {
                        return;
                    }
                    while let Some(event) = rx.recv().await {
                        if socket.write_all(event.as_bytes()).await.is_err() {
                            return;
                        }
                    }
                    return;
                }
            }
        }
    }

    fn answer_post(&self, body: &[u8]) -> Reply {
        let Ok(message) = serde_json::from_slice::<Value>(body) else { return Reply::Status(400) };
        self.received.lock().push(message.clone());
        if message["method"] == "notifications/initialized" && self.script.lock().stall_initialized {
            return Reply::Never;
        }
        let (Some(id), Some(method)) = (message.get("id"), message.get("method").and_then(Value::as_str)) else {
            return Reply::Status(202); // a notification, or a response to one of our requests
        };
        let result = match method {
            "initialize" => {
                if self.initializes.fetch_add(1, Ordering::SeqCst) > 0 && self.script.lock().stall_reinitialize {
                    return Reply::Never;
                }
                json!({
                    "protocolVersion": message["params"]["protocolVersion"],
                    "capabilities": { "tools": { "listChanged": true } },
                    "serverInfo": { "name": "fake", "version": "1.0.0" },
                })
            }
            "tools/list" => {
                if self.script.lock().change_after_every_list {
                    self.push(&json!({ "jsonrpc": "2.0", "method": "notifications/tools/list_changed" }));
                }
                json!({ "tools": *self.tools.lock() })
            }
            "tools/call" => {
                json!({ "content": [{ "type": "text", "text": format!("called {}", message["params"]["name"]) }] })
            }
            "ping" => json!({}),
            _ => {
                return Reply::Json(
                    json!({ "jsonrpc": "2.0", "id": id, "error": { "code": -32601, "message": "no such method" } }),
                )
            }
        };
        Reply::Json(json!({ "jsonrpc": "2.0", "id": id, "result": result }))
    }
}

enum Reply {
    Json(Value),
    Status(u16),
    Never,
    Stream,
}

pub fn tool(name: &str, description: &str) -> Value {
    json!({ "name": name, "description": description, "inputSchema": { "type": "object", "properties": { "text": { "type": "string" } } } })
}

/// A call's outcome as recorded: its result's JSON, or its error's code and message.
pub type Outcome = Result<String, (&'static str, String)>;

/// What a toolset reports: call outcomes by id, diagnostics, tool-map changes.
#[derive(Default)]
pub struct Recorder {
    pub outcomes: Mutex<Vec<(u32, Outcome)>>,
    pub diagnostics: Mutex<Vec<Diagnostic>>,
    pub changes: Mutex<Vec<ToolsChange>>,
}

impl Recorder {
    pub fn outcome(&self, call_id: u32) -> Option<Outcome> {
        self.outcomes.lock().iter().find(|(id, _)| *id == call_id).map(|(_, o)| o.clone())
    }

    pub fn has_diagnostic(&self, matches: impl Fn(&Diagnostic) -> bool) -> bool {
        self.diagnostics.lock().iter().any(matches)
    }
}

impl CallSink for Recorder {
    fn complete(&self, call_id: u32, outcome: Result<Box<str>, McpError>) {
        let outcome = outcome.map(String::from).map_err(|e| (e.code(), e.to_string()));
        self.outcomes.lock().push((call_id, outcome));
    }
}

impl ToolsetEvents for Recorder {
    fn diagnostic(&self, diagnostic: &Diagnostic) {
        self.diagnostics.lock().push(diagnostic.clone());
    }
    fn tools_changed(&self, change: &ToolsChange) {
        self.changes.lock().push(change.clone());
    }
}

/// Poll `condition` every 10 ms for up to `within`.
pub async fn until(within: Duration, condition: impl Fn() -> bool) -> bool {
    let deadline = tokio::time::Instant::now() + within;
    while tokio::time::Instant::now() < deadline {
        if condition() {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    condition()
}
