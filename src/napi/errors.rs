//! How failures cross: an `McpError` becomes a JS `Error` whose `code` is `McpError::code()` (no
//! message parsing on the JS side), and a panic anywhere behind an entry point becomes
//! `mcp_internal_error` instead of aborting Node (sync entries) or leaving a promise pending (async).

use crate::error::McpError;
use napi::bindgen_prelude::*;
use std::future::Future;
use std::panic::{catch_unwind, AssertUnwindSafe};

/// What a sync entry point returns: its error carries the engine's code as its JS `code`.
pub(crate) type JsResult<T> = napi::Result<T, String>;

pub(crate) fn to_js_error(error: McpError) -> napi::Error<String> {
    napi::Error::new(error.code().to_owned(), error.to_string())
}

/// The text of a panic's payload, for the `mcp_internal_error` it becomes.
fn panic_text(payload: &(dyn std::any::Any + Send)) -> String {
    let detail = payload
        .downcast_ref::<&str>()
        .map(|s| (*s).to_owned())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "no message".to_owned());
    format!("mcpferry engine bug (a panic, contained): {detail}")
}

/// Runs a sync entry point's body; an error or a panic becomes a thrown JS error with its code.
/// The engine's locks do not poison, so state a panic leaves behind stays usable.
pub(crate) fn guard<T>(entry: &'static str, body: impl FnOnce() -> crate::error::Result<T>) -> JsResult<T> {
    catch_unwind(AssertUnwindSafe(|| {
        panic_if_armed(entry);
        body()
    }))
    .unwrap_or_else(|payload| Err(McpError::Internal(panic_text(payload.as_ref()))))
    .map_err(to_js_error)
}

/// Runs an async entry point's work as its own task, so a panic inside it rejects the promise with
/// `mcp_internal_error` (the task's `JoinError`) rather than leaving it pending; an `McpError`
/// rejects with its code. `resolve` turns the value into what JavaScript receives.
pub(crate) fn settle<'env, T, V>(
    env: &'env Env,
    entry: &'static str,
    work: impl Future<Output = crate::error::Result<T>> + Send + 'static,
    resolve: impl FnOnce(T) -> V + 'static,
) -> napi::Result<PromiseRaw<'env, V>>
where
    T: Send + 'static,
    V: ToNapiValue,
{
    let task = async move {
        let outcome = match tokio::spawn(async move {
            panic_if_armed(entry);
            work.await
        })
        .await
        {
            Ok(outcome) => outcome,
            Err(failed) if failed.is_panic() => Err(McpError::Internal(panic_text(failed.into_panic().as_ref()))),
            Err(_) => Err(McpError::Internal("the engine stopped before this operation finished".to_owned())),
        };
        Ok::<_, napi::Error>(outcome)
    };
    env.spawn_future_with_callback(task, move |env, outcome| match outcome {
        Ok(value) => Ok(resolve(value)),
        Err(error) => Err(rejection(env, error)),
    })
}

/// A JS error object with its `code`, held by reference so the promise rejects with it verbatim
/// (napi would otherwise build a new error whose `code` is a napi status).
pub(crate) fn rejection(env: &Env, error: McpError) -> napi::Error {
    let object = JsError::from(to_js_error(error)).into_unknown(*env);
    napi::Error::from(object)
}

/// Debug builds only: the next call of the named entry point panics, so tests can prove a panic
/// becomes `mcp_internal_error` and the process lives on. Absent from release builds entirely.
#[cfg(debug_assertions)]
static PANIC_AT: parking_lot::Mutex<Option<String>> = parking_lot::Mutex::new(None);

#[cfg(debug_assertions)]
#[napi_derive::napi]
#[allow(dead_code)] // called from JavaScript only
pub fn debug_panic_next(entry: String) {
    *PANIC_AT.lock() = Some(entry);
}

#[inline]
pub(crate) fn panic_if_armed(_entry: &str) {
    #[cfg(debug_assertions)]
    {
        let mut armed = PANIC_AT.lock();
        if armed.as_deref() == Some(_entry) {
            *armed = None;
            drop(armed);
            panic!("injected by debugPanicNext({_entry:?})");
        }
    }
}
