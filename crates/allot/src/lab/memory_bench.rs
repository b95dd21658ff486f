//! `allot-lab bench memory`: user B's working set against user A's growing hog, the kernel
//! alone, a static per-user limit (the login-node recipe: each user's cgroup limited to
//! their half) and allot, in one run (docs/memory.md).
//!
//! The runs are the same but for `[memory] enable` and the static limits: a private daemon places B's and A's
//! processes in their currencies (equal funding), allot's cgroup root is bounded in the v1
//! memory controller (`--limit`, 512 MiB) so the pressure stays inside it, B reads a file
//! of its own over and over (`allot-lab workload read`: a working set in the page cache, below
//! its share) and A's hog takes anonymous memory past the limit (`allot-lab workload mem`).
//! What B kept in memory while the hog ran (and what it read again from the disk) is the
//! number; B's read rate with the hog against its rate alone, and whose process the OOM
//! killer took, the others. B's rate also falls because A's hog takes CPU (one of two
//! CPUs is A's share), so the check is on memory: `--check` fails when, with allot, B
//! held less than 90% of its working set at any moment of the hog's run or lost its reader.
//!
//! Before B reads anything, A runs a hog of 80% of the limit alone: what A could use with
//! B absent (a static limit wastes what B does not use; allot reserves nothing for an
//! absent user). `--check` also fails when, with allot, that hog did not run to its end.
//!
//! On a systemd host with cgroup v2 the benchmark is `memory_bench_sd`'s instead: five
//! arms (the kernel alone, systemd-oomd, earlyoom, a static `MemoryMax=`, allot) with swap.

use allot_measure::harness::{Kids, PrivateDaemon};
use anyhow::{bail, Context};
use clap::Args;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

/// `allot-lab bench memory`.
#[derive(Debug, Args)]
pub struct MemoryBenchArgs {
    /// Exit non-zero if, with allot, B holds less than 90% of its working set while the hog
    /// runs, or loses its reader (on a systemd host: B keeps less than 90% of its rate
    /// alone, or loses a process, or A alone holds less than 90% of its hog).
    #[arg(long)]
    pub check: bool,
    /// The memory all of allot's users share in the benchmark, MiB (allot's root's limit;
    /// cgroup v1 only: on a systemd host the machine's memory and swap are shared).
    #[arg(long, default_value_t = 512)]
    pub limit: u64,
    /// B's working set, MiB (below its half of the limit).
    #[arg(long, default_value_t = 160)]
    pub working_set: u64,
    /// Seconds B reads (or touches its memory) alone, then with A's hog; on a systemd host
    /// also the seconds of A's hog alone.
    #[arg(long, default_value_t = 8)]
    pub seconds: u64,
    /// On a systemd host: the two login accounts, B's and A's (B,A), whose login sessions
    /// (`su -l`) run the benchmark's processes.
    #[arg(long, value_delimiter = ',')]
    pub users: Vec<String>,
    /// On a systemd host: the arms to run, of kernel, systemd-oomd, earlyoom, static and
    /// allot (default: all five, in that order).
    #[arg(long, value_delimiter = ',')]
    pub arms: Vec<String>,
    /// Where the report and its chart go (--output, --svg, --replot).
    #[command(flatten)]
    pub files: super::memory_chart::ReportFiles,
    /// The two uids (B, A) the benchmark runs processes as (cgroup v1).
    #[command(flatten)]
    pub uids: allot_measure::test_uids::TestUids,
}

#[derive(Debug, serde::Serialize)]
struct Row {
    mode: &'static str,
    /// B's read rate alone, MiB/s.
    b_alone: f64,
    /// B's read rate while A's hog runs, MiB/s.
    b_with_hog: f64,
    /// B's rate with the hog over its rate alone.
    kept: f64,
    /// What B read from the disk while the hog ran (its working set reclaimed), MiB.
    b_disk: f64,
    /// The least memory B's currency held while the hog ran, MiB.
    b_min: f64,
    /// A's hog: "killed" (by the OOM killer) or "finished".
    hog: String,
    /// B's reader ran to its end.
    b_survived: bool,
    /// With B absent: the most memory A's currency held, MiB.
    a_alone_peak: f64,
    /// With B absent: A's hog "killed" or "finished".
    a_alone_hog: String,
}

/// How users' memory is shared in one run.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Mode {
    /// No limit but allot's root's, no allot memory policy.
    Kernel,
    /// Each user's currency limited to half of the limit, no allot memory policy.
    Static,
    /// allot's memory by share.
    Allot,
}

const MEM_ROOT: &str = "/sys/fs/cgroup/memory";

/// The benchmark runs as root, on either kind of host.
pub fn require_root() -> anyhow::Result<()> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        bail!("allot-lab bench memory must run as root (it starts a private daemon and makes cgroups)");
    }
    Ok(())
}

/// Runs the benchmark (the raw tree's, on cgroup v1).
pub fn run(args: MemoryBenchArgs, json: bool) -> anyhow::Result<i32> {
    require_root()?;
    if !Path::new(MEM_ROOT).join("memory.limit_in_bytes").exists() {
        bail!("allot-lab bench memory needs the cgroup v1 memory controller at {MEM_ROOT}, or a systemd host with cgroup v2 only");
    }
    if args.working_set == 0 || args.working_set * 2 > args.limit || args.seconds == 0 {
        bail!("--working-set must be 1..{} MiB (at most half of --limit {}), --seconds at least 1", args.limit / 2, args.limit);
    }
    args.files.check_paths()?;
    let uids = args.uids.pick(2)?;
    let (b, a) = (uids[0], uids[1]);
    let exe = std::env::current_exe().context("the allot binary")?;
    let file = WorkingSet::new(args.working_set)?;
    let mut rows = vec![];
    for (name, mode) in [("kernel alone", Mode::Kernel), ("static limit", Mode::Static), ("allot", Mode::Allot)] {
        rows.push(one(&exe, &args, &file.0, name, mode, b, a)?);
    }
    let al = &rows[2];
    let ok = al.b_min >= 0.9 * args.working_set as f64 && al.b_survived && al.a_alone_hog == "finished";
    let report = serde_json::json!({
        "bench": super::memory_chart::BENCH, "host": "cgroup v1", "limit_mib": args.limit, "working_set_mib": args.working_set,
        "a_alone_hog_mib": 2 * alone_mib(args.limit), "rows": rows, "passed": ok, "machine": allot_measure::bench::common::machine(),
    });
    args.files.emit(&report)?;
    if json {
        println!("{report}");
    } else {
        let mut t = allot_report::Table::new([
            "",
            "B ALONE MiB/s",
            "B WITH HOG MiB/s",
            "KEPT",
            "B FROM DISK MiB",
            "B HELD MiB (LEAST)",
            "A'S HOG",
            "B'S READER",
            "A ALONE MiB (MOST)",
            "A ALONE HOG",
        ]);
        for r in &rows {
            t.row([
                r.mode.to_string(),
                format!("{:.0}", r.b_alone),
                format!("{:.0}", r.b_with_hog),
                format!("{:.0}%", r.kept * 100.0),
                format!("{:.0}", r.b_disk),
                format!("{:.0}", r.b_min),
                r.hog.clone(),
                if r.b_survived { "ran on".into() } else { "lost".into() },
                format!("{:.0}", r.a_alone_peak),
                r.a_alone_hog.clone(),
            ]);
        }
        print!("{}", t.render());
        println!(
            "\nB reads a {} MiB file over and over; A's hog takes 2 x {} MiB of anonymous memory; allot's users share {} MiB (no swap). Equal funding: each is protected up to {} MiB; the static limit holds each user to {} MiB. Alone, A's hog takes 2 x {} MiB.",
            args.working_set,
            args.limit / 2,
            args.limit,
            args.limit / 2,
            args.limit / 2,
            alone_mib(args.limit)
        );
        if args.check {
            println!(
                "check: with allot B held at least {:.0} MiB of its {} MiB working set (at least 90%), {} its reader, and A alone ran its hog of {} MiB to its end ({}): {}",
                al.b_min,
                args.working_set,
                if al.b_survived { "kept" } else { "lost" },
                2 * alone_mib(args.limit),
                al.a_alone_hog,
                if ok { "passed" } else { "FAILED" }
            );
        }
    }
    Ok(if args.check && !ok { 1 } else { 0 })
}

/// B's file, written with O_DIRECT so none of it is cached (and charged to this process)
/// before B reads it; removed when dropped.
struct WorkingSet(PathBuf);

impl WorkingSet {
    fn new(mib: u64) -> anyhow::Result<WorkingSet> {
        let dir = std::env::temp_dir().join(format!("allot-bench-memory-{}", std::process::id()));
        std::fs::create_dir_all(&dir)?;
        std::fs::set_permissions(&dir, std::os::unix::fs::PermissionsExt::from_mode(0o755))?;
        let f = dir.join("working-set");
        let st = Command::new("dd")
            .args(["if=/dev/zero", &format!("of={}", f.display()), "bs=1M", &format!("count={mib}"), "oflag=direct", "status=none"])
            .status()
            .context("run dd")?;
        if !st.success() {
            bail!("dd could not write {}", f.display());
        }
        std::fs::set_permissions(&f, std::os::unix::fs::PermissionsExt::from_mode(0o644))?;
        Ok(WorkingSet(f))
    }
}

/// Drops a file's pages from the cache (uncharging them), so each run starts cold.
fn drop_cache(f: &Path) {
    let _ = Command::new("dd").args([&format!("if={}", f.display()), "iflag=nocache", "count=0", "status=none"]).status();
}

impl Drop for WorkingSet {
    fn drop(&mut self) {
        if let Some(d) = self.0.parent() {
            let _ = std::fs::remove_dir_all(d);
        }
    }
}

/// B's read rate (MiB/s) and disk reads (MiB) from its workload's report, and whether it
/// ran to its end.
fn rate(out: &str) -> (f64, f64, bool) {
    let v: serde_json::Value = serde_json::from_str(out.lines().last().unwrap_or("")).unwrap_or_default();
    let (work, wall) = (v["work"].as_f64(), v["wall_s"].as_f64());
    match (work, wall) {
        (Some(w), Some(t)) if t > 0.0 => (w / t, v["disk_mib"].as_f64().unwrap_or(0.0), true),
        _ => (0.0, 0.0, false),
    }
}

/// Each of the two arrays of A's hog when it runs alone, MiB: 80% of the limit together.
fn alone_mib(limit: u64) -> u64 {
    limit * 2 / 5
}

/// How a hog ended: "killed" (SIGKILL: the OOM killer), "signal N" or "finished".
pub(super) fn ended(status: Option<std::process::ExitStatus>) -> String {
    match status.and_then(|s| std::os::unix::process::ExitStatusExt::signal(&s)) {
        Some(9) => "killed".to_string(),
        Some(s) => format!("signal {s}"),
        None => "finished".to_string(),
    }
}

/// Waits (up to 5 s) for a currency's directory in the memory controller.
fn currency_dir(root: &Path, uid: u32) -> anyhow::Result<PathBuf> {
    let dir = root.join(format!("user-{uid}"));
    for _ in 0..100 {
        if dir.join("memory.limit_in_bytes").exists() {
            return Ok(dir);
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    bail!("{} did not appear within 5 s (is the daemon placing uid {uid}'s processes?)", dir.display())
}

fn one(exe: &Path, args: &MemoryBenchArgs, file: &Path, name: &'static str, mode: Mode, b: u32, a: u32) -> anyhow::Result<Row> {
    drop_cache(file);
    let enable = mode == Mode::Allot;
    let cfg = format!("[users]\nonly = [\"{b}\", \"{a}\"]\n[memory]\nenable = {enable}\n");
    let mut d = PrivateDaemon::start(exe, &cfg)?;
    let root = Path::new(MEM_ROOT).join(&d.root_name);
    allot_linux::write(root.join("memory.limit_in_bytes"), &(args.limit << 20).to_string())?;
    let mut kids = Kids::default();
    let exe_s = exe.display().to_string();
    let file_s = file.display().to_string();
    let reader = |d: &PrivateDaemon, kids: &mut Kids, secs: u64| -> u32 {
        let mut c = d.user_command(b, &[&exe_s, "workload", "read", "--file", &file_s, "--duration", &format!("{secs}s")]);
        c.stdout(Stdio::piped());
        kids.add(c.spawn().expect("start B's reader"))
    };
    // B's currency lives through the whole run (a job emptied between two readers would be
    // reaped, and with its cgroup the charge of B's cached file).
    let keep = d.user_command(b, &["sleep", "3600"]).spawn()?;
    kids.add(keep);
    kids.add(d.user_command(a, &["sleep", "3600"]).spawn()?);
    let (b_dir, a_dir) = (currency_dir(&root, b)?, currency_dir(&root, a)?);
    if mode == Mode::Static {
        for dir in [&b_dir, &a_dir] {
            allot_linux::write(dir.join("memory.limit_in_bytes"), &((args.limit / 2) << 20).to_string())?;
        }
    }
    // A alone, B absent: what A can use.
    let _ = allot_linux::write(a_dir.join("memory.max_usage_in_bytes"), "0");
    let alone = kids.add(d.user_command(a, &[&exe_s, "workload", "mem", "--mib", &alone_mib(args.limit).to_string(), "--duration", "3s"]).spawn()?);
    let alone_status = kids.0.iter_mut().find(|c| c.id() == alone).map(|c| c.wait()).transpose()?;
    kids.0.retain(|c| c.id() != alone);
    let a_alone_peak = (allot_linux::read_u64(a_dir.join("memory.max_usage_in_bytes")).unwrap_or(0) >> 20) as f64;
    let a_alone_hog = ended(alone_status);
    // Warm: B's first pass reads the disk.
    let p = reader(&d, &mut kids, 3);
    kids.output(p);
    let p = reader(&d, &mut kids, args.seconds);
    let (b_alone, _, _) = rate(&kids.output(p));
    // A's hog starts a second into B's measured run and takes more than everyone's limit.
    let p = reader(&d, &mut kids, args.seconds);
    std::thread::sleep(Duration::from_secs(1));
    let hog = kids.add(
        d.user_command(a, &[&exe_s, "workload", "mem", "--mib", &(args.limit / 2).to_string(), "--duration", &format!("{}s", args.seconds)])
            .spawn()?,
    );
    let usage = b_dir.join("memory.usage_in_bytes");
    let mut b_min = u64::MAX;
    while kids.0.iter_mut().find(|c| c.id() == p).is_some_and(|c| c.try_wait().ok().flatten().is_none()) {
        b_min = b_min.min(allot_linux::read_u64(&usage).unwrap_or(u64::MAX));
        std::thread::sleep(Duration::from_millis(50));
    }
    let (b_with_hog, b_disk, b_survived) = rate(&kids.output(p));
    let hog_status = kids.0.iter_mut().find(|c| c.id() == hog).map(|c| c.wait()).transpose()?;
    kids.0.retain(|c| c.id() != hog);
    let hog = ended(hog_status);
    kids.kill_all();
    d.stop()?;
    let kept = if b_alone > 0.0 { b_with_hog / b_alone } else { 0.0 };
    Ok(Row {
        mode: name,
        a_alone_peak,
        a_alone_hog,
        b_alone,
        b_with_hog,
        kept,
        b_disk,
        b_min: if b_min == u64::MAX { 0.0 } else { (b_min >> 20) as f64 },
        hog,
        b_survived,
    })
}
