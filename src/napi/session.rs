//! Resources, prompts, completions and skills of a `NativeToolset` (`toolset::session`, `toolset::skills`): these functions
//! convert and delegate. Listings and results cross as JSON; a read's blobs cross as bytes, decoded
//! once by the engine and never base64 again.

use super::errors::{guard, rejection, settle};
use super::toolset::NativeToolset;
use crate::session::resources::{Body, ReadResult};
use crate::telemetry::TraceContext;
use napi::bindgen_prelude::*;
use napi_derive::napi;

/// A `resources/read` result: `json` is `{"contents": [{uri, mimeType?, text} | {uri, mimeType?, blob: i}]}`,
/// where `i` indexes `blobs`.
#[napi(object)]
pub struct ResourceRead {
    pub json: String,
    // Buffers, typed as what they are to JavaScript: the generated types must not need @types/node.
    #[napi(ts_type = "Array<Uint8Array>")]
    pub blobs: Vec<Buffer>,
}

/// One item of a read as it crosses: the blob is an index into the read's `blobs`.
#[derive(serde::Serialize)]
#[serde(rename_all = "camelCase")]
struct Crossing {
    uri: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    mime_type: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    text: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    blob: Option<usize>,
    #[serde(rename = "_meta", skip_serializing_if = "Option::is_none")]
    meta: Option<crate::session::resources::Meta>,
}

fn read_to_js(read: ReadResult) -> (String, Vec<Vec<u8>>) {
    let mut blobs = Vec::new();
    let contents: Vec<Crossing> = read
        .contents
        .into_iter()
        .map(|c| {
            let (text, blob) = match c.body {
                Body::Text(text) => (Some(text), None),
                Body::Blob(bytes) => {
                    blobs.push(bytes);
                    (None, Some(blobs.len() - 1))
                }
            };
            Crossing { uri: c.uri, mime_type: c.mime_type, text, blob, meta: c.meta }
        })
        .collect();
    #[derive(serde::Serialize)]
    struct Read {
        contents: Vec<Crossing>,
    }
    (serde_json::to_string(&Read { contents }).expect("a read serializes"), blobs)
}

/// `what`: `resources`, `templates`, `prompts` or `skills`; every server's, or `server`'s. Resolves to a JSON array.
#[napi(ts_return_type = "Promise<string>")]
#[allow(dead_code)] // called from JavaScript only
pub fn session_list<'env>(
    env: &'env Env,
    toolset: &NativeToolset,
    what: String,
    server: Option<String>,
) -> napi::Result<PromiseRaw<'env, String>> {
    let inner = toolset.inner.clone();
    let listed = async move {
        let server = server.as_deref();
        let json = match what.as_str() {
            "resources" => serde_json::to_string(&inner.list_resources(server).await?),
            "templates" => serde_json::to_string(&inner.list_resource_templates(server).await?),
            "prompts" => serde_json::to_string(&inner.list_prompts(server).await?),
            "skills" => serde_json::to_string(&inner.list_skills(server).await?),
            _ => return Err(crate::error::McpError::Internal(format!("no listing named {what:?}"))),
        };
        Ok(json.expect("listings serialize"))
    };
    settle(env, "sessionList", listed, |json| json)
}

/// `resources/read`; `abortId` (not 0) names it for `clientAbortListing`; `traceJson` the caller's trace
/// context (`{traceparent, tracestate?, baggage?}`), sent in `params._meta`.
#[napi(ts_return_type = "Promise<ResourceRead>")]
#[allow(dead_code)] // called from JavaScript only
pub fn session_read_resource<'env>(
    env: &'env Env,
    toolset: &NativeToolset,
    server: String,
    uri: String,
    abort_id: u32,
    trace_json: Option<String>,
) -> napi::Result<PromiseRaw<'env, ResourceRead>> {
    let trace = trace_json.as_deref().map(TraceContext::from_json).transpose().map_err(|e| rejection(env, e))?;
    let inner = toolset.inner.clone();
    let abort = (abort_id != 0).then(|| inner.listing_abort(abort_id));
    // Begun here when nothing gates it, settled from the thread that reads the answer (no task, no
    // hop through the runtime); else the async way.
    let (deferred, promise) = env.create_deferred::<ResourceRead, ReadResolver>()?;
    let settling = ReadSettling(Some(deferred));
    let promise = PromiseRaw::new(env.raw(), promise.raw());
    let started = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        super::errors::panic_if_armed("sessionReadResource");
        super::runtime::within_runtime(|| {
            inner.start_read_resource(&server, &uri, abort, trace.as_ref(), move |outcome| settling.settle(outcome))
        })
    }));
    // Started, or a panic: the settling it dropped rejected the promise with `mcp_internal_error`.
    let Ok(Err((done, abort))) = started else { return Ok(promise) };
    let read = async move { inner.read_resource(&server, &uri, abort, trace.as_ref()).await };
    // Inside the unwind guard too: a panic here drops `done`, whose settling rejects.
    let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        super::runtime::within_runtime(|| drop(tokio::spawn(async move { done(read.await) })));
    }));
    Ok(promise)
}

type ReadResolver = Box<dyn FnOnce(Env) -> napi::Result<ResourceRead> + Send>;

/// A read's promise, settled once: with its outcome, or — dropped unsettled, which only a panic or a
/// runtime shutdown does — with `mcp_internal_error`, never left pending.
struct ReadSettling(Option<napi::JsDeferred<ResourceRead, ReadResolver>>);

impl ReadSettling {
    fn settle(mut self, outcome: crate::error::Result<ReadResult>) {
        // Converted first: should that panic, the deferred is still held, and `Drop` rejects it.
        let outcome = outcome.map(read_to_js);
        let deferred = self.0.take().expect("settled once");
        deferred.resolve(Box::new(move |env| match outcome {
            Ok((json, blobs)) => Ok(ResourceRead { json, blobs: blobs.into_iter().map(Buffer::from).collect() }),
            Err(error) => Err(super::errors::rejection(&env, error)),
        }));
    }
}

impl Drop for ReadSettling {
    fn drop(&mut self) {
        if let Some(deferred) = self.0.take() {
            let doing = if std::thread::panicking() { "panicked" } else { "stopped" };
            let error = crate::error::McpError::Internal(format!(
                "the engine {doing} while reading this resource; this is a bug in mcpferry"
            ));
            deferred.resolve(Box::new(move |env| Err(super::errors::rejection(&env, error))));
        }
    }
}

/// Load a skill (SEP-2640): resolves to `{server, uri, name, description, frontmatter, files, instructions}`
/// as JSON, SKILL.md verified.
#[napi(ts_return_type = "Promise<string>")]
#[allow(dead_code)] // called from JavaScript only
pub fn session_load_skill<'env>(
    env: &'env Env,
    toolset: &NativeToolset,
    server: String,
    uri: String,
) -> napi::Result<PromiseRaw<'env, String>> {
    let inner = toolset.inner.clone();
    let loaded = async move {
        inner.load_skill(&server, &uri).await.map(|l| serde_json::to_string(&l).expect("a skill serializes"))
    };
    settle(env, "sessionLoadSkill", loaded, |json| json)
}

/// Read a file of a loaded skill, verified against its entry; crosses as a resource read does.
#[napi(ts_return_type = "Promise<ResourceRead>")]
#[allow(dead_code)] // called from JavaScript only
pub fn session_read_skill_file<'env>(
    env: &'env Env,
    toolset: &NativeToolset,
    server: String,
    uri: String,
    path: String,
) -> napi::Result<PromiseRaw<'env, ResourceRead>> {
    let inner = toolset.inner.clone();
    let read = async move { inner.read_skill_file(&server, &uri, &path).await.map(read_to_js) };
    settle(env, "sessionReadSkillFile", read, |(json, blobs)| ResourceRead {
        json,
        blobs: blobs.into_iter().map(Buffer::from).collect(),
    })
}

/// Subscribe to a resource's updates (`resource-updated` events `{server, uri}`); resolves to the
/// subscription's id for `sessionUnsubscribe`.
#[napi(ts_return_type = "Promise<number>")]
#[allow(dead_code)] // called from JavaScript only
pub fn session_subscribe<'env>(
    env: &'env Env,
    toolset: &NativeToolset,
    server: String,
    uri: String,
) -> napi::Result<PromiseRaw<'env, f64>> {
    let inner = toolset.inner.clone();
    let subscribed = async move { inner.subscribe_resource(&server, &uri).await };
    // Ids stay far below 2^53.
    settle(env, "sessionSubscribe", subscribed, |id| id as f64)
}

#[napi]
#[allow(dead_code)] // called from JavaScript only
pub fn session_unsubscribe(toolset: &NativeToolset, id: f64) -> napi::Result<(), String> {
    guard("sessionUnsubscribe", || {
        super::runtime::within_runtime(|| toolset.inner.unsubscribe_resource(id as u64));
        Ok(())
    })
}

/// A `resource-updated` event was taken by JavaScript: the next update of that URI is sent again.
#[napi]
#[allow(dead_code)] // called from JavaScript only
pub fn session_update_delivered(toolset: &NativeToolset, server: String, uri: String) -> napi::Result<(), String> {
    guard("sessionUpdateDelivered", || {
        toolset.inner.resource_update_delivered(&server, &uri);
        Ok(())
    })
}

/// `prompts/get`; `argsJson` an object of strings (or empty); `traceJson` as for `sessionReadResource`.
/// Resolves to `{description?, messages}` as JSON.
#[napi(ts_return_type = "Promise<string>")]
#[allow(dead_code)] // called from JavaScript only
pub fn session_get_prompt<'env>(
    env: &'env Env,
    toolset: &NativeToolset,
    server: String,
    name: String,
    args_json: String,
    trace_json: Option<String>,
) -> napi::Result<PromiseRaw<'env, String>> {
    let inner = toolset.inner.clone();
    let got = async move {
        let trace = trace_json.as_deref().map(TraceContext::from_json).transpose()?;
        inner
            .get_prompt(&server, &name, &args_json, trace.as_ref())
            .await
            .map(|r| serde_json::to_string(&r).expect("a prompt serializes"))
    };
    settle(env, "sessionGetPrompt", got, |json| json)
}

/// `completion/complete`; resolves to `{values, total?, hasMore?}` as JSON.
#[napi(ts_return_type = "Promise<string>")]
#[allow(dead_code)] // called from JavaScript only
pub fn session_complete<'env>(
    env: &'env Env,
    toolset: &NativeToolset,
    server: String,
    ref_json: String,
    argument_json: String,
    context_json: String,
) -> napi::Result<PromiseRaw<'env, String>> {
    let inner = toolset.inner.clone();
    let completed = async move {
        inner
            .complete(&server, &ref_json, &argument_json, &context_json)
            .await
            .map(|c| serde_json::to_string(&c).expect("a completion serializes"))
    };
    settle(env, "sessionComplete", completed, |json| json)
}
