//! The embedding application's callbacks, as the engine sees them: one trait, [`Callback`]. The napi
//! module implements it over JavaScript functions (`napi/hooks.rs`); a toolset holds the ones its host
//! gave in `toolset::Hooks`. Nothing here knows what a callback is for, so every module may ask one.

use futures_util::future::BoxFuture;

/// An asynchronous callback. `Err` carries the callback's own failure text, which is never shown
/// verbatim where it could carry a secret.
pub trait Callback<A, R>: Send + Sync {
    fn call(&self, arg: A) -> BoxFuture<'static, Result<R, String>>;
}
