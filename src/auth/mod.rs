//! OAuth 2.1 authorization for HTTP servers (MCP authorization, 2025-11-25), in the engine.
//!
//! | file                   | what                                                                        |
//! |------------------------|-----------------------------------------------------------------------------|
//! | `settings.rs`          | a server entry's `oauth` option, validated                                 |
//! | `authorizer.rs`        | one server's token: load, use, refresh, step-up, flows one at a time        |
//! | `budget.rs`            | a login's time: one deadline per request's whole answer, one for them all  |
//! | `challenge.rs`         | the `WWW-Authenticate` Bearer challenge                                     |
//! | `discovery.rs`         | protected-resource and authorization-server metadata, 2025-03-26 fallback   |
//! | `registration.rs`      | pre-registered client → client ID metadata document → stored → DCR          |
//! | `code_flow.rs`         | authorization code + PKCE S256 + `resource` + `iss`                          |
//! | `loopback.rs`          | the 127.0.0.1 redirect listener                                             |
//! | `pkce.rs`              | verifiers, challenges, `state`                                              |
//! | `token.rs`             | the token endpoint: client authentication, responses, revocation           |
//! | `jwt.rs`               | ES256 / RS256 assertions (`private_key_jwt`)                                |
//! | `dpop.rs`              | DPoP (RFC 9449): the key pair, proofs, nonces                               |
//! | `client_credentials.rs`, `cross_app.rs`, `device.rs` | the other grants                              |
//! | `workload.rs`          | workload identity federation: the assertion source and the JWT bearer grant |
//! | `store/`               | token stores: memory, OS secret store, encrypted file; the refresh claim    |
//! | `keys.rs`              | token-store keys                                                            |
//!
//! What never happens: a token sent to a server other than the resource it was issued for, a credential
//! presented to another authorization server than its issuer, a request to an authorization server
//! outside `allowedHosts` or over plain http off this machine, a tool call sent twice because of an
//! authorization, a secret in an error, diagnostic or store row other than the token store's own.

pub mod authorizer;
pub mod budget;
pub mod challenge;
pub mod client_credentials;
pub mod code_flow;
pub mod cross_app;
pub mod device;
pub mod discovery;
pub mod dpop;
pub mod jwt;
pub mod keys;
pub mod loopback;
pub mod pkce;
pub mod registration;
pub mod settings;
pub mod store;
pub mod token;
pub mod workload;

pub use authorizer::{AuthHost, Authorizer};
pub use settings::OAuthSettings;
