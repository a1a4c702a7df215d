//! `allowedHosts`: the SSRF guard. A URL whose host is outside the list is refused before any request;
//! so is every redirect hop (checked in `egress.rs`, which follows redirects itself), and so is a DNS
//! answer that points a listed name at an internal address
//! (loopback, private, link-local, cloud metadata) unless that exact host or address is listed itself.
//! Through a `proxy`, the proxy resolves the server's name, so the DNS-answer check covers the proxy's
//! own name only; the proxy's host must be listed like any other.
//!
//! Hosts are compared after the WHATWG URL parser has canonicalized them, so `2130706433`, `0177.0.0.1`
//! and `127.1` are all `127.0.0.1`; an IPv4-mapped IPv6 address is compared as its IPv4 address; a
//! trailing dot is ignored; `user@host` is judged by `host` (and userinfo is refused at configuration).

use crate::error::{McpError, Result};
use std::collections::HashSet;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::Arc;
use url::{Host, Url};

/// Entries of `allowedHosts`, normalized.
#[derive(Debug, Default)]
pub struct HostGuard {
    /// Exact host names, lowercase, without a trailing dot.
    names: HashSet<String>,
    /// `*.example.com` entries, kept as `.example.com`.
    suffixes: Vec<String>,
    /// `*`: any host name (never an IP literal, never an internal address by DNS).
    any_name: bool,
    addresses: HashSet<IpAddr>,
}

/// How a host matched the list; only an exact entry vouches for an internal address.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Match {
    Exact,
    Pattern,
    None,
}

impl HostGuard {
    pub fn new(entries: &[String]) -> Result<Self> {
        let mut guard = HostGuard::default();
        for entry in entries {
            let entry = entry.trim();
            if entry == "*" {
                guard.any_name = true;
            } else if let Some(domain) = entry.strip_prefix("*.") {
                guard.suffixes.push(format!(".{}", normalize_name(domain)));
            } else {
                let bare = entry.strip_prefix('[').and_then(|e| e.strip_suffix(']')).unwrap_or(entry);
                match Host::parse(bare).or_else(|_| Host::parse(entry)) {
                    Ok(Host::Domain(name)) => {
                        guard.names.insert(normalize_name(&name));
                    }
                    Ok(Host::Ipv4(ip)) => {
                        guard.addresses.insert(IpAddr::V4(ip));
                    }
                    Ok(Host::Ipv6(ip)) => {
                        guard.addresses.insert(canonical_ip(IpAddr::V6(ip)));
                    }
                    Err(_) => {
                        return Err(McpError::config(format!("allowedHosts: {entry:?} is not a host name or address")))
                    }
                }
            }
        }
        Ok(guard)
    }

    /// The list in a canonical form: two guards with equal identities make the same decision for every
    /// URL and DNS answer, so they may share one HTTP client (whose resolver applies the guard).
    pub fn identity(&self) -> Vec<String> {
        // Each entry is tagged with its kind: `*` is a legal character of a host name, so an exact name
        // `[*.b.test]` and the pattern `*.b.test` would otherwise render alike and decide differently.
        let mut entries: Vec<String> = self.names.iter().map(|n| format!("name:{n}")).collect();
        entries.extend(self.suffixes.iter().map(|s| format!("suffix:{s}")));
        if self.any_name {
            entries.push("any".to_owned());
        }
        entries.extend(self.addresses.iter().map(|a| format!("addr:{a}")));
        entries.sort_unstable();
        entries.dedup();
        entries
    }

    fn classify(&self, host: Host<&str>) -> Match {
        match host {
            Host::Domain(name) => {
                let name = normalize_name(name);
                if let Ok(ip) = name.parse::<IpAddr>() {
                    return if self.addresses.contains(&canonical_ip(ip)) { Match::Exact } else { Match::None };
                }
                if self.names.contains(&name) {
                    Match::Exact
                } else if self.any_name || self.suffixes.iter().any(|s| name.ends_with(s.as_str())) {
                    Match::Pattern
                } else {
                    Match::None
                }
            }
            Host::Ipv4(ip) => self.address_match(IpAddr::V4(ip)),
            Host::Ipv6(ip) => self.address_match(IpAddr::V6(ip)),
        }
    }

    fn address_match(&self, ip: IpAddr) -> Match {
        if self.addresses.contains(&canonical_ip(ip)) {
            Match::Exact
        } else {
            Match::None
        }
    }

    /// Refuse a URL whose host is not in the list.
    pub fn check_url(&self, url: &Url) -> Result<()> {
        match url.host() {
            Some(host) if self.classify(host.clone()) != Match::None => Ok(()),
            _ => Err(McpError::HostNotAllowed(format!(
                "host {} is not in allowedHosts; no request was sent",
                url.host_str().unwrap_or("(none)")
            ))),
        }
    }

    /// Keep the addresses a name may be reached at. Internal ones only when the exact host, or the
    /// address itself, is listed.
    pub fn filter_resolved(&self, name: &str, addresses: Vec<SocketAddr>) -> Result<Vec<SocketAddr>> {
        let exact = self.classify(Host::Domain(name)) == Match::Exact;
        let kept: Vec<SocketAddr> = addresses
            .into_iter()
            .filter(|a| exact || !is_internal(a.ip()) || self.addresses.contains(&canonical_ip(a.ip())))
            .collect();
        if kept.is_empty() {
            return Err(McpError::HostNotAllowed(format!(
                "host {name} resolves to internal addresses only, and neither the host nor an address is listed in \
                 allowedHosts; no request was sent"
            )));
        }
        Ok(kept)
    }
}

fn normalize_name(name: &str) -> String {
    name.trim_end_matches('.').to_ascii_lowercase()
}

/// An IPv4-mapped IPv6 address (`::ffff:a.b.c.d`) is the IPv4 address.
pub fn canonical_ip(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map(IpAddr::V4).unwrap_or(ip),
        v4 => v4,
    }
}

/// Addresses a public URL has no business resolving to: this machine, private networks, link-local
/// (which holds the cloud metadata service at 169.254.169.254), carrier-grade NAT, and their IPv6 kin.
pub fn is_internal(ip: IpAddr) -> bool {
    match canonical_ip(ip) {
        IpAddr::V4(v4) => {
            v4.is_loopback()
                || v4.is_private()
                || v4.is_link_local()
                || v4.is_unspecified()
                || v4.is_broadcast()
                || v4.is_multicast()
                || in_v4_net(v4, Ipv4Addr::new(100, 64, 0, 0), 10)
                || in_v4_net(v4, Ipv4Addr::new(0, 0, 0, 0), 8)
        }
        IpAddr::V6(v6) => {
            v6.is_loopback()
                || v6.is_unspecified()
                || v6.is_multicast()
                || (v6.segments()[0] & 0xfe00) == 0xfc00 // unique local, incl. fd00:ec2::254 (metadata)
                || (v6.segments()[0] & 0xffc0) == 0xfe80 // link-local
                || v6 == Ipv6Addr::new(0x64, 0xff9b, 0, 0, 0, 0, 0xa9fe, 0xa9fe)
            // NAT64 of 169.254.169.254
        }
    }
}

fn in_v4_net(ip: Ipv4Addr, net: Ipv4Addr, prefix: u32) -> bool {
    let mask = if prefix == 0 { 0 } else { u32::MAX << (32 - prefix) };
    (u32::from(ip) & mask) == (u32::from(net) & mask)
}

/// The marker error our resolver raises, found again in reqwest's error chain (`egress::request_error`).
#[derive(Debug)]
pub struct HostRefused(pub String);

impl std::fmt::Display for HostRefused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for HostRefused {}

/// DNS through the guard: every connection, redirects included, dials only addresses it allows.
/// Checking the answer that is then used (rather than resolving twice) leaves no rebinding window.
pub struct GuardedResolver {
    pub guard: Arc<HostGuard>,
}

impl reqwest::dns::Resolve for GuardedResolver {
    fn resolve(&self, name: reqwest::dns::Name) -> reqwest::dns::Resolving {
        let guard = self.guard.clone();
        let host = name.as_str().to_owned();
        Box::pin(async move {
            let found: Vec<SocketAddr> = tokio::net::lookup_host((host.as_str(), 0)).await?.collect();
            match guard.filter_resolved(&host, found) {
                Ok(kept) => Ok(Box::new(kept.into_iter()) as reqwest::dns::Addrs),
                Err(e) => Err(Box::new(HostRefused(e.to_string())) as Box<dyn std::error::Error + Send + Sync>),
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn guard(entries: &[&str]) -> HostGuard {
        HostGuard::new(&entries.iter().map(|s| s.to_string()).collect::<Vec<_>>()).unwrap()
    }

    fn allowed(g: &HostGuard, url: &str) -> bool {
        g.check_url(&Url::parse(url).unwrap()).is_ok()
    }

    /// `identity` is what the shared HTTP clients are keyed by, and the client's DNS guard is the guard of
    /// whichever toolset built it. A bracketed name entry `[*.b.test]` is an exact name, `*.b.test` a
    /// pattern: they decide a DNS answer that points at an internal address differently, so their
    /// identities must differ.
    #[test]
    fn equal_identities_make_equal_dns_decisions() {
        let exact = guard(&["[*.b.test]"]);
        let pattern = guard(&["*.b.test"]);
        // Such a host is a URL host a redirect can name, and the pattern admits it.
        assert!(allowed(&pattern, "http://*.b.test/latest/meta-data/"));
        let internal = vec![SocketAddr::from(([169, 254, 169, 254], 80))];
        let decisions = (
            exact.filter_resolved("*.b.test", internal.clone()).is_ok(),
            pattern.filter_resolved("*.b.test", internal).is_ok(),
        );
        assert!(
            exact.identity() != pattern.identity() || decisions.0 == decisions.1,
            "identities {:?} == {:?}, DNS decisions {decisions:?}",
            exact.identity(),
            pattern.identity()
        );
    }

    #[test]
    fn ip_literal_tricks_are_canonicalized() {
        let g = guard(&["127.0.0.1"]);
        for url in [
            "http://127.0.0.1/",
            "http://2130706433/",
            "http://0177.0.0.1/",
            "http://0x7f.1/",
            "http://127.1/",
            "http://[::ffff:127.0.0.1]/",
        ] {
            assert!(allowed(&g, url), "{url}");
        }
        let g = guard(&["example.com"]);
        for url in [
            "http://2130706433/",
            "http://[::ffff:7f00:1]/",
            "http://example.com@127.0.0.1/",
            "http://example.com.evil.test/",
        ] {
            assert!(!allowed(&g, url), "{url}");
        }
        assert!(allowed(&g, "http://EXAMPLE.com./mcp"));
        assert!(allowed(&g, "http://evil.test@example.com/"));
    }

    #[test]
    fn patterns_match_names_but_never_vouch_for_internal_addresses() {
        let g = guard(&["*.example.com", "intranet.corp"]);
        assert!(allowed(&g, "https://api.example.com/"));
        assert!(!allowed(&g, "https://example.com.attacker.net/"));
        let loopback = vec!["127.0.0.1:0".parse().unwrap()];
        let public = vec!["93.184.216.34:0".parse().unwrap()];
        assert!(g.filter_resolved("api.example.com", loopback.clone()).is_err());
        assert!(g.filter_resolved("api.example.com", public).is_ok());
        assert!(g.filter_resolved("intranet.corp", vec!["10.1.2.3:0".parse().unwrap()]).is_ok(), "exact host vouches");
        let metadata = vec!["169.254.169.254:0".parse().unwrap()];
        assert_eq!(g.filter_resolved("api.example.com", metadata).unwrap_err().code(), "mcp_host_not_allowed");
        let g = guard(&["*", "127.0.0.1"]);
        assert!(g.filter_resolved("anything.test", loopback).is_ok(), "a listed address vouches for itself");
        assert!(!allowed(&g, "http://10.0.0.1/"), "`*` never admits an IP literal");
    }

    #[test]
    fn internal_ranges() {
        for ip in [
            "127.0.0.1",
            "10.0.0.1",
            "172.16.0.1",
            "192.168.1.1",
            "169.254.169.254",
            "100.64.0.1",
            "0.0.0.0",
            "::1",
            "fd00:ec2::254",
            "fe80::1",
            "::ffff:10.0.0.1",
        ] {
            assert!(is_internal(ip.parse().unwrap()), "{ip}");
        }
        for ip in ["93.184.216.34", "8.8.8.8", "2606:4700::1111"] {
            assert!(!is_internal(ip.parse().unwrap()), "{ip}");
        }
    }

    #[test]
    fn bad_entries_are_config_errors() {
        assert_eq!(HostGuard::new(&["exa mple".to_string()]).unwrap_err().code(), "mcp_config_invalid");
    }
}
