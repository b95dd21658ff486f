//! `allot-scx hackbench --groups G --loops L`: hackbench's message passing (rt-tests'
//! hackbench in its thread mode, `-T`), for the side-by-side bench in the sched_ext VM
//! (tests/vm/scx/bench.sh, docs/scx.md), whose guest has no hackbench of its own. Each
//! group is 20 senders and 20 receivers, one stream socket pair per receiver; every sender
//! writes L messages of 100 bytes to each receiver of its group, and every receiver reads
//! 20 × L. All threads start together; the time is from that start until the last
//! receiver has read its last message. Prints one line:
//!   `hackbench: G groups of 20 senders and 20 receivers (threads), L loops of 100 bytes: Time: S`.
//! Threads, not processes, so that a scheduler that sets a job's policy when the job
//! starts (`allot-scx run`, partial switch) holds every one of them: they inherit it.

use anyhow::{bail, Context, Result};
use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::sync::{Arc, Barrier};
use std::time::Instant;

const USAGE: &str = "usage: allot-scx hackbench --groups G --loops L";
/// hackbench's defaults: 20 senders and 20 receivers per group, 100-byte messages.
const FDS: usize = 20;
const MSG: usize = 100;

fn parse(args: &[String]) -> Result<(usize, usize)> {
    let (mut groups, mut loops) = (None, None);
    let mut it = args.iter();
    while let Some(opt) = it.next() {
        let val = it.next().with_context(|| format!("{opt} needs a value; {USAGE}"))?;
        let n: usize = val.parse().ok().filter(|n| *n > 0).with_context(|| format!("{opt} wants a whole number above 0, got {val:?}"))?;
        match opt.as_str() {
            "--groups" if n <= 50 => groups = Some(n),
            "--loops" if n <= 100_000 => loops = Some(n),
            "--groups" | "--loops" => bail!("{opt} {val}: at most 50 (--groups) or 100000 (--loops)"),
            _ => bail!("unknown option {opt:?}; {USAGE}"),
        }
    }
    match (groups, loops) {
        (Some(g), Some(l)) => Ok((g, l)),
        _ => bail!("give --groups and --loops; {USAGE}"),
    }
}

/// Runs `groups` groups for `loops` loops; returns the time in seconds and the messages
/// the receivers read.
pub fn run(groups: usize, loops: usize) -> Result<(f64, usize)> {
    let start = Arc::new(Barrier::new(groups * FDS * 2 + 1));
    let mut handles = vec![];
    for _ in 0..groups {
        let mut ends = vec![];
        for _ in 0..FDS {
            let (w, mut r) = UnixStream::pair().context("socketpair")?;
            ends.push(w);
            let b = start.clone();
            handles.push(std::thread::spawn(move || -> std::io::Result<usize> {
                b.wait();
                let mut buf = [0u8; MSG];
                for _ in 0..FDS * loops {
                    r.read_exact(&mut buf)?;
                }
                // Every sender has written all it will: nothing more may be left to read.
                r.set_nonblocking(true)?;
                match r.read(&mut buf) {
                    Ok(0) | Err(_) => Ok(FDS * loops),
                    Ok(_) => Ok(FDS * loops + 1),
                }
            }));
        }
        for _ in 0..FDS {
            let mut out = ends.iter().map(UnixStream::try_clone).collect::<std::io::Result<Vec<_>>>().context("dup of a socket")?;
            let b = start.clone();
            handles.push(std::thread::spawn(move || -> std::io::Result<usize> {
                b.wait();
                let msg = [0x5au8; MSG];
                for _ in 0..loops {
                    for w in out.iter_mut() {
                        w.write_all(&msg)?;
                    }
                }
                Ok(0)
            }));
        }
    }
    start.wait();
    let t = Instant::now();
    let mut read = 0;
    for h in handles {
        read += h.join().map_err(|_| anyhow::anyhow!("a hackbench thread panicked"))?.context("a hackbench thread's socket")?;
    }
    Ok((t.elapsed().as_secs_f64(), read))
}

/// `allot-scx hackbench ...`.
pub fn main(args: &[String]) -> Result<()> {
    let (groups, loops) = parse(args)?;
    let (secs, read) = run(groups, loops)?;
    if read != groups * FDS * FDS * loops {
        bail!("hackbench: the receivers read {read} messages, not the {} sent", groups * FDS * FDS * loops);
    }
    println!("hackbench: {groups} groups of {FDS} senders and {FDS} receivers (threads), {loops} loops of {MSG} bytes: Time: {secs:.3}");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_message_arrives() {
        // Each of 2 × 20 receivers reads its 20 senders' 3 messages each, and no more.
        assert_eq!(run(2, 3).unwrap().1, 2 * 20 * 20 * 3);
    }

    #[test]
    fn bad_options_are_refused_naming_the_value() {
        let a = |s: &str| s.split_whitespace().map(String::from).collect::<Vec<_>>();
        assert_eq!(parse(&a("--groups 2 --loops 100")).unwrap(), (2, 100));
        assert!(parse(&a("--groups 0 --loops 1")).unwrap_err().to_string().contains("got \"0\""));
        assert!(parse(&a("--groups x --loops 1")).unwrap_err().to_string().contains("got \"x\""));
        assert!(parse(&a("--groups 51 --loops 1")).unwrap_err().to_string().contains("at most"));
        assert!(parse(&a("--groups 1")).unwrap_err().to_string().contains("--loops"));
        assert!(parse(&a("--threads 1 --loops 1")).unwrap_err().to_string().contains("--threads"));
    }
}
