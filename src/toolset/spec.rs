//! What a supervisor checks and prepares before it contacts its server: containment and the command
//! for stdio; for HTTP the host guard (no request at all to a host outside it), the connect-time
//! credential and the OAuth authorizer.

use super::supervisor::Supervisor;
use crate::config::ServerKind;
use crate::diagnostics::Diagnostic;
use crate::error::{McpError, Result};
use crate::guard::containment;
use crate::guard::hosts::HostGuard;
use crate::limits::MAX_STDERR_LINES_PER_SECOND;
use crate::transport::http::{Authorization, HttpSpec};
use crate::transport::stdio::{StderrEvent, StderrListener, StderrMode, StdioSpec};
use crate::transport::TransportSpec;
use std::sync::Arc;

impl Supervisor {
    /// The server's stderr lines (`stderr: 'diagnostics'`), delivered at once as they come; the transport
    /// has redacted and bounded them.
    fn stderr_listener(&self) -> StderrListener {
        // Weak, as every other hold on the host's events: a live server must not keep the toolset's owner alive.
        let events = Arc::downgrade(&self.shared.events);
        let server = self.entry.name.clone();
        Arc::new(move |event| {
            let Some(events) = events.upgrade() else { return };
            let diagnostic = match event {
                StderrEvent::Line { text, truncated } => {
                    Diagnostic::ServerStderr { server: server.clone(), message: format!("{server}: {text}"), line: text, truncated }
                }
                StderrEvent::Dropped { lines } => Diagnostic::ServerStderrDropped {
                    server: server.clone(),
                    message: format!("dropped {lines} stderr lines of MCP server {server:?} (over {MAX_STDERR_LINES_PER_SECOND} a second)"),
                    dropped: lines,
                },
            };
            events.diagnostic(&diagnostic);
        })
    }

    /// Everything checked before a server is contacted: containment for stdio; for HTTP the host
    /// guard (no request at all to a host outside it) and the connect-time credential.
    pub(super) async fn transport_spec(&self) -> Result<TransportSpec> {
        match &self.entry.kind {
            ServerKind::Stdio { command, args, env, cwd, root, stderr } => {
                let env = containment::child_environment(|name| std::env::var(name).ok(), env);
                let (command, cwd, root, resolve_env) = (command.clone(), cwd.clone(), root.clone(), env.clone());
                // canonicalize and PATH lookups touch the file system: off the engine's worker.
                let (program, cwd) = tokio::task::spawn_blocking(move || -> Result<_> {
                    match root {
                        Some(root) => {
                            let contained = containment::contain(&root, &command, cwd.as_deref())?;
                            let program = match contained.program {
                                Some(program) => program,
                                None => containment::resolve_program(&command, &resolve_env, Some(&contained.cwd))?,
                            };
                            Ok((program, Some(contained.cwd)))
                        }
                        None => Ok((containment::resolve_program(&command, &resolve_env, cwd.as_deref())?, cwd)),
                    }
                })
                .await
                .map_err(|e| super::panic_error("resolving the server's command", e))??;
                let reader_host = self.shared.hooks.stdio_reader.clone();
                let on_stderr = (*stderr == StderrMode::Diagnostics).then(|| self.stderr_listener());
                Ok(TransportSpec::Stdio(StdioSpec {
                    program,
                    args: args.clone(),
                    env,
                    cwd,
                    reader_host,
                    stderr: *stderr,
                    on_stderr,
                }))
            }
            ServerKind::StreamableHttp { url, headers, oauth } | ServerKind::Sse { url, headers, oauth } => {
                let guard = self.host_guard().await?;
                if let Some(guard) = &guard {
                    guard.check_url(url)?;
                }
                if self.shared.hooks.auth.is_some() {
                    self.authenticate().await?;
                }
                let authorization: Option<Arc<dyn Authorization>> = match oauth {
                    Some(settings) => Some(self.authorizer(url, settings, &guard)?),
                    None => None,
                };
                // Read now, never kept in the configuration; redacted from then on like static headers.
                let mut headers = headers.clone();
                for from_env in &self.entry.headers_from_env {
                    let value = from_env.resolve(&self.entry.name)?;
                    self.secrets.add_header_value(value.as_bytes());
                    headers.insert(from_env.name.clone(), value);
                }
                let spec = HttpSpec {
                    url: url.clone(),
                    headers,
                    guard,
                    proxy: self.shared.proxy.clone(),
                    credential: self.credential.clone(),
                    authorization,
                };
                Ok(match self.entry.kind {
                    ServerKind::Sse { .. } => TransportSpec::Sse(spec),
                    _ => TransportSpec::StreamableHttp(spec),
                })
            }
        }
    }

    /// The server's OAuth authorizer: made on its first connection and kept for every later one, so the
    /// token in use (and a flow under way) outlives a reconnection.
    fn authorizer(
        &self,
        url: &url::Url,
        settings: &crate::auth::OAuthSettings,
        guard: &Option<Arc<HostGuard>>,
    ) -> Result<Arc<crate::auth::Authorizer>> {
        if let Some(authorizer) = self.authorizer.lock().clone() {
            return Ok(authorizer);
        }
        let policy = crate::egress::EgressPolicy { guard: guard.clone(), proxy: self.shared.proxy.clone() };
        let authorizer = Arc::new(crate::auth::Authorizer::new(
            self.entry.name.clone(),
            url.clone(),
            settings.clone(),
            self.shared.auth_host.clone(),
            &policy,
            self.credential.clone(),
            self.secrets.clone(),
            self.cancel.clone(),
        )?);
        Ok(self.authorizer.lock().get_or_insert(authorizer).clone())
    }

    /// The static list, or the resolver's answer for this server.
    async fn host_guard(&self) -> Result<Option<Arc<HostGuard>>> {
        if let Some(resolver) = &self.shared.hooks.allowed_hosts {
            let name = self.entry.name.clone();
            let hosts = resolver.call(name.clone()).await.map_err(|_| {
                McpError::HostNotAllowed(format!("the allowedHosts resolver failed for server {name:?}; refusing"))
            })?;
            return Ok(Some(Arc::new(HostGuard::new(&hosts)?)));
        }
        Ok(self.shared.allowed_hosts.clone())
    }

    /// Ask `auth` for this server's token and make it the credential. The token replaces the previous
    /// one among the secrets: the set holds live values only, however often the token rotates.
    pub(super) async fn authenticate(&self) -> Result<()> {
        let Some(auth) = &self.shared.hooks.auth else { return Ok(()) };
        let name = &self.entry.name;
        let token = auth
            .call(name.clone())
            .await
            .map_err(|_| McpError::Auth(format!("the auth callback failed for server {name:?}")))?;
        if token.is_empty() {
            return Err(McpError::Auth(format!("the auth callback returned no token for server {name:?}")));
        }
        self.secrets.set_rotating("bearer", token.as_bytes());
        self.credential.set_bearer(&token)
    }
}
