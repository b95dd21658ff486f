//! The bytes of the process events connector, and a parser that takes any bytes.
//!
//! A datagram from the connector holds netlink messages, each laid out as
//! (include/uapi/linux/netlink.h, connector.h, cn_proc.h):
//!
//! ```text
//! offset  size  field
//!      0    16  struct nlmsghdr   len u32, type u16 (NLMSG_DONE for connector data), flags u16, seq u32, pid u32
//!     16    20  struct cn_msg     id.idx u32, id.val u32, seq u32, ack u32, len u16, flags u16
//!     36    40  struct proc_event what u32, cpu u32, timestamp_ns u64, event_data (24 bytes)
//! ```
//!
//! `proc_event` starts 36 bytes into the datagram, so its `u64` is not 8-aligned in our
//! buffer: every field is read from bytes (native endian), never through a cast
//! pointer. The kernel sends one message per datagram, but nothing here relies on it.
//! Offsets are pinned by the unit tests below and used by the socket filter.

use super::ProcEvent;

/// sizeof(struct nlmsghdr).
pub(crate) const NLMSG_HDRLEN: usize = 16;
/// sizeof(struct cn_msg), without its data.
pub(crate) const CN_MSG_LEN: usize = 20;
/// Where `struct proc_event` starts in a datagram.
pub(crate) const EVENT: usize = NLMSG_HDRLEN + CN_MSG_LEN;
/// Where `event_data` starts inside `struct proc_event` (after what, cpu, timestamp_ns).
pub(crate) const EVENT_DATA: usize = 16;
/// sizeof(struct proc_event): the header plus the largest member (exit, 6 × u32).
#[cfg(test)]
pub(crate) const PROC_EVENT_LEN: usize = EVENT_DATA + 24;

/// Offsets in a datagram the socket filter reads.
pub(crate) const OFF_CN_IDX: u32 = NLMSG_HDRLEN as u32;
pub(crate) const OFF_CN_VAL: u32 = OFF_CN_IDX + 4;
pub(crate) const OFF_WHAT: u32 = EVENT as u32;
/// event_data word `i` (each member is a run of u32s).
pub(crate) const fn off_data(i: u32) -> u32 {
    (EVENT + EVENT_DATA) as u32 + 4 * i
}

/// The proc connector's id (connector.h).
pub(crate) const CN_IDX_PROC: u32 = 1;
pub(crate) const CN_VAL_PROC: u32 = 1;

/// `enum proc_cn_mcast_op`.
pub(crate) const PROC_CN_MCAST_LISTEN: u32 = 1;
pub(crate) const PROC_CN_MCAST_IGNORE: u32 = 2;

/// `enum proc_cn_event` values allot reads (`what`).
pub(crate) const PROC_EVENT_NONE: u32 = 0x0000_0000;
pub(crate) const PROC_EVENT_FORK: u32 = 0x0000_0001;
pub(crate) const PROC_EVENT_EXEC: u32 = 0x0000_0002;
pub(crate) const PROC_EVENT_UID: u32 = 0x0000_0004;
pub(crate) const PROC_EVENT_EXIT: u32 = 0x8000_0000;

/// Netlink message types (netlink.h).
const NLMSG_NOOP: u16 = 1;
const NLMSG_ERROR: u16 = 2;
const NLMSG_OVERRUN: u16 = 4;

/// One netlink message of a datagram, classified.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Message {
    /// A process event about a thread-group leader (a process).
    Event(ProcEvent),
    /// A fork, exit or uid change of a thread that is not a group leader.
    Thread,
    /// The connector's reply to a PROC_CN_MCAST_* request: `ack` is the request's ack
    /// plus one, `err` an errno (0 for success).
    Ack {
        /// cn_msg.ack of the reply.
        ack: u32,
        /// event_data.ack.err.
        err: u32,
    },
    /// Well-formed but not for allot: another connector, another event kind (gid, sid,
    /// ptrace, comm, coredump), NLMSG_NOOP, NLMSG_ERROR.
    Other,
    /// NLMSG_OVERRUN: the kernel says data was lost.
    Overrun,
    /// Bytes that do not parse (short, lengths that point outside the datagram). When the
    /// netlink header's own length is bad, the rest of the datagram is not trusted either
    /// and is skipped; a bad connector message inside a well-framed netlink message is
    /// only that message, and the next is read.
    Malformed,
}

fn u32_at(b: &[u8], off: usize) -> Option<u32> {
    let s: [u8; 4] = b.get(off..off.checked_add(4)?)?.try_into().ok()?;
    Some(u32::from_ne_bytes(s))
}

fn u16_at(b: &[u8], off: usize) -> Option<u16> {
    let s: [u8; 2] = b.get(off..off.checked_add(2)?)?.try_into().ok()?;
    Some(u16::from_ne_bytes(s))
}

/// Calls `each` for every netlink message in `datagram`, in order. Never panics, never
/// reads outside `datagram`, never allocates.
pub(crate) fn parse_datagram(datagram: &[u8], mut each: impl FnMut(Message)) {
    let mut rest = datagram;
    while !rest.is_empty() {
        let (Some(len), Some(kind)) = (u32_at(rest, 0), u16_at(rest, 4)) else {
            each(Message::Malformed);
            return;
        };
        let len = len as usize;
        if len < NLMSG_HDRLEN || len > rest.len() {
            each(Message::Malformed);
            return;
        }
        let body = &rest[NLMSG_HDRLEN..len];
        each(match kind {
            NLMSG_NOOP | NLMSG_ERROR => Message::Other,
            NLMSG_OVERRUN => Message::Overrun,
            // The connector sends its data as NLMSG_DONE (cn_netlink_send_mult): unlike
            // a netlink dump, DONE here carries the payload and ends nothing.
            _ => parse_cn_msg(body),
        });
        // Messages are padded to 4 bytes (NLMSG_ALIGN); the last one may not be.
        let next = (len + 3) & !3;
        rest = rest.get(next..).unwrap_or(&[]);
    }
}

/// Classifies the body of one netlink message: a `cn_msg` and its data.
fn parse_cn_msg(body: &[u8]) -> Message {
    let (Some(idx), Some(val), Some(ack), Some(len)) = (u32_at(body, 0), u32_at(body, 4), u32_at(body, 12), u16_at(body, 16)) else {
        return Message::Malformed;
    };
    let Some(data) = body.get(CN_MSG_LEN..CN_MSG_LEN + len as usize) else {
        return Message::Malformed;
    };
    if (idx, val) != (CN_IDX_PROC, CN_VAL_PROC) {
        return Message::Other;
    }
    parse_proc_event(data, ack)
}

/// Classifies a `struct proc_event`. Only the words an event needs must be present, so a
/// future kernel that grows the struct still parses.
fn parse_proc_event(ev: &[u8], cn_ack: u32) -> Message {
    proc_event(ev, cn_ack).unwrap_or(Message::Malformed)
}

fn proc_event(ev: &[u8], cn_ack: u32) -> Option<Message> {
    let word = |i: usize| u32_at(ev, EVENT_DATA + 4 * i);
    let leader = |pid: u32, tgid: u32, e: ProcEvent| if pid == tgid { Message::Event(e) } else { Message::Thread };
    Some(match u32_at(ev, 0)? {
        PROC_EVENT_NONE => Message::Ack { ack: cn_ack, err: word(0)? },
        // fork: parent_pid, parent_tgid, child_pid, child_tgid. A new thread has
        // child_pid (its tid) != child_tgid. The parent is reported as its process.
        PROC_EVENT_FORK => {
            let (parent, pid, tgid) = (word(1)?, word(2)?, word(3)?);
            leader(pid, tgid, ProcEvent::Fork { parent: parent as i32, child: tgid as i32 })
        }
        // exec: process_pid, process_tgid. exec makes the caller the leader (de_thread),
        // so the two are equal; the tgid is the process either way.
        PROC_EVENT_EXEC => Message::Event(ProcEvent::Exec { pid: word(1)? as i32 }),
        // id: process_pid, process_tgid, ruid, euid. Credentials are per thread; the
        // leader's are the ones /proc/PID/status shows.
        PROC_EVENT_UID => {
            let (pid, tgid, ruid, euid) = (word(0)?, word(1)?, word(2)?, word(3)?);
            leader(pid, tgid, ProcEvent::Uid { pid: tgid as i32, ruid, euid })
        }
        // exit: process_pid, process_tgid, exit_code, exit_signal, parent_pid, parent_tgid.
        PROC_EVENT_EXIT => {
            let (pid, tgid) = (word(0)?, word(1)?);
            leader(pid, tgid, ProcEvent::Exit { pid: tgid as i32 })
        }
        _ => Message::Other,
    })
}

/// The request that (un)subscribes: nlmsghdr + cn_msg + the 4-byte `proc_cn_mcast_op`.
/// This is the form every kernel since 2.6.15 takes; 6.6's longer `struct proc_input`
/// (op + event mask) is silently ignored by older kernels, so it is not used.
pub(crate) fn mcast_request(op: u32, ack: u32) -> [u8; NLMSG_HDRLEN + CN_MSG_LEN + 4] {
    let mut m = [0u8; NLMSG_HDRLEN + CN_MSG_LEN + 4];
    let total = m.len() as u32;
    m[0..4].copy_from_slice(&total.to_ne_bytes());
    m[4..6].copy_from_slice(&3u16.to_ne_bytes()); // NLMSG_DONE, as the connector expects
    m[16..20].copy_from_slice(&CN_IDX_PROC.to_ne_bytes());
    m[20..24].copy_from_slice(&CN_VAL_PROC.to_ne_bytes());
    m[28..32].copy_from_slice(&ack.to_ne_bytes());
    m[32..34].copy_from_slice(&4u16.to_ne_bytes());
    m[36..40].copy_from_slice(&op.to_ne_bytes());
    m
}

/// Test support: builds datagrams the way the kernel does (cn_proc.c).
#[cfg(test)]
pub(crate) mod build {
    use super::*;

    /// One complete message: nlmsghdr + cn_msg + proc_event with `what` and data words.
    pub(crate) fn message(idx: u32, what: u32, words: &[u32], ack: u32) -> Vec<u8> {
        let total = EVENT + PROC_EVENT_LEN;
        let mut m = vec![0u8; total];
        m[0..4].copy_from_slice(&(total as u32).to_ne_bytes());
        m[4..6].copy_from_slice(&3u16.to_ne_bytes());
        m[16..20].copy_from_slice(&idx.to_ne_bytes());
        m[20..24].copy_from_slice(&1u32.to_ne_bytes());
        m[28..32].copy_from_slice(&ack.to_ne_bytes());
        m[32..34].copy_from_slice(&(PROC_EVENT_LEN as u16).to_ne_bytes());
        m[EVENT..EVENT + 4].copy_from_slice(&what.to_ne_bytes());
        m[EVENT + 8..EVENT + 16].copy_from_slice(&123_456_789u64.to_ne_bytes());
        for (i, w) in words.iter().enumerate() {
            let o = off_data(i as u32) as usize;
            m[o..o + 4].copy_from_slice(&w.to_ne_bytes());
        }
        m
    }

    /// A proc connector event message.
    pub(crate) fn event(what: u32, words: &[u32]) -> Vec<u8> {
        message(CN_IDX_PROC, what, words, 0)
    }
}

#[cfg(test)]
mod tests {
    use super::build::*;
    use super::*;

    fn parse(b: &[u8]) -> Vec<Message> {
        let mut v = Vec::new();
        parse_datagram(b, |m| v.push(m));
        v
    }

    #[test]
    fn layout_matches_the_kernel_headers() {
        // The fields the filter reads, by the headers' arithmetic.
        assert_eq!(EVENT, 36);
        assert_eq!(off_data(0), 52);
        assert_eq!(off_data(3), 64);
        assert_eq!(EVENT + PROC_EVENT_LEN, 76, "what the kernel sends: NLMSG_SPACE(20 + 40)");
        assert_eq!(std::mem::size_of::<libc::nlmsghdr>(), NLMSG_HDRLEN);
    }

    #[test]
    fn each_kind_parses() {
        let p = |what, w: &[u32]| parse(&event(what, w));
        assert_eq!(p(PROC_EVENT_FORK, &[10, 10, 11, 11]), [Message::Event(ProcEvent::Fork { parent: 10, child: 11 })]);
        // a thread forked by a thread: parent is the parent's process
        assert_eq!(p(PROC_EVENT_FORK, &[12, 10, 13, 13]), [Message::Event(ProcEvent::Fork { parent: 10, child: 13 })]);
        assert_eq!(p(PROC_EVENT_FORK, &[10, 10, 14, 10]), [Message::Thread]);
        assert_eq!(p(PROC_EVENT_EXEC, &[11, 11]), [Message::Event(ProcEvent::Exec { pid: 11 })]);
        assert_eq!(p(PROC_EVENT_UID, &[11, 11, 61000, 61001]), [Message::Event(ProcEvent::Uid { pid: 11, ruid: 61000, euid: 61001 })]);
        assert_eq!(p(PROC_EVENT_UID, &[14, 11, 61000, 61000]), [Message::Thread]);
        assert_eq!(p(PROC_EVENT_EXIT, &[11, 11, 0, 17, 10, 10]), [Message::Event(ProcEvent::Exit { pid: 11 })]);
        assert_eq!(p(PROC_EVENT_EXIT, &[14, 11, 0, 17, 10, 10]), [Message::Thread]);
        assert_eq!(p(PROC_EVENT_NONE, &[1]), [Message::Ack { ack: 0, err: 1 }]);
        assert_eq!(p(0x40, &[11, 11, 5, 5]), [Message::Other], "gid events are not reported");
        assert_eq!(parse(&message(7, PROC_EVENT_FORK, &[1, 1, 2, 2], 0)), [Message::Other], "another connector");
    }

    #[test]
    fn several_messages_in_one_datagram() {
        let mut d = event(PROC_EVENT_FORK, &[1, 1, 2, 2]);
        d.extend(event(PROC_EVENT_EXEC, &[2, 2]));
        d.extend(event(PROC_EVENT_FORK, &[2, 2, 3, 2]));
        d.extend(event(PROC_EVENT_EXIT, &[2, 2]));
        assert_eq!(
            parse(&d),
            [
                Message::Event(ProcEvent::Fork { parent: 1, child: 2 }),
                Message::Event(ProcEvent::Exec { pid: 2 }),
                Message::Thread,
                Message::Event(ProcEvent::Exit { pid: 2 }),
            ]
        );
    }

    #[test]
    fn unaligned_lengths_are_padded_and_the_last_may_end_short() {
        // A 17-byte NOOP (padded to 20), then an event.
        let mut d = vec![0u8; 20];
        d[0..4].copy_from_slice(&17u32.to_ne_bytes());
        d[4..6].copy_from_slice(&NLMSG_NOOP.to_ne_bytes());
        d.extend(event(PROC_EVENT_EXEC, &[5, 5]));
        assert_eq!(parse(&d), [Message::Other, Message::Event(ProcEvent::Exec { pid: 5 })]);
        let mut d = event(PROC_EVENT_EXEC, &[5, 5]);
        d.truncate(EVENT + EVENT_DATA + 8); // nlmsg_len still says 76
        assert_eq!(parse(&d), [Message::Malformed]);
    }

    #[test]
    fn overrun_and_error_messages() {
        let mut d = vec![0u8; 16];
        d[0..4].copy_from_slice(&16u32.to_ne_bytes());
        d[4..6].copy_from_slice(&NLMSG_OVERRUN.to_ne_bytes());
        let mut e = vec![0u8; 36];
        e[0..4].copy_from_slice(&36u32.to_ne_bytes());
        e[4..6].copy_from_slice(&NLMSG_ERROR.to_ne_bytes());
        d.extend(e);
        assert_eq!(parse(&d), [Message::Overrun, Message::Other]);
    }

    #[test]
    fn truncated_and_hostile_bytes_never_panic() {
        let good = {
            let mut d = event(PROC_EVENT_FORK, &[1, 1, 2, 2]);
            d.extend(event(PROC_EVENT_UID, &[2, 2, 3, 4]));
            d
        };
        // every prefix
        for n in 0..good.len() {
            let v = parse(&good[..n]);
            assert!(v.len() <= 2);
            if n < good.len() / 2 && n > 0 {
                assert_eq!(v, [Message::Malformed], "prefix {n}");
            }
        }
        // lengths that lie: zero, too small, beyond the datagram, u32::MAX; cn_msg.len beyond
        for (off, val) in [(0usize, 0u32), (0, 15), (0, 77), (0, u32::MAX), (32, 0xFFFF), (32, 3)] {
            let mut d = good.clone();
            if off == 32 {
                d[32..34].copy_from_slice(&(val as u16).to_ne_bytes());
            } else {
                d[off..off + 4].copy_from_slice(&val.to_ne_bytes());
            }
            let v = parse(&d);
            assert!(!v.is_empty() && v.len() <= 2, "{off} {val}: {v:?}");
            assert!(v.iter().all(|m| !matches!(m, Message::Event(ProcEvent::Fork { .. }))) || val == 77, "{off} {val}: {v:?}");
        }
        // pseudo-random garbage, including valid headers with random contents
        let mut x = 0x9E37_79B9_7F4A_7C15u64;
        let mut next = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        for _ in 0..20_000 {
            let n = (next() % 200) as usize;
            let mut d: Vec<u8> = (0..n).map(|_| next() as u8).collect();
            if n >= 8 && next() % 2 == 0 {
                let len = (next() % (n as u64 + 8)) as u32;
                d[0..4].copy_from_slice(&len.to_ne_bytes());
                d[4..6].copy_from_slice(&3u16.to_ne_bytes());
            }
            let mut count = 0;
            parse_datagram(&d, |_| count += 1);
            assert!(count <= n / NLMSG_HDRLEN + 1);
        }
    }

    #[test]
    fn subscribe_request_bytes() {
        let m = mcast_request(PROC_CN_MCAST_LISTEN, 0xABCD);
        assert_eq!(m.len(), 40);
        assert_eq!(u32_at(&m, 0), Some(40));
        assert_eq!(u32_at(&m, 16), Some(CN_IDX_PROC));
        assert_eq!(u32_at(&m, 28), Some(0xABCD));
        assert_eq!(u16_at(&m, 32), Some(4));
        assert_eq!(u32_at(&m, 36), Some(PROC_CN_MCAST_LISTEN));
    }
}
