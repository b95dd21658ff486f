//! `allot-scx serve`: the loader as the daemon runs it (docs/scx.md). The daemon never
//! links this crate (it is GPL-2.0-only, allot is not): it starts this program and talks
//! to it over a pipe.
//!
//! stdin, a table at a time: lines `job SHARE CGROUP-DIR` (SHARE in base units, already
//! flattened by the daemon from its plan) and then a line `end`. Each table replaces the
//! last: jobs not in it are forgotten and their threads put back in the fair class. End
//! of input (the daemon stopped, or died) or SIGTERM unloads the scheduler.
//!
//! stdout, one line per event:
//!   `loaded allot_stride MODE`               attached;
//!   `table N jobs M threads`                  a table is in the maps (M threads newly SCHED_EXT);
//!   `bad LINE: WHY`                           a line it could not take (the rest of the table is);
//!   `ejected KIND NAME: REASON: MESSAGE`      the kernel ejected it (said at once; it then
//!                                             puts the threads back and exits 3);
//!   `unloaded ...`                            it left because it was asked to; exit 0.
//! A failure to load is an error on stderr and exit status 1.

use crate::{cgroup_id, set_policy, threads, Scheduler, State};
use anyhow::Result;
use std::collections::{BTreeMap, HashSet};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{channel, RecvTimeoutError};
use std::time::{Duration, Instant};

static STOP: AtomicBool = AtomicBool::new(false);

extern "C" fn on_signal(_: libc::c_int) {
    STOP.store(true, Ordering::SeqCst);
}

/// One job of the table in force: its share, cgroup id and the threads set to SCHED_EXT.
struct Job {
    id: u64,
    share: u64,
    ext: HashSet<i32>,
}

/// Parses `job SHARE CGROUP-DIR`.
pub fn parse_job(line: &str) -> Result<(PathBuf, u64), String> {
    let rest = line.strip_prefix("job ").ok_or("wanted `job SHARE CGROUP-DIR` or `end`")?;
    let (share, dir) = rest.split_once(' ').ok_or("wanted `job SHARE CGROUP-DIR`")?;
    let share: u64 = share.parse().ok().filter(|s| *s >= 1).ok_or_else(|| format!("share must be a whole number 1 or more, got {share:?}"))?;
    if !dir.starts_with('/') {
        return Err(format!("the cgroup must be an absolute directory, got {dir:?}"));
    }
    Ok((PathBuf::from(dir), share))
}

/// Puts every thread of the job's cgroup not yet put there in sched_ext (partial switch:
/// new ones moved in since, too). Returns how many were.
fn sweep(dir: &std::path::Path, j: &mut Job, partial: bool) -> usize {
    if !partial {
        return 0;
    }
    let now: HashSet<i32> = threads(dir).unwrap_or_default().into_iter().collect();
    j.ext.retain(|t| now.contains(t));
    let mut n = 0;
    for t in now {
        if !j.ext.contains(&t) && set_policy(t, true).is_ok() {
            j.ext.insert(t);
            n += 1;
        }
    }
    n
}

fn back_to_fair(dir: &std::path::Path) -> usize {
    threads(dir).unwrap_or_default().into_iter().filter(|t| set_policy(*t, false).is_ok()).count()
}

/// Runs the serve mode until end of input, SIGTERM/SIGINT, or an ejection (exit 3).
pub fn serve(all: bool) -> Result<()> {
    let mut s = Scheduler::load(all)?;
    // SAFETY: the handler only stores to an atomic.
    unsafe {
        libc::signal(libc::SIGINT, on_signal as *const () as libc::sighandler_t);
        libc::signal(libc::SIGTERM, on_signal as *const () as libc::sighandler_t);
    }
    println!("loaded allot_stride {}", if all { "all" } else { "partial" });
    let (tx, rx) = channel::<Option<String>>();
    std::thread::spawn(move || {
        for line in std::io::stdin().lines() {
            let Ok(line) = line else { break };
            if tx.send(Some(line)).is_err() {
                return;
            }
        }
        let _ = tx.send(None);
    });
    let mut table: BTreeMap<PathBuf, Job> = BTreeMap::new();
    let mut pending: Vec<(PathBuf, u64)> = vec![];
    let mut next_sweep = Instant::now() + Duration::from_secs(1);
    let ejected: Option<State> = loop {
        let st = s.state()?;
        if st.exit_kind != 0 {
            // Said at once (the daemon falls back on this line), cleaned up after.
            let msg = st.exit_msg.lines().next().unwrap_or("").trim();
            let msg = if msg.is_empty() { String::new() } else { format!(": {msg}") };
            println!("ejected {} {}: {}{msg}", st.exit_kind, st.exit_kind_name(), st.exit_reason);
            break Some(st);
        }
        if STOP.load(Ordering::SeqCst) {
            break None;
        }
        match rx.recv_timeout(Duration::from_millis(100)) {
            Ok(Some(line)) if line.trim() == "end" => {
                let new: BTreeMap<PathBuf, u64> = std::mem::take(&mut pending).into_iter().collect();
                for (dir, j) in std::mem::take(&mut table) {
                    if new.contains_key(&dir) {
                        table.insert(dir, j);
                    } else {
                        let _ = s.remove_job(j.id);
                        if !all {
                            back_to_fair(&dir);
                        }
                    }
                }
                let mut n = 0;
                for (dir, share) in new {
                    let id = match cgroup_id(&dir) {
                        Ok(id) => id,
                        Err(e) => {
                            println!("bad job {share} {}: {e:#}", dir.display());
                            continue;
                        }
                    };
                    let j = table.entry(dir.clone()).or_insert(Job { id, share: 0, ext: HashSet::new() });
                    if j.id != id {
                        // the directory was made again: a new cgroup
                        let _ = s.remove_job(j.id);
                        *j = Job { id, share: 0, ext: HashSet::new() };
                    }
                    if j.share != share {
                        s.set_job(id, share)?;
                        j.share = share;
                    }
                    n += sweep(&dir, j, !all);
                }
                println!("table {} jobs {n} threads", table.len());
            }
            Ok(Some(line)) if line.trim().is_empty() => {}
            Ok(Some(line)) => match parse_job(&line) {
                Ok(j) => pending.push(j),
                Err(e) => println!("bad {line}: {e}"),
            },
            Ok(None) | Err(RecvTimeoutError::Disconnected) => break None,
            Err(RecvTimeoutError::Timeout) => {}
        }
        if Instant::now() >= next_sweep {
            for (dir, j) in table.iter_mut() {
                sweep(dir, j, !all);
            }
            next_sweep = Instant::now() + Duration::from_secs(1);
        }
    };
    // Back to the fair class first (a thread that ran SCHED_EXT keeps the policy number
    // after a detach), then detach.
    let back: usize = if all { 0 } else { table.keys().map(|d| back_to_fair(d)).sum() };
    s.detach();
    match ejected {
        Some(_) => {
            println!("unloaded after the ejection; {back} threads back to SCHED_OTHER");
            std::process::exit(3);
        }
        None => {
            std::thread::sleep(Duration::from_millis(200)); // the kernel's exit callback runs after the detach
            let st = s.state().unwrap_or_default();
            println!("unloaded {} ({}): {}; {back} threads back to SCHED_OTHER", st.exit_kind_name(), st.exit_kind, st.exit_reason);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn job_lines_are_read_or_refused_naming_why() {
        assert_eq!(parse_job("job 50000 /sys/fs/cgroup/allot/u/j 1").unwrap(), (PathBuf::from("/sys/fs/cgroup/allot/u/j 1"), 50000));
        assert!(parse_job("job 0 /x").unwrap_err().contains("got \"0\""));
        assert!(parse_job("job 5 x").unwrap_err().contains("absolute"));
        assert!(parse_job("jobs 5 /x").unwrap_err().contains("end"));
    }
}
