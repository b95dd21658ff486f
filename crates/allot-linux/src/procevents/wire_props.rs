//! Property tests of the proc connector's parser (proptest; in place of a fuzz target,
//! see docs/layout.md): datagrams built as the kernel lays them out (`wire::build`, from
//! cn_proc.h) parse back to the messages they were built from, every prefix of one parses
//! to a prefix of them and then at most one `Malformed`, and any bytes at all, random or
//! a valid datagram mutated, return without a panic and without more messages than
//! 16-byte headers fit in them. (A bad connector body in a well-framed netlink message
//! is one `Malformed` and parsing goes on; a bad netlink length ends the datagram.)

use super::wire::build::message;
use super::wire::{parse_datagram, Message, NLMSG_HDRLEN, PROC_EVENT_EXEC, PROC_EVENT_EXIT, PROC_EVENT_FORK, PROC_EVENT_NONE, PROC_EVENT_UID};
use super::ProcEvent;
use proptest::prelude::*;

/// One netlink message to put in a datagram.
#[derive(Debug, Clone)]
enum Part {
    /// A proc connector message: `what`, its event_data words, cn_msg.ack.
    Event(u32, [u32; 6], u32),
    /// A message of another connector (idx != 1).
    OtherConnector(u32, [u32; 6]),
    /// NLMSG_NOOP (1) or NLMSG_ERROR (2), `len` bytes (16..=40, not always a multiple of 4).
    Control(u16, usize),
    /// NLMSG_OVERRUN.
    Overrun,
}

impl Part {
    /// Its bytes, without the padding after it.
    fn bytes(&self) -> Vec<u8> {
        match self {
            Part::Event(what, w, ack) => message(1, *what, w, *ack),
            Part::OtherConnector(idx, w) => message(*idx, PROC_EVENT_FORK, w, 0),
            Part::Control(kind, len) => control(*kind, *len),
            Part::Overrun => control(4, 16),
        }
    }

    /// What the parser must say of it: the event the kernel's fields mean (cn_proc.h).
    fn expected(&self) -> Message {
        let leader = |pid: u32, tgid: u32, e: ProcEvent| if pid == tgid { Message::Event(e) } else { Message::Thread };
        match self {
            Part::Event(PROC_EVENT_NONE, w, ack) => Message::Ack { ack: *ack, err: w[0] },
            Part::Event(PROC_EVENT_FORK, w, _) => leader(w[2], w[3], ProcEvent::Fork { parent: w[1] as i32, child: w[3] as i32 }),
            Part::Event(PROC_EVENT_EXEC, w, _) => Message::Event(ProcEvent::Exec { pid: w[1] as i32 }),
            Part::Event(PROC_EVENT_UID, w, _) => leader(w[0], w[1], ProcEvent::Uid { pid: w[1] as i32, ruid: w[2], euid: w[3] }),
            Part::Event(PROC_EVENT_EXIT, w, _) => leader(w[0], w[1], ProcEvent::Exit { pid: w[1] as i32 }),
            Part::Event(..) | Part::OtherConnector(..) | Part::Control(..) => Message::Other,
            Part::Overrun => Message::Overrun,
        }
    }
}

fn control(kind: u16, len: usize) -> Vec<u8> {
    let mut m = vec![0u8; len];
    m[0..4].copy_from_slice(&(len as u32).to_ne_bytes());
    m[4..6].copy_from_slice(&kind.to_ne_bytes());
    m
}

fn arb_part() -> impl Strategy<Value = Part> {
    // Pids drawn from a few values so that pid == tgid (a process) and != (a thread) both occur.
    let words = prop::array::uniform6(prop_oneof![1u32..4, any::<u32>()]);
    let what = prop_oneof![
        Just(PROC_EVENT_NONE),
        Just(PROC_EVENT_FORK),
        Just(PROC_EVENT_EXEC),
        Just(PROC_EVENT_UID),
        Just(PROC_EVENT_EXIT),
        // gid, sid, ptrace, comm, coredump, or anything else: not for allot.
        any::<u32>(),
    ];
    prop_oneof![
        6 => (what, words.clone(), any::<u32>()).prop_map(|(what, w, ack)| Part::Event(what, w, ack)),
        1 => (2u32..100, words).prop_map(|(idx, w)| Part::OtherConnector(idx, w)),
        1 => (1u16..=2, 16usize..=40).prop_map(|(kind, len)| Part::Control(kind, len)),
        1 => Just(Part::Overrun),
    ]
}

/// The datagram of `parts`, each padded to 4 bytes (NLMSG_ALIGN) but the last, and where
/// each part starts and ends.
fn datagram(parts: &[Part]) -> (Vec<u8>, Vec<(usize, usize)>) {
    let mut d = vec![];
    let mut spans = vec![];
    for p in parts {
        while d.len() % 4 != 0 {
            d.push(0);
        }
        let b = p.bytes();
        spans.push((d.len(), d.len() + b.len()));
        d.extend(b);
    }
    (d, spans)
}

fn parse(b: &[u8]) -> Vec<Message> {
    let mut v = Vec::new();
    parse_datagram(b, |m| v.push(m));
    v
}

/// What any bytes may parse to: at most one message per 16-byte netlink header.
fn bounded(b: &[u8], got: &[Message]) -> Result<(), TestCaseError> {
    prop_assert!(got.len() <= b.len() / NLMSG_HDRLEN + 1, "{} messages from {} bytes", got.len(), b.len());
    Ok(())
}

proptest! {
    // 256 cases each (proptest's default); all four run in about a tenth of a second.
    #[test]
    fn built_datagrams_parse_to_what_they_were_built_from(parts in prop::collection::vec(arb_part(), 0..6)) {
        let (d, _) = datagram(&parts);
        let want: Vec<Message> = parts.iter().map(Part::expected).collect();
        prop_assert_eq!(parse(&d), want);
    }

    #[test]
    fn every_prefix_parses_to_a_prefix_then_at_most_one_malformed(parts in prop::collection::vec(arb_part(), 1..5), cut in any::<prop::sample::Index>()) {
        let (d, spans) = datagram(&parts);
        let n = cut.index(d.len() + 1);
        let mut want: Vec<Message> = parts.iter().zip(&spans).take_while(|(_, s)| s.1 <= n).map(|(p, _)| p.expected()).collect();
        // A message begun but not whole; a cut inside the padding after one is no message.
        if spans.iter().any(|&(start, end)| start < n && n < end) {
            want.push(Message::Malformed);
        }
        prop_assert_eq!(parse(&d[..n]), want, "cut at {} of {}", n, d.len());
    }

    #[test]
    fn any_bytes_return_without_a_panic(b in prop::collection::vec(any::<u8>(), 0..400)) {
        bounded(&b, &parse(&b))?;
    }

    #[test]
    fn mutated_datagrams_return_without_a_panic(
        parts in prop::collection::vec(arb_part(), 1..5),
        edits in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..6),
    ) {
        let (mut d, _) = datagram(&parts);
        for (at, byte) in edits {
            let i = at.index(d.len());
            d[i] = byte;
        }
        bounded(&d, &parse(&d))?;
    }
}
