//! The config's `[metrics]`: where the endpoint listens and who may scrape it: `allow`, a list of addresses and
//! networks (`10.0.0.0/8`, `192.0.2.7`, `2001:db8::/32`). With no list only loopback
//! peers may, and the config refuses a non-loopback `listen` without one; with a list,
//! only the peers in it (loopback too only if listed), so what the admin wrote is all
//! that is let in.

use serde::{Deserialize, Serialize};
use std::net::IpAddr;
use std::str::FromStr;

/// The optional HTTP metrics endpoint.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct MetricsConfig {
    /// Address to serve `GET /metrics` on, e.g. "127.0.0.1:9743" (off when unset).
    pub listen: Option<String>,
    /// Who may scrape: addresses and networks ("10.0.0.0/8"); required when `listen` is
    /// not loopback. Empty: loopback peers only.
    pub allow: Vec<String>,
}

/// An address with a prefix length: a network (a bare address is a network of one).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Net {
    addr: IpAddr,
    prefix: u8,
}

impl FromStr for Net {
    type Err = String;
    fn from_str(s: &str) -> Result<Net, String> {
        let bad = |why: &str| {
            format!("{s:?} is not an address or network ({why}): give an IPv4 or IPv6 address, alone or with a prefix length (192.0.2.7, 10.0.0.0/8, 2001:db8::/32)")
        };
        let (a, p) = match s.trim().split_once('/') {
            Some((a, p)) => (a, Some(p)),
            None => (s.trim(), None),
        };
        let addr: IpAddr = a.parse().map_err(|_| bad("not an address"))?;
        let max = if addr.is_ipv4() { 32 } else { 128 };
        let prefix = match p {
            None => max,
            Some(p) => match p.parse::<u8>() {
                Ok(p) if p <= max => p,
                _ => return Err(bad(&format!("the prefix length must be 0..{max}"))),
            },
        };
        // An IPv4-mapped IPv6 network (::ffff:10.0.0.0/104) is the IPv4 network it maps,
        // as peers are compared (contains): its prefix counts the IPv4 bits.
        match addr.to_canonical() {
            IpAddr::V4(v4) if addr.is_ipv6() => match prefix.checked_sub(96) {
                Some(p) => Ok(Net { addr: IpAddr::V4(v4), prefix: p }),
                None => Err(bad("an IPv4-mapped network's prefix length must be 96..128")),
            },
            _ => Ok(Net { addr, prefix }),
        }
    }
}

impl Net {
    /// Whether `ip` is in this network (an IPv4-mapped IPv6 peer, as a dual-stack
    /// listener sees IPv4 clients, counts as its IPv4 address).
    pub fn contains(&self, ip: IpAddr) -> bool {
        let bits = |a: IpAddr| -> (u128, u32) {
            match a.to_canonical() {
                IpAddr::V4(v) => (u32::from(v) as u128, 32),
                IpAddr::V6(v) => (u128::from(v), 128),
            }
        };
        let ((net, w), (peer, pw)) = (bits(self.addr), bits(ip));
        if w != pw {
            return false;
        }
        let host = w.saturating_sub(self.prefix as u32);
        host >= 128 || net >> host == peer >> host
    }
}

/// Parses a config's list (each entry checked; the first bad one is the error).
pub fn parse(list: &[String]) -> Result<Vec<Net>, String> {
    list.iter().map(|s| s.parse()).collect()
}

/// `[metrics]`'s rules: every `allow` entry parses, and a `listen` address that is not
/// loopback has a list (a host name is checked once bound, in the daemon's endpoint).
/// Err: the setting's dotted path and why.
pub fn check(m: &MetricsConfig) -> Result<(), (String, String)> {
    let nets = parse(&m.allow).map_err(|e| ("metrics.allow".to_string(), format!("metrics.allow: {e}")))?;
    let Some(listen) = &m.listen else { return Ok(()) };
    match listen.parse::<std::net::SocketAddr>() {
        Ok(a) if nets.is_empty() && !a.ip().is_loopback() => Err(("metrics.listen".into(), needs_allow(listen))),
        _ => Ok(()),
    }
}

/// The error for a non-loopback `listen` without `allow`.
pub fn needs_allow(listen: &str) -> String {
    format!(
        "metrics.listen {listen:?} is not a loopback address, so metrics.allow must name who may scrape it: addresses or networks, e.g. allow = [\"10.0.0.0/8\", \"192.0.2.7\"] (others get 403); a loopback address (127.0.0.1:9743) needs none"
    )
}

/// Whether `peer` may scrape: in `allow`, or loopback when the list is empty.
pub fn allowed(allow: &[Net], peer: IpAddr) -> bool {
    if allow.is_empty() {
        peer.to_canonical().is_loopback()
    } else {
        allow.iter().any(|n| n.contains(peer))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn an_ipv4_mapped_network_is_the_ipv4_network_it_maps() {
        // Before: ::ffff:10.0.0.0/104 compared 32 IPv4 bits against a prefix of 104, and the
        // wrapped subtraction let every IPv4 peer in.
        let n: Net = "::ffff:10.0.0.0/104".parse().unwrap();
        assert!(n.contains(ip("10.9.8.7")) && n.contains(ip("::ffff:10.1.2.3")));
        assert!(!n.contains(ip("192.0.2.7")) && !n.contains(ip("::ffff:192.0.2.7")));
        let one: Net = "::ffff:192.0.2.7".parse().unwrap();
        assert!(one.contains(ip("192.0.2.7")) && !one.contains(ip("192.0.2.8")));
        let e = "::ffff:10.0.0.0/64".parse::<Net>().unwrap_err();
        assert!(e.contains("96..128") && e.contains("::ffff:10.0.0.0/64"), "{e}");
    }

    #[test]
    fn networks_hold_their_addresses_only() {
        let n: Net = "10.0.0.0/8".parse().unwrap();
        assert!(n.contains(ip("10.255.1.2")) && !n.contains(ip("11.0.0.1")));
        assert!(n.contains(ip("::ffff:10.1.2.3")), "IPv4 clients of a dual-stack listener");
        let one: Net = "192.0.2.7".parse().unwrap();
        assert!(one.contains(ip("192.0.2.7")) && !one.contains(ip("192.0.2.8")));
        let v6: Net = "2001:db8::/32".parse().unwrap();
        assert!(v6.contains(ip("2001:db8:1::5")) && !v6.contains(ip("2001:db9::1")) && !v6.contains(ip("10.0.0.1")));
        let all: Net = "0.0.0.0/0".parse().unwrap();
        assert!(all.contains(ip("203.0.113.9")) && !all.contains(ip("2001:db8::1")));
        assert!("::/0".parse::<Net>().unwrap().contains(ip("2001:db8::1")));
    }

    #[test]
    fn a_bad_entry_is_named_with_the_forms() {
        for (s, why) in [("10.0.0.0/33", "0..32"), ("2001:db8::/129", "0..128"), ("example.org", "not an address"), ("10.0.0.0/x", "0..32")] {
            let e = s.parse::<Net>().unwrap_err();
            assert!(e.starts_with(&format!("{s:?} is not an address or network")) && e.contains(why) && e.contains("10.0.0.0/8"), "{e}");
        }
        assert!(parse(&["10.0.0.0/8".into(), "nope".into()]).unwrap_err().contains("\"nope\""));
    }

    #[test]
    fn a_network_listen_needs_an_allow_list() {
        let m = |listen: &str, allow: &[&str]| MetricsConfig { listen: Some(listen.into()), allow: allow.iter().map(|s| s.to_string()).collect() };
        let (key, e) = check(&m("0.0.0.0:9743", &[])).unwrap_err();
        assert_eq!(key, "metrics.listen");
        assert!(e.contains("\"0.0.0.0:9743\" is not a loopback address") && e.contains("metrics.allow") && e.contains("403"), "{e}");
        assert!(check(&m("[::]:9743", &[])).is_err() && check(&m("192.0.2.1:9743", &[])).is_err());
        assert!(check(&m("0.0.0.0:9743", &["10.0.0.0/8"])).is_ok());
        assert!(check(&m("127.0.0.1:9743", &[])).is_ok() && check(&m("[::1]:9743", &[])).is_ok());
        assert_eq!(check(&m("127.0.0.1:9743", &["10.0.0.0/40"])).unwrap_err().0, "metrics.allow");
    }

    #[test]
    fn no_list_means_loopback_only_and_a_list_means_only_it() {
        assert!(allowed(&[], ip("127.0.0.1")) && allowed(&[], ip("::1")) && allowed(&[], ip("::ffff:127.0.0.1")));
        assert!(!allowed(&[], ip("10.0.0.1")));
        let list = parse(&["10.0.0.0/8".into()]).unwrap();
        assert!(allowed(&list, ip("10.0.0.1")) && !allowed(&list, ip("192.0.2.1")));
        assert!(!allowed(&list, ip("127.0.0.1")), "loopback only when listed");
    }
}
