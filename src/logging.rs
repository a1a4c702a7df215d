//! Engine logs, through `tracing`: connect, era negotiation, listing, call start and end, lost
//! connections and refreshes, OAuth token refreshes. Off by default (a disabled `tracing` event costs
//! a load and a branch). Two ways out, each independent of the other:
//!
//! - `MCPFERRY_LOG` (tracing-subscriber's env-filter syntax, as RUST_LOG: `debug`, `mcpferry=debug`,
//!   `mcpferry::toolset=trace,warn`) prints them to stderr, one line each.
//! - `logs: 'diagnostics'` routes the events of that toolset (those carrying its `toolset` id) to its
//!   `onDiagnostic` as `log` diagnostics, at debug level and above.
//!
//! Fields hold only what may be shown anywhere: names, codes, counts, timings, and error text that was
//! redacted by the server's secrets before it was logged. Header values, env values and tokens are
//! never logged, so nothing here has to redact.

use crate::diagnostics::Diagnostic;
use parking_lot::RwLock;
use std::collections::HashMap;
use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Once, Weak};
use tracing::field::{Field, Visit};
use tracing::{Event, Level, Metadata, Subscriber};
use tracing_subscriber::filter::{filter_fn, EnvFilter};
use tracing_subscriber::layer::{Context, Layer, SubscriberExt};

/// The environment variable that turns on the stderr log, with an env-filter directive.
pub const LOG_ENV: &str = "MCPFERRY_LOG";
/// The most verbose level routed to `onDiagnostic` (`trace` stays on stderr only).
const ROUTED_LEVEL: Level = Level::DEBUG;

/// Where one toolset's routed log events go.
pub trait LogSink: Send + Sync {
    fn log(&self, diagnostic: Diagnostic);
}

static SINKS: RwLock<Option<HashMap<u64, Weak<dyn LogSink>>>> = RwLock::new(None);
/// How many toolsets route their logs: while none does, the router is disabled for every event, so a
/// log point on the hot path costs an atomic load.
static ROUTED: AtomicUsize = AtomicUsize::new(0);
static NEXT_TOOLSET_ID: AtomicU64 = AtomicU64::new(1);

/// A fresh id for a toolset's log events (the `toolset` field).
pub fn toolset_id() -> u64 {
    NEXT_TOOLSET_ID.fetch_add(1, Ordering::Relaxed)
}

/// Install the subscriber if `MCPFERRY_LOG` asks for the stderr log. Without it (and with no toolset
/// routing its logs) no subscriber exists and every log point is a no-op.
pub fn init_from_env() {
    if std::env::var_os(LOG_ENV).is_some() {
        init();
    }
}

/// Install the subscriber, once per process: the stderr layer when `MCPFERRY_LOG` is set, and the
/// router (disabled while no toolset routes its logs).
fn init() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let stderr = std::env::var(LOG_ENV).ok().filter(|spec| !spec.trim().is_empty()).map(|spec| {
            tracing_subscriber::fmt::layer()
                .with_writer(std::io::stderr)
                .with_ansi(false)
                .with_filter(EnvFilter::new(spec))
        });
        // A per-layer filter (a plain Layer::enabled would filter the stderr layer too), asked per event
        // (`filter_fn` answers `Interest::sometimes`), so routing can start and stop at any time.
        let routed = filter_fn(|metadata: &Metadata<'_>| {
            ROUTED.load(Ordering::Acquire) > 0 && *metadata.level() <= ROUTED_LEVEL
        });
        let subscriber = tracing_subscriber::registry().with(stderr).with(Router.with_filter(routed));
        // Another subscriber already installed (an embedding Rust program): its choice stands.
        let _ = tracing::subscriber::set_global_default(subscriber);
    });
}

/// Route the events that carry `id` to `sink` until [`unroute`] (or the sink is dropped).
pub fn route(id: u64, sink: Weak<dyn LogSink>) {
    init();
    let mut sinks = SINKS.write();
    let sinks = sinks.get_or_insert_with(HashMap::new);
    sinks.insert(id, sink);
    ROUTED.store(sinks.len(), Ordering::Release);
}

pub fn unroute(id: u64) {
    if let Some(sinks) = SINKS.write().as_mut() {
        sinks.remove(&id);
        ROUTED.store(sinks.len(), Ordering::Release);
    }
}

struct Router;

impl<S: Subscriber> Layer<S> for Router {
    fn on_event(&self, event: &Event<'_>, _ctx: Context<'_, S>) {
        let sink = {
            let sinks = SINKS.read();
            let Some(sinks) = sinks.as_ref().filter(|s| !s.is_empty()) else { return };
            let mut fields = Fields::default();
            event.record(&mut fields);
            let Some(sink) = fields.toolset.and_then(|id| sinks.get(&id)).and_then(Weak::upgrade) else { return };
            (sink, fields)
        };
        let (sink, fields) = sink;
        let level = match *event.metadata().level() {
            Level::ERROR => "error",
            Level::WARN => "warn",
            Level::INFO => "info",
            Level::DEBUG => "debug",
            Level::TRACE => "trace",
        };
        let message =
            if fields.rest.is_empty() { fields.message } else { format!("{}{}", fields.message, fields.rest) };
        sink.log(Diagnostic::Log {
            server: fields.server.unwrap_or_default(),
            level,
            target: event.metadata().target().to_owned(),
            message,
        });
    }
}

/// An event's fields: `toolset` and `server` apart, the message, the rest as ` key=value`.
#[derive(Default)]
struct Fields {
    toolset: Option<u64>,
    server: Option<String>,
    message: String,
    rest: String,
}

impl Visit for Fields {
    fn record_u64(&mut self, field: &Field, value: u64) {
        match field.name() {
            "toolset" => self.toolset = Some(value),
            name => {
                let _ = write!(self.rest, " {name}={value}");
            }
        }
    }

    fn record_str(&mut self, field: &Field, value: &str) {
        match field.name() {
            "server" => self.server = Some(value.to_owned()),
            "message" => self.message = value.to_owned(),
            name => {
                let _ = write!(self.rest, " {name}={value}");
            }
        }
    }

    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        match field.name() {
            "message" => self.message = format!("{value:?}"),
            "server" => self.server = Some(format!("{value:?}").trim_matches('"').to_owned()),
            name => {
                let _ = write!(self.rest, " {name}={value:?}");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use parking_lot::Mutex;
    use std::sync::Arc;

    #[derive(Default)]
    struct Recorder(Mutex<Vec<Diagnostic>>);
    impl LogSink for Recorder {
        fn log(&self, diagnostic: Diagnostic) {
            self.0.lock().push(diagnostic);
        }
    }

    #[test]
    fn events_reach_the_sink_of_their_toolset_only() {
        let (mine, other) = (toolset_id(), toolset_id());
        let recorder = Arc::new(Recorder::default());
        let weak: Weak<dyn LogSink> = Arc::downgrade(&recorder) as Weak<dyn LogSink>;
        route(mine, weak);
        tracing::debug!(toolset = mine, server = "docs", elapsed_ms = 12u64, "connected");
        tracing::debug!(toolset = other, server = "docs", "not mine");
        tracing::trace!(toolset = mine, server = "docs", "too verbose to route");
        unroute(mine);
        tracing::info!(toolset = mine, server = "docs", "after unroute");
        let seen = recorder.0.lock();
        assert_eq!(seen.len(), 1, "{seen:?}");
        let Diagnostic::Log { server, level, message, target } = &seen[0] else { panic!("{seen:?}") };
        assert_eq!((server.as_str(), *level, message.as_str()), ("docs", "debug", "connected elapsed_ms=12"));
        assert!(target.starts_with("mcpferry"), "{target}");
    }
}
