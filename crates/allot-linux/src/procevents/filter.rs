//! The classic BPF socket filter that keeps unwanted events out of user space.
//!
//! The kernel runs it on every event it broadcasts, in the context of the process that
//! forked, exec'd or exited, before the datagram is queued on the socket. A dropped
//! datagram costs the listener nothing and never fills its receive buffer, so a fork
//! storm of threads (or of processes, when forks are not wanted) cannot make it lose
//! the events it does want.
//!
//! Classic BPF loads (`BPF_LD|BPF_W|BPF_ABS`) read 32-bit words in network byte order,
//! while the connector writes host order: constants are compared in the loaded order
//! ([`be`]), and pid/tgid pairs are compared with each other, both loaded alike.

use super::wire::{self, PROC_EVENT_EXEC, PROC_EVENT_EXIT, PROC_EVENT_FORK, PROC_EVENT_NONE, PROC_EVENT_UID};
use super::Kinds;

// Opcodes (include/uapi/linux/filter.h, bpf_common.h).
const LD_W_ABS: u16 = 0x20; // BPF_LD 0x00 | BPF_W 0x00 | BPF_ABS 0x20
const LD_W_LEN: u16 = 0x80; // BPF_LD 0x00 | BPF_W 0x00 | BPF_LEN 0x80
const JEQ_K: u16 = 0x15; // BPF_JMP 0x05 | BPF_JEQ 0x10 | BPF_K 0x00
const JGE_K: u16 = 0x35; // BPF_JMP 0x05 | BPF_JGE 0x30 | BPF_K 0x00
const JEQ_X: u16 = 0x1d; // BPF_JMP 0x05 | BPF_JEQ 0x10 | BPF_X 0x08
const TAX: u16 = 0x07; // BPF_MISC 0x07 | BPF_TAX 0x00
const RET_K: u16 = 0x06; // BPF_RET 0x06 | BPF_K 0x00

/// Return values: keep the whole datagram, or drop it.
const KEEP: u32 = u32::MAX;
const DROP: u32 = 0;

/// A value as a `BPF_W|BPF_ABS` load of its host-order bytes sees it.
fn be(v: u32) -> u32 {
    u32::from_be_bytes(v.to_ne_bytes())
}

/// Where a jump goes.
#[derive(Clone, Copy)]
enum To {
    Next,
    Keep,
    Drop,
    /// The "is the pid its own tgid" test at data words (i, i + 1).
    Leader(u32),
}

enum Op {
    LdLen,
    Ld(u32),
    Jeq(u32, To, To),
    Jge(u32, To, To),
}

/// The filter for `kinds`, as `struct sock_filter` instructions.
///
/// ```text
/// shorter than an event's words, or not the proc connector  → keep (user space decides)
/// what == NONE (the replies to subscribe requests)             → keep
/// what == FORK: wanted and child_pid == child_tgid             → keep, else drop
/// what == EXEC: wanted                                         → keep, else drop
/// what == UID:  wanted and process_pid == process_tgid         → keep, else drop
/// what == EXIT: wanted and process_pid == process_tgid         → keep, else drop
/// anything else (gid, sid, ptrace, comm, coredump)             → drop
/// ```
pub(crate) fn program(kinds: Kinds) -> Vec<libc::sock_filter> {
    let want = |k: Kinds, then: To| if kinds.contains(k) { then } else { To::Drop };
    let ops = [
        Op::LdLen,
        // Loads past the end would end the program with 0 (drop): check the length first.
        Op::Jge(wire::off_data(4), To::Next, To::Keep),
        Op::Ld(wire::OFF_CN_IDX),
        Op::Jeq(be(wire::CN_IDX_PROC), To::Next, To::Keep),
        Op::Ld(wire::OFF_CN_VAL),
        Op::Jeq(be(wire::CN_VAL_PROC), To::Next, To::Keep),
        Op::Ld(wire::OFF_WHAT),
        Op::Jeq(be(PROC_EVENT_NONE), To::Keep, To::Next),
        Op::Jeq(be(PROC_EVENT_FORK), want(Kinds::FORK, To::Leader(2)), To::Next),
        Op::Jeq(be(PROC_EVENT_EXEC), want(Kinds::EXEC, To::Keep), To::Next),
        Op::Jeq(be(PROC_EVENT_UID), want(Kinds::UID, To::Leader(0)), To::Next),
        Op::Jeq(be(PROC_EVENT_EXIT), want(Kinds::EXIT, To::Leader(0)), To::Drop),
    ];
    // Layout: ops, then "leader at 2" (4 insns), "leader at 0" (4 insns), keep, drop.
    let leader2 = ops.len();
    let leader0 = leader2 + 4;
    let keep = leader0 + 4;
    let drop = keep + 1;
    let target = |t: To, at: usize| -> u8 {
        let dest = match t {
            To::Next => at + 1,
            To::Keep => keep,
            To::Drop => drop,
            To::Leader(2) => leader2,
            To::Leader(_) => leader0,
        };
        u8::try_from(dest - at - 1).expect("BPF jump fits in u8")
    };
    let mut prog = Vec::with_capacity(drop + 1);
    let ins = |code, jt, jf, k| libc::sock_filter { code, jt, jf, k };
    for (at, op) in ops.iter().enumerate() {
        prog.push(match *op {
            Op::LdLen => ins(LD_W_LEN, 0, 0, 0),
            Op::Ld(off) => ins(LD_W_ABS, 0, 0, off),
            Op::Jeq(k, t, f) => ins(JEQ_K, target(t, at), target(f, at), k),
            Op::Jge(k, t, f) => ins(JGE_K, target(t, at), target(f, at), k),
        });
    }
    for first in [2, 0] {
        // X = pid word, A = tgid word; equal → a leader.
        let at = prog.len();
        prog.push(ins(LD_W_ABS, 0, 0, wire::off_data(first)));
        prog.push(ins(TAX, 0, 0, 0));
        prog.push(ins(LD_W_ABS, 0, 0, wire::off_data(first + 1)));
        prog.push(ins(JEQ_X, target(To::Keep, at + 3), target(To::Drop, at + 3), 0));
    }
    debug_assert_eq!(prog.len(), keep);
    prog.push(ins(RET_K, 0, 0, KEEP));
    prog.push(ins(RET_K, 0, 0, DROP));
    prog
}

/// A classic BPF interpreter for the opcodes above, as the kernel runs them: tests run
/// the filter on the datagrams the parser's tests build.
#[cfg(test)]
pub(crate) fn run(prog: &[libc::sock_filter], pkt: &[u8]) -> u32 {
    let (mut a, mut x, mut pc) = (0u32, 0u32, 0usize);
    loop {
        let i = prog[pc];
        pc += 1;
        match i.code {
            LD_W_LEN => a = pkt.len() as u32,
            LD_W_ABS => match pkt.get(i.k as usize..i.k as usize + 4) {
                Some(b) => a = u32::from_be_bytes(b.try_into().unwrap()),
                None => return 0,
            },
            TAX => x = a,
            RET_K => return i.k,
            JEQ_K | JGE_K | JEQ_X => {
                let hit = match i.code {
                    JEQ_K => a == i.k,
                    JGE_K => a >= i.k,
                    _ => a == x,
                };
                pc += if hit { i.jt } else { i.jf } as usize;
            }
            c => panic!("opcode {c:#x} not in the interpreter"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::wire::build::{event, message};
    use super::*;

    #[test]
    fn keeps_processes_drops_threads_and_unwanted_kinds() {
        let all = program(Kinds::ALL);
        let keep = |p: &[libc::sock_filter], d: Vec<u8>| run(p, &d) != 0;
        assert!(keep(&all, event(PROC_EVENT_FORK, &[1, 1, 2, 2])));
        assert!(keep(&all, event(PROC_EVENT_FORK, &[3, 1, 2, 2])), "fork from a thread");
        assert!(!keep(&all, event(PROC_EVENT_FORK, &[1, 1, 3, 1])), "new thread");
        assert!(keep(&all, event(PROC_EVENT_EXEC, &[2, 2])));
        assert!(keep(&all, event(PROC_EVENT_UID, &[2, 2, 61000, 61000])));
        assert!(!keep(&all, event(PROC_EVENT_UID, &[3, 2, 61000, 61000])), "a thread's setuid");
        assert!(keep(&all, event(PROC_EVENT_EXIT, &[2, 2, 0, 17, 1, 1])));
        assert!(!keep(&all, event(PROC_EVENT_EXIT, &[3, 2, 0, 0, 1, 1])), "thread exit");
        assert!(keep(&all, event(PROC_EVENT_NONE, &[0])), "subscribe replies");
        assert!(!keep(&all, event(0x40, &[2, 2, 5, 5])), "gid");
        assert!(!keep(&all, event(0x200, &[2, 2])), "comm");
        assert!(keep(&all, message(7, PROC_EVENT_FORK, &[1, 1, 3, 1], 0)), "another connector: user space decides");
        assert!(keep(&all, vec![0u8; 20]), "short: user space decides");

        let some = program(Kinds::UID | Kinds::EXEC);
        assert!(!keep(&some, event(PROC_EVENT_FORK, &[1, 1, 2, 2])));
        assert!(!keep(&some, event(PROC_EVENT_EXIT, &[2, 2, 0, 17, 1, 1])));
        assert!(keep(&some, event(PROC_EVENT_EXEC, &[2, 2])));
        assert!(keep(&some, event(PROC_EVENT_UID, &[2, 2, 1, 1])));
        assert!(keep(&some, event(PROC_EVENT_NONE, &[0])));
        let none = program(Kinds::NONE);
        assert!(!keep(&none, event(PROC_EVENT_EXEC, &[2, 2])));
        assert!(keep(&none, event(PROC_EVENT_NONE, &[0])));
    }

    #[test]
    fn jumps_stay_inside_and_it_ends_in_ret() {
        for k in [Kinds::ALL, Kinds::NONE, Kinds::FORK, Kinds::EXIT | Kinds::UID] {
            let p = program(k);
            assert!(p.len() < 64);
            for (i, ins) in p.iter().enumerate() {
                if ins.code & 0x07 == 0x05 {
                    assert!(i + 1 + (ins.jt as usize) < p.len() && i + 1 + (ins.jf as usize) < p.len());
                }
            }
            assert_eq!(p.last().unwrap().code, RET_K);
        }
    }
}
