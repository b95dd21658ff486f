//! `allot-scx serve`: the loader as the daemon runs it (docs/scx.md). The daemon never
//! links this crate (it is GPL-2.0-only, allot is not): it starts this program and talks
//! to it over a pipe.
//!
//! stdin, a table at a time: lines
//! `job SHARE [cap=CPUS] [currency-cap=CURRENCY:CPUS] [boost=NS [line=NS]] [background] CGROUP-DIR`
//! (SHARE in base units, already flattened by the daemon from its plan; CPUS a hard cap,
//! held by the sinbin; currency-cap the hard cap of the job's currency, held by the sinbin
//! for all the jobs that name that currency together, bpf/cap.h; NS the job's entitlement
//! over the boost window (`--boost-window-ms`, 500 ms by default),
//! allot_model::wake::entitlement_ns: its wakeups are boosted while it used less than half
//! of it, and without it never; background: dispatched only when no other task of allot's
//! is runnable on the CPU) and then a line `end`. Each table replaces the
//! last: jobs not in it are forgotten and their threads put back in the fair class; what
//! the BPF side kept for such a job (its runnable count, pass, cap period, boost window)
//! goes once its cgroup is gone (looked at with each table and every second, a second
//! after the removal at the earliest). A line
//! `maps` asks how many jobs the BPF side keeps state for. End of input (the daemon
//! stopped, or died) or SIGTERM unloads the scheduler.
//!
//! stdout, one line per event:
//!   `loaded allot_stride MODE window=MSms`   attached, boosting over a window of MS ms;
//!   `table N jobs M threads`                  a table is in the maps (M threads newly SCHED_EXT);
//!   `bad LINE: WHY`                           a line it could not take (the rest of the table is);
//!   `maps runnable N job_passes N usages N windows N retired N`
//!                                             the answer to `maps`: entries per map, and the
//!                                             removed jobs whose cgroup is still there;
//!   `ejected KIND NAME: REASON: MESSAGE`      the kernel ejected it (said at once; it then
//!                                             puts the threads back and exits 3);
//!   `unloaded ...`                            it left because it was asked to; exit 0.
//! A failure to load is an error on stderr and exit status 1.

use crate::{cgroup_id, set_policy, threads, Scheduler, State};
use anyhow::Result;
use std::collections::{BTreeMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{channel, RecvTimeoutError};
use std::time::{Duration, Instant};

static STOP: AtomicBool = AtomicBool::new(false);

extern "C" fn on_signal(_: libc::c_int) {
    STOP.store(true, Ordering::SeqCst);
}

/// What the scheduler is told of a job: its share, hard cap (ns per period, 0: none),
/// its currency's hard cap and whether it is a background job.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Terms {
    /// Share in base units.
    pub share: u64,
    /// Hard cap, [`crate::cap_ns`].
    pub cap_ns: u64,
    /// Its currency's key when the currency has a hard cap ([`CurrencyKeys`]; 0: none).
    pub group: u64,
    /// That currency's hard cap, [`crate::cap_ns`], for all its jobs together.
    pub group_cap_ns: u64,
    /// A background job.
    pub background: bool,
    /// Its entitlement over the boost window, ns (0: not boosted).
    pub boost_ns: u64,
    /// Boosted while its use over the window is below this, ns (0: half its entitlement;
    /// allot_model::wake::line_ns).
    pub line_ns: u64,
}

/// One job of the table in force: what the maps hold, its cgroup id and the threads set to
/// SCHED_EXT.
struct Job {
    id: u64,
    terms: Option<Terms>,
    ext: HashSet<i32>,
}

const JOB_LINE: &str = "`job SHARE [cap=CPUS] [currency-cap=CURRENCY:CPUS] [boost=NS [line=NS]] [background] CGROUP-DIR`";

/// The keys of capped currencies in the BPF side's `currency_usages` (struct job's group),
/// one per currency name for the loader's life, never reused: a budget is never handed
/// to another currency, whatever the tables that follow.
#[derive(Debug, Default)]
pub struct CurrencyKeys(BTreeMap<String, u64>);

/// At most this many currency names get a key (the BPF map's size).
const MAX_CURRENCIES: usize = 65536;

impl CurrencyKeys {
    /// The key of currency `name` (1..=65536), given at its first use.
    pub fn key(&mut self, name: &str) -> Result<u64, String> {
        if name.is_empty() || name.len() > 64 || !name.bytes().all(|b| b.is_ascii_alphanumeric() || b"._-@".contains(&b)) {
            return Err(format!("a currency is 1 to 64 of A-Z a-z 0-9 . _ - @, got {name:?}"));
        }
        if let Some(k) = self.0.get(name) {
            return Ok(*k);
        }
        if self.0.len() >= MAX_CURRENCIES {
            return Err(format!("no room for currency {name:?}: {MAX_CURRENCIES} currencies have had caps"));
        }
        let k = self.0.len() as u64 + 1;
        self.0.insert(name.to_string(), k);
        Ok(k)
    }
}

/// A cap's CPUs: above 0 and at most 4096.
fn cap_cpus(what: &str, c: &str) -> Result<u64, String> {
    crate::parse_cap_cpus(c).map(crate::cap_ns).ok_or_else(|| format!("{what} must be a number of CPUs above 0 and at most 4096, got {c:?}"))
}

/// Parses `job SHARE [cap=CPUS] [currency-cap=CURRENCY:CPUS] [boost=NS [line=NS]] [background]
/// CGROUP-DIR`, a capped currency's key from `keys`; boost and line are ns of CPU over
/// the boost window of `window` ns, so at most `window`.
pub fn parse_job(line: &str, keys: &mut CurrencyKeys, window: u64) -> Result<(PathBuf, Terms), String> {
    let rest = line.strip_prefix("job ").ok_or_else(|| format!("wanted {JOB_LINE} or `end`"))?;
    let (share, mut rest) = rest.split_once(' ').ok_or_else(|| format!("wanted {JOB_LINE}"))?;
    let share: u64 = share.parse().ok().filter(|s| *s >= 1).ok_or_else(|| format!("share must be a whole number 1 or more, got {share:?}"))?;
    let mut t = Terms { share, ..Terms::default() };
    while !rest.starts_with('/') {
        let (word, more) = rest.split_once(' ').ok_or_else(|| format!("the cgroup must be an absolute directory, got {rest:?}"))?;
        if word == "background" {
            t.background = true;
        } else if let Some(c) = word.strip_prefix("cap=") {
            t.cap_ns = cap_cpus("cap", c)?;
        } else if let Some(cc) = word.strip_prefix("currency-cap=") {
            let (name, c) = cc.rsplit_once(':').ok_or_else(|| format!("currency-cap wants CURRENCY:CPUS, got {cc:?}"))?;
            t.group_cap_ns = cap_cpus("currency-cap", c)?;
            t.group = keys.key(name)?;
        } else if let Some(n) = word.strip_prefix("boost=") {
            t.boost_ns = n
                .parse()
                .ok()
                .filter(|n| *n <= window)
                .ok_or_else(|| format!("boost must be ns of CPU 0..{window} (the boost window), got {n:?}"))?;
        } else if let Some(n) = word.strip_prefix("line=") {
            t.line_ns = n
                .parse()
                .ok()
                .filter(|n| (1..=window).contains(n))
                .ok_or_else(|| format!("line must be ns of CPU 1..{window} (the boost window), got {n:?}"))?;
        } else {
            return Err(format!(
                "unknown term {word:?}: wanted cap=CPUS, currency-cap=CURRENCY:CPUS, boost=NS, line=NS, background or the cgroup's absolute directory"
            ));
        }
        rest = more;
    }
    if t.line_ns > 0 && t.boost_ns == 0 {
        return Err("line=NS moves a boosted job's line: it needs boost=NS".into());
    }
    Ok((PathBuf::from(rest), t))
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

/// A removed job's BPF-side state is kept at least this long after the removal: a
/// callback that read the job's entry in `jobs` before it (and may make its other entries
/// again) has long finished by then, even on a vCPU the host held up.
const RETIRE_AGE: Duration = Duration::from_secs(1);

/// Jobs removed from the maps whose BPF-side state waits for their cgroup to go: cgroup
/// id -> its directory and when the job was removed.
type Retired = BTreeMap<u64, (PathBuf, Instant)>;

/// The removed jobs whose cgroup is gone now, removed RETIRE_AGE or more before `now`:
/// taken out of `retired` and returned, for their BPF-side state to be forgotten. A cgroup
/// still there (the same id) may still hold tasks the BPF side counts: it stays. A
/// directory made again is another cgroup (another id): the old one is gone.
fn gone(retired: &mut Retired, now: Instant, id_of: impl Fn(&Path) -> Option<u64>) -> Vec<u64> {
    let mut out = vec![];
    retired.retain(|id, (dir, at)| {
        let keep = now.duration_since(*at) < RETIRE_AGE || id_of(dir) == Some(*id);
        if !keep {
            out.push(*id);
        }
        keep
    });
    out
}

fn forget_gone(s: &Scheduler, retired: &mut Retired) {
    for id in gone(retired, Instant::now(), |d| cgroup_id(d).ok()) {
        if let Err(e) = s.forget_job(id) {
            println!("bad forget {id}: {e:#}");
        }
    }
}

fn back_to_fair(dir: &std::path::Path) -> usize {
    threads(dir).unwrap_or_default().into_iter().filter(|t| set_policy(*t, false).is_ok()).count()
}

/// How `allot-scx serve` is asked to run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ServeArgs {
    /// `--all`: every task of the machine, not only allot's jobs' (a partial switch).
    pub all: bool,
    /// `--lottery`: the lottery mode.
    pub lottery: bool,
    /// `--boost-window-ms MS`: the boost window, ns (500 ms when not given).
    pub window: u64,
}

/// The usage of `allot-scx serve`.
pub const SERVE_USAGE: &str = "usage: allot-scx serve [--all] [--lottery] [--boost-window-ms MS]";

/// Parses `serve`'s options (after the word `serve`), each at most once.
pub fn parse_serve(args: &[String]) -> Result<ServeArgs, String> {
    let mut a = ServeArgs { all: false, lottery: false, window: allot_model::wake::DEFAULT_WINDOW_NS };
    let (mut seen, mut it) = (HashSet::new(), args.iter());
    while let Some(opt) = it.next() {
        if !seen.insert(opt.as_str()) {
            return Err(format!("{opt} is given twice; {SERVE_USAGE}"));
        }
        match opt.as_str() {
            "--all" => a.all = true,
            "--lottery" => a.lottery = true,
            "--boost-window-ms" => {
                let v = it.next().ok_or_else(|| format!("--boost-window-ms needs a value; {SERVE_USAGE}"))?;
                a.window = parse_window_ms(v)?;
            }
            _ => return Err(format!("unknown option {opt:?}; {SERVE_USAGE}")),
        }
    }
    Ok(a)
}

/// `--boost-window-ms MS`: the window in ns, within [`allot_model::wake::window_ns`]'s limits.
pub fn parse_window_ms(v: &str) -> Result<u64, String> {
    let ms: u64 = v.parse().map_err(|_| format!("--boost-window-ms wants a whole number of ms, got {v:?}"))?;
    allot_model::wake::window_ns(ms).map_err(|e| format!("--boost-window-ms: {e}"))
}

/// Runs the serve mode until end of input, SIGTERM/SIGINT, or an ejection (exit 3);
/// `lottery`: the lottery mode (docs/scx.md), else stride scheduling; `window`: the boost
/// window, ns ([`allot_model::wake::window_ns`]).
pub fn serve(all: bool, lottery: bool, window: u64) -> Result<()> {
    let mut s = Scheduler::prepare(all, window)?;
    s.set_lottery(lottery)?;
    s.attach()?;
    // SAFETY: the handler only stores to an atomic.
    unsafe {
        libc::signal(libc::SIGINT, on_signal as *const () as libc::sighandler_t);
        libc::signal(libc::SIGTERM, on_signal as *const () as libc::sighandler_t);
    }
    println!("loaded allot_stride {}{} window={}ms", if all { "all" } else { "partial" }, if lottery { " lottery" } else { "" }, window / 1_000_000);
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
    let mut pending: Vec<(PathBuf, Terms)> = vec![];
    let mut retired = Retired::new();
    let mut keys = CurrencyKeys::default();
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
                forget_gone(&s, &mut retired);
                let new: BTreeMap<PathBuf, Terms> = std::mem::take(&mut pending).into_iter().collect();
                for (dir, j) in std::mem::take(&mut table) {
                    if new.contains_key(&dir) {
                        table.insert(dir, j);
                    } else {
                        let _ = s.remove_job(j.id);
                        retired.insert(j.id, (dir.clone(), Instant::now()));
                        if !all {
                            back_to_fair(&dir);
                        }
                    }
                }
                let mut n = 0;
                for (dir, terms) in new {
                    let id = match cgroup_id(&dir) {
                        Ok(id) => id,
                        Err(e) => {
                            println!("bad job {} {}: {e:#}", terms.share, dir.display());
                            continue;
                        }
                    };
                    let j = table.entry(dir.clone()).or_insert(Job { id, terms: None, ext: HashSet::new() });
                    if j.id != id {
                        // the directory was made again: a new cgroup
                        let _ = s.remove_job(j.id);
                        retired.insert(j.id, (dir.clone(), Instant::now()));
                        *j = Job { id, terms: None, ext: HashSet::new() };
                    }
                    retired.remove(&id);
                    if j.terms != Some(terms) {
                        s.set_job(id, &terms)?;
                        j.terms = Some(terms);
                    }
                    n += sweep(&dir, j, !all);
                }
                println!("table {} jobs {n} threads", table.len());
            }
            Ok(Some(line)) if line.trim() == "maps" => match s.kept() {
                Ok(kept) => {
                    let kept: Vec<String> = kept.iter().map(|(m, n)| format!("{m} {n}")).collect();
                    println!("maps {} retired {}", kept.join(" "), retired.len());
                }
                Err(e) => println!("bad maps: {e:#}"),
            },
            Ok(Some(line)) if line.trim().is_empty() => {}
            Ok(Some(line)) => match parse_job(&line, &mut keys, window) {
                Ok(j) => pending.push(j),
                Err(e) => println!("bad {line}: {e}"),
            },
            Ok(None) | Err(RecvTimeoutError::Disconnected) => break None,
            Err(RecvTimeoutError::Timeout) => {}
        }
        if Instant::now() >= next_sweep {
            forget_gone(&s, &mut retired);
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
    fn a_removed_job_is_forgotten_only_once_its_cgroup_is_gone() {
        let t0 = Instant::now();
        let mut retired: Retired = [(7, ("/cg/a".into(), t0)), (8, ("/cg/b".into(), t0)), (9, ("/cg/c".into(), t0))].into();
        // a still there (same id), b gone, c made again (another id)
        let id_of = |d: &Path| match d.to_str() {
            Some("/cg/a") => Some(7),
            Some("/cg/c") => Some(90),
            _ => None,
        };
        // not before RETIRE_AGE has passed since the removal
        assert_eq!(gone(&mut retired, t0 + RETIRE_AGE / 2, id_of), Vec::<u64>::new());
        assert_eq!(retired.len(), 3);
        let later = t0 + RETIRE_AGE;
        assert_eq!(gone(&mut retired, later, id_of), vec![8, 9]);
        assert_eq!(retired.keys().copied().collect::<Vec<_>>(), vec![7]);
        assert_eq!(gone(&mut retired, later, id_of), Vec::<u64>::new());
        assert_eq!(gone(&mut retired, later, |_: &Path| None), vec![7]);
        assert!(retired.is_empty());
    }

    #[test]
    fn job_lines_are_read_or_refused_naming_why() {
        let k = &mut CurrencyKeys::default();
        let mut parse_job = |l: &str| parse_job(l, k, allot_model::wake::DEFAULT_WINDOW_NS);
        let plain = Terms { share: 50000, ..Terms::default() };
        assert_eq!(parse_job("job 50000 /sys/fs/cgroup/allot/u/j 1").unwrap(), (PathBuf::from("/sys/fs/cgroup/allot/u/j 1"), plain));
        assert_eq!(
            parse_job("job 7 cap=0.3 background /a b").unwrap(),
            (PathBuf::from("/a b"), Terms { share: 7, cap_ns: 30_000_000, background: true, ..Terms::default() })
        );
        assert_eq!(parse_job("job 7 boost=250000000 /a").unwrap().1, Terms { boost_ns: 250_000_000, ..Terms { share: 7, ..plain } });
        assert!(parse_job("job 7 boost=500000001 /a").unwrap_err().contains("got \"500000001\""));
        assert!(parse_job("job 7 boost=-1 /a").unwrap_err().contains("boost must be"));
        assert_eq!(parse_job("job 7 boost=250000000 line=500000000 /a").unwrap().1.line_ns, 500_000_000);
        assert!(parse_job("job 7 boost=250000000 line=500000001 /a").unwrap_err().contains("line must be ns of CPU 1..500000000"));
        assert!(parse_job("job 7 boost=250000000 line=0 /a").unwrap_err().contains("got \"0\""));
        assert!(parse_job("job 7 line=1000 /a").unwrap_err().contains("it needs boost=NS"));
        assert!(parse_job("job 0 /x").unwrap_err().contains("got \"0\""));
        assert!(parse_job("job 5 x").unwrap_err().contains("absolute"));
        assert!(parse_job("job 5 cap=0 /x").unwrap_err().contains("got \"0\""));
        assert!(parse_job("job 5 cap=inf /x").unwrap_err().contains("at most 4096"));
        assert!(parse_job("job 5 idle /x").unwrap_err().contains("unknown term \"idle\""));
        assert!(parse_job("jobs 5 /x").unwrap_err().contains("end"));
    }

    #[test]
    fn the_window_is_read_bounded_and_bounds_the_table() {
        let a = |v: &[&str]| parse_serve(&v.iter().map(|s| s.to_string()).collect::<Vec<_>>());
        let def = allot_model::wake::DEFAULT_WINDOW_NS;
        assert_eq!(a(&[]), Ok(ServeArgs { all: false, lottery: false, window: def }));
        assert_eq!(a(&["--lottery", "--boost-window-ms", "100", "--all"]), Ok(ServeArgs { all: true, lottery: true, window: 100_000_000 }));
        assert_eq!(a(&["--boost-window-ms", "60000"]).unwrap().window, 60_000_000_000);
        for (bad, why) in [
            (&["--boost-window-ms", "0"][..], "50..60000 ms (policy.boost_window_ms's limits), got 0"),
            (&["--boost-window-ms", "60001"], "got 60001"),
            (&["--boost-window-ms", "18446744073709551615"], "got 18446744073709551615"),
            (&["--boost-window-ms", "99999999999999999999"], "whole number of ms, got \"99999999999999999999\""),
            (&["--boost-window-ms", "0.5"], "got \"0.5\""),
            (&["--boost-window-ms", "-1"], "got \"-1\""),
            (&["--boost-window-ms", ""], "got \"\""),
            (&["--boost-window-ms"], "needs a value"),
            (&["--boost-window-ms", "100", "--boost-window-ms", "200"], "given twice"),
            (&["--window", "100"], "unknown option \"--window\""),
        ] {
            let e = a(bad).unwrap_err();
            assert!(e.contains(why), "{bad:?}: {e}");
        }
        // a job's boost and line are bounded by the window in force
        let k = &mut CurrencyKeys::default();
        let w = 100_000_000;
        assert_eq!(parse_job("job 7 boost=100000000 line=100000000 /a", k, w).unwrap().1.boost_ns, w);
        assert!(parse_job("job 7 boost=100000001 /a", k, w)
            .unwrap_err()
            .contains("boost must be ns of CPU 0..100000000 (the boost window), got \"100000001\""));
        assert!(parse_job("job 7 boost=50 line=100000001 /a", k, w).unwrap_err().contains("line must be ns of CPU 1..100000000"));
        assert!(parse_job("job 7 boost=18446744073709551616 /a", k, w).unwrap_err().contains("boost must be"));
        assert!(parse_job("job 7 boost=1e6 /a", k, w).unwrap_err().contains("got \"1e6\""));
        assert!(parse_job("job 7 boost= /a", k, w).unwrap_err().contains("got \"\""));
        assert_eq!(parse_job("job 7 boost=0 /a", k, w).unwrap().1.boost_ns, 0);
    }

    #[test]
    fn a_currency_cap_names_its_currency_whose_key_stays_its_own() {
        let mut k = CurrencyKeys::default();
        let t = |l: &str, k: &mut CurrencyKeys| parse_job(l, k, allot_model::wake::DEFAULT_WINDOW_NS).map(|(_, t)| t);
        let a = t("job 7 currency-cap=user-1000:0.4 /a", &mut k).unwrap();
        assert_eq!((a.group, a.group_cap_ns, a.cap_ns), (1, 40_000_000, 0));
        let b = t("job 7 cap=0.1 currency-cap=ci:2 /b", &mut k).unwrap();
        assert_eq!((b.group, b.group_cap_ns, b.cap_ns), (2, 200_000_000, 10_000_000));
        // the same name, the same key, in any later table
        assert_eq!(t("job 9 currency-cap=user-1000:0.5 /c", &mut k).unwrap().group, 1);
        for (bad, why) in [
            ("job 7 currency-cap=user-1000 /a", "CURRENCY:CPUS"),
            ("job 7 currency-cap=user-1000:0 /a", "got \"0\""),
            ("job 7 currency-cap=user-1000:nan /a", "at most 4096"),
            ("job 7 currency-cap=:1 /a", "got \"\""),
            ("job 7 currency-cap=a b:1 /a", "CURRENCY:CPUS, got \"a\""),
            ("job 7 currency-cap=a/b:1 /a", "got \"a/b\""),
        ] {
            let e = t(bad, &mut k).unwrap_err();
            assert!(e.contains(why), "{bad}: {e}");
        }
        let long = "x".repeat(65);
        assert!(t(&format!("job 7 currency-cap={long}:1 /a"), &mut k).unwrap_err().contains("1 to 64"));
        // keys are bounded: the map's size
        let mut full = CurrencyKeys::default();
        for i in 0..MAX_CURRENCIES {
            full.key(&format!("c{i}")).unwrap();
        }
        assert_eq!(full.key("c7").unwrap(), 8);
        assert!(full.key("one-more").unwrap_err().contains("no room"));
    }
}
