//! The time a login has. Its automated part (discovery, registration, the token requests) has
//! `connectTimeoutMs` in all, the person's own time (at the login page, entering a device code) aside,
//! and each request within it at most `OAUTH_REQUEST_TIMEOUT_MS` for its whole answer: the response's
//! headers and every byte of its body, so a server that drips a byte at a time ends there as surely as
//! a silent one. A request that runs out is the login's failure, `mcp_auth_error` naming the step.

use crate::egress::display_url;
use crate::error::{McpError, Result};
use std::future::Future;
use std::time::{Duration, Instant};
use url::Url;

/// What is left of one login's time for its automated part.
#[derive(Debug, Clone, Copy)]
pub struct LoginBudget {
    until: Instant,
    /// The most one request gets, whatever is left.
    per_request: Duration,
}

impl LoginBudget {
    /// `total` for the automated part of the login starting now, `per_request` at most for each request.
    pub fn new(total: Duration, per_request: Duration) -> Self {
        LoginBudget { until: Instant::now() + total, per_request }
    }

    /// The deadline of the next request: what is left, at most `per_request`.
    pub fn request(&self) -> Duration {
        self.until.saturating_duration_since(Instant::now()).min(self.per_request)
    }

    /// The budget once the person has taken `spent`: their time does not count.
    pub fn after_person(self, spent: Duration) -> Self {
        LoginBudget { until: self.until + spent, ..self }
    }
}

/// `work` (one request: sent, and its answer read whole) under `deadline`; `None` when it ran out,
/// whether this bound or the exchange's own `Timeout` (the same deadline, passed in) said so.
pub async fn in_time<T>(deadline: Duration, work: impl Future<Output = Result<T>>) -> Option<Result<T>> {
    match tokio::time::timeout(deadline, work).await {
        Ok(Err(McpError::Timeout { .. })) | Err(_) => None,
        Ok(done) => Some(done),
    }
}

/// A request that got no complete answer within `deadline`: the step, and where it went without the
/// URL's query (it may carry a key).
pub fn timed_out(step: &str, url: &Url, deadline: Duration) -> McpError {
    McpError::Auth(format!(
        "{step} timed out: {} sent no complete answer within {} ms",
        display_url(url),
        deadline.as_millis()
    ))
}

/// [`in_time`], its running out being [`timed_out`].
pub async fn request_in_time<T>(
    step: &str,
    url: &Url,
    deadline: Duration,
    work: impl Future<Output = Result<T>>,
) -> Result<T> {
    in_time(deadline, work).await.unwrap_or_else(|| Err(timed_out(step, url, deadline)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_request_gets_what_is_left_at_most_its_own_bound_and_the_persons_time_is_not_counted() {
        let budget = LoginBudget::new(Duration::from_secs(3), Duration::from_secs(30));
        assert!(budget.request() <= Duration::from_secs(3) && budget.request() > Duration::from_secs(2));
        let generous = LoginBudget::new(Duration::from_secs(120), Duration::from_secs(30));
        assert_eq!(generous.request(), Duration::from_secs(30));
        let spent = LoginBudget::new(Duration::ZERO, Duration::from_secs(30));
        assert_eq!(spent.request(), Duration::ZERO);
        assert!(spent.after_person(Duration::from_secs(60)).request() > Duration::from_secs(29));
    }

    #[tokio::test]
    async fn running_out_names_the_step_and_never_the_query() {
        let url = Url::parse("http://127.0.0.1:9/.well-known/x?key=sekrit").unwrap();
        let hung = request_in_time("fetching x", &url, Duration::from_millis(20), std::future::pending::<Result<()>>())
            .await
            .unwrap_err();
        assert_eq!(hung.code(), "mcp_auth_error");
        assert_eq!(
            hung.to_string(),
            "fetching x timed out: http://127.0.0.1:9/.well-known/x sent no complete answer within 20 ms"
        );
        // The exchange's own timeout (the same deadline) is the same failure.
        let inner = request_in_time("fetching x", &url, Duration::from_secs(5), async {
            Err::<(), _>(McpError::Timeout { after_ms: 5 })
        })
        .await;
        assert!(inner.unwrap_err().to_string().starts_with("fetching x timed out"));
        let other = request_in_time("fetching x", &url, Duration::from_secs(5), async {
            Err::<(), _>(McpError::Transport("refused".into()))
        })
        .await;
        assert_eq!(other.unwrap_err().code(), "mcp_transport_error");
    }
}
