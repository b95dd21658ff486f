//! docs/protocol.md held to the code: its examples are real requests and replies, and an
//! integrator copies them, so each must still be what this build sends and reads.

use crate::proto::{decode_request, Reply, MAX_REQUEST, PROTOCOL};

const DOC: &str = include_str!("../../../docs/protocol.md");

/// The fenced blocks whose info string is exactly `info` (e.g. "json request").
fn blocks(info: &str) -> Vec<&'static str> {
    let mut out = vec![];
    let mut rest = DOC;
    let open = format!("```{info}\n");
    while let Some(i) = rest.find(&open) {
        let body = &rest[i + open.len()..];
        let end = body.find("\n```").expect("a closed block");
        out.push(&body[..end]);
        rest = &body[end..];
    }
    out
}

/// Every op this build knows, from the decoder's own refusal of an unknown one.
fn ops() -> Vec<String> {
    let e = decode_request(format!("{{\"v\":{PROTOCOL},\"op\":\"?\"}}").as_bytes()).unwrap_err().to_string();
    let list = e.split("expected one of").nth(1).expect("serde names the variants");
    list.split('`').skip(1).step_by(2).map(String::from).collect()
}

#[test]
fn every_request_example_decodes_and_every_op_has_one() {
    let mut seen = std::collections::BTreeSet::new();
    for line in blocks("json request").iter().flat_map(|b| b.lines()) {
        let req = decode_request(line.as_bytes()).unwrap_or_else(|e| panic!("docs/protocol.md request {line}: {e}"));
        seen.insert(serde_json::to_value(&req).unwrap()["op"].as_str().unwrap().to_string());
    }
    let all: std::collections::BTreeSet<String> = ops().into_iter().collect();
    assert!(all.len() >= 10, "{all:?}");
    assert_eq!(seen, all, "docs/protocol.md has an example request of every op, and only of these");
    for line in blocks("json bad-request").iter().flat_map(|b| b.lines()) {
        assert!(decode_request(line.as_bytes()).is_err(), "docs/protocol.md shows {line} refused");
    }
}

#[test]
fn every_reply_example_decodes_and_encodes_back_to_itself() {
    let replies = blocks("json reply");
    assert!(replies.len() >= 20, "{}", replies.len());
    for b in replies {
        let shown: serde_json::Value = serde_json::from_str(b).unwrap_or_else(|e| panic!("docs/protocol.md reply is not JSON: {e}: {b}"));
        let reply: Reply = serde_json::from_value(shown.clone()).unwrap_or_else(|e| panic!("docs/protocol.md reply: {e}: {b}"));
        assert_eq!(reply.v, Some(PROTOCOL), "{b}");
        assert_eq!(reply.ok, reply.data.is_some(), "{b}");
        assert_eq!(serde_json::to_value(&reply).unwrap(), shown, "docs/protocol.md reply, as this build writes it");
    }
}

/// The refusals the decoder makes, on the page as this build's connection thread writes
/// them (the request, then its reply), word for word and with their kind.
#[test]
fn the_decoders_refusals_on_the_page_are_its_own() {
    let replies: Vec<serde_json::Value> = blocks("json reply").iter().map(|b| serde_json::from_str(b).unwrap()).collect();
    for line in [r#"{"op":"status"}"#, r#"{"v":4,"op":"status"}"#, r#"{"v":3,"op":"frob"}"#, r#"{"v":3,"op":"run","tickets":0}"#] {
        let e = decode_request(line.as_bytes()).unwrap_err();
        let want = serde_json::to_value(Reply::err(e.into())).unwrap();
        assert!(replies.contains(&want), "docs/protocol.md shows the refusal of {line} as {want}");
    }
    for r in replies.iter().filter(|r| r["ok"] == false) {
        assert!(r["kind"].is_string(), "docs/protocol.md: every refusal has its kind: {r}");
    }
}

/// 65536 as the page writes it: 65,536.
fn thousands(n: usize) -> String {
    let d = n.to_string();
    let mut out = String::new();
    for (i, c) in d.chars().enumerate() {
        if i > 0 && (d.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}

#[test]
fn the_numbers_on_the_page_are_the_codes() {
    use crate::daemon::{audit, limits, server};
    assert!(DOC.contains(&format!("**protocol version {PROTOCOL}**")));
    assert!(DOC.contains(&format!("request larger than {MAX_REQUEST} bytes refused")));
    let l = crate::config::Limits::default();
    let secs = |d: std::time::Duration| format!("{} s", d.as_secs());
    // Every line of the page that names the setting (the limits table's rows) gives this value.
    let rows = [
        ("`MAX_REQUEST`", format!("{} bytes", thousands(MAX_REQUEST))),
        ("`DEADLINE`", secs(server::DEADLINE)),
        ("`WAIT`", secs(server::WAIT)),
        ("`TIMEOUT` and `ALLOT_TIMEOUT`", secs(crate::client::TIMEOUT)),
        ("`MAX_WAIT`", format!("up to {}", secs(limits::MAX_WAIT))),
        ("`COST_UNIT`", format!("{} ms", limits::COST_UNIT.as_millis())),
        ("`limits.connections_per_user`", format!("| {} |", l.connections_per_user)),
        ("`limits.connections`", format!("| {} |", l.connections)),
        ("`limits.requests_per_second`", format!("{} a second, bursts of {}", l.requests_per_second, l.request_burst)),
        ("`limits.jobs_per_user`", format!("| {} |", l.jobs_per_user)),
        ("`MAX_LOG_LIMIT`", format!("at most {}", thousands(audit::MAX_LOG_LIMIT))),
    ];
    for (key, value) in rows {
        let lines: Vec<&str> = DOC.lines().filter(|x| x.contains(key)).collect();
        assert!(!lines.is_empty(), "docs/protocol.md names {key}");
        for x in lines {
            assert!(x.contains(&value), "docs/protocol.md: {key} is {value}, the page says: {x}");
        }
    }
}
