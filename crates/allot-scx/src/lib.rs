//! allot's sched_ext scheduler: the BPF program (bpf/allot_stride.bpf.c, stride
//! scheduling over currencies, jobs and tasks) embedded, and the user-space side that
//! loads it, describes jobs to it and reads back why it left. GPL-2.0-only, as sched_ext
//! requires of the BPF program; see docs/scx.md.

use anyhow::{bail, Context, Result};
use libbpf_rs::{Link, MapCore, MapFlags, Object, ObjectBuilder};
use std::collections::BTreeMap;
use std::path::Path;

pub mod hackbench;
pub mod probe;
pub mod serve;
pub mod work;

/// The compiled BPF object (build.rs).
pub const BPF_OBJECT: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/allot_stride.bpf.o"));

/// The kernel's scheduling policy number for sched_ext (include/uapi/linux/sched.h).
pub const SCHED_EXT: i32 = 7;

/// sched_ext_ops.flags: only SCHED_EXT tasks are the scheduler's.
const SCX_OPS_SWITCH_PARTIAL: u64 = 8;
/// sched_ext_ops.flags: a CPU's last runnable task is handed to the scheduler, not kept
/// running (a job over its hard cap is held out even on an otherwise idle CPU).
const SCX_OPS_ENQ_LAST: u64 = 2;

/// A hard cap's accounting period in the BPF program (CAP_PERIOD), ns.
pub const CAP_PERIOD_NS: u64 = 100_000_000;

/// The BPF program's map (section) holding the boost window, window_ns (bpf/wake.h).
const WINDOW_MAP: &str = ".rodata.window";

/// struct job's flags in the BPF program: a background job.
pub const JOB_BACKGROUND: u64 = 1;

/// The maps the BPF side fills by itself, one entry per job (by cgroup id): its runnable
/// tasks, its pass, a capped job's use in its period, a boosted job's window of use.
pub const JOB_STATE_MAPS: [&str; 4] = ["runnable", "job_passes", "usages", "windows"];

/// A hard cap of `cpus` CPUs as the BPF program holds it: ns of CPU per CAP_PERIOD (0:
/// none; a cap is at least 1 ns).
pub fn cap_ns(cpus: f64) -> u64 {
    if cpus.is_finite() && cpus > 0.0 {
        ((cpus * CAP_PERIOD_NS as f64).round() as u64).max(1)
    } else {
        0
    }
}

/// A cap's CPUs as written (`--cap`, `--currency-cap`, a table's `cap=`): a number above 0
/// and at most 4096, else None.
pub fn parse_cap_cpus(s: &str) -> Option<f64> {
    s.parse().ok().filter(|c: &f64| c.is_finite() && *c > 0.0 && *c <= 4096.0)
}

/// One job as the scheduler sees it: its cgroup, tickets and currency.
#[derive(Debug, Clone, PartialEq)]
pub struct JobSpec {
    /// The job's cgroup directory (cgroup v2).
    pub cgroup: std::path::PathBuf,
    /// Its tickets in its currency.
    pub tickets: u64,
    /// Its currency.
    pub currency: String,
}

pub use allot_model::flat::SHARE_SCALE;

/// The flattened hierarchy: each job's share of the machine in base units
/// (`allot_model::flat`, the daemon's flattening too), from tickets and funding. All of
/// allot's jobs together weigh `outside_weight` (100: one nice-0 task), split among
/// currencies by funding and within a currency by tickets. A currency not in `funding` is
/// funded at 100.
pub fn flatten(jobs: &[JobSpec], funding: &BTreeMap<String, u64>, outside_weight: u64) -> Vec<u64> {
    let names: Vec<&str> = jobs.iter().map(|j| j.currency.as_str()).collect();
    let flat: Vec<allot_model::flat::FlatJob> = jobs
        .iter()
        .map(|j| allot_model::flat::FlatJob {
            currency: names.iter().position(|c| *c == j.currency).unwrap_or(0),
            currency_weight: funding.get(&j.currency).copied().unwrap_or(100).min(u32::MAX as u64) as u32,
            weight: j.tickets.min(u32::MAX as u64) as u32,
            background: false,
            active: true,
        })
        .collect();
    allot_model::flat::flatten(&flat, outside_weight.min(u32::MAX as u64) as u32)
}

/// What the BPF side reports (struct scx_state in the BPF program, same layout).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct State {
    /// The kernel's exit kind (enum scx_exit_kind); 0 while loaded.
    pub exit_kind: i64,
    /// The exit code.
    pub exit_code: i64,
    /// Tasks queued by pass.
    pub nr_enqueued: u64,
    /// Tasks sent straight to an idle CPU.
    pub nr_direct: u64,
    /// Charges of tasks in no job the scheduler knows (each weighed as its nice weight).
    pub nr_unknown_job: u64,
    /// Tasks put in the sinbin (their job over its hard cap).
    pub nr_sinbinned: u64,
    /// Tasks let out of it.
    pub nr_released: u64,
    /// Wakeups boosted (allot_model::wake): a task that preempted and ran a short slice.
    pub nr_boosted: u64,
    /// Wakeups of jobs that may be boosted, not boosted: their job had used half its
    /// entitlement over the window.
    pub nr_not_boosted: u64,
    /// The kernel's reason.
    pub exit_reason: String,
    /// The message (the BPF program's or the kernel's).
    pub exit_msg: String,
}

const STATE_LEN: usize = 9 * 8 + 128 + 1024;

impl State {
    /// Reads the map value's bytes.
    pub fn parse(b: &[u8]) -> Result<Self> {
        if b.len() < STATE_LEN {
            bail!("the scheduler's state is {} bytes, expected {STATE_LEN}", b.len());
        }
        let word = |i: usize| i64::from_ne_bytes(b[i * 8..i * 8 + 8].try_into().expect("8 bytes"));
        let text = |s: &[u8]| String::from_utf8_lossy(&s[..s.iter().position(|&c| c == 0).unwrap_or(s.len())]).into_owned();
        Ok(State {
            exit_kind: word(0),
            exit_code: word(1),
            nr_enqueued: word(2) as u64,
            nr_direct: word(3) as u64,
            nr_unknown_job: word(4) as u64,
            nr_sinbinned: word(5) as u64,
            nr_released: word(6) as u64,
            nr_boosted: word(7) as u64,
            nr_not_boosted: word(8) as u64,
            exit_reason: text(&b[72..200]),
            exit_msg: text(&b[200..STATE_LEN]),
        })
    }

    /// The exit kind in words (enum scx_exit_kind).
    pub fn exit_kind_name(&self) -> &'static str {
        match self.exit_kind {
            0 => "none (loaded)",
            1 => "done",
            64 => "unregistered",
            65 => "unregistered by the BPF program",
            66 => "unregistered by the kernel",
            67 => "sysrq-S",
            68 => "parent scheduler left",
            1024 => "error",
            1025 => "error in the BPF program",
            1026 => "stall: a runnable task was not run in time (watchdog)",
            _ => "unknown exit kind",
        }
    }
}

/// The loaded scheduler. Dropping it detaches it: the kernel returns every task to the
/// fair class.
pub struct Scheduler {
    obj: Object,
    link: Option<Link>,
}

impl Scheduler {
    /// Loads the BPF program (the verifier checks it here) and attaches it. `all`: it
    /// schedules every task, not only those set to SCHED_EXT (docs/scx.md, coexistence);
    /// `window_ns`: the boost window ([`allot_model::wake::window_ns`]).
    pub fn load(all: bool, window_ns: u64) -> Result<Self> {
        let mut s = Self::prepare(all, window_ns)?;
        s.attach()?;
        Ok(s)
    }

    /// Loads the BPF program without attaching it: its maps can be written, and tasks set
    /// to SCHED_EXT run on in the fair class until [`Scheduler::attach`], which moves them
    /// all in one pass of the kernel's (docs/scx.md, "Many tasks"). The boost window
    /// (`window_ns`, [`allot_model::wake::window_ns`]) is read-only to the BPF side: it is
    /// set here, before the load, for the scheduler's life.
    pub fn prepare(all: bool, window_ns: u64) -> Result<Self> {
        if !Path::new("/sys/kernel/sched_ext/state").exists() {
            bail!("this kernel has no sched_ext (/sys/kernel/sched_ext/state is missing)");
        }
        let mut open = ObjectBuilder::default().open_memory(BPF_OBJECT).context("opening the BPF object")?;
        {
            let mut ops = open.maps_mut().find(|m| m.name() == "allot_ops").context("no allot_ops in the BPF object")?;
            // flags is the first member of the local sched_ext_ops (bpf/sched_ext.h)
            let v = ops.initial_value_mut().context("allot_ops has no initial value")?;
            let flags: u64 = if all { SCX_OPS_ENQ_LAST } else { SCX_OPS_SWITCH_PARTIAL | SCX_OPS_ENQ_LAST };
            v[..8].copy_from_slice(&flags.to_ne_bytes());
        }
        {
            let mut rodata = open.maps_mut().find(|m| m.name() == WINDOW_MAP).with_context(|| format!("no {WINDOW_MAP} in the BPF object"))?;
            // its one variable, window_ns (bpf/wake.h)
            let v = rodata.initial_value_mut().with_context(|| format!("{WINDOW_MAP} has no initial value"))?;
            if v.len() != 8 {
                bail!("{WINDOW_MAP} is {} bytes, expected 8 (window_ns alone)", v.len());
            }
            v.copy_from_slice(&window_ns.to_ne_bytes());
        }
        let obj = open.load().context("loading the BPF scheduler (the verifier's log is above)")?;
        Ok(Scheduler { obj, link: None })
    }

    /// Attaches the prepared scheduler (nothing if it is attached).
    pub fn attach(&mut self) -> Result<()> {
        if self.link.is_none() {
            let mut ops = self.obj.maps_mut().find(|m| m.name() == "allot_ops").context("no allot_ops in the BPF object")?;
            self.link = Some(ops.attach_struct_ops().context("attaching the scheduler (is another sched_ext scheduler loaded?)")?);
        }
        Ok(())
    }

    fn map(&self, name: &str) -> Result<libbpf_rs::Map<'_>> {
        self.obj.maps().find(|m| m.name() == name).with_context(|| format!("no map {name} in the BPF object"))
    }

    /// Describes a job by its cgroup's id: its share (base units, from [`flatten`]), hard
    /// cap ([`cap_ns`]; 0: none), its currency's key and hard cap (0: none; bpf/cap.h),
    /// whether it is a background job, and its entitlement over the boost window
    /// (`allot_model::wake::entitlement_ns`; 0: its wakeups are never boosted).
    pub fn set_job(&self, cgroup_id: u64, t: &serve::Terms) -> Result<()> {
        // struct job (bpf/allot_stride.bpf.c): share, cap, flags, boost, group, group_cap, line
        let mut v = Vec::with_capacity(56);
        for x in [t.share, t.cap_ns, if t.background { JOB_BACKGROUND } else { 0 }, t.boost_ns, t.group, t.group_cap_ns, t.line_ns] {
            v.extend_from_slice(&x.to_ne_bytes());
        }
        self.map("jobs")?.update(&cgroup_id.to_ne_bytes(), &v, MapFlags::ANY).context("writing the jobs map")
    }

    /// The lottery mode (`true`: each turn a draw by shares, with compensation tickets;
    /// bpf/lottery.h, allot_model::lottery) or stride scheduling (`false`, the default).
    pub fn set_lottery(&self, on: bool) -> Result<()> {
        // struct draw (bpf/lottery.h): the mode, then the draws and their sum, from 0
        let mut v = [0u8; 24];
        v[..8].copy_from_slice(&u64::from(on).to_ne_bytes());
        self.map("draw_mode")?.update(&0u32.to_ne_bytes(), &v, MapFlags::ANY).context("writing the draw_mode map")
    }

    /// The lottery mode's draws so far: how many, and their mean (1.0 expected).
    pub fn draws(&self) -> Result<(u64, f64)> {
        let v = self.map("draw_mode")?.lookup(&0u32.to_ne_bytes(), MapFlags::ANY).context("reading the draw_mode map")?.unwrap_or_default();
        let at = |i: usize| v.get(i * 8..i * 8 + 8).map_or(0, |b| u64::from_ne_bytes(b.try_into().expect("8 bytes")));
        let (n, sum) = (at(1), at(2));
        Ok((n, if n == 0 { 0.0 } else { sum as f64 / n as f64 / allot_model::lottery::ONE as f64 }))
    }

    /// Forgets a job: its tasks become jobs of their own at their nice weight.
    pub fn remove_job(&self, cgroup_id: u64) -> Result<()> {
        match self.map("jobs")?.delete(&cgroup_id.to_ne_bytes()) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == libbpf_rs::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(e).context("deleting from the jobs map"),
        }
    }

    /// Forgets what the BPF side keeps for a job (its entries in [`JOB_STATE_MAPS`]): for
    /// a job already removed ([`Scheduler::remove_job`]) whose cgroup is gone, so that no
    /// task is left to count or charge there (serve.rs waits for that). Without it the maps
    /// (65536 entries each) filled up with every job a long-running daemon ever had.
    pub fn forget_job(&self, cgroup_id: u64) -> Result<()> {
        for name in JOB_STATE_MAPS {
            match self.map(name)?.delete(&cgroup_id.to_ne_bytes()) {
                Ok(()) => {}
                Err(e) if e.kind() == libbpf_rs::ErrorKind::NotFound => {}
                Err(e) => return Err(e).with_context(|| format!("deleting from the {name} map")),
            }
        }
        Ok(())
    }

    /// How many jobs each of [`JOB_STATE_MAPS`] holds an entry for (a walk of its keys: for
    /// checks, not for every table).
    pub fn kept(&self) -> Result<Vec<(&'static str, usize)>> {
        JOB_STATE_MAPS.iter().map(|name| Ok((*name, self.map(name)?.keys().count()))).collect()
    }

    /// A job's runnable tasks as the BPF side counts them (None: none counted yet).
    pub fn job_runnable(&self, cgroup_id: u64) -> Result<Option<i64>> {
        let v = self.map("runnable")?.lookup(&cgroup_id.to_ne_bytes(), MapFlags::ANY)?;
        Ok(v.map(|v| i64::from_ne_bytes(v[..8].try_into().expect("a count is 8 bytes"))))
    }

    /// What the BPF side reports.
    pub fn state(&self) -> Result<State> {
        let b = self.map("state")?.lookup(&0u32.to_ne_bytes(), MapFlags::ANY)?.context("the state map is empty")?;
        State::parse(&b)
    }

    /// Detaches the scheduler (as dropping it does).
    pub fn detach(&mut self) {
        self.link.take();
    }
}

/// A cgroup's id as the kernel's BPF side reads it (its kernfs node id: the directory's
/// inode number on 64-bit kernels).
pub fn cgroup_id(dir: &Path) -> Result<u64> {
    use std::os::unix::fs::MetadataExt;
    Ok(std::fs::metadata(dir).with_context(|| format!("cgroup {}", dir.display()))?.ino())
}

/// The threads in a cgroup (cgroup.threads).
pub fn threads(dir: &Path) -> Result<Vec<i32>> {
    let f = dir.join("cgroup.threads");
    let t = std::fs::read_to_string(&f).with_context(|| format!("reading {}", f.display()))?;
    Ok(t.lines().filter_map(|l| l.trim().parse().ok()).collect())
}

/// Puts a thread in the sched_ext class (`ext`) or back in the fair class; its nice value
/// is kept. Err with the errno: a thread that has exited gives ESRCH.
pub fn set_policy(tid: i32, ext: bool) -> std::io::Result<()> {
    let param = libc::sched_param { sched_priority: 0 };
    let policy = if ext { SCHED_EXT } else { libc::SCHED_OTHER };
    // SAFETY: a plain syscall on a pid with a valid sched_param.
    if unsafe { libc::sched_setscheduler(tid, policy, &param) } == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job(t: u64, c: &str) -> JobSpec {
        JobSpec { cgroup: "/x".into(), tickets: t, currency: c.into() }
    }

    #[test]
    fn flattening_splits_each_currency_by_tickets() {
        // one currency: shares in the ratio of tickets, all of them one nice-0 task's 100
        assert_eq!(flatten(&[job(3, "a"), job(2, "a"), job(1, "a")], &BTreeMap::new(), 100), vec![50_000, 33_333, 16_666]);
        // two currencies funded 300 and 100: alice's two jobs split 3/4, bob's one job
        // gets 1/4 whatever its tickets (the currencies' insulation)
        let f = BTreeMap::from([("alice".to_string(), 300), ("bob".to_string(), 100)]);
        assert_eq!(flatten(&[job(1, "alice"), job(1, "alice"), job(500, "bob")], &f, 100), vec![37_500, 37_500, 25_000]);
        // [outside] weight 300: the same split, three nice-0 tasks' worth in all
        assert_eq!(flatten(&[job(1, "alice"), job(1, "alice"), job(500, "bob")], &f, 300), vec![112_500, 112_500, 75_000]);
    }

    /// The value of `#define NAME VALUE[ULL]` in a BPF header.
    fn define(src: &str, name: &str) -> u64 {
        let l = src.lines().find(|l| l.starts_with(&format!("#define {name} "))).unwrap_or_else(|| panic!("no #define {name}"));
        l.split_whitespace().nth(2).unwrap().trim_end_matches("ULL").parse().unwrap()
    }

    /// The BPF program follows allot_model::wake in its own constants: they must agree.
    #[test]
    fn the_bpf_program_boosts_by_the_model_s_constants() {
        let def = |name| define(include_str!("../bpf/wake.h"), name);
        use allot_model::wake::{BELOW, BOOST_SLICE_NS, DEFAULT_WINDOW_NS, FRAC_BITS};
        assert_eq!((def("BOOST_SLICE"), def("BELOW_NUM"), def("BELOW_DEN"), def("FRAC_BITS")), (BOOST_SLICE_NS, BELOW.0, BELOW.1, FRAC_BITS as u64));
        // the window's default, which the loader always overwrites
        let src = include_str!("../bpf/wake.h");
        let l = src.lines().find(|l| l.starts_with("const volatile u64 window_ns SEC(\".rodata.window\") = ")).expect("window_ns in bpf/wake.h");
        assert_eq!(l.rsplit(' ').next().unwrap().trim_end_matches(';').trim_end_matches("ULL").parse::<u64>().unwrap(), DEFAULT_WINDOW_NS);
    }

    /// The BPF program's quantum follows allot_model::quantum's constants.
    #[test]
    fn the_bpf_program_s_quantum_is_the_model_s() {
        let def = |name| define(include_str!("../bpf/quantum.h"), name);
        use allot_model::quantum::{MAX_SLICE_NS, MIN_SLICE_NS, TARGET_NS};
        assert_eq!((def("TARGET_NS"), def("MIN_SLICE"), def("MAX_SLICE")), (TARGET_NS, MIN_SLICE_NS, MAX_SLICE_NS));
    }

    /// The BPF program queues and charges by allot_model::pass's constants.
    #[test]
    fn the_bpf_program_s_pass_is_the_model_s() {
        use allot_model::pass::{LAG, STRIDE_UNIT};
        assert_eq!(define(include_str!("../bpf/allot_stride.bpf.c"), "STRIDE_UNIT"), STRIDE_UNIT);
        assert_eq!(define(include_str!("../bpf/sched_ext.h"), "SCX_SLICE_DFL"), LAG);
    }

    /// The lottery mode's draw is allot_model::lottery's, in its constants.
    #[test]
    fn the_bpf_program_draws_by_the_model_s_constants() {
        use allot_model::lottery::{FRAC_BITS, LN2_Q16, ONE};
        let def = |name| define(include_str!("../bpf/lottery.h"), name);
        assert_eq!((def("DRAW_ONE"), def("DRAW_FRAC_BITS"), def("LN2_Q16")), (ONE, FRAC_BITS as u64, LN2_Q16));
    }

    #[test]
    fn a_cap_is_ns_per_period() {
        assert_eq!(cap_ns(0.3), 30_000_000);
        assert_eq!(cap_ns(2.0), 200_000_000);
        assert_eq!(cap_ns(1e-12), 1);
        assert_eq!((cap_ns(0.0), cap_ns(-1.0), cap_ns(f64::NAN)), (0, 0, 0));
    }

    #[test]
    fn state_reads_the_bpf_layout() {
        let mut b = vec![0u8; STATE_LEN];
        b[..8].copy_from_slice(&1026i64.to_ne_bytes());
        b[16..24].copy_from_slice(&7u64.to_ne_bytes());
        b[48..56].copy_from_slice(&9u64.to_ne_bytes());
        b[56..64].copy_from_slice(&4u64.to_ne_bytes());
        b[64..72].copy_from_slice(&5u64.to_ne_bytes());
        b[72..77].copy_from_slice(b"stall");
        b[200..202].copy_from_slice(b"hi");
        let s = State::parse(&b).unwrap();
        assert_eq!(
            (s.exit_kind, s.nr_enqueued, s.nr_released, s.nr_boosted, s.nr_not_boosted, s.exit_reason.as_str(), s.exit_msg.as_str()),
            (1026, 7, 9, 4, 5, "stall", "hi")
        );
        assert!(s.exit_kind_name().contains("watchdog"));
        assert!(State::parse(&b[..100]).is_err());
    }
}
