//! One arm's measurement on the systemd memory bench: the users' processes in login
//! sessions, the slices sampled while they run.

use super::{ended_by, Arm, Row, Sizes, CG, WARM};
use crate::memory_bench::{ended, MemoryBenchArgs};
use allot_linux::cgroup::io::pressure_file;
use allot_linux::process::procfs;
use allot_measure::harness::Kids;
use anyhow::{bail, Context};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// A user's slice in the cgroup tree.
pub(super) fn slice(uid: u32) -> PathBuf {
    Path::new(CG).join(format!("user.slice/user-{uid}.slice"))
}

fn mib(path: &Path) -> u64 {
    allot_linux::read_u64(path).unwrap_or(0) >> 20
}

/// The `oom_kill` count of a cgroup's (hierarchical) `memory.events`.
pub(super) fn oom_kills(dir: &Path) -> u64 {
    let t = allot_linux::read(dir.join("memory.events")).unwrap_or_default();
    t.lines().find_map(|l| l.strip_prefix("oom_kill ")?.trim().parse().ok()).unwrap_or(0)
}

/// What B waited for while A's hog ran, from the first sample to the last (B's slice's
/// pressure stall information and major faults, the kernel's reclaim threads' CPU time).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub(super) struct Stalls {
    /// `memory.pressure`'s `some` total: time some task of B's stalled on memory, µs.
    pub memory_us: u64,
    /// `cpu.pressure`'s `some` total: time some task of B's waited for a CPU, µs.
    pub cpu_us: u64,
    /// `memory.stat`'s `pgmajfault`: pages B waited to read back (from swap or a file).
    pub majfaults: u64,
    /// The CPU time of the kswapd threads (the machine's, not B's), clock ticks.
    pub kswapd_ticks: u64,
}

impl Stalls {
    fn read(dir: &Path) -> Stalls {
        let psi = |name: &str| pressure_file(&dir.join(name)).ok().flatten().map_or(0, |p| p.some.total_us);
        let stat = allot_linux::read(dir.join("memory.stat")).unwrap_or_default();
        Stalls {
            memory_us: psi("memory.pressure"),
            cpu_us: psi("cpu.pressure"),
            majfaults: stat_field(&stat, "pgmajfault"),
            kswapd_ticks: kswapd_ticks(),
        }
    }

    fn since(self, first: Stalls) -> Stalls {
        Stalls {
            memory_us: self.memory_us.saturating_sub(first.memory_us),
            cpu_us: self.cpu_us.saturating_sub(first.cpu_us),
            majfaults: self.majfaults.saturating_sub(first.majfaults),
            kswapd_ticks: self.kswapd_ticks.saturating_sub(first.kswapd_ticks),
        }
    }
}

/// A field of a `memory.stat` (`name value` lines).
pub(super) fn stat_field(text: &str, name: &str) -> u64 {
    text.lines().find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.trim().parse().ok()).unwrap_or(0)
}

/// The CPU time of the kernel's kswapd threads (the machine's reclaim in the background);
/// the threads are found once, as they live as long as the machine.
fn kswapd_ticks() -> u64 {
    static PIDS: std::sync::OnceLock<Vec<i32>> = std::sync::OnceLock::new();
    let pids = PIDS.get_or_init(|| {
        let rd = std::fs::read_dir("/proc").into_iter().flatten().flatten();
        let pids = rd.filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok());
        pids.filter(|&pid| procfs::stat(pid).is_ok_and(|st| st.is_kernel_thread() && st.comm.starts_with("kswapd"))).collect()
    });
    pids.iter().filter_map(|&pid| procfs::stat(pid).ok()).map(|st| st.utime + st.stime).sum()
}

/// The pid of the working set in a slice: its process named `name` (allot-lab: the user's
/// sleeper is `sleep`, and under allot `allot run` is `allot`).
fn working_set_pid(dir: &Path, name: &str) -> Option<i32> {
    let mut dirs = vec![dir.to_path_buf()];
    while let Some(d) = dirs.pop() {
        let procs = allot_linux::read(d.join("cgroup.procs")).unwrap_or_default();
        for pid in procs.lines().filter_map(|l| l.trim().parse::<i32>().ok()) {
            if procfs::stat(pid).is_ok_and(|st| st.comm == name) {
                return Some(pid);
            }
        }
        dirs.extend(std::fs::read_dir(&d).into_iter().flatten().flatten().filter(|e| e.path().is_dir()).map(|e| e.path()));
    }
    None
}

/// True while a process still has its memory: /proc/PID/status shows VmRSS only while the
/// process has an address space, and an exiting process gives that up before its pages are
/// freed, so a slice read before this answers true held the process's memory.
fn has_memory(pid: i32) -> bool {
    allot_linux::read(format!("/proc/{pid}/status")).is_ok_and(|t| t.lines().any(|l| l.starts_with("VmRSS:")))
}

/// The least and most of a slice's memory and swap, sampled. A meter that follows the
/// slice's working set counts a sample only while the working set still has its memory
/// (read after the sample), so the moments after it ended are not B's least.
#[derive(Default)]
struct Meter {
    least: Option<u64>,
    most: u64,
    swap: u64,
    /// The name of the working set's process to follow, if any.
    follow: Option<&'static str>,
    pid: Option<i32>,
    first: Option<Stalls>,
    last: Option<Stalls>,
    /// The least of the machine's MemAvailable (/proc/meminfo) while followed, MiB.
    machine_least: Option<u64>,
}

impl Meter {
    fn following(name: &'static str) -> Meter {
        Meter { follow: Some(name), ..Meter::default() }
    }

    fn sample(&mut self, dir: &Path) {
        let m = mib(&dir.join("memory.current"));
        let swap = mib(&dir.join("memory.swap.current"));
        if let Some(name) = self.follow {
            let stalls = Stalls::read(dir);
            if self.pid.is_none() {
                self.pid = working_set_pid(dir, name);
            }
            if !self.pid.is_some_and(has_memory) {
                return;
            }
            self.first.get_or_insert(stalls);
            self.last = Some(stalls);
            if let Some(avail) = allot_linux::read("/proc/meminfo").ok().and_then(|t| super::meminfo_mib(&t, "MemAvailable")) {
                self.machine_least = Some(self.machine_least.map_or(avail, |l| l.min(avail)));
            }
        }
        self.least = Some(self.least.map_or(m, |l| l.min(m)));
        self.most = self.most.max(m);
        self.swap = self.swap.max(swap);
    }

    /// What the followed working set waited for between its first and last samples.
    fn stalls(&self) -> Stalls {
        match (self.first, self.last) {
            (Some(f), Some(l)) => l.since(f),
            _ => Stalls::default(),
        }
    }
}

/// A login account the benchmark runs processes as.
#[derive(Debug, Clone)]
pub(super) struct User {
    name: String,
    pub uid: u32,
}

/// Looks up the two accounts of `--users B,A`.
pub(super) fn accounts(names: &[String]) -> anyhow::Result<(User, User)> {
    let [b, a] = names else {
        bail!("on a systemd host the benchmark runs its processes in login sessions: --users must name two login accounts, B's and A's (e.g. --users alice,bob), got {names:?}");
    };
    let one = |name: &String| -> anyhow::Result<User> {
        let o = Command::new("id").args(["-u", name]).output().context("run id")?;
        let uid = String::from_utf8_lossy(&o.stdout).trim().parse::<u32>().ok().filter(|_| o.status.success());
        match uid {
            Some(uid) if uid >= 1000 => Ok(User { name: name.clone(), uid }),
            _ => bail!("--users: {name:?} is not a login account with a uid of at least 1000"),
        }
    };
    Ok((one(b)?, one(a)?))
}

/// What an arm starts for its users, and how.
struct Users<'a> {
    exe: String,
    product: &'a Path,
    allot: bool,
}

impl Users<'_> {
    /// A process of `user` in a login session of its own (`su -l`, whose PAM stack makes
    /// the session, as an ssh login's does), in the user's slice; under allot, a job of the
    /// user's (`allot run`). The child is su, which passes the command's status on (128 +
    /// the signal when it was killed).
    fn command(&self, user: &User, cmd: &[&str]) -> Command {
        let mut words: Vec<String> = vec!["exec".into()];
        if self.allot {
            words.extend([self.product.display().to_string(), "run".into(), "--".into()]);
        }
        words.extend(cmd.iter().map(|w| w.to_string()));
        let mut c = Command::new("setsid");
        c.args(["su", "-l", &user.name, "-c", &words.join(" ")]).env("XDG_SESSION_CLASS", "user");
        c.stdin(Stdio::null()).stdout(Stdio::null());
        c
    }

    /// `allot-lab workload mem` of two arrays of `array` MiB for `secs`, its report piped.
    fn mem(&self, user: &User, array: u64, secs: u64) -> Command {
        let (a, d) = (array.to_string(), format!("{secs}s"));
        let mut c = self.command(user, &[&self.exe, "workload", "mem", "--mib", &a, "--duration", &d]);
        c.stdout(Stdio::piped());
        c
    }
}

/// How a process run through su ended: su exits 128 + the signal that killed the command.
fn su_ended(status: Option<std::process::ExitStatus>) -> String {
    match status.and_then(|s| s.code()) {
        Some(9 | 137) => "killed".into(),
        Some(c) if c > 128 => format!("signal {}", c - 128),
        _ => ended(status),
    }
}

/// How a hog that reported ended: a workload stops before its duration only on SIGTERM or
/// SIGINT, after which it reports and exits 0 (earlyoom's SIGTERM looked like its end).
fn hog_ended(how: String, out: &str, secs: u64) -> String {
    let wall = out.lines().last().and_then(|l| serde_json::from_str::<serde_json::Value>(l).ok()).and_then(|v| v["wall_s"].as_f64());
    match wall {
        Some(w) if how == "finished" && w + 1.0 < secs as f64 => "signal 15".into(),
        _ => how,
    }
}

/// MiB/s from a workload's report line; None when it did not report (it was killed).
fn rate(out: &str) -> Option<f64> {
    let v: serde_json::Value = serde_json::from_str(out.lines().last()?).ok()?;
    let (w, t) = (v["work"].as_f64()?, v["wall_s"].as_f64()?);
    (t > 0.0).then(|| w / t)
}

/// Waits for one child while sampling slices every 100 ms; its stdout and exit status.
fn watch(kids: &mut Kids, pid: u32, meters: &mut [(&Path, &mut Meter)]) -> anyhow::Result<(String, Option<std::process::ExitStatus>)> {
    let i = kids.0.iter().position(|c| c.id() == pid).context("a child of the benchmark")?;
    let mut c = kids.0.swap_remove(i);
    let mut out = c.stdout.take();
    let reader = std::thread::spawn(move || {
        let mut s = String::new();
        if let Some(o) = out.as_mut() {
            let _ = std::io::Read::read_to_string(o, &mut s);
        }
        s
    });
    let status = loop {
        for (dir, m) in meters.iter_mut() {
            m.sample(dir);
        }
        if let Some(st) = c.try_wait()? {
            break st;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    Ok((reader.join().unwrap_or_default(), Some(status)))
}

#[allow(clippy::too_many_arguments)]
pub(super) fn measure(
    arm: Arm,
    exe: &Path,
    product: &Path,
    args: &MemoryBenchArgs,
    s: &Sizes,
    b: &User,
    a: &User,
    kids: &mut Kids,
) -> anyhow::Result<Row> {
    let users = Users { exe: exe.display().to_string(), product, allot: arm == Arm::Allot };
    let (b_dir, a_dir) = (slice(b.uid), slice(a.uid));
    // Each user's sleeper keeps a session (and under allot a job) for the whole arm.
    let b_sleeper = kids.add(users.command(b, &["sleep", "3600"]).spawn()?);
    kids.add(users.command(a, &["sleep", "3600"]).spawn()?);
    let t0 = Instant::now();
    while !(b_dir.join("memory.current").exists() && a_dir.join("memory.current").exists()) {
        if t0.elapsed() > Duration::from_secs(60) {
            bail!("{} and {} did not both appear within 60 s", b_dir.display(), a_dir.display());
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    // A alone, B absent: what A can use.
    let secs = args.seconds;
    let alone = kids.add(users.mem(a, s.alone_array, secs).spawn()?);
    let mut a_alone = Meter::default();
    let (_, st) = watch(kids, alone, &mut [(&a_dir, &mut a_alone)])?;
    let a_alone_hog = su_ended(st);
    // B warms (its first pass faults its pages in), then runs alone, then beside each of
    // A's hogs; each rate is over B's whole run (the hog shares all but its first seconds).
    let p = kids.add(users.mem(b, s.b_array, 3).spawn()?);
    kids.output(p);
    let p = kids.add(users.mem(b, s.b_array, secs).spawn()?);
    let b_alone = rate(&kids.output(p)).unwrap_or(0.0);
    // B beside a hog of A's that uses a CPU and no memory: what B's rate loses to A's use of
    // the other CPU alone (on a TCG guest both CPUs are threads of one loaded host).
    let hog_secs = format!("{}s", secs - WARM);
    let cpu_hog = users.command(a, &[&users.exe, "workload", "cpu", "--duration", &hog_secs]);
    let (out, _, hog) = beside(kids, &users, s, secs, b, [&b_dir, &a_dir], cpu_hog, &mut Meter::default())?;
    kids.output(hog);
    let b_with_cpu = rate(&out).unwrap_or(0.0);
    // B beside A's memory hog.
    let (b_kills, a_kills) = (oom_kills(&b_dir), oom_kills(&a_dir));
    let mut am = Meter::default();
    let (out, bm, hog) = beside(kids, &users, s, secs, b, [&b_dir, &a_dir], users.mem(a, s.hog_array, secs - WARM), &mut am)?;
    let b_with = rate(&out);
    // B's working set has ended: from here on only A is measured.
    let (hog_out, hog_st) = watch(kids, hog, &mut [(&a_dir, &mut am)])?;
    let sleeper_gone = kids.0.iter_mut().find(|c| c.id() == b_sleeper).is_none_or(|c| c.try_wait().ok().flatten().is_some());
    let b_lost = u32::from(b_with.is_none()) + u32::from(sleeper_gone);
    let killer = arm.unit().map(|u| u.1);
    let hog = ended_by(&hog_ended(su_ended(hog_st), &hog_out, secs - WARM), oom_kills(&a_dir).saturating_sub(a_kills), killer);
    if oom_kills(&b_dir) > b_kills {
        eprintln!("allot-lab: the {} arm: the kernel's OOM killer killed in B's slice too", arm.name());
    }
    let b_with = b_with.unwrap_or(0.0);
    let st = bm.stalls();
    let kept = |r: f64| if b_alone > 0.0 { r / b_alone } else { 0.0 };
    Ok(Row {
        arm: arm.name(),
        b_alone,
        b_with_hog: b_with,
        kept: kept(b_with),
        b_with_cpu_hog: b_with_cpu,
        kept_cpu: kept(b_with_cpu),
        b_memory_stall_s: st.memory_us as f64 / 1e6,
        b_cpu_wait_s: st.cpu_us as f64 / 1e6,
        b_majfaults: st.majfaults,
        kswapd_s: st.kswapd_ticks as f64 / procfs::clk_tck() as f64,
        mem_available_least_mib: bm.machine_least.unwrap_or(0),
        b_least_mib: bm.least.unwrap_or(0),
        b_swap_mib: bm.swap,
        b_lost,
        hog,
        a_most_mib: am.most,
        a_swap_mib: am.swap,
        a_alone_mib: a_alone.most,
        a_alone_swap_mib: a_alone.swap,
        a_alone_hog,
    })
}

/// B's working set for `secs` with A's `hog` beside it from WARM seconds in, once B's new
/// session holds 90% of its working set (a login takes seconds under TCG; at most half of
/// `secs`), so that B's least is B's and not its sleeper's alone; `dirs` are B's and A's
/// slices, A's sampled into `am`: B's report, B's meter and the hog's pid.
#[allow(clippy::too_many_arguments)]
fn beside(
    kids: &mut Kids,
    users: &Users,
    s: &Sizes,
    secs: u64,
    b: &User,
    dirs: [&Path; 2],
    mut hog: Command,
    am: &mut Meter,
) -> anyhow::Result<(String, Meter, u32)> {
    let [b_dir, a_dir] = dirs;
    let p = kids.add(users.mem(b, s.b_array, secs).spawn()?);
    let t0 = Instant::now();
    std::thread::sleep(Duration::from_secs(WARM));
    while mib(&b_dir.join("memory.current")) < s.b_array * 2 * 9 / 10 && t0.elapsed() < Duration::from_secs(secs / 2) {
        std::thread::sleep(Duration::from_millis(100));
    }
    let hog = kids.add(hog.spawn()?);
    let mut bm = Meter::following("allot-lab");
    let (out, _) = watch(kids, p, &mut [(b_dir, &mut bm), (a_dir, am)])?;
    Ok((out, bm, hog))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn su_passes_a_killed_commands_signal_as_128_plus_it() {
        use std::os::unix::process::ExitStatusExt;
        let code = |c: i32| Some(std::process::ExitStatus::from_raw(c << 8));
        assert_eq!(su_ended(code(137)), "killed");
        assert_eq!(su_ended(code(143)), "signal 15");
        assert_eq!(su_ended(code(0)), "finished");
        assert_eq!(su_ended(Some(std::process::ExitStatus::from_raw(9))), "killed");
    }

    #[test]
    fn a_report_line_gives_a_rate_and_a_killed_workload_none() {
        assert_eq!(rate("{\"work\":300,\"wall_s\":3.0}\n"), Some(100.0));
        assert_eq!(rate(""), None);
        assert_eq!(rate("{\"work\":300,\"wall_s\":0}"), None);
    }

    #[test]
    fn a_hog_that_reported_before_its_time_was_terminated() {
        let out = |w: f64| format!("{{\"work\":1,\"wall_s\":{w}}}\n");
        assert_eq!(hog_ended("finished".into(), &out(12.0), 25), "signal 15");
        assert_eq!(hog_ended("finished".into(), &out(25.1), 25), "finished");
        assert_eq!(hog_ended("killed".into(), "", 25), "killed");
    }

    #[test]
    fn a_memory_stat_field_is_read_by_its_whole_name() {
        let t = "pgfault 900\npgmajfault 12\npgmajfault_x 5\n";
        assert_eq!(stat_field(t, "pgmajfault"), 12);
        assert_eq!(stat_field(t, "pgfault"), 900);
        assert_eq!(stat_field(t, "workingset"), 0);
    }

    #[test]
    fn a_following_meter_counts_no_sample_after_its_working_set_let_its_memory_go() {
        let dir = std::env::temp_dir().join(format!("allot-membench-meter-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("session-1.scope")).unwrap();
        let mut child = Command::new("sleep").arg("30").spawn().unwrap();
        std::fs::write(dir.join("session-1.scope/cgroup.procs"), format!("{}\n", child.id())).unwrap();
        let set = |mib: u64| std::fs::write(dir.join("memory.current"), (mib << 20).to_string()).unwrap();
        let mut m = Meter::following("sleep");
        set(160);
        m.sample(&dir);
        set(150);
        m.sample(&dir);
        assert_eq!((m.least, m.most, m.pid), (Some(150), 160, Some(child.id() as i32)));
        // Killed and not yet reaped (a zombie: no memory of its own), then reaped.
        // SAFETY: our own unreaped child.
        unsafe { libc::kill(child.id() as i32, libc::SIGKILL) };
        let t0 = Instant::now();
        while has_memory(child.id() as i32) && t0.elapsed() < Duration::from_secs(5) {
            std::thread::sleep(Duration::from_millis(10));
        }
        set(2);
        m.sample(&dir);
        child.wait().unwrap();
        m.sample(&dir);
        assert_eq!((m.least, m.most), (Some(150), 160), "the samples after the working set ended are not its least");
        let mut fresh = Meter::following("sleep");
        fresh.sample(&dir);
        assert_eq!(fresh.least, None, "nothing counted while no working set has its memory");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
