//! What a hostile or confused client sends, value by value: each is refused where the line
//! is decoded, in one sentence naming the value and what is allowed, or taken as the typed
//! value it means.
use super::*;

fn line(fields: &str) -> Vec<u8> {
    format!("{{\"v\":{PROTOCOL},{fields}}}").into_bytes()
}

/// The refusal of a line whose values are wrong (not its shape).
fn invalid(fields: &str) -> String {
    match decode_request(&line(fields)) {
        Err(LineError::Invalid(e)) => e,
        other => panic!("{fields}: {other:?}"),
    }
}

fn malformed(fields: &str) -> String {
    match decode_request(&line(fields)) {
        Err(LineError::Malformed(e)) => e,
        other => panic!("{fields}: {other:?}"),
    }
}

#[test]
fn tickets_and_funding_out_of_range_are_named_as_sent() {
    for (n, shown) in [
        ("0", "\"0\""),
        ("-5", "\"-5\""),
        ("10001", "\"10001\""),
        ("9223372036854775807", "\"9223372036854775807\""),
        ("-9223372036854775808", "\"-9223372036854775808\""),
        ("18446744073709551615", "\"18446744073709551615\""),
        ("1e300", "\"1e+300\""),
        ("5.5", "\"5.5\""),
        ("5.0", "\"5.0\""),
    ] {
        let e = invalid(&format!("\"op\":\"run\",\"tickets\":{n}"));
        assert_eq!(e, format!("tickets must be a whole number 1..10000, got {shown}"), "{n}");
        let e = invalid(&format!("\"op\":\"fund\",\"currency\":\"ci\",\"funding\":{n}"));
        assert!(e.starts_with("funding must be a whole number 1..10000, got"), "{n}: {e}");
    }
    // A number as a string is the wrong JSON type: malformed, naming what was expected.
    assert!(malformed("\"op\":\"set\",\"pids\":[5],\"tickets\":\"50\"").contains("invalid type: string \"50\""));
    let ok = decode_request(&line("\"op\":\"run\",\"tickets\":10000")).unwrap();
    assert_eq!(
        ok,
        Request::Run { tickets: Tickets::new(10_000).ok(), currency: None, cap: None, background: false, force: false, mem: None, oom_group: false }
    );
}

#[test]
fn pids_are_process_ids_and_a_set_names_one_to_1024() {
    for bad in ["0", "-1", "2147483648", "18446744073709551615", "1.5", "-9223372036854775808"] {
        let e = invalid(&format!("\"op\":\"focus\",\"pid\":{bad}"));
        assert_eq!(e, format!("pid {bad} is not a process id (a positive number, as `ps` shows)"));
        let e = invalid(&format!("\"op\":\"set\",\"pids\":[7,{bad}],\"tickets\":5"));
        assert!(e.starts_with(&format!("pid {bad} is not")), "{e}");
        assert!(invalid(&format!("\"op\":\"rulestest\",\"pid\":{bad}")).contains("not a process id"));
        assert!(invalid(&format!("\"op\":\"move\",\"pid\":{bad},\"currency\":\"ci\"")).contains("not a process id"));
    }
    assert_eq!(invalid("\"op\":\"set\",\"pids\":[],\"tickets\":5"), "set needs at least one PID");
    let many: Vec<String> = (1..=1025).map(|p| p.to_string()).collect();
    assert_eq!(invalid(&format!("\"op\":\"set\",\"pids\":[{}],\"tickets\":5", many.join(","))), "set takes at most 1024 PIDs, got 1025");
    let most = Pids::new(1..=1024).unwrap();
    assert_eq!(most.as_slice().len(), MAX_PIDS);
    assert!(malformed("\"op\":\"set\",\"pids\":5,\"tickets\":5").contains("invalid type"));
    assert!(malformed("\"op\":\"set\",\"pids\":[\"5\"],\"tickets\":5").contains("invalid type"));
    assert!(malformed("\"op\":\"focus\",\"pid\":null").contains("invalid type"));
    assert_eq!(
        decode_request(&line("\"op\":\"focus\",\"pid\":2147483647")).unwrap(),
        Request::Focus { pid: Pid::new(i32::MAX.into()).unwrap(), on: true }
    );
}

#[test]
fn a_cap_is_kept_cleared_or_set_and_nothing_else() {
    let set = |cap: &str| decode_request(&line(&format!("\"op\":\"set\",\"pids\":[5]{cap}")));
    let cap_of = |r: Request| match r {
        Request::Set { cap, .. } => cap,
        r => panic!("{r:?}"),
    };
    assert_eq!(cap_of(set("").unwrap()), CapChange::Keep);
    assert_eq!(cap_of(set(",\"cap\":null").unwrap()), CapChange::Clear);
    assert_eq!(cap_of(set(",\"cap\":\"1/2!\"").unwrap()), CapChange::Set(Cap { cpus: 0.5, hard: true }));
    assert_eq!(cap_of(set(",\"cap\":\"0\"").unwrap()), CapChange::Set(Cap::BACKGROUND));
    // "none" was protocol 2's way to clear: refused, saying what to send.
    for none in ["none", "None", " none "] {
        let e = invalid(&format!("\"op\":\"set\",\"pids\":[5],\"cap\":{none:?}"));
        assert!(e.contains(&format!("cap {none:?} is not a cap")) && e.contains("\"cap\": null"), "{e}");
    }
    for (bad, why) in
        [("2/0", "denominator is 0"), ("-1", ">= 0"), ("0!", "hard cap of 0"), ("nan", "finite"), ("1e999", "finite"), ("99999", "more CPUs")]
    {
        let e = invalid(&format!("\"op\":\"set\",\"pids\":[5],\"cap\":{bad:?}"));
        assert!(e.contains(&format!("cap {bad:?} is invalid")) && e.contains(why), "{bad}: {e}");
        let e = invalid(&format!("\"op\":\"run\",\"cap\":{bad:?}"));
        assert!(e.contains(&format!("cap {bad:?} is invalid")), "{bad}: {e}");
    }
    // Any other JSON type is the wrong shape.
    for shape in ["{\"cpus\":0.5,\"hard\":true}", "[\"0.5\"]", "0.5", "true"] {
        let e = malformed(&format!("\"op\":\"set\",\"pids\":[5],\"cap\":{shape}"));
        assert!(e.contains("invalid type") && e.contains("expected a string"), "{shape}: {e}");
    }
    // A currency's cap is hard only, checked as the line is read.
    let e = invalid("\"op\":\"fund\",\"currency\":\"ci\",\"cap\":\"4\"");
    assert!(e.contains("currency cap \"4\" is not a hard cap"), "{e}");
    let fund = decode_request(&line("\"op\":\"fund\",\"currency\":\"ci\",\"cap\":null")).unwrap();
    assert_eq!(fund, Request::Fund { currency: Some("ci".into()), funding: None, cap: CapChange::Clear });
    // run has no cap to clear: null is no cap.
    assert!(matches!(decode_request(&line("\"op\":\"run\",\"cap\":null")), Ok(Request::Run { cap: None, .. })));
}

#[test]
fn caps_travel_exactly_and_encode_as_the_grammar() {
    for written in ["1/3", "0.0015", "12.5%!", "4096", "0.001", "1%!"] {
        let c: Cap = written.parse().unwrap();
        let r = Request::Set {
            pids: Pids::new([9]).unwrap(),
            tickets: None,
            cap: CapChange::Set(c),
            background: None,
            force: false,
            mem: MemChange::Keep,
            oom_group: None,
        };
        let encoded = encode_request(&r);
        assert_eq!(decode_request(&encoded), Ok(r), "{written}");
        let v: serde_json::Value = serde_json::from_slice(&encoded).unwrap();
        assert_eq!(v["cap"].as_str().unwrap(), wire_cap(&c), "{written}");
    }
    let clear = Request::Fund { currency: Some("ci".into()), funding: None, cap: CapChange::Clear };
    assert_eq!(
        String::from_utf8(encode_request(&clear)).unwrap(),
        format!("{{\"cap\":null,\"currency\":\"ci\",\"funding\":null,\"op\":\"fund\",\"v\":{PROTOCOL}}}\n")
    );
    let keep = Request::Fund { currency: Some("ci".into()), funding: None, cap: CapChange::Keep };
    assert!(!String::from_utf8(encode_request(&keep)).unwrap().contains("cap"));
}

#[test]
fn bytes_that_are_not_a_request_are_malformed() {
    for bad in [&b"\xff\xfe{}"[..], b"{\"v\":3,\"op\":\"show\",\"user\":\"\xc3\x28\"}", b"", b"\n", b"null", b"{\"v\":3}"] {
        assert!(matches!(decode_request(bad), Err(LineError::Malformed(_))), "{bad:?}");
    }
}

#[test]
fn memory_caps_are_checked_as_the_line_is_read_and_travel_exactly() {
    for bad in ["0", "512K!", "4Q", "-1G", "lots", "2000T!"] {
        let e = invalid(&format!("\"op\":\"run\",\"mem\":{bad:?}"));
        assert!(e.starts_with(&format!("memory cap {bad:?} is invalid")) && e.contains("4G!"), "{bad}: {e}");
    }
    let e = invalid("\"op\":\"set\",\"pids\":[5],\"mem\":\"none\"");
    assert!(e.contains("\"none\" is not a cap") && e.contains("null"), "{e}");
    for shape in ["67108864", "{\"bytes\":67108864,\"hard\":true}", "true"] {
        let e = malformed(&format!("\"op\":\"run\",\"mem\":{shape}"));
        assert!(e.contains("invalid type") && e.contains("expected a string"), "{shape}: {e}");
    }
    let set = |mem: &str| decode_request(&line(&format!("\"op\":\"set\",\"pids\":[5],\"mem\":{mem}")));
    assert!(matches!(set("null"), Ok(Request::Set { mem: MemChange::Clear, .. })));
    assert!(matches!(set("\"64M!\""), Ok(Request::Set { mem: MemChange::Set(m), .. }) if m.bytes == 64 << 20 && m.hard));
    let run = decode_request(&line("\"op\":\"run\",\"mem\":\"1.5G\"")).unwrap();
    assert!(matches!(run, Request::Run { mem: Some(m), .. } if m.bytes == 3 << 29 && !m.hard));
    // Written as the size reads back, and left off a line without one (so a daemon from
    // before memory caps reads it).
    let text = String::from_utf8(encode_request(&run)).unwrap();
    assert!(text.contains("\"mem\":\"1536M\""), "{text}");
    let plain = Request::Run { tickets: None, currency: None, cap: None, background: false, force: false, mem: None, oom_group: false };
    assert!(!String::from_utf8(encode_request(&plain)).unwrap().contains("mem"));
    // The OOM group: off is left off the line (a daemon from before it reads the line),
    // on travels; absent reads as off for run and as kept for set; a value that is not a
    // boolean is refused, naming the field.
    assert!(!String::from_utf8(encode_request(&plain)).unwrap().contains("oom_group"));
    let on = Request::Run { tickets: None, currency: None, cap: None, background: false, force: false, mem: None, oom_group: true };
    assert_eq!(decode_request(&encode_request(&on)), Ok(on));
    assert!(matches!(decode_request(&line("\"op\":\"run\"")), Ok(Request::Run { oom_group: false, .. })));
    assert!(matches!(set("null"), Ok(Request::Set { oom_group: None, .. })));
    let off = decode_request(&line("\"op\":\"set\",\"pids\":[5],\"oom_group\":false"));
    assert!(matches!(off, Ok(Request::Set { oom_group: Some(false), .. })), "{off:?}");
    let e = decode_request(&line("\"op\":\"run\",\"oom_group\":\"yes\"")).unwrap_err();
    assert!(e.to_string().contains("oom_group") || e.to_string().contains("boolean"), "{e}");
}
