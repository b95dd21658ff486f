//! The protocol's unit tests (proto_props.rs holds its decoder's properties).
use super::*;

#[path = "proto_hostile_tests.rs"]
mod hostile;

#[test]
fn lines_round_trip_and_unknown_fields_are_refused() {
    let r = Request::Set {
        pids: Pids::new([1, 2]).unwrap(),
        tickets: Tickets::new(5).ok(),
        cap: CapChange::Keep,
        background: Some(true),
        force: false,
        mem: MemChange::Keep,
    };
    assert_eq!(decode_request(&encode_request(&r)).unwrap(), r);
    assert!(matches!(decode_request(b"{\"v\":3,\"op\":\"status\",\"x\":1}"), Err(LineError::Malformed(e)) if e.contains("unknown field")));
    assert!(matches!(decode_request(b"{\"v\":3,\"op\":\"status\"}"), Ok(Request::Status {})));
    assert!(matches!(decode_request(b"{\"v\":3,\"op\":\"run\",\"command\":[\"x\"]}"), Err(LineError::Malformed(_))));
}

#[test]
fn every_response_encodes() {
    let c = CurrencyView { name: "ci".into(), kind: "n".into(), funding: 1, cap: None, weight: 1, jobs: 0, active: 0, usage: 0.0, memory: None };
    for r in [
        Response::Currencies(CurrenciesView { currencies: vec![c] }),
        Response::Changed(Changed { jobs: vec!["1".into()], focus: None, warnings: vec!["process 5 left its login session".into()] }),
        Response::Funding(FundingView { currency: "x".into(), funding: 5, cap: Some("4!".into()) }),
    ] {
        let line = Reply::ok(r.clone()).encode();
        let back: Reply = serde_json::from_slice(&line).unwrap();
        assert_eq!(back.data, Some(r));
    }
}

#[test]
fn versions_are_named() {
    assert_eq!(decode_request(b"{\"op\":\"status\"}"), Err(LineError::Version(1)));
    assert_eq!(decode_request(b"{\"v\":2,\"op\":\"status\"}"), Err(LineError::Version(2)));
    assert_eq!(decode_request(b"{\"v\":4,\"op\":\"status\"}"), Err(LineError::Version(4)));
    assert!(LineError::Version(1).to_string().contains("protocol 1"));
    assert!(LineError::Version(2).to_string().contains("speaks protocol 2, the daemon speaks 3"));
    assert!(LineError::Version(4).to_string().contains("restart the daemon"));
    assert!(matches!(decode_request(b"[1]"), Err(LineError::Malformed(_))));
    assert!(matches!(decode_request(b"{\"v\":\"2\"}"), Err(LineError::Malformed(_))));
}

#[test]
fn a_refusal_keeps_its_kind_and_an_unknown_kind_reads_as_other() {
    let line = Reply::err(Refusal::not_found("no process 7")).encode();
    assert_eq!(
        String::from_utf8(line.clone()).unwrap(),
        format!("{{\"v\":{PROTOCOL},\"ok\":false,\"error\":\"no process 7\",\"kind\":\"not_found\"}}\n")
    );
    let back: Reply = serde_json::from_slice(&line).unwrap();
    assert_eq!(back.refusal(), Some(Refusal::not_found("no process 7")));
    let newer: Reply = serde_json::from_str(r#"{"v":3,"ok":false,"error":"x","kind":"quota_exceeded"}"#).unwrap();
    assert_eq!(newer.refusal().map(|r| r.kind), Some(ErrorKind::Other));
    let older: Reply = serde_json::from_str(r#"{"v":2,"ok":false,"error":"x"}"#).unwrap();
    assert_eq!(older.refusal().map(|r| r.kind), Some(ErrorKind::Other));
    assert_eq!(Reply::ok(Response::Log(LogView { records: vec![] })).refusal(), None);
    for k in [ErrorKind::Malformed, ErrorKind::NotPermitted, ErrorKind::TooLong] {
        assert_eq!(serde_json::to_value(k).unwrap(), k.as_str());
    }
}
