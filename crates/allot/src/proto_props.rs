//! Property tests of the request decoder, the parser that reads what any local user sends
//! the root daemon (proptest; in place of a fuzz target, see docs/layout.md): every
//! request the client can send is one line that decodes back to itself; any bytes, any
//! JSON and near-valid requests are decoded or refused, never panicked on; what is
//! decoded encodes back to itself; a version other than this one is named as a version.

use crate::proto::{decode_request, encode_request, CapChange, LineError, MemChange, Pid, Pids, Request, PROTOCOL};
use allot_model::memory::MemCap;
use allot_model::{Cap, Funding, Tickets};
use proptest::prelude::*;
use serde_json::{json, Map, Value};

/// The ops and field names the decoder knows (docs/protocol.md).
const OPS: &[&str] = &["status", "show", "run", "set", "fund", "focus", "explain", "rulestest", "log", "move"];
const FIELDS: &[&str] = &["user", "tickets", "currency", "cap", "background", "force", "pids", "funding", "pid", "on", "target", "job", "limit"];

/// Names as users type them, and any string at all (control characters, quotes, newlines).
fn text() -> impl Strategy<Value = String> {
    prop_oneof!["[a-z0-9/._!-]{0,12}", any::<String>()]
}

fn number() -> impl Strategy<Value = i64> {
    prop_oneof![-2i64..10_002, any::<i64>()]
}

fn tickets() -> impl Strategy<Value = Option<Tickets>> {
    prop::option::of((1i64..=10_000).prop_map(|v| Tickets::new(v).unwrap()))
}

fn pid() -> impl Strategy<Value = Pid> {
    prop_oneof![1i64..5_000_000, 1..=i64::from(i32::MAX)].prop_map(|p| Pid::new(p).unwrap())
}

/// Caps as users write them (every form of the grammar) and any CPUs at all, kept when the
/// decoder would take them.
fn cap(hard_only: bool) -> impl Strategy<Value = Cap> {
    let written = prop_oneof![
        "(0|1|2|0\\.5|0\\.25|1\\.333|4096)!?",
        "[1-9]/[1-9]!?",
        "(1|50|12\\.5|150)%!?",
        (any::<f64>(), any::<bool>()).prop_map(|(c, h)| format!("{}{}", c, if h { "!" } else { "" })),
        (0.0f64..4096.0, any::<bool>()).prop_map(|(c, h)| format!("{}{}", c, if h { "!" } else { "" })),
    ];
    written.prop_filter_map("a cap the decoder takes", move |s| if hard_only { Cap::parse_currency(&s).ok() } else { s.parse().ok() })
}

fn cap_change(hard_only: bool) -> impl Strategy<Value = CapChange> {
    prop_oneof![Just(CapChange::Keep), Just(CapChange::Clear), cap(hard_only).prop_map(CapChange::Set)]
}

/// A memory cap the decoder takes: any size from 1M to the largest, hard or soft.
fn mem() -> impl Strategy<Value = MemCap> {
    ((1u64 << 20)..allot_model::memory::MAX_BYTES, any::<bool>()).prop_map(|(bytes, hard)| MemCap { bytes, hard })
}

fn mem_change() -> impl Strategy<Value = MemChange> {
    prop_oneof![Just(MemChange::Keep), Just(MemChange::Clear), mem().prop_map(MemChange::Set)]
}

fn arb_request() -> impl Strategy<Value = Request> {
    let opt_text = || prop::option::of(text());
    prop_oneof![
        Just(Request::Status {}),
        opt_text().prop_map(|user| Request::Show { user }),
        (tickets(), opt_text(), prop::option::of(cap(false)), any::<bool>(), any::<bool>(), (prop::option::of(mem()), any::<bool>())).prop_map(
            |(tickets, currency, cap, background, force, (mem, oom_group))| Request::Run {
                tickets,
                currency,
                cap,
                background,
                force,
                mem,
                oom_group
            }
        ),
        (
            prop::collection::vec(pid(), 1..8),
            tickets(),
            cap_change(false),
            prop::option::of(any::<bool>()),
            any::<bool>(),
            (mem_change(), prop::option::of(any::<bool>()))
        )
            .prop_map(|(pids, tickets, cap, background, force, (mem, oom_group))| Request::Set {
                pids: Pids::new(pids.iter().map(|p| i64::from(p.get()))).unwrap(),
                tickets,
                cap,
                background,
                force,
                mem,
                oom_group
            }),
        (opt_text(), prop::option::of((1i64..=10_000).prop_map(|v| Funding::new(v).unwrap())), cap_change(true))
            .prop_map(|(currency, funding, cap)| Request::Fund { currency, funding, cap }),
        (pid(), any::<bool>()).prop_map(|(pid, on)| Request::Focus { pid, on }),
        text().prop_map(|target| Request::Explain { target }),
        pid().prop_map(|pid| Request::RulesTest { pid }),
        (opt_text(), opt_text(), prop::option::of(any::<usize>())).prop_map(|(user, job, limit)| Request::Log { user, job, limit }),
        (pid(), text(), any::<bool>()).prop_map(|(pid, currency, force)| Request::Move { pid, currency, force }),
    ]
}

/// Any JSON, its object keys often the decoder's own field names.
fn arb_json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        number().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        any::<f64>().prop_map(|f| serde_json::Number::from_f64(f).map_or(Value::Null, Value::Number)),
        text().prop_map(Value::from),
    ];
    leaf.prop_recursive(4, 32, 6, |inner| {
        let key = prop_oneof![prop::sample::select(FIELDS).prop_map(String::from), text()];
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            prop::collection::vec((key, inner), 0..6).prop_map(|kv| Value::Object(kv.into_iter().collect::<Map<_, _>>())),
        ]
    })
}

/// An object with this version, a known op and some known fields of any JSON value: the
/// requests a confused or hostile client sends.
fn near_valid() -> impl Strategy<Value = Value> {
    let op = prop_oneof![4 => prop::sample::select(OPS).prop_map(Value::from), 1 => arb_json()];
    let fields = prop::collection::vec((prop::sample::select(FIELDS), arb_json()), 0..4);
    (op, fields).prop_map(|(op, fields)| {
        let mut o = Map::new();
        o.insert("v".into(), json!(PROTOCOL));
        o.insert("op".into(), op);
        for (k, v) in fields {
            o.insert(k.into(), v);
        }
        Value::Object(o)
    })
}

/// What any decoded request must satisfy: it encodes to one line that decodes to itself.
fn decodes_to_a_fixed_point(line: &[u8]) -> Result<(), TestCaseError> {
    if let Ok(r) = decode_request(line) {
        prop_assert_eq!(decode_request(&encode_request(&r)), Ok(r));
    }
    Ok(())
}

proptest! {
    // 256 cases each (proptest's default); the six run in about a second in a debug build.
    #[test]
    fn every_request_is_one_line_that_decodes_to_itself(r in arb_request()) {
        let line = encode_request(&r);
        prop_assert_eq!(line.iter().position(|&b| b == b'\n'), Some(line.len() - 1), "one line, ended by its newline");
        prop_assert_eq!(decode_request(&line), Ok(r));
    }

    #[test]
    fn any_bytes_are_decoded_or_refused(b in prop::collection::vec(any::<u8>(), 0..256)) {
        decodes_to_a_fixed_point(&b)?;
    }

    #[test]
    fn any_string_is_decoded_or_refused(s in any::<String>()) {
        decodes_to_a_fixed_point(s.as_bytes())?;
    }

    #[test]
    fn any_json_is_decoded_or_refused(v in arb_json()) {
        decodes_to_a_fixed_point(&serde_json::to_vec(&v).unwrap())?;
    }

    #[test]
    fn near_valid_requests_are_decoded_or_refused(v in near_valid(), other_version in any::<u64>()) {
        let line = serde_json::to_vec(&v).unwrap();
        decodes_to_a_fixed_point(&line)?;
        // The same request in another protocol version is refused as that version.
        let mut o = v;
        o["v"] = json!(other_version);
        let got = decode_request(&serde_json::to_vec(&o).unwrap());
        if other_version == PROTOCOL as u64 {
            prop_assert_eq!(got.is_ok(), decode_request(&line).is_ok());
        } else {
            prop_assert_eq!(got, Err(LineError::Version(other_version.min(u32::MAX as u64) as u32)));
        }
    }

    /// Nesting deeper than serde_json's limit (128) is refused, not a stack overflow.
    #[test]
    fn deep_nesting_is_refused_without_overflow(depth in 0usize..20_000, object in any::<bool>()) {
        let (open, close) = if object { ("{\"v\":", "}") } else { ("[", "]") };
        let line = format!("{}2{}", open.repeat(depth), close.repeat(depth));
        let got = decode_request(line.as_bytes());
        prop_assert!(matches!(got, Err(LineError::Malformed(_))), "{:?}", got);
    }
}
