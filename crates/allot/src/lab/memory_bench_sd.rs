//! `allot-lab bench memory` on a systemd host (cgroup v2, with swap): user B's working set
//! against user A's hog that grows past the machine's memory and swap, in five arms of one
//! run: the kernel alone, systemd-oomd (as its Debian package ships it), earlyoom (as its
//! Debian package ships it), a static per-user `MemoryMax=` on each user's slice (the
//! login-node recipe) and allot's memory by share (docs/memory.md, "Measured side by side").
//!
//! Every user process runs in a scope of its own in the user's slice
//! (`systemd-run --scope --slice=user-UID.slice`, then `setpriv` to the uid), as a login
//! session's would; under allot each is an `allot run` job of the user's. B's working set is
//! anonymous memory it keeps touching (`allot-lab workload mem`: two arrays, MiB processed per
//! second is its rate), so with swap a reclaimed page is a page B waits to read back. Per arm:
//! A alone runs a hog of 80% of the memory available to users (B absent: what A can use);
//! then B runs alone, then again with A's hog starting a second in. Measured: B's rate with
//! the hog against alone, the least B's slice held and the most it had in swap, B's processes
//! lost, how A's hog ended and who ended it (the kernel's OOM killer is seen in the slice's
//! `memory.events`), and A alone's most memory and swap.

use super::memory_bench::{ended, MemoryBenchArgs};
use allot_measure::harness::Kids;
use anyhow::{bail, Context};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const CG: &str = "/sys/fs/cgroup";
/// The private daemon's unit in the allot arm.
const DAEMON_UNIT: &str = "allot-bench-memory.service";
const DAEMON_CONFIG: &str = "/run/allot-bench-memory.toml";
const OOMD_SOCKET: &str = "systemd-oomd.socket";
/// Seconds B runs (its session made, its working set touched) before A's hog starts.
const WARM: u64 = 5;

/// True on a host whose init is systemd and whose cgroups are v2 only.
pub fn is_systemd_v2() -> bool {
    Path::new("/run/systemd/system").is_dir() && Path::new(CG).join("cgroup.controllers").exists()
}

/// One way of sharing the users' memory.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Arm {
    Kernel,
    Oomd,
    Earlyoom,
    Static,
    Allot,
}

const ARMS: [Arm; 5] = [Arm::Kernel, Arm::Oomd, Arm::Earlyoom, Arm::Static, Arm::Allot];

impl Arm {
    fn name(self) -> &'static str {
        match self {
            Arm::Kernel => "kernel alone",
            Arm::Oomd => "systemd-oomd",
            Arm::Earlyoom => "earlyoom",
            Arm::Static => "static MemoryMax=",
            Arm::Allot => "allot",
        }
    }

    /// The service the arm starts, and the Debian package that has it.
    fn unit(self) -> Option<(&'static str, &'static str)> {
        match self {
            Arm::Oomd => Some(("systemd-oomd.service", "systemd-oomd")),
            Arm::Earlyoom => Some(("earlyoom.service", "earlyoom")),
            _ => None,
        }
    }
}

/// The sizes of one run, MiB, from the machine's memory and swap.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub(crate) struct Sizes {
    /// MemTotal.
    pub ram: u64,
    /// SwapTotal.
    pub swap: u64,
    /// The memory available to users: MemTotal less allot's default reserve (10%).
    pub available: u64,
    /// The static arm's `MemoryMax=` of each user's slice: half of what is available.
    pub static_max: u64,
    /// Each of the two arrays of A's hog alone: together 80% of what is available.
    pub alone_array: u64,
    /// Each of the two arrays of A's hog beside B: together 1.2 times memory and swap.
    pub hog_array: u64,
    /// Each of the two arrays of B's working set.
    pub b_array: u64,
}

/// The sizes for a machine of `ram` and `swap` MiB and B's working set of `working_set` MiB.
pub(crate) fn sizes(ram: u64, swap: u64, working_set: u64) -> Sizes {
    let available = ram - ram / 10;
    Sizes {
        ram,
        swap,
        available,
        static_max: available / 2,
        alone_array: available * 2 / 5,
        hog_array: (ram + swap) * 3 / 5,
        b_array: working_set / 2,
    }
}

/// A `kB` line of /proc/meminfo, in MiB.
pub(crate) fn meminfo_mib(text: &str, key: &str) -> Option<u64> {
    let v = text.lines().find_map(|l| l.strip_prefix(key)?.strip_prefix(':'))?;
    let kb: u64 = v.trim().trim_end_matches("kB").trim().parse().ok()?;
    Some(kb >> 10)
}

/// Who ended a hog: the kernel's OOM killer when the slice counted an OOM kill meanwhile,
/// else the arm's killer when one runs and the hog died of a signal.
pub(crate) fn ended_by(how: &str, oom_kills: u64, killer: Option<&str>) -> String {
    match (how, oom_kills, killer) {
        ("finished", _, _) => "ran to its end".into(),
        (h, n, _) if n > 0 => format!("{h} by the kernel's OOM killer"),
        ("signal 15", _, Some(k)) => format!("terminated by {k}"),
        (h, _, Some(k)) => format!("{h} by {k}"),
        (h, _, None) => h.to_string(),
    }
}

#[derive(Debug, serde::Serialize)]
struct Row {
    arm: &'static str,
    /// B's rate alone, MiB/s.
    b_alone: f64,
    /// B's rate while A's hog runs, MiB/s.
    b_with_hog: f64,
    /// The second over the first.
    kept: f64,
    /// The least memory B's slice held while the hog ran, MiB.
    b_least_mib: u64,
    /// The most of B's slice in swap meanwhile, MiB.
    b_swap_mib: u64,
    /// B's processes (its working set and a sleeper) that did not run to their end.
    b_lost: u32,
    /// How A's hog ended and who ended it.
    hog: String,
    /// The most memory and swap A's slice held meanwhile, MiB.
    a_most_mib: u64,
    a_swap_mib: u64,
    /// With B absent: the most memory and swap A's slice held, MiB.
    a_alone_mib: u64,
    a_alone_swap_mib: u64,
    /// With B absent: how A's hog ended.
    a_alone_hog: String,
}

/// Runs the benchmark on a systemd host.
pub fn run(args: &MemoryBenchArgs, json: bool) -> anyhow::Result<i32> {
    let info = allot_linux::read("/proc/meminfo")?;
    let (ram, swap) = (meminfo_mib(&info, "MemTotal").unwrap_or(0), meminfo_mib(&info, "SwapTotal").unwrap_or(0));
    if swap == 0 {
        bail!("allot-lab bench memory on a systemd host needs swap (SwapTotal is 0): make a swap file (fallocate -l 512M /swapfile; mkswap /swapfile; swapon /swapfile)");
    }
    let s = sizes(ram, swap, args.working_set);
    if s.b_array == 0 || args.working_set > s.static_max / 2 || args.seconds == 0 {
        bail!(
            "--working-set must be 2..{} MiB (at most half of a user's half of the {} MiB available), --seconds at least 1",
            s.static_max / 2,
            s.available
        );
    }
    for arm in ARMS {
        if let Some((unit, pkg)) = arm.unit() {
            let load = systemctl_out(&["show", "-p", "LoadState", "--value", unit]);
            if load != "loaded" {
                bail!("{unit} is not installed (LoadState {load:?}): the {} arm needs Debian's {pkg} package", arm.name());
            }
        }
    }
    for unit in ["systemd-oomd.service", OOMD_SOCKET, "earlyoom.service", DAEMON_UNIT] {
        if systemctl_out(&["is-active", unit]) == "active" {
            bail!("{unit} is running: stop it (systemctl stop {unit}) so that every other arm runs without it");
        }
    }
    let (b, a) = accounts(&args.users)?;
    mask_oomd();
    let exe = std::env::current_exe().context("the allot-lab binary")?;
    let product = exe.with_file_name("allot");
    let mut rows = vec![];
    for arm in ARMS {
        rows.push(one(arm, &exe, &product, args, &s, &b, &a).with_context(|| format!("the {} arm", arm.name()))?);
    }
    let al = &rows[4];
    let ok = al.kept >= 0.9 && al.b_lost == 0 && al.a_alone_mib as f64 >= 0.9 * (2 * s.alone_array) as f64;
    if json {
        println!("{}", serde_json::json!({"sizes_mib": s, "seconds": args.seconds, "rows": rows, "passed": ok}));
        return Ok(if args.check && !ok { 1 } else { 0 });
    }
    let mut t = allot_report::Table::new([
        "",
        "B ALONE MiB/s",
        "B WITH HOG MiB/s",
        "KEPT",
        "B HELD MiB (LEAST)",
        "B SWAP MiB (MOST)",
        "B LOST",
        "A'S HOG",
        "A MiB/SWAP (MOST)",
        "A ALONE MiB/SWAP (MOST)",
        "A ALONE HOG",
    ]);
    for r in &rows {
        t.row([
            r.arm.to_string(),
            format!("{:.0}", r.b_alone),
            format!("{:.0}", r.b_with_hog),
            format!("{:.0}%", r.kept * 100.0),
            r.b_least_mib.to_string(),
            r.b_swap_mib.to_string(),
            format!("{} of 2", r.b_lost),
            r.hog.clone(),
            format!("{}/{}", r.a_most_mib, r.a_swap_mib),
            format!("{}/{}", r.a_alone_mib, r.a_alone_swap_mib),
            r.a_alone_hog.clone(),
        ]);
    }
    print!("{}", t.render());
    println!(
        "\nMemTotal {} MiB, swap {} MiB, available to users {} MiB (less allot's 10% reserve). B touches 2 x {} MiB over and over; A's hog takes 2 x {} MiB (1.2 times memory and swap) for {} s from {} s into B's {} s (B is measured from then on); alone, A's hog takes 2 x {} MiB for {} s. The static arm sets MemoryMax={}M on each user's slice; allot funds both users equally.",
        s.ram,
        s.swap,
        s.available,
        s.b_array,
        s.hog_array,
        args.seconds - WARM,
        WARM,
        args.seconds,
        s.alone_array,
        args.seconds,
        s.static_max
    );
    if args.check {
        println!(
            "check: with allot B kept {:.0}% of its rate alone (at least 90%), lost {} of its 2 processes (none), and A alone held {} MiB (at least 90% of its {} MiB hog): {}",
            al.kept * 100.0,
            al.b_lost,
            al.a_alone_mib,
            2 * s.alone_array,
            if ok { "passed" } else { "FAILED" }
        );
    }
    Ok(if args.check && !ok { 1 } else { 0 })
}

/// Stops systemd-oomd and masks it until the next boot (or its arm), so that no other arm
/// runs with it.
fn mask_oomd() {
    let _ = systemctl(&["stop", OOMD_SOCKET, "systemd-oomd.service"]);
    let _ = systemctl(&["mask", "--runtime", OOMD_SOCKET, "systemd-oomd.service"]);
}

/// The machine's uptime, s (to find an arm in the journal).
fn uptime() -> f64 {
    allot_linux::read("/proc/uptime").ok().and_then(|t| t.split_whitespace().next()?.parse().ok()).unwrap_or(0.0)
}

fn systemctl_out(args: &[&str]) -> String {
    Command::new("systemctl")
        .args(args)
        .stderr(Stdio::null())
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_default()
}

fn systemctl(args: &[&str]) -> anyhow::Result<()> {
    let st = Command::new("systemctl").args(args).status().with_context(|| format!("run systemctl {args:?}"))?;
    if !st.success() {
        bail!("systemctl {} failed ({st})", args.join(" "));
    }
    Ok(())
}

/// A user's slice in the cgroup tree.
fn slice(uid: u32) -> PathBuf {
    Path::new(CG).join(format!("user.slice/user-{uid}.slice"))
}

fn mib(path: &Path) -> u64 {
    allot_linux::read_u64(path).unwrap_or(0) >> 20
}

/// The `oom_kill` count of a cgroup's (hierarchical) `memory.events`.
fn oom_kills(dir: &Path) -> u64 {
    let t = allot_linux::read(dir.join("memory.events")).unwrap_or_default();
    t.lines().find_map(|l| l.strip_prefix("oom_kill ")?.trim().parse().ok()).unwrap_or(0)
}

/// The least and most of a slice's memory and swap, sampled.
#[derive(Default)]
struct Meter {
    least: Option<u64>,
    most: u64,
    swap: u64,
}

impl Meter {
    fn sample(&mut self, dir: &Path) {
        let m = mib(&dir.join("memory.current"));
        self.least = Some(self.least.map_or(m, |l| l.min(m)));
        self.most = self.most.max(m);
        self.swap = self.swap.max(mib(&dir.join("memory.swap.current")));
    }
}

/// A login account the benchmark runs processes as.
#[derive(Debug, Clone)]
struct User {
    name: String,
    uid: u32,
}

/// Looks up the two accounts of `--users B,A`.
fn accounts(names: &[String]) -> anyhow::Result<(User, User)> {
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

/// Sets up an arm's way of sharing; undone by [`teardown`].
fn setup(arm: Arm, s: &Sizes, product: &Path, b: u32, a: u32) -> anyhow::Result<()> {
    match arm {
        Arm::Kernel => {}
        // Masked outside its arm: a login's user@.service carries the package's
        // ManagedOOMMemoryPressure=, which pulls systemd-oomd's socket (and the daemon) in.
        Arm::Oomd => {
            systemctl(&["unmask", "--runtime", OOMD_SOCKET, "systemd-oomd.service"])?;
            systemctl(&["start", "systemd-oomd.service"])?;
        }
        Arm::Earlyoom => systemctl(&["start", "earlyoom.service"])?,
        Arm::Static => {
            for uid in [b, a] {
                systemctl(&["set-property", "--runtime", &format!("user-{uid}.slice"), &format!("MemoryMax={}M", s.static_max)])?;
            }
        }
        Arm::Allot => {
            std::fs::write(DAEMON_CONFIG, "[memory]\nenable = true\n")?;
            let p = product.display().to_string();
            let env = format!("--setenv=ALLOT_CONFIG={DAEMON_CONFIG}");
            let st = Command::new("systemd-run").args(["--quiet", "--collect", &format!("--unit={DAEMON_UNIT}"), &env, &p, "daemon"]).status()?;
            if !st.success() {
                bail!("systemd-run could not start {p} daemon ({st})");
            }
            let t0 = Instant::now();
            while !Command::new(product).arg("status").stdout(Stdio::null()).stderr(Stdio::null()).status().is_ok_and(|s| s.success()) {
                if t0.elapsed() > Duration::from_secs(60) {
                    bail!("allot's daemon ({DAEMON_UNIT}) did not answer `allot status` within 60 s (journalctl -u {DAEMON_UNIT})");
                }
                std::thread::sleep(Duration::from_millis(250));
            }
        }
    }
    Ok(())
}

fn teardown(arm: Arm, b: u32, a: u32) {
    match arm {
        Arm::Kernel => {}
        // systemd-oomd's socket too: while it listens, systemd would start the daemon again
        // when it has news of a cgroup oomd manages, in a later arm.
        Arm::Oomd => mask_oomd(),
        Arm::Earlyoom => {
            let _ = systemctl(&["stop", "earlyoom.service"]);
        }
        Arm::Static => {
            for uid in [b, a] {
                let _ = systemctl(&["set-property", "--runtime", &format!("user-{uid}.slice"), "MemoryMax=infinity"]);
            }
        }
        Arm::Allot => {
            let _ = systemctl(&["stop", DAEMON_UNIT]);
            let _ = std::fs::remove_file(DAEMON_CONFIG);
        }
    }
}

fn one(arm: Arm, exe: &Path, product: &Path, args: &MemoryBenchArgs, s: &Sizes, b: &User, a: &User) -> anyhow::Result<Row> {
    setup(arm, s, product, b.uid, a.uid)?;
    let t0 = uptime();
    let mut kids = Kids::default();
    let r = measure(arm, exe, product, args, s, b, a, &mut kids);
    kids.kill_all();
    // Whatever su left running in the users' sessions (or allot's jobs) goes with the slice.
    let _ = systemctl(&["stop", &format!("user-{}.slice", b.uid), &format!("user-{}.slice", a.uid)]);
    teardown(arm, b.uid, a.uid);
    eprintln!("allot-lab: the {} arm ran from uptime {t0:.0} s to {:.0} s", arm.name(), uptime());
    // A killer that came back during another arm would make that arm's numbers its own.
    for (other, (unit, _)) in ARMS.iter().filter_map(|&o| Some((o, o.unit()?))) {
        if other != arm && systemctl_out(&["is-active", unit]) == "active" {
            eprintln!("allot-lab: {unit} was running at the end of the {} arm (started by something else); stopped", arm.name());
            let _ = systemctl(&["stop", OOMD_SOCKET, unit]);
        }
    }
    r
}

#[allow(clippy::too_many_arguments)]
fn measure(arm: Arm, exe: &Path, product: &Path, args: &MemoryBenchArgs, s: &Sizes, b: &User, a: &User, kids: &mut Kids) -> anyhow::Result<Row> {
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
    // B warms (its first pass faults its pages in), then runs alone, then with A's hog,
    // which starts once B has run WARM seconds; B is measured from then on.
    let p = kids.add(users.mem(b, s.b_array, 3).spawn()?);
    kids.output(p);
    let p = kids.add(users.mem(b, s.b_array, secs).spawn()?);
    let b_alone = rate(&kids.output(p)).unwrap_or(0.0);
    let (b_kills, a_kills) = (oom_kills(&b_dir), oom_kills(&a_dir));
    let p = kids.add(users.mem(b, s.b_array, secs).spawn()?);
    // The hog starts once B's new session holds its working set (a login takes seconds under
    // TCG), at least WARM seconds in, so that B's least is B's and not its sleeper's alone.
    let t0 = Instant::now();
    std::thread::sleep(Duration::from_secs(WARM));
    while mib(&b_dir.join("memory.current")) < s.b_array * 2 * 9 / 10 && t0.elapsed() < Duration::from_secs(secs / 2) {
        std::thread::sleep(Duration::from_millis(100));
    }
    let hog = kids.add(users.mem(a, s.hog_array, secs - WARM).spawn()?);
    let (mut bm, mut am) = (Meter::default(), Meter::default());
    let (out, _) = watch(kids, p, &mut [(&b_dir, &mut bm), (&a_dir, &mut am)])?;
    let b_with = rate(&out);
    // B's working set has ended: from here on only A is measured.
    let (_, hog_st) = watch(kids, hog, &mut [(&a_dir, &mut am)])?;
    let sleeper_gone = kids.0.iter_mut().find(|c| c.id() == b_sleeper).is_none_or(|c| c.try_wait().ok().flatten().is_some());
    let b_lost = u32::from(b_with.is_none()) + u32::from(sleeper_gone);
    let killer = arm.unit().map(|u| u.1);
    let hog = ended_by(&su_ended(hog_st), oom_kills(&a_dir).saturating_sub(a_kills), killer);
    if oom_kills(&b_dir) > b_kills {
        eprintln!("allot-lab: the {} arm: the kernel's OOM killer killed in B's slice too", arm.name());
    }
    let b_with = b_with.unwrap_or(0.0);
    Ok(Row {
        arm: arm.name(),
        b_alone,
        b_with_hog: b_with,
        kept: if b_alone > 0.0 { b_with / b_alone } else { 0.0 },
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_follow_the_machine() {
        let s = sizes(1973, 512, 160);
        assert_eq!(s.available, 1973 - 197);
        assert_eq!(s.static_max, 888);
        assert_eq!(s.alone_array * 2, 1420, "80% of the available memory, in two arrays");
        assert!(2 * s.hog_array > s.ram + s.swap, "the hog grows past memory and swap");
        assert_eq!(s.b_array, 80);
    }

    #[test]
    fn meminfo_lines_are_read_in_mib() {
        let t = "MemTotal:        2020700 kB\nMemFree:  10 kB\nSwapTotal:        524284 kB\n";
        assert_eq!(meminfo_mib(t, "MemTotal"), Some(1973));
        assert_eq!(meminfo_mib(t, "SwapTotal"), Some(511));
        assert_eq!(meminfo_mib(t, "SwapFree"), None);
        assert_eq!(meminfo_mib("MemTotalX: 5 kB", "MemTotal"), None);
    }

    #[test]
    fn a_hog_is_ended_by_whoever_killed_it() {
        assert_eq!(ended_by("finished", 0, Some("earlyoom")), "ran to its end");
        assert_eq!(ended_by("killed", 1, Some("systemd-oomd")), "killed by the kernel's OOM killer");
        assert_eq!(ended_by("killed", 0, Some("systemd-oomd")), "killed by systemd-oomd");
        assert_eq!(ended_by("signal 15", 0, Some("earlyoom")), "terminated by earlyoom");
        assert_eq!(ended_by("killed", 0, None), "killed");
    }

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
}
