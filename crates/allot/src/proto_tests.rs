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
        oom_group: None,
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

/// What `allot --json` prints of a view (the view alone, without the reply's kind tag) reads
/// back as that view: the product's integration tests read the CLI's output this way, so an
/// optional field left off the line must read back as absent, not fail.
#[test]
fn each_view_as_the_cli_prints_it_reads_back_as_itself() {
    fn back<T: Serialize + serde::de::DeserializeOwned + PartialEq + std::fmt::Debug>(x: T) {
        let printed = serde_json::to_string_pretty(&serde_json::to_value(&x).unwrap()).unwrap();
        let read: T = serde_json::from_str(&printed).unwrap_or_else(|e| panic!("{e}: {printed}"));
        assert_eq!(read, x, "{printed}");
    }
    let job = JobView {
        id: "alice/default".into(),
        uid: 1000,
        user: "alice".into(),
        currency: "alice".into(),
        tickets: 100,
        funding: 100,
        entitlement: 0.5,
        active: false,
        usage: 0.0,
        cap: None,
        mem: None,
        oom_group: false,
        background: false,
        held: false,
        boost: true,
        focus: false,
        nice: 0,
        niced: false,
        recent: 0.0,
        runnable: 0,
        weight: 10_000,
        quota: None,
        pids: None,
        command: None,
        cgroup: "user-1000/default".into(),
        dir: String::new(),
    };
    let capped = JobView {
        id: "3".into(),
        cap: Some("0.5!".into()),
        mem: Some("4G!".into()),
        quota: Some(0.5),
        pids: Some(vec![42]),
        command: Some("sleep 9".into()),
        ..job.clone()
    };
    let cur = CurrencyView {
        name: "alice".into(),
        kind: "user".into(),
        funding: 100,
        cap: None,
        weight: 100,
        jobs: 2,
        active: 0,
        usage: 0.0,
        memory: None,
    };
    back(ShowView { ncpu: 2, outside: 0.1, jobs: vec![job, capped], currencies: vec![cur], hidden: true, unread: vec![] });
    back(StatusView {
        version: "0.1.0".into(),
        protocol: PROTOCOL,
        pid: 7,
        uptime_s: 9,
        cgroup_version: "v2".into(),
        cgroup_root: "/sys/fs/cgroup/allot".into(),
        manager: "allot".into(),
        ncpu: 2,
        jobs: 2,
        features: [("cpu_idle".to_string(), true)].into(),
        degraded: vec![],
        tracking: "events".into(),
        placement: "every human user".into(),
        rt: "none".into(),
        outside: 0.0,
        outside_weight: None,
        scheduler: Default::default(),
        io: Default::default(),
        counters: Counters::default(),
        last_reload: None,
    });
    back(FundingView { currency: "ci".into(), funding: 5, cap: None });
    back(JobMade { job: "3".into(), currency: "alice".into(), tickets: 100, cgroup: "user-1000/j3-u1000".into() });
    back(Changed { jobs: vec!["3".into()], focus: None, warnings: vec![] });
    let reason = Reason { state: "boost".into(), on: true, since_s: None, because: "asleep".into() };
    back(ExplainView {
        job: "3".into(),
        currency: "alice".into(),
        entitlement: 1.0,
        window: 0.0,
        last: 0.0,
        threshold: 0.5,
        weight: 100,
        quota: None,
        reasons: vec![reason],
    });
    let rec = AuditRecord { time: 1.5, uid: 0, pid: 9, request: "fund ci 5".into(), refused: None, changes: vec![], jobs: vec![], owners: vec![] };
    back(LogView { records: vec![rec] });
    back(RulesView { pid: 9, exe: "/bin/sleep".into(), comm: "sleep".into(), matched: None, checked: vec![] });
}
