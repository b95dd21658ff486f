//! Stalls on memory and I/O, for `why`: the target's threads' state and wait channel at
//! every sample, its major faults, I/O counters and memory cgroup's refaults over the
//! window, and who holds the memory (or moves the data) where it stalls. The verdict and
//! whose use caused it are allot_model::stall's; this samples and groups.

use allot_linux::process::stall as k;
use allot_model::stall::{cause_words, io_culprit, judge, memory_culprit, memory_wait, Holder, StallFacts, StallKind};
use std::collections::HashMap;

/// A process's use of memory (bytes resident) or I/O (bytes a second) during the window.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct ProcUse {
    /// Its pid.
    pub pid: i32,
    /// Its real uid (None: it exited).
    pub uid: Option<u32>,
    /// Bytes (memory) or bytes a second (I/O).
    pub bytes: f64,
    /// Whom its use counts for: "currency NAME" where allot's daemon has it in a job, else
    /// "user NAME (in no allot job)".
    pub who: String,
    /// Its allot currency, where the daemon has it in a job.
    pub currency: Option<String>,
    /// Memory only: its memory cgroup, where that is below the one it is reclaimed in, and
    /// that cgroup's charge, bytes (its processes' memory and the page cache they read,
    /// which no process's resident memory shows).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub charge: Option<(String, u64)>,
}

/// The most processes kept per list (the largest).
pub const KEPT: usize = 20;

/// What `why` found about memory and I/O.
#[derive(Debug, Clone, Default, serde::Serialize, serde::Deserialize)]
pub struct Stall {
    /// The numbers judged.
    pub facts: StallFacts,
    /// The wait channels its threads were seen blocked in (state D), most seen first, with
    /// how many samples.
    pub waits: Vec<(String, u32)>,
    /// Why /proc/PID/io gave nothing (another user's process), if it did not.
    pub io_unreadable: Option<String>,
    /// Its memory cgroup.
    pub memory_cgroup: Option<String>,
    /// Where its memory is reclaimed first: the nearest memory cgroup with a limit (None:
    /// the machine), with its use and limit, bytes.
    pub domain: Option<(String, u64, u64)>,
    /// The machine's PSI over the window, share: memory "some", I/O "some".
    pub system_memory_pressure: Option<f64>,
    /// As above, I/O.
    pub system_io_pressure: Option<f64>,
    /// The largest processes by resident memory in its memory domain.
    pub memory_users: Vec<ProcUse>,
    /// The processes that moved the most data to and from storage in the window.
    pub io_users: Vec<ProcUse>,
    /// The currencies' memory against their share, from allot's daemon (empty: it does not
    /// share memory, or was not asked).
    pub shares: Vec<CurrencyShare>,
    /// Whom the process's own use counts for (as [`ProcUse::who`]).
    pub own: String,
    /// What it stalled on (None: no stall).
    pub kind: Option<StallKind>,
    /// The evidence in one sentence.
    pub reason: String,
    /// Whose use caused it, as judged.
    pub culprit: Option<Holder>,
}

/// A currency's memory against its share, as allot's daemon reports it.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct CurrencyShare {
    /// The currency.
    pub currency: String,
    /// Bytes it uses.
    pub usage: u64,
    /// Its funded share, bytes.
    pub protection: u64,
}

/// The counters read at the start of the window.
pub struct Sampler {
    pid: i32,
    faults: Option<k::Faults>,
    io: Result<k::TaskIo, String>,
    memcg: Option<k::MemoryCgroup>,
    refaults: Option<u64>,
    cg_psi: (Option<allot_linux::process::procfs::Psi>, Option<allot_linux::process::procfs::Psi>),
    psi: (Option<allot_linux::process::procfs::Psi>, Option<allot_linux::process::procfs::Psi>),
    all_io: HashMap<i32, u64>,
    samples: u32,
    blocked: u32,
    reclaim: u32,
    waits: HashMap<String, u32>,
}

fn io_bytes(io: &k::TaskIo) -> u64 {
    io.read_bytes + io.write_bytes.saturating_sub(io.cancelled_write_bytes)
}

/// Every process's storage reads and writes so far (those this user may read).
fn all_io() -> HashMap<i32, u64> {
    allot_linux::process::procfs::pids().unwrap_or_default().into_iter().filter_map(|p| k::io(p).ok().map(|io| (p, io_bytes(&io)))).collect()
}

fn pressure_share(a: Option<allot_linux::process::procfs::Psi>, b: Option<allot_linux::process::procfs::Psi>, t: f64) -> Option<f64> {
    let (a, b) = (a?, b?);
    Some((b.some.total_us.saturating_sub(a.some.total_us) as f64 / 1e6 / t).min(1.0))
}

impl Sampler {
    /// Reads the counters of `pid` at the start of the window.
    pub fn start(pid: i32) -> Sampler {
        let memcg = k::memory_cgroup_of(pid).ok().flatten();
        Sampler {
            pid,
            faults: k::faults(pid).ok(),
            io: k::io(pid).map_err(|e| format!("{e}")),
            refaults: memcg.as_ref().and_then(|m| m.refaults()),
            cg_psi: (memcg.as_ref().and_then(|m| m.pressure("memory")), memcg.as_ref().and_then(|m| m.pressure("io"))),
            memcg,
            psi: (k::psi("memory"), k::psi("io")),
            all_io: all_io(),
            samples: 0,
            blocked: 0,
            reclaim: 0,
            waits: HashMap::new(),
        }
    }

    /// One sample of its threads' state and wait channel. A thread that exits between
    /// the listing and the read is skipped.
    pub fn sample(&mut self, tids: &[i32]) {
        let (mut blocked, mut reclaim) = (false, false);
        for &tid in tids {
            let Ok((state, wchan)) = k::state_and_wchan(self.pid, tid) else { continue };
            if let Some(w) = &wchan {
                reclaim |= memory_wait(w);
            }
            if state == 'D' {
                blocked = true;
                *self.waits.entry(wchan.unwrap_or_else(|| "(not shown)".into())).or_default() += 1;
            }
        }
        self.samples += 1;
        self.blocked += blocked as u32;
        self.reclaim += reclaim as u32;
    }

    /// The start time of the process as first read: a recycled pid has another.
    pub fn starttime(&self) -> Option<u64> {
        self.faults.map(|f| f.starttime)
    }

    /// The counters again at the end of a window of `t` seconds, and the memory users
    /// where it would be reclaimed. Errors: the pid now names another process.
    pub fn finish(self, t: f64) -> anyhow::Result<Stall> {
        let t = t.max(1e-3);
        let f1 = k::faults(self.pid).ok();
        if let (Some(a), Some(b)) = (self.faults, f1) {
            if a.starttime != b.starttime {
                anyhow::bail!("process {} exited during sampling: its pid now names another process", self.pid);
            }
        }
        let io1 = k::io(self.pid);
        let rate = |a: u64, b: u64| b.saturating_sub(a) as f64 / t;
        let (read_per_s, disk_read_per_s, disk_write_per_s, io_unreadable) = match (&self.io, &io1) {
            (Ok(a), Ok(b)) => (
                Some(rate(a.rchar, b.rchar)),
                Some(rate(a.read_bytes, b.read_bytes)),
                Some(rate(a.write_bytes.saturating_sub(a.cancelled_write_bytes), b.write_bytes.saturating_sub(b.cancelled_write_bytes))),
                None,
            ),
            (Err(e), _) => (None, None, None, Some(e.clone())),
            (_, Err(e)) => (None, None, None, Some(format!("{e}"))),
        };
        let hz = allot_linux::process::procfs::clk_tck() as f64;
        let delay_on = std::fs::read_to_string("/proc/sys/kernel/task_delayacct").is_ok_and(|s| s.trim() == "1");
        let n = self.samples.max(1) as f64;
        let memcg = self.memcg.as_ref();
        let domain = memcg.and_then(|m| m.domain());
        let facts = StallFacts {
            blocked_share: self.blocked as f64 / n,
            reclaim_share: self.reclaim as f64 / n,
            major_faults_per_s: match (self.faults, f1) {
                (Some(a), Some(b)) => rate(a.majflt, b.majflt),
                _ => 0.0,
            },
            read_per_s,
            disk_read_per_s,
            disk_write_per_s,
            refaults_per_s: match (self.refaults, memcg.and_then(|m| m.refaults())) {
                (Some(a), Some(b)) => Some(rate(a, b)),
                _ => None,
            },
            io_delay_share: match (self.faults, f1) {
                (Some(a), Some(b)) if delay_on => Some((rate(a.blkio_ticks, b.blkio_ticks) / hz).min(1.0)),
                _ => None,
            },
            cgroup_memory_pressure: pressure_share(self.cg_psi.0, memcg.and_then(|m| m.pressure("memory")), t),
            cgroup_io_pressure: pressure_share(self.cg_psi.1, memcg.and_then(|m| m.pressure("io")), t),
            domain_full: match &domain {
                Some((_, u, l)) => Some((*u as f64 / (*l).max(1) as f64).min(1.0)),
                None => k::machine_full(),
            },
        };
        let members = match (memcg, &domain) {
            (Some(m), Some((rel, _, _))) => m.members(rel),
            _ => allot_linux::process::procfs::pids().unwrap_or_default(),
        };
        let top = domain.as_ref().map_or("/", |d| d.0.as_str());
        let mut charges: HashMap<String, Option<u64>> = HashMap::new();
        let mut memory_users: Vec<ProcUse> = members
            .into_iter()
            .filter_map(|p| {
                let rss = k::resident(p).ok()?;
                // A cgroup of its own below the domain: its charge holds the page cache too.
                let charge = memcg.and_then(|m| {
                    let rel = m.rel_of(p).filter(|r| r != top && under(r, top))?;
                    let c = *charges.entry(rel.clone()).or_insert_with(|| m.usage_limit(&rel).map(|u| u.0));
                    Some((rel, c?))
                });
                Some(ProcUse { pid: p, uid: None, bytes: rss as f64, who: String::new(), currency: None, charge })
            })
            .collect();
        let size = |u: &ProcUse| u.charge.as_ref().map_or(u.bytes, |c| c.1 as f64);
        memory_users.sort_by(|a, b| size(b).total_cmp(&size(a)).then(b.bytes.total_cmp(&a.bytes)));
        memory_users.truncate(KEPT);
        let mut io_users: Vec<ProcUse> = all_io()
            .into_iter()
            .filter_map(|(p, b)| {
                let r = rate(self.all_io.get(&p).copied().unwrap_or(b), b);
                (r > 0.0).then_some(ProcUse { pid: p, uid: None, bytes: r, who: String::new(), currency: None, charge: None })
            })
            .collect();
        io_users.sort_by(|a, b| b.bytes.total_cmp(&a.bytes));
        io_users.truncate(KEPT);
        for u in memory_users.iter_mut().chain(io_users.iter_mut()) {
            u.uid = allot_linux::process::machine::creds(u.pid).ok().map(|c| c.uid[0]);
            u.who = user_words(u.uid);
        }
        let own = user_words(allot_linux::process::machine::creds(self.pid).ok().map(|c| c.uid[0]));
        let mut waits: Vec<(String, u32)> = self.waits.into_iter().collect();
        waits.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
        waits.truncate(5);
        Ok(Stall {
            facts,
            waits,
            io_unreadable,
            memory_cgroup: memcg.map(|m| m.rel.clone()),
            domain,
            system_memory_pressure: pressure_share(self.psi.0, k::psi("memory"), t),
            system_io_pressure: pressure_share(self.psi.1, k::psi("io"), t),
            memory_users,
            io_users,
            own,
            ..Default::default()
        })
    }
}

/// Whom a process's use counts for where allot has it in no job: its user.
pub fn user_words(uid: Option<u32>) -> String {
    match uid {
        Some(uid) => format!("user {} (in no allot job)", allot_linux::process::procfs::user_name(uid).unwrap_or_else(|| uid.to_string())),
        None => "an exited process".into(),
    }
}

/// Whether cgroup path `rel` is `top` or below it.
fn under(rel: &str, top: &str) -> bool {
    top == "/" || rel == top || rel.strip_prefix(top).is_some_and(|r| r.starts_with('/'))
}

/// The processes' use summed by whom it counts for, largest first: a memory cgroup's
/// charge once however many of its processes are listed, else each process's own.
fn group(uses: &[ProcUse], own: &str) -> Vec<Holder> {
    let mut by: Vec<Holder> = vec![];
    let mut counted: Vec<&str> = vec![];
    for u in uses {
        let bytes = match &u.charge {
            Some((cg, _)) if counted.contains(&cg.as_str()) => 0.0,
            Some((cg, c)) => {
                counted.push(cg);
                *c as f64
            }
            None => u.bytes,
        };
        let name = u.who.clone();
        match by.iter_mut().find(|h| h.name == name) {
            Some(h) => {
                h.bytes += bytes;
                h.pids.push(u.pid);
            }
            None => by.push(Holder { own: name == own, name, bytes, share: None, pids: vec![u.pid] }),
        }
    }
    by.sort_by(|a, b| b.bytes.total_cmp(&a.bytes));
    by
}

/// Judges the stall and whose use caused it, pure. Sets `kind`, `reason` and `culprit`.
pub fn decide(s: &mut Stall) {
    let own = s.own.as_str();
    s.culprit = None;
    let Some((kind, evidence)) = judge(&s.facts) else {
        s.kind = None;
        s.reason.clear();
        return;
    };
    let holders = match kind {
        StallKind::Memory if !s.shares.is_empty() => s
            .shares
            .iter()
            .map(|c| {
                let name = format!("currency {}", c.currency);
                let pids = s.memory_users.iter().filter(|u| u.currency.as_deref() == Some(&c.currency)).map(|u| u.pid).collect();
                Holder { own: name == own, name, bytes: c.usage as f64, share: Some(c.protection as f64), pids }
            })
            .collect(),
        StallKind::Memory => group(&s.memory_users, own),
        StallKind::Io => group(&s.io_users, own),
    };
    let culprit = match kind {
        StallKind::Memory => memory_culprit(&holders),
        StallKind::Io => io_culprit(&holders),
    };
    let whose = match (kind, culprit) {
        (_, Some(h)) => {
            let pids: Vec<String> = h.pids.iter().take(3).map(|p| p.to_string()).collect();
            let pids = if pids.is_empty() { String::new() } else { format!(" (pid {})", pids.join(", ")) };
            format!("; whose use caused it: {}{pids}", cause_words(kind, h))
        }
        (StallKind::Memory, None) if !s.shares.is_empty() => "; every currency is within its memory share: what is protected does not fit".into(),
        _ => String::new(),
    };
    s.kind = Some(kind);
    s.culprit = culprit.cloned();
    s.reason = format!("{evidence}{whose}");
}

#[cfg(test)]
mod tests {
    use super::super::tests::diagnosis;
    use super::super::*;
    use super::*;

    fn used(pid: i32, mib: f64, who: &str) -> ProcUse {
        ProcUse {
            pid,
            uid: Some(2901),
            bytes: mib * 1048576.0,
            who: who.into(),
            currency: who.strip_prefix("currency ").map(str::to_string),
            charge: None,
        }
    }

    /// The kernel test's reader as sampled: its cache read back from disk while B's hog
    /// holds most of the memory of allot's bounded root.
    fn stalled() -> Stall {
        Stall {
            facts: StallFacts {
                blocked_share: 0.26,
                read_per_s: Some(1.1e9),
                disk_read_per_s: Some(1.0e9),
                refaults_per_s: Some(273_636.0),
                domain_full: Some(1.0),
                ..Default::default()
            },
            memory_users: vec![used(22113, 109.0, "currency 2902"), used(21855, 10.0, "currency 2901"), used(3, 5.0, "currency 2901")],
            own: "currency 2901".into(),
            ..Default::default()
        }
    }

    #[test]
    fn the_largest_holder_is_named_without_shares_and_the_furthest_over_with_them() {
        let mut s = stalled();
        decide(&mut s);
        assert_eq!(s.kind, Some(StallKind::Memory));
        let c = s.culprit.clone().unwrap();
        assert_eq!((c.name.as_str(), c.own, c.pids.as_slice()), ("currency 2902", false, &[22113][..]));
        assert!(s.reason.ends_with("whose use caused it: currency 2902 holds the most memory there (109M) (pid 22113)"), "{}", s.reason);
        // With the daemon's shares: 2901 is over its share, 2902 within: 2901's own use.
        s.shares = vec![
            CurrencyShare { currency: "2901".into(), usage: 100 << 20, protection: 80 << 20 },
            CurrencyShare { currency: "2902".into(), usage: 109 << 20, protection: 120 << 20 },
        ];
        decide(&mut s);
        let c = s.culprit.clone().unwrap();
        assert!(c.own && c.name == "currency 2901" && c.pids == [21855, 3], "{c:?}");
        assert!(s.reason.contains("its own currency 2901 uses 100M against its share of 80M"), "{}", s.reason);
        // Everyone within their share: nobody is named, and that is said.
        s.shares[0].usage = 70 << 20;
        decide(&mut s);
        assert!(
            s.culprit.is_none() && s.reason.ends_with("every currency is within its memory share: what is protected does not fit"),
            "{}",
            s.reason
        );
        // No stall: nothing named, no reason left from before.
        s.facts = StallFacts::default();
        decide(&mut s);
        assert!(s.kind.is_none() && s.culprit.is_none() && s.reason.is_empty());
    }

    #[test]
    fn a_pid_that_names_another_process_by_the_end_is_refused() {
        let me = std::process::id() as i32;
        let mut s = Sampler::start(me);
        s.sample(&[me]);
        assert!(s.starttime().is_some());
        // As if the process first read had exited and its pid been given to this one.
        s.faults.as_mut().unwrap().starttime += 1;
        let e = s.finish(0.1).unwrap_err().to_string();
        assert!(e.contains(&format!("process {me} exited during sampling: its pid now names another process")), "{e}");
        // The same process throughout: its own numbers, its memory domain found.
        let mut s = Sampler::start(me);
        s.sample(&[me, -1]);
        let st = s.finish(0.1).unwrap();
        assert!(st.io_unreadable.is_none() && st.facts.read_per_s.is_some(), "{st:?}");
        assert!(st.own.starts_with("user "), "{}", st.own);
    }

    #[test]
    fn a_cgroups_charge_counts_its_page_cache_once() {
        // B's reader holds 2 MiB resident but its job's cgroup is charged 120 MiB of page
        // cache; A's hog holds 60 MiB resident in the domain itself (no cgroup of its own).
        let mut s = stalled();
        let cache = |pid, cg: &str| ProcUse { charge: Some((cg.into(), 120 << 20)), ..used(pid, 2.0, "currency 2902") };
        s.memory_users = vec![cache(7, "/allot/2902/1"), cache(8, "/allot/2902/1"), used(9, 60.0, "currency 2901")];
        decide(&mut s);
        let c = s.culprit.clone().unwrap();
        assert_eq!((c.name.as_str(), c.bytes, c.pids.as_slice()), ("currency 2902", (120u64 << 20) as f64, &[7, 8][..]), "counted once: {c:?}");
        assert!(under("/allot/2902/1", "/allot") && under("/allot", "/allot") && under("/x", "/"));
        assert!(!under("/allotx/1", "/allot") && !under("/", "/allot"));
    }

    #[test]
    fn a_stall_is_the_verdict_and_the_help_names_who_may_act() {
        let mut d = diagnosis("reader", "hog", "/allot/2901/1");
        d.stall = stalled();
        advise(&mut d);
        assert_eq!((d.kernel_verdict, d.verdict), (Verdict::MemoryStall, Verdict::MemoryStall));
        assert_eq!(d.help, ["(no CPU setting will help: it waits for memory)"]);
        assert_eq!(d.ask, ["currency 2902 causes it: its owner, or root, may stop or shrink its memory use (pid 22113)"]);
        // An I/O stall: another user's writer moving the most.
        d.stall.facts.refaults_per_s = Some(0.0);
        d.stall.io_users = vec![used(21855, 40.0, "currency 2901"), used(9, 80.0, "user bob (in no allot job)")];
        advise(&mut d);
        assert_eq!(d.verdict, Verdict::IoStall);
        assert!(d.reason.ends_with("whose use caused it: user bob (in no allot job) moves the most data (80M a second) (pid 9)"), "{}", d.reason);
    }

    #[test]
    fn names_and_wait_channels_cannot_write_to_the_terminal() {
        let mut d = diagnosis("reader", "hog", "/");
        d.stall = stalled();
        d.stall.memory_users[0].who = "currency \x1b[2Jevil".into();
        d.stall.waits = vec![("\x1b]0;x\x07".into(), 3)];
        d.stall.memory_cgroup = Some("/a\x1b[H".into());
        advise(&mut d);
        let s = render(&d);
        assert!(!s.contains('\x1b') && !s.contains('\x07'), "{s}");
        assert!(s.contains("currency \\e[2Jevil") && s.contains("waiting in \\e]0;x\\a (3)"), "{s}");
        assert!(s.contains("verdict: STALLED ON MEMORY"), "{s}");
    }
}
