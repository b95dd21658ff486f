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

mod arms;
mod measure;

use super::memory_bench::MemoryBenchArgs;
use anyhow::{bail, Context};
use arms::{mask_oomd, one, systemctl_out};
use measure::accounts;
use std::path::Path;

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
    /// The arm's word in `--arms`.
    fn key(self) -> &'static str {
        match self {
            Arm::Kernel => "kernel",
            Arm::Oomd => "systemd-oomd",
            Arm::Earlyoom => "earlyoom",
            Arm::Static => "static",
            Arm::Allot => "allot",
        }
    }

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

/// The arms `--arms` names, in the order of [`ARMS`] (all five when it names none).
fn chosen(words: &[String]) -> anyhow::Result<Vec<Arm>> {
    let allowed = || ARMS.iter().map(|a| a.key()).collect::<Vec<_>>().join(", ");
    for w in words {
        if !ARMS.iter().any(|a| a.key() == w) {
            bail!("--arms: {w:?} is not an arm; the arms are {}", allowed());
        }
    }
    Ok(ARMS.into_iter().filter(|a| words.is_empty() || words.iter().any(|w| w == a.key())).collect())
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
    /// B's rate beside a hog of A's that uses a CPU and no memory, MiB/s.
    b_with_cpu_hog: f64,
    /// That over B's rate alone.
    kept_cpu: f64,
    /// While A's memory hog ran: the time some task of B's stalled on memory, s (PSI).
    b_memory_stall_s: f64,
    /// The time some task of B's waited for a CPU, s (PSI).
    b_cpu_wait_s: f64,
    /// Pages B waited to read back from swap or a file.
    b_majfaults: u64,
    /// The CPU time of the kernel's kswapd threads meanwhile, s.
    kswapd_s: f64,
    /// The least of the machine's MemAvailable meanwhile, MiB.
    mem_available_least_mib: u64,
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
    if s.b_array == 0 || args.working_set > s.static_max / 2 || args.seconds <= WARM {
        bail!(
            "--working-set must be 2..{} MiB (at most half of a user's half of the {} MiB available), --seconds at least {}",
            s.static_max / 2,
            s.available,
            WARM + 1
        );
    }
    let arms = chosen(&args.arms)?;
    args.files.check_paths()?;
    if args.check && !arms.contains(&Arm::Allot) {
        bail!("--check checks the allot arm: --arms must name allot");
    }
    for &arm in &arms {
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
    for &arm in &arms {
        rows.push(one(arm, &exe, &product, args, &s, &b, &a).with_context(|| format!("the {} arm", arm.name()))?);
    }
    let al = rows.iter().find(|r| r.arm == Arm::Allot.name());
    let ok = al.is_some_and(|al| al.kept >= 0.9 && al.b_lost == 0 && al.a_alone_mib as f64 >= 0.9 * (2 * s.alone_array) as f64);
    let report = serde_json::json!({
        "bench": super::memory_chart::BENCH, "host": "systemd", "sizes_mib": s, "seconds": args.seconds,
        "a_alone_hog_mib": 2 * s.alone_array, "rows": rows, "passed": ok, "machine": allot_measure::bench::common::machine(),
    });
    args.files.emit(&report)?;
    if json {
        println!("{report}");
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
    println!();
    let mut t = allot_report::Table::new([
        "",
        "B WITH CPU-ONLY HOG MiB/s",
        "KEPT",
        "B STALLED ON MEMORY s",
        "B WAITED FOR CPU s",
        "B MAJOR FAULTS",
        "KSWAPD CPU s",
        "MEMAVAILABLE MiB (LEAST)",
    ]);
    for r in &rows {
        t.row([
            r.arm.to_string(),
            format!("{:.0}", r.b_with_cpu_hog),
            format!("{:.0}%", r.kept_cpu * 100.0),
            format!("{:.2}", r.b_memory_stall_s),
            format!("{:.2}", r.b_cpu_wait_s),
            r.b_majfaults.to_string(),
            format!("{:.2}", r.kswapd_s),
            r.mem_available_least_mib.to_string(),
        ]);
    }
    print!("{}", t.render());
    println!(
        "\nMemTotal {} MiB, swap {} MiB, available to users {} MiB (less allot's 10% reserve). B touches 2 x {} MiB over and over; A's hog takes 2 x {} MiB (1.2 times memory and swap) for {} s from at least {} s into B's {} s, once B's slice holds 90% of B's working set; B's rate is over its whole run. Before it B ran the same way beside a hog of A's that uses one CPU and no memory (the second table's first columns); its other columns are from B's slice while A's memory hog ran (pressure stall totals, memory.stat's pgmajfault), the kswapd threads' CPU time and the least of the machine's MemAvailable meanwhile. B held (least) counts only samples taken while B's working set still had its memory. Alone, A's hog takes 2 x {} MiB for {} s. The static arm sets MemoryMax={}M on each user's slice; allot funds both users equally.",
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
    if let Some(al) = al.filter(|_| args.check) {
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
    fn arms_are_chosen_by_name_in_their_order_and_a_wrong_one_is_named() {
        let w = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(chosen(&[]).unwrap(), ARMS.to_vec());
        assert_eq!(chosen(&w(&["allot", "kernel"])).unwrap(), [Arm::Kernel, Arm::Allot]);
        let e = chosen(&w(&["oomd"])).unwrap_err().to_string();
        assert!(e.contains("\"oomd\"") && e.contains("systemd-oomd, earlyoom"), "{e}");
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
}
