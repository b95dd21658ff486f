//! Round trips of the messages allot and systemd actually exchange (proptest, 256 cases
//! each): every call the client builds (with the body builders [`super::Systemd`] uses)
//! and every kind of reply and signal systemd and logind send it, with any names, pids
//! and numbers, encodes and decodes back to itself, header and body, whole or read as the
//! client reads it (header first); a ListUnitsByPatterns reply reads back as the units it
//! listed. dbus/props.rs holds the format itself to generated values and hostile bytes.

use super::*;
use crate::ipc::dbus::message::{Message, ERROR, METHOD_RETURN, SIGNAL};
use proptest::prelude::*;

/// Any text D-Bus carries (no NUL), short.
fn text() -> impl Strategy<Value = String> {
    "[^\u{0}]{0,24}"
}

/// An object path as systemd makes them (`/org/freedesktop/systemd1/unit/allot_3auser_2d1000_2escope`).
fn path() -> impl Strategy<Value = String> {
    "(/[A-Za-z0-9_]{1,12}){1,5}"
}

/// Encodes with `serial`, decodes whole and header-then-body; both must equal `m`.
fn round_trip(mut m: Message, serial: u32) -> std::result::Result<(), TestCaseError> {
    m.serial = serial;
    let bytes = m.encode(serial);
    let head: [u8; 16] = bytes[..16].try_into().unwrap();
    prop_assert_eq!(Message::length(&head), Ok(bytes.len()));
    let whole = Message::decode(&bytes);
    prop_assert_eq!(whole.as_ref(), Ok(&m));
    let f = Message::fixed(&head).unwrap();
    let (mut h, sig) = Message::decode_header(&bytes[..f.header_len()]).unwrap();
    h.decode_body(&sig, &bytes[f.header_len()..], f.big).unwrap();
    prop_assert_eq!(h, m);
    Ok(())
}

fn reply(to: u32, body: Vec<Value>) -> Message {
    Message {
        kind: METHOD_RETURN,
        reply_serial: Some(to),
        sender: Some(":1.0".into()),
        destination: Some(":1.42".into()),
        body,
        ..Default::default()
    }
}

#[derive(Debug, Clone)]
enum Call {
    StartScope { name: String, slice: String, pids: Vec<u32>, delegate: Option<Vec<String>>, weight: u32, quota: Option<(u64, u64)>, desc: String },
    StartSlice { name: String, idle: bool },
    SetProperties { unit: String, runtime: bool, weight: Option<u32>, quota: Option<(u64, u64)> },
    Attach { unit: String, sub: String, pids: Vec<u32> },
    OneName { method: &'static str, unit: String },
    ByPid { pid: u32 },
    Get { path: String, iface: String, name: String },
    List { states: Vec<String>, patterns: Vec<String> },
}

fn max((quota_us, period_us): (u64, u64)) -> crate::cgroup::max::Max {
    crate::cgroup::max::Max { quota_us, period_us }
}

fn call() -> impl Strategy<Value = Call> {
    let pids = prop::collection::vec(any::<u32>(), 0..4);
    let quota = prop::option::of((any::<u64>(), 1..=u64::MAX));
    prop_oneof![
        (text(), text(), pids.clone(), prop::option::of(prop::collection::vec(text(), 0..3)), any::<u32>(), quota.clone(), text())
            .prop_map(|(name, slice, pids, delegate, weight, quota, desc)| Call::StartScope { name, slice, pids, delegate, weight, quota, desc }),
        (text(), any::<bool>()).prop_map(|(name, idle)| Call::StartSlice { name, idle }),
        (text(), any::<bool>(), prop::option::of(any::<u32>()), quota).prop_map(|(unit, runtime, weight, quota)| Call::SetProperties {
            unit,
            runtime,
            weight,
            quota
        }),
        (text(), text(), pids).prop_map(|(unit, sub, pids)| Call::Attach { unit, sub, pids }),
        (prop::sample::select(vec!["StopUnit", "ResetFailedUnit", "GetUnit", "GetUnitByControlGroup"]), text())
            .prop_map(|(method, unit)| Call::OneName { method, unit }),
        any::<u32>().prop_map(|pid| Call::ByPid { pid }),
        (path(), text(), text()).prop_map(|(path, iface, name)| Call::Get { path, iface, name }),
        (prop::collection::vec(text(), 0..3), prop::collection::vec(text(), 0..3)).prop_map(|(states, patterns)| Call::List { states, patterns }),
    ]
}

/// The message the client sends for `c`, built as [`Systemd`] builds it.
fn message_of(c: Call) -> Message {
    let mgr = |method: &str, body| Message::call(SYSTEMD, MANAGER_PATH, MANAGER, method, body);
    match c {
        Call::StartScope { name, slice, pids, delegate, weight, quota, desc } => {
            let ctrls: Option<Vec<&str>> = delegate.as_ref().map(|d| d.iter().map(String::as_str).collect());
            let extra = vec![prop("Description", Value::str(desc)), CpuWeight::Weight(weight).prop(), CpuQuota::from(quota.map(max)).prop()];
            mgr("StartTransientUnit", transient_body(&name, scope_props(&slice, &pids, ctrls.as_deref(), extra)))
        }
        Call::StartSlice { name, idle } => {
            let w = if idle { CpuWeight::Idle } else { CpuWeight::Unset };
            mgr("StartTransientUnit", transient_body(&name, vec![w.prop()]))
        }
        Call::SetProperties { unit, runtime, weight, quota } => {
            let mut props = vec![CpuQuota::from(quota.map(max)).prop()];
            props.extend(weight.map(|w| CpuWeight::Weight(w).prop()));
            mgr("SetUnitProperties", set_properties_body(&unit, runtime, props))
        }
        Call::Attach { unit, sub, pids } => mgr("AttachProcessesToUnit", vec![Value::str(unit), Value::str(sub), Value::u32s(&pids)]),
        Call::OneName { method, unit } => mgr(method, vec![Value::str(unit)]),
        Call::ByPid { pid } => mgr("GetUnitByPID", vec![Value::U32(pid)]),
        Call::Get { path, iface, name } => Message::call(SYSTEMD, &path, PROPERTIES, "Get", vec![Value::str(iface), Value::str(name)]),
        Call::List { states, patterns } => mgr("ListUnitsByPatterns", vec![Value::strs(&states), Value::strs(&patterns)]),
    }
}

/// A unit as ListUnitsByPatterns lists it: `(ssssssouso)`.
fn listed() -> impl Strategy<Value = (UnitInfo, String, u32)> {
    (text(), text(), text(), text(), text(), path(), any::<u32>())
        .prop_map(|(name, description, load, active, sub, p, job)| (UnitInfo { name, description, load, active, sub }, p, job))
}

fn listed_value((u, p, job): &(UnitInfo, String, u32)) -> Value {
    Value::Struct(vec![
        Value::str(&u.name),
        Value::str(&u.description),
        Value::str(&u.load),
        Value::str(&u.active),
        Value::str(&u.sub),
        Value::str(""),
        Value::Path(p.clone()),
        Value::U32(*job),
        Value::str(""),
        Value::Path("/".into()),
    ])
}

proptest! {
    #[test]
    fn every_call_the_client_makes_round_trips(c in call(), serial in 1..=u32::MAX) {
        round_trip(message_of(c), serial)?;
    }

    #[test]
    fn every_reply_systemd_sends_round_trips(
        to in 1..=u32::MAX,
        serial in 1..=u32::MAX,
        job in path(),
        cgroup in text(),
        n in any::<u64>(),
        uid in any::<u32>(),
        units in prop::collection::vec(listed(), 0..4),
        error in ("[A-Za-z][A-Za-z0-9_]{0,8}(\\.[A-Za-z][A-Za-z0-9_]{0,8}){1,3}", text()),
        unit in text(),
        result in text(),
    ) {
        // A job (StartTransientUnit, StopUnit), an object (GetUnit), a property (Get: a
        // cgroup, a number, logind's `User` as `(uo)`), a list of units, nothing at all.
        let bodies = vec![
            vec![Value::Path(job.clone())],
            vec![Value::Variant(Box::new(Value::str(&cgroup)))],
            vec![Value::Variant(Box::new(Value::U64(n)))],
            vec![Value::Variant(Box::new(Value::Struct(vec![Value::U32(uid), Value::Path(job.clone())])))],
            vec![Value::Array("(ssssssouso)".into(), units.iter().map(listed_value).collect())],
            vec![],
        ];
        for body in bodies {
            round_trip(reply(to, body), serial)?;
        }
        // What the client makes of the list: the units it was sent.
        let m = Message::decode(&reply(to, vec![Value::Array("(ssssssouso)".into(), units.iter().map(listed_value).collect())]).encode(serial)).unwrap();
        let back = units_of(m.body[0].items().unwrap());
        prop_assert_eq!(back, units.into_iter().map(|(u, _, _)| u).collect::<Vec<_>>());
        // An error, and the JobRemoved signal a job's end is read from.
        let (name, message) = error;
        round_trip(Message { kind: ERROR, error_name: Some(name), ..reply(to, vec![Value::str(message)]) }, serial)?;
        let done = Message {
            kind: SIGNAL,
            reply_serial: None,
            path: Some(MANAGER_PATH.into()),
            interface: Some(MANAGER.into()),
            member: Some("JobRemoved".into()),
            destination: None,
            body: vec![Value::U32(uid), Value::Path(job), Value::str(unit), Value::str(result)],
            ..reply(0, vec![])
        };
        round_trip(done, serial)?;
    }
}
