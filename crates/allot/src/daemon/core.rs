//! The daemon's state and every request it serves. Pure policy comes from allot-model,
//! kernel access from allot-linux; this file wires them and checks who is asking.
//!
//! cgroup layout under allot's root (DESIGN.md, "How it maps to the kernel"):
//!
//! ```text
//! ROOT/<currency>/<job>              foreground; currency weight = funding, job weight = tickets
//! ROOT-background/<currency>/<job>   background; ROOT-background (beside ROOT, at the top of
//!                                    the hierarchy) has cpu.idle = 1; addressed as
//!                                    `background/<currency>/<job>`
//! ```
//!
//! `<currency>` is `user-<uid>` for a user's own currency or the name of a named one;
//! `<job>` is `default` (the user's automatic job) or `j<id>-u<owner uid>`. Everything a
//! job is can be read back from the tree (tickets from the weight, a hard cap from the
//! quota, background from the place, owner from the name), so a restarted daemon adopts
//! the tree as it finds it. Only funding is kept in the state file, written atomically.

use super::state;
use crate::config::Config;
use crate::proto::{CurrencyView, JobView, Reply, Request, ShowView};
use allot_linux::cgroup::{CpuController, Max};
use allot_linux::pidfd::PidFd;
use allot_linux::procfs;
use allot_model::policy::{boosted, nice_emulation, soft_cap_held, BoostRule, NiceClaim};
use allot_model::{Cap, Funding, Tickets, UsageRate};
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// Where background jobs live (allot's idle sibling; see `allot_linux::cgroup::Tree`).
pub use allot_linux::cgroup::BACKGROUND;
/// cpu.max period allot uses (the kernel's default).
pub const PERIOD_US: u64 = 100_000;
/// A job younger than this is not reaped while empty (its first process is on the way).
const GRACE: Duration = Duration::from_secs(3);

/// Who is asking, from SO_PEERCRED.
#[derive(Debug, Clone, Copy)]
pub struct Peer {
    /// Process id of the client.
    pub pid: i32,
    /// Its uid.
    pub uid: u32,
    /// Its gid.
    pub gid: u32,
}

impl Peer {
    fn is_root(&self) -> bool {
        self.uid == 0
    }
}

#[derive(Debug, Clone, PartialEq)]
enum Kind {
    User(u32),
    Named,
}

#[derive(Debug, Clone)]
struct Currency {
    dir: String,
    kind: Kind,
}

impl Currency {
    fn user(uid: u32) -> Self {
        Self { dir: format!("user-{uid}"), kind: Kind::User(uid) }
    }
    fn name(&self) -> String {
        match self.kind {
            Kind::User(uid) => user_label(uid),
            Kind::Named => self.dir.clone(),
        }
    }
}

fn user_label(uid: u32) -> String {
    procfs::user_name(uid).unwrap_or_else(|| uid.to_string())
}

#[derive(Debug)]
struct Job {
    /// 0 for a user's default job.
    id: u64,
    currency: String,
    owner: u32,
    /// Base tickets, as the user set them.
    tickets: Tickets,
    /// Cap as the user set it: hard (cpu.max always) or soft (cpu.max while held).
    cap: Option<Cap>,
    background: bool,
    created: Instant,
    command: String,
    usage: UsageRate,
    last: Option<(u64, Instant)>,
    active: bool,
    dynamic: Dynamic,
}

/// What the dynamic policy knows of a job and has applied to it.
#[derive(Debug, Default)]
struct Dynamic {
    /// (CPU seconds, wall seconds) per tick over the boost window.
    window: VecDeque<(f64, f64)>,
    /// Usage over the window, CPUs.
    recent: f64,
    /// Thread ids seen this tick.
    threads: Vec<i32>,
    /// The thread list changed at this tick.
    threads_changed: bool,
    /// The lowest nice of its processes.
    nice: i32,
    /// CPUs its first thread may run on (observed while active).
    cpus: Vec<usize>,
    /// A soft cap is being held.
    held: bool,
    /// The cpu.max quota written (µs per PERIOD_US), None: unlimited.
    quota: Option<u64>,
    focus: bool,
    boosted: bool,
    /// The job weight written to the kernel (None: its tickets).
    weight: Option<u32>,
    /// Threads given the boost slice, with the slice they had before.
    slices: HashMap<i32, u64>,
    /// Summed run-queue wait of its threads at the last tick, ns.
    wait_ns: u64,
    /// Its threads waited for CPU during the last tick.
    waiting: bool,
}

impl Job {
    fn name(&self) -> String {
        if self.id == 0 {
            "default".into()
        } else {
            format!("j{}-u{}", self.id, self.owner)
        }
    }
    fn rel(&self) -> String {
        let base = format!("{}/{}", self.currency, self.name());
        if self.background {
            format!("{BACKGROUND}/{base}")
        } else {
            base
        }
    }
    fn label(&self) -> String {
        if self.id == 0 {
            format!("{}/default", user_label(self.owner))
        } else {
            self.id.to_string()
        }
    }
}

/// Kernel features found at start.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Features {
    /// cgroup cpu.idle (background).
    pub cpu_idle: bool,
    /// EEVDF per-task slices through sched_setattr (Linux 6.12+).
    pub custom_slices: bool,
    /// /proc/pressure/cpu.
    pub psi: bool,
    /// kernel.task_delayacct = 1.
    pub delay_accounting: bool,
}

impl Features {
    fn detect(cg: &dyn CpuController) -> Self {
        Self {
            cpu_idle: cg.has_idle(),
            custom_slices: allot_linux::sched::custom_slices_supported(),
            psi: std::path::Path::new("/proc/pressure/cpu").exists(),
            delay_accounting: std::fs::read_to_string("/proc/sys/kernel/task_delayacct").map(|s| s.trim() == "1").unwrap_or(false),
        }
    }
    fn degraded(&self) -> Vec<String> {
        let mut v = vec![];
        if !self.cpu_idle {
            v.push("no cpu.idle: background jobs get the smallest weight (1) instead of idle-only CPU".into());
        }
        if !self.custom_slices {
            v.push("no custom slices (Linux < 6.12): latency boost falls back to weights".into());
        }
        if !self.psi {
            v.push("no PSI: `allot why` cannot report CPU pressure".into());
        }
        if !self.delay_accounting {
            v.push("delay accounting off: `allot why` has no worst-wait maxima (sysctl kernel.task_delayacct=1)".into());
        }
        v
    }
}

/// What the process scan knows of a pid.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Seen {
    /// Never touched again (kernel thread, or already placed/in allot).
    Done,
    /// Not a candidate now (e.g. root's); its owner may still change (setuid).
    Watch,
}

/// The daemon's state.
pub struct Core {
    cg: Box<dyn CpuController>,
    cfg: Config,
    state_path: Option<PathBuf>,
    ncpu: usize,
    features: Features,
    currencies: BTreeMap<String, Currency>,
    funding: BTreeMap<String, u32>,
    jobs: Vec<Job>,
    next_id: u64,
    seen: HashMap<i32, Seen>,
    started: Instant,
    /// Currency weights written to the kernel that differ from funding (nice emulation).
    cur_weight: HashMap<String, u32>,
    /// Per-CPU idle ticks at the last tick, for soft caps.
    idle_prev: Option<(Vec<u64>, Instant)>,
    /// Base settings kept across restarts.
    saved_jobs: BTreeMap<String, state::JobState>,
    /// Ticks so far.
    ticks: u64,
}

type R<T> = Result<T, String>;

fn kerr(e: allot_linux::Error) -> String {
    e.to_string()
}

impl Core {
    /// Creates or adopts the tree under the controller's root.
    pub fn start(cg: Box<dyn CpuController>, cfg: Config, state_path: Option<PathBuf>) -> anyhow::Result<Self> {
        // The root must exist before features are read from it.
        cg.create("").map_err(|e| anyhow::anyhow!("{e}"))?;
        let features = Features::detect(cg.as_ref());
        let mut core = Self {
            ncpu: allot_linux::ncpu(),
            features,
            cfg,
            state_path,
            currencies: BTreeMap::new(),
            funding: BTreeMap::new(),
            jobs: vec![],
            next_id: 1,
            seen: HashMap::new(),
            started: Instant::now(),
            cur_weight: HashMap::new(),
            idle_prev: None,
            saved_jobs: BTreeMap::new(),
            ticks: 0,
            cg,
        };
        if let Some(p) = &core.state_path {
            let st = state::load(p)?;
            core.funding = st.funding;
            core.saved_jobs = st.jobs;
            core.next_id = core.next_id.max(st.next_id);
        }
        core.cg.create(BACKGROUND).map_err(|e| anyhow::anyhow!("{e}"))?;
        if core.features.cpu_idle {
            core.cg.set_idle(BACKGROUND, true).map_err(|e| anyhow::anyhow!("{e}"))?;
        } else {
            core.cg.set_weight(BACKGROUND, 1).map_err(|e| anyhow::anyhow!("{e}"))?;
        }
        for (name, _) in core.cfg.currencies.clone() {
            core.currencies.insert(name.clone(), Currency { dir: name, kind: Kind::Named });
        }
        core.adopt();
        Ok(core)
    }

    /// Reads the existing tree back into jobs (after a restart or crash).
    fn adopt(&mut self) {
        for bg in [false, true] {
            let base = if bg { BACKGROUND.to_string() } else { String::new() };
            let Ok(curs) = self.cg.children(&base) else { continue };
            for cdir in curs {
                if !bg && cdir == BACKGROUND {
                    continue;
                }
                let cur = match cdir.strip_prefix("user-").and_then(|u| u.parse::<u32>().ok()) {
                    Some(uid) => Currency::user(uid),
                    None => Currency { dir: cdir.clone(), kind: Kind::Named },
                };
                let crel = if bg { format!("{BACKGROUND}/{cdir}") } else { cdir.clone() };
                let Ok(jobs) = self.cg.children(&crel) else { continue };
                self.currencies.entry(cdir.clone()).or_insert(cur.clone());
                let _ = self.apply_funding(&cdir);
                for jdir in jobs {
                    let (id, owner) = if jdir == "default" {
                        match cur.kind {
                            Kind::User(uid) => (0, uid),
                            Kind::Named => continue,
                        }
                    } else {
                        let Some((id, uid)) = jdir.strip_prefix('j').and_then(|r| r.split_once("-u")) else { continue };
                        let (Ok(id), Ok(uid)) = (id.parse::<u64>(), uid.parse::<u32>()) else { continue };
                        (id, uid)
                    };
                    let rel = format!("{crel}/{jdir}");
                    // The user's settings from the state file; else read back from the tree.
                    let saved = self.saved_jobs.get(&format!("{cdir}/{jdir}")).cloned();
                    let tickets = match &saved {
                        Some(s) => Tickets::new(s.tickets as i64).unwrap_or_default(),
                        None => Tickets::new(self.cg.weight(&rel).unwrap_or(100) as i64).unwrap_or_default(),
                    };
                    let held_max = self.cg.max(&rel).ok().flatten();
                    // A default job never has a cap of its own (`set` gives a process its own
                    // job), so a quota on it is the dynamic policy's (a boost), not a cap.
                    let cap = match &saved {
                        _ if id == 0 => None,
                        Some(s) => s.cap.as_deref().and_then(|c| c.parse::<Cap>().ok()).filter(|c| !c.is_background()),
                        None => held_max.map(|m| Cap { cpus: m.quota_us as f64 / m.period_us as f64, hard: true }),
                    };
                    let command = self.cg.procs(&rel).ok().and_then(|p| p.first().and_then(|&p| procfs::cmdline(p).ok())).unwrap_or_default();
                    self.next_id = self.next_id.max(id + 1);
                    if self.jobs.iter().any(|j| j.id == id && (id != 0 || j.owner == owner)) {
                        continue;
                    }
                    self.jobs.push(Job {
                        id,
                        currency: cdir.clone(),
                        owner,
                        tickets,
                        cap,
                        background: bg,
                        created: Instant::now(),
                        command,
                        usage: UsageRate::new(self.cfg.half_life_ms),
                        last: None,
                        active: false,
                        dynamic: Dynamic {
                            held: cap.is_some_and(|c| !c.hard) && held_max.is_some(),
                            quota: held_max.map(|m| m.quota_us * PERIOD_US / m.period_us.max(1)),
                            ..Default::default()
                        },
                    });
                }
            }
        }
    }

    /// The number of jobs (for logs).
    pub fn job_count(&self) -> usize {
        self.jobs.len()
    }

    fn funding_of(&self, dir: &str) -> u32 {
        if let Some(f) = self.funding.get(dir) {
            return *f;
        }
        self.cfg.currencies.get(dir).and_then(|c| c.funding).unwrap_or(self.cfg.default_funding)
    }

    fn apply_funding(&self, dir: &str) -> R<()> {
        let f = self.funding_of(dir);
        for rel in [dir.to_string(), format!("{BACKGROUND}/{dir}")] {
            if self.cg.exists(&rel) {
                self.cg.set_weight(&rel, f).map_err(kerr)?;
            }
        }
        Ok(())
    }

    fn ensure_currency_dir(&mut self, dir: &str, background: bool) -> R<()> {
        let rel = if background { format!("{BACKGROUND}/{dir}") } else { dir.to_string() };
        if !self.cg.exists(&rel) {
            self.cg.create(&rel).map_err(kerr)?;
        }
        self.apply_funding(dir)
    }

    /// Resolves a currency argument: a named currency, a user name, or a uid.
    /// Pure: a currency is registered only when a job is made in it.
    fn resolve_currency(&self, arg: &str) -> R<Currency> {
        if let Some(c) = self.currencies.get(arg).filter(|c| c.kind == Kind::Named) {
            return Ok(c.clone());
        }
        let uid = procfs::user_uid(arg).or_else(|| arg.parse::<u32>().ok());
        match uid {
            Some(uid) => Ok(self.currencies.get(&format!("user-{uid}")).cloned().unwrap_or_else(|| Currency::user(uid))),
            None => {
                let named: Vec<&str> = self.currencies.values().filter(|c| c.kind == Kind::Named).map(|c| c.dir.as_str()).collect();
                Err(format!(
                    "unknown currency or user {arg:?}: named currencies are [{}]; otherwise give a user name or uid (named currencies are defined in the config)",
                    named.join(", ")
                ))
            }
        }
    }

    fn user_currency(&self, uid: u32) -> Currency {
        self.currencies.get(&format!("user-{uid}")).cloned().unwrap_or_else(|| Currency::user(uid))
    }

    fn in_list(list: &[String], uid: u32) -> bool {
        list.iter().any(|u| procfs::user_uid(u) == Some(uid) || u.parse::<u32>().ok() == Some(uid))
    }

    fn may_use(&self, peer: &Peer, cur: &Currency) -> bool {
        if peer.is_root() {
            return true;
        }
        match cur.kind {
            Kind::User(uid) => uid == peer.uid,
            Kind::Named => self.cfg.currencies.get(&cur.dir).is_some_and(|c| {
                Self::in_list(&c.users, peer.uid)
                    || Self::in_list(&c.owners, peer.uid)
                    || c.groups.iter().any(|g| {
                        procfs::group_members(g)
                            .is_some_and(|(gid, members)| gid == peer.gid || members.iter().any(|m| procfs::user_uid(m) == Some(peer.uid)))
                    })
            }),
        }
    }

    fn may_fund(&self, peer: &Peer, cur: &Currency) -> bool {
        peer.is_root() || (cur.kind == Kind::Named && self.cfg.currencies.get(&cur.dir).is_some_and(|c| Self::in_list(&c.owners, peer.uid)))
    }

    /// Serves one request from `peer`. Every path that refuses changes nothing.
    pub fn handle(&mut self, req: Request, peer: &Peer) -> Reply {
        let r = match req {
            Request::Status => Ok(self.status()),
            Request::Show { user } => self.show(user.as_deref()),
            Request::Run { tickets, currency, cap, background, command } => self.run(peer, tickets, currency, cap, background, command),
            Request::Set { pids, tickets, cap, background } => self.set(peer, pids, tickets, cap, background),
            Request::Fund { currency, funding } => self.fund(peer, currency, funding),
            Request::Move { pid, currency } => self.move_pid(peer, pid, &currency),
            Request::Focus { pid, on } => self.focus(peer, pid, on),
        };
        match r {
            Ok(v) => Reply::ok(v),
            Err(e) => Reply::err(e),
        }
    }

    fn status(&self) -> serde_json::Value {
        serde_json::json!({
            "version": env!("CARGO_PKG_VERSION"),
            "pid": std::process::id(),
            "uptime_s": self.started.elapsed().as_secs(),
            "cgroup_version": self.cg.version(),
            "cgroup_root": self.cg.root(),
            "ncpu": self.ncpu,
            "features": self.features,
            "degraded": self.features.degraded(),
            "jobs": self.jobs.len(),
            "auto_place": self.cfg.users.auto_place,
            "min_uid": self.cfg.users.min_uid,
        })
    }

    fn parse_tickets(t: Option<i64>) -> R<Option<Tickets>> {
        t.map(|t| Tickets::new(t).map_err(|e| e.to_string())).transpose()
    }

    /// Parses a cap argument into (cap, background): soft 0 is background.
    fn parse_cap(&self, cap: &str) -> R<(Option<Cap>, bool)> {
        let c: Cap = cap.parse().map_err(|e: allot_model::ModelError| e.to_string())?;
        if c.is_background() {
            return Ok((None, true));
        }
        if c.cpus > self.ncpu as f64 {
            return Err(format!("cap {cap:?} is more than this machine's {} CPUs; give at most {}!", self.ncpu, self.ncpu));
        }
        Ok((Some(c), false))
    }

    /// Creates a job's cgroup with its settings. `default`: the user's automatic job.
    #[allow(clippy::too_many_arguments)] // replaced by the registry in the daemon split
    fn new_job(
        &mut self,
        cur: &Currency,
        owner: u32,
        tickets: Tickets,
        cap: Option<Cap>,
        background: bool,
        command: String,
        default: bool,
    ) -> R<Job> {
        self.ensure_currency_dir(&cur.dir, background)?;
        self.currencies.entry(cur.dir.clone()).or_insert_with(|| cur.clone());
        let job = Job {
            id: if default { 0 } else { self.next_id },
            currency: cur.dir.clone(),
            owner,
            tickets,
            cap,
            background,
            created: Instant::now(),
            command,
            usage: UsageRate::new(self.cfg.half_life_ms),
            last: None,
            active: false,
            dynamic: Dynamic { quota: cap.filter(|c| c.hard).map(|c| c.quota_us(PERIOD_US)), ..Default::default() },
        };
        let rel = job.rel();
        let made = (|| {
            self.cg.create(&rel)?;
            self.cg.set_weight(&rel, tickets.get())?;
            if let Some(c) = cap.filter(|c| c.hard) {
                self.cg.set_max(&rel, Some(Max { quota_us: c.quota_us(PERIOD_US), period_us: PERIOD_US }))?;
            }
            Ok::<_, allot_linux::Error>(())
        })();
        if let Err(e) = made {
            let _ = self.cg.remove(&rel);
            return Err(kerr(e));
        }
        if !default {
            self.next_id += 1;
        }
        let mut job = job;
        self.boost_newcomer(&mut job);
        Ok(job)
    }

    /// A new job has used nothing of what it deserves (seed 001 §3.3: f = 0): it starts
    /// boosted, at once rather than at the next tick, so its first wakeups are already
    /// protected. Weight and its quota here; the tick adds slices once it has threads.
    fn boost_newcomer(&self, job: &mut Job) {
        let pol = &self.cfg.policy;
        if !pol.boost || job.background {
            return;
        }
        let rel = job.rel();
        let w = ((job.tickets.get() as f64 * pol.boost_weight).round() as u32).clamp(1, 10_000);
        let sums = self.active_sums();
        let mut limit = self.entitlement_if_joined(&sums, &job.currency, job.tickets.get() as f64).max(0.01);
        if let Some(c) = job.cap {
            limit = limit.min(c.cpus);
        }
        let quota = Cap { cpus: limit, hard: true }.quota_us(PERIOD_US);
        if self.cg.set_max(&rel, Some(Max { quota_us: quota, period_us: PERIOD_US })).is_ok() {
            job.dynamic.quota = Some(quota);
            if self.cg.set_weight(&rel, w).is_ok() {
                job.dynamic.weight = Some(w);
                job.dynamic.boosted = true;
            }
        }
    }

    /// Moves a process, checking through its pidfd that it is still the same process.
    fn place(&self, pidfd: &PidFd, rel: &str) -> R<()> {
        if !pidfd.alive() {
            return Err(format!("process {} exited", pidfd.pid()));
        }
        self.cg.move_pid(rel, pidfd.pid()).map_err(|e| if e.is_gone() { format!("process {} exited", pidfd.pid()) } else { kerr(e) })
    }

    fn run(
        &mut self,
        peer: &Peer,
        tickets: Option<i64>,
        currency: Option<String>,
        cap: Option<String>,
        background: bool,
        command: Vec<String>,
    ) -> R<serde_json::Value> {
        let tickets = Self::parse_tickets(tickets)?.unwrap_or_default();
        let (cap, cap_bg) = match cap.as_deref() {
            Some(c) => self.parse_cap(c)?,
            None => (None, false),
        };
        let cur = match currency.as_deref() {
            Some(c) => self.resolve_currency(c)?,
            None => self.user_currency(peer.uid),
        };
        if !self.may_use(peer, &cur) {
            return Err(format!(
                "you (uid {}) may not run jobs in currency {:?}; ask root to list you in its `users` in the config",
                peer.uid,
                cur.name()
            ));
        }
        let pidfd = PidFd::open(peer.pid).map_err(|_| format!("client process {} is gone", peer.pid))?;
        let cmd = command.join(" ");
        let cmd: String = cmd.chars().take(256).collect();
        let job = self.new_job(&cur, peer.uid, tickets, cap, background || cap_bg, cmd, false)?;
        let rel = job.rel();
        if let Err(e) = self.place(&pidfd, &rel) {
            let _ = self.cg.remove(&rel);
            return Err(e);
        }
        let out = serde_json::json!({"job": job.id, "currency": cur.name(), "tickets": tickets.get(), "cgroup": rel});
        self.jobs.push(job);
        self.save_jobs();
        Ok(out)
    }

    /// Checks that `peer` may act on `pid`, returning a pidfd held for the action.
    fn own_process(&self, peer: &Peer, pid: i64) -> R<(PidFd, procfs::Ids)> {
        if pid <= 0 || pid > i32::MAX as i64 {
            return Err(format!("pid {pid} is not a process id (a positive number, as `ps` shows)"));
        }
        let pid = pid as i32;
        let pidfd = PidFd::open(pid).map_err(|_| format!("no process {pid} (it does not exist or has exited)"))?;
        let st = procfs::stat(pid).map_err(|_| format!("no process {pid} (it has exited)"))?;
        if st.is_kernel_thread() {
            return Err(format!("pid {pid} ({}) is a kernel thread; allot manages user processes only", st.comm));
        }
        let ids = procfs::ids(pid).map_err(|_| format!("no process {pid} (it has exited)"))?;
        if !pidfd.alive() {
            return Err(format!("no process {pid} (it has exited)"));
        }
        if !peer.is_root() && ids.ruid != peer.uid && ids.euid != peer.uid {
            return Err(format!(
                "process {pid} belongs to {} (uid {}); you (uid {}) may only change your own processes",
                user_label(ids.ruid),
                ids.ruid,
                peer.uid
            ));
        }
        Ok((pidfd, ids))
    }

    fn job_index_of(&self, pid: i32) -> Option<usize> {
        let rel = self.cg.rel_of(pid).ok().flatten()?;
        self.jobs.iter().position(|j| j.rel() == rel)
    }

    fn set(&mut self, peer: &Peer, pids: Vec<i64>, tickets: Option<i64>, cap: Option<String>, background: Option<bool>) -> R<serde_json::Value> {
        if pids.is_empty() {
            return Err("set needs at least one PID".into());
        }
        if pids.len() > 1024 {
            return Err(format!("set takes at most 1024 PIDs, got {}", pids.len()));
        }
        let tickets = Self::parse_tickets(tickets)?;
        // cap: None = unchanged; Some(None) = clear; Some(Some(c)) = hard cap c.
        let mut bg = background;
        let cap: Option<Option<Cap>> = match cap.as_deref() {
            None => None,
            Some("none") => Some(None),
            Some(c) => {
                let (hard, is_bg) = self.parse_cap(c)?;
                if is_bg {
                    if bg == Some(false) {
                        return Err("cap 0 means background; it contradicts --foreground".into());
                    }
                    bg = Some(true);
                    None
                } else {
                    Some(hard)
                }
            }
        };
        if tickets.is_none() && cap.is_none() && bg.is_none() {
            return Err("set needs something to change: -t TICKETS, --cap CAP|none, --background or --foreground".into());
        }
        // Check everything before changing anything.
        let mut targets: Vec<(PidFd, procfs::Ids, Option<usize>)> = vec![];
        for &pid in &pids {
            let (fd, ids) = self.own_process(peer, pid)?;
            let idx = self.job_index_of(fd.pid());
            if let Some(i) = idx {
                let j = &self.jobs[i];
                if j.id != 0 && !peer.is_root() && j.owner != peer.uid {
                    return Err(format!("process {pid} is in job {} of {}; only its owner or root may change it", j.label(), user_label(j.owner)));
                }
            }
            targets.push((fd, ids, idx));
        }
        let mut changed = vec![];
        for (fd, ids, idx) in targets {
            let idx = self.own_job(&fd, &ids, idx)?;
            if changed.contains(&idx) {
                continue;
            }
            self.change_job(idx, tickets, cap, bg)?;
            changed.push(idx);
        }
        self.save_jobs();
        let jobs: Vec<String> = changed.iter().map(|&i| self.jobs[i].label()).collect();
        Ok(serde_json::json!({"jobs": jobs}))
    }

    /// The job of its own that a process is in, made if it has none yet (it is outside
    /// allot, or in a user's default job): in the currency it is already in, or its
    /// owner's, with the settings it had.
    fn own_job(&mut self, fd: &PidFd, ids: &procfs::Ids, idx: Option<usize>) -> R<usize> {
        if let Some(i) = idx.filter(|&i| self.jobs[i].id != 0) {
            return Ok(i);
        }
        let cur = match idx {
            Some(i) => self.currencies.get(&self.jobs[i].currency).cloned().unwrap_or_else(|| Currency::user(ids.ruid)),
            None => self.user_currency(ids.ruid),
        };
        let cmd = procfs::cmdline(fd.pid()).unwrap_or_default();
        let old = idx.map(|i| &self.jobs[i]);
        let (t, c, b) = (old.map(|j| j.tickets).unwrap_or_default(), old.and_then(|j| j.cap), old.is_some_and(|j| j.background));
        let job = self.new_job(&cur, ids.ruid, t, c, b, cmd.chars().take(256).collect(), false)?;
        if let Err(e) = self.place(fd, &job.rel()) {
            let _ = self.cg.remove(&job.rel());
            return Err(e);
        }
        self.jobs.push(job);
        Ok(self.jobs.len() - 1)
    }

    fn focus(&mut self, peer: &Peer, pid: i64, on: bool) -> R<serde_json::Value> {
        let (fd, ids) = self.own_process(peer, pid)?;
        let idx = self.job_index_of(fd.pid());
        if let Some(i) = idx {
            let j = &self.jobs[i];
            if j.id != 0 && !peer.is_root() && j.owner != peer.uid {
                return Err(format!("process {pid} is in job {} of {}; only its owner or root may focus it", j.label(), user_label(j.owner)));
            }
        }
        let idx = self.own_job(&fd, &ids, idx)?;
        self.jobs[idx].dynamic.focus = on;
        self.save_jobs();
        Ok(serde_json::json!({"job": self.jobs[idx].label(), "focus": on}))
    }

    /// Keeps every job's base settings in the state file (not for ephemeral daemons).
    fn save_jobs(&mut self) {
        let Some(p) = self.state_path.clone() else { return };
        self.saved_jobs = self
            .jobs
            .iter()
            .filter(|j| j.id != 0)
            .map(|j| (format!("{}/{}", j.currency, j.name()), state::JobState { tickets: j.tickets.get(), cap: j.cap.map(|c| c.to_string()) }))
            .collect();
        let st = state::State { funding: self.funding.clone(), jobs: self.saved_jobs.clone(), next_id: self.next_id };
        if let Err(e) = state::save(&p, &st) {
            eprintln!("allot daemon: could not save job settings: {e:#}");
        }
    }

    fn change_job(&mut self, idx: usize, tickets: Option<Tickets>, cap: Option<Option<Cap>>, bg: Option<bool>) -> R<()> {
        if let Some(b) = bg {
            if b != self.jobs[idx].background {
                self.relocate(idx, b)?;
            }
        }
        let rel = self.jobs[idx].rel();
        if let Some(t) = tickets {
            self.cg.set_weight(&rel, t.get()).map_err(kerr)?;
            self.jobs[idx].tickets = t;
        }
        if let Some(c) = cap {
            // A hard cap is written now; a soft one is held by the tick when others wait.
            let max = c.filter(|c| c.hard).map(|c| Max { quota_us: c.quota_us(PERIOD_US), period_us: PERIOD_US });
            self.cg.set_max(&rel, max).map_err(kerr)?;
            self.jobs[idx].cap = c;
            self.jobs[idx].dynamic.held = false;
            self.jobs[idx].dynamic.quota = max.map(|m| m.quota_us);
        }
        if tickets.is_some() {
            self.jobs[idx].dynamic.weight = None;
        }
        Ok(())
    }

    /// Moves a job between the foreground and background trees: a new directory with the
    /// same settings, every process moved (repeated while it forks), the old one removed.
    fn relocate(&mut self, idx: usize, background: bool) -> R<()> {
        let old = self.jobs[idx].rel();
        let cur = self.jobs[idx].currency.clone();
        self.ensure_currency_dir(&cur, background)?;
        self.jobs[idx].background = background;
        let new = self.jobs[idx].rel();
        let j = &self.jobs[idx];
        let setup = (|| {
            self.cg.create(&new)?;
            self.cg.set_weight(&new, j.tickets.get())?;
            if let Some(c) = j.cap.filter(|c| c.hard) {
                self.cg.set_max(&new, Some(Max { quota_us: c.quota_us(PERIOD_US), period_us: PERIOD_US }))?;
            }
            Ok::<_, allot_linux::Error>(())
        })();
        if let Err(e) = setup {
            self.jobs[idx].background = !background;
            return Err(kerr(e));
        }
        self.jobs[idx].dynamic.held = false;
        self.jobs[idx].dynamic.weight = None;
        self.jobs[idx].dynamic.quota = self.jobs[idx].cap.filter(|c| c.hard).map(|c| c.quota_us(PERIOD_US));
        for _ in 0..100 {
            let procs = self.cg.procs(&old).unwrap_or_default();
            if procs.is_empty() {
                break;
            }
            for p in procs {
                let _ = self.cg.move_pid(&new, p);
            }
        }
        let _ = self.cg.remove(&old);
        Ok(())
    }

    fn fund(&mut self, peer: &Peer, currency: Option<String>, funding: Option<i64>) -> R<serde_json::Value> {
        let Some(name) = currency else {
            if funding.is_some() {
                return Err("give the currency or user to fund: allot fund NAME BASE".into());
            }
            return Ok(serde_json::to_value(self.currency_views()).unwrap_or_default());
        };
        let cur = self.resolve_currency(&name)?;
        let Some(f) = funding else {
            return Ok(serde_json::json!({"currency": cur.name(), "funding": self.funding_of(&cur.dir)}));
        };
        let f = Funding::new(f).map_err(|e| e.to_string())?;
        if !self.may_fund(peer, &cur) {
            return Err(format!("setting funding of {:?} is root's (or a config-listed owner's); you are uid {}", cur.name(), peer.uid));
        }
        let before = self.funding.clone();
        self.funding.insert(cur.dir.clone(), f.get());
        if let Some(p) = &self.state_path {
            if let Err(e) = state::save(p, &state::State { funding: self.funding.clone(), jobs: self.saved_jobs.clone(), next_id: self.next_id }) {
                self.funding = before;
                return Err(format!("could not save funding: {e}"));
            }
        }
        self.apply_funding(&cur.dir)?;
        self.cur_weight.remove(&cur.dir);
        Ok(serde_json::json!({"currency": cur.name(), "funding": f.get()}))
    }

    fn move_pid(&mut self, peer: &Peer, pid: i64, currency: &str) -> R<serde_json::Value> {
        let cur = self.resolve_currency(currency)?;
        let owner_of_target = self.may_fund(peer, &cur);
        if !owner_of_target {
            return Err(format!("moving a process into currency {:?} is root's (or a config-listed owner's); you are uid {}", cur.name(), peer.uid));
        }
        let (fd, ids) = self.own_process(peer, pid)?;
        let cmd = procfs::cmdline(fd.pid()).unwrap_or_default();
        let job = self.new_job(&cur, ids.ruid, Tickets::default(), None, false, cmd.chars().take(256).collect(), false)?;
        if let Err(e) = self.place(&fd, &job.rel()) {
            let _ = self.cg.remove(&job.rel());
            return Err(e);
        }
        let out = serde_json::json!({"job": job.id, "currency": cur.name(), "cgroup": job.rel()});
        self.jobs.push(job);
        self.save_jobs();
        Ok(out)
    }

    fn entitlements(&self) -> Vec<f64> {
        // Group jobs by currency, compute, scatter back.
        let mut order: Vec<String> = vec![];
        let mut claims: Vec<allot_model::CurrencyClaim> = vec![];
        let mut where_: Vec<(usize, usize)> = vec![];
        // Capacity: the CPUs the active jobs may use (all of them unless pinned).
        let mut allowed = vec![false; self.ncpu.max(1)];
        for j in self.jobs.iter().filter(|j| j.active) {
            if j.dynamic.cpus.is_empty() {
                allowed.iter_mut().for_each(|a| *a = true);
            }
            for &c in &j.dynamic.cpus {
                if c < allowed.len() {
                    allowed[c] = true;
                }
            }
        }
        let capacity = match allowed.iter().filter(|&&a| a).count() {
            0 => self.ncpu as f64,
            n => n as f64,
        };
        for j in &self.jobs {
            let ci = match order.iter().position(|c| *c == j.currency) {
                Some(i) => i,
                None => {
                    order.push(j.currency.clone());
                    claims.push(allot_model::CurrencyClaim { funding: self.funding_of(&j.currency) as f64, jobs: vec![] });
                    order.len() - 1
                }
            };
            let threads = j.dynamic.threads.len() as f64;
            let mut ceiling = threads.max(1.0).min(self.ncpu as f64);
            if !j.dynamic.cpus.is_empty() {
                ceiling = ceiling.min(j.dynamic.cpus.len() as f64);
            }
            if let Some(c) = j.cap {
                ceiling = ceiling.min(c.cpus);
            }
            where_.push((ci, claims[ci].jobs.len()));
            claims[ci].jobs.push(allot_model::Claimant { tickets: j.tickets.get() as f64, ceiling, active: j.active, background: j.background });
        }
        let e = allot_model::entitlements(capacity, &claims);
        where_.iter().map(|&(c, k)| e[c][k]).collect()
    }

    /// Funding of each currency with active foreground jobs, and their active tickets.
    fn active_sums(&self) -> (HashMap<String, f64>, HashMap<String, f64>) {
        let (mut funding, mut tickets) = (HashMap::new(), HashMap::new());
        for j in self.jobs.iter().filter(|j| j.active && !j.background) {
            funding.insert(j.currency.clone(), self.funding_of(&j.currency) as f64);
            *tickets.entry(j.currency.clone()).or_insert(0.0) += j.tickets.get() as f64;
        }
        (funding, tickets)
    }

    /// What a job with `tickets` in `currency` would be entitled to if it joined the
    /// active claimants: its tickets' share of its currency's funding share (an upper
    /// bound: ceilings are ignored).
    fn entitlement_if_joined(&self, sums: &(HashMap<String, f64>, HashMap<String, f64>), currency: &str, tickets: f64) -> f64 {
        let capacity = self.ncpu as f64;
        let f = self.funding_of(currency) as f64;
        let total: f64 = sums.0.values().sum::<f64>() + if sums.0.contains_key(currency) { 0.0 } else { f };
        let t_total = sums.1.get(currency).copied().unwrap_or(0.0) + tickets;
        (capacity * f / total * tickets / t_total).min(capacity)
    }

    /// What each job would be entitled to if it were active: its entitlement when it is.
    fn entitlements_if_active(&self, ent: &[f64]) -> Vec<f64> {
        let sums = self.active_sums();
        self.jobs
            .iter()
            .zip(ent)
            .map(|(j, &e)| if j.active || j.background { e } else { self.entitlement_if_joined(&sums, &j.currency, j.tickets.get() as f64) })
            .collect()
    }

    fn currency_views(&self) -> Vec<CurrencyView> {
        let mut dirs: Vec<String> = self.currencies.keys().cloned().collect();
        for d in self.funding.keys() {
            if !dirs.contains(d) {
                dirs.push(d.clone());
            }
        }
        dirs.sort();
        dirs.iter()
            .map(|d| {
                let cur = self.currencies.get(d).cloned().unwrap_or_else(|| match d.strip_prefix("user-").and_then(|u| u.parse().ok()) {
                    Some(uid) => Currency::user(uid),
                    None => Currency { dir: d.clone(), kind: Kind::Named },
                });
                let jobs: Vec<&Job> = self.jobs.iter().filter(|j| &j.currency == d).collect();
                CurrencyView {
                    name: cur.name(),
                    kind: match cur.kind {
                        Kind::User(_) => "user".into(),
                        Kind::Named => "named".into(),
                    },
                    funding: self.funding_of(d),
                    jobs: jobs.len(),
                    active: jobs.iter().filter(|j| j.active).count(),
                    usage: jobs.iter().fold(0.0, |a, j| a + j.usage.cpus),
                }
            })
            .collect()
    }

    fn show(&self, user: Option<&str>) -> R<serde_json::Value> {
        let only = match user {
            Some(u) => Some(procfs::user_uid(u).or_else(|| u.parse().ok()).ok_or_else(|| format!("unknown user {u:?}: give a user name or uid"))?),
            None => None,
        };
        let ent = self.entitlements();
        let jobs: Vec<JobView> = self
            .jobs
            .iter()
            .zip(ent)
            .filter(|(j, _)| only.is_none_or(|u| j.owner == u))
            .map(|(j, e)| {
                let pids = self.cg.procs(&j.rel()).unwrap_or_default();
                let command =
                    if j.command.is_empty() { pids.first().and_then(|&p| procfs::cmdline(p).ok()).unwrap_or_default() } else { j.command.clone() };
                JobView {
                    id: j.label(),
                    uid: j.owner,
                    user: user_label(j.owner),
                    currency: self.currencies.get(&j.currency).map(|c| c.name()).unwrap_or_else(|| j.currency.clone()),
                    tickets: j.tickets.get(),
                    funding: self.funding_of(&j.currency),
                    entitlement: e,
                    usage: j.usage.cpus,
                    cap: if j.background { Some("0".into()) } else { j.cap.map(|c| c.to_string()) },
                    background: j.background,
                    held: j.dynamic.held,
                    boost: j.dynamic.boosted,
                    focus: j.dynamic.focus,
                    nice: j.dynamic.nice,
                    recent: j.dynamic.recent,
                    threads: j.dynamic.threads.len(),
                    weight: j.dynamic.weight.unwrap_or(j.tickets.get()),
                    quota: j.dynamic.quota.map(|q| q as f64 / PERIOD_US as f64),
                    pids,
                    command,
                    cgroup: j.rel(),
                }
            })
            .collect();
        let mut currencies = self.currency_views();
        if let Some(u) = only {
            currencies.retain(|c| jobs.iter().any(|j| j.currency == c.name) || c.name == user_label(u));
        }
        Ok(serde_json::to_value(ShowView { ncpu: self.ncpu, jobs, currencies }).unwrap_or_default())
    }

    /// One pass of the loop: observe each job (usage, threads, nice, waits), decide
    /// (entitlement, boost, soft-cap hold, nice emulation), apply only what changed.
    pub fn tick(&mut self) {
        let now = Instant::now();
        self.observe(now);
        self.split_niced();
        let ent = self.entitlements();
        self.decide_and_apply(&ent, now);
    }

    fn observe(&mut self, now: Instant) {
        let window = self.cfg.policy.boost_window_ms as f64 / 1000.0;
        self.ticks += 1;
        let full = self.ticks % (1000 / self.cfg.tick_ms).max(1) == 0;
        let need_waits = self.jobs.iter().any(|j| j.cap.is_some_and(|c| !c.hard));
        let mut gone = vec![];
        for (i, j) in self.jobs.iter_mut().enumerate() {
            let rel = j.rel();
            let Ok(ns) = self.cg.usage_ns(&rel) else {
                gone.push(i);
                continue;
            };
            let d = &mut j.dynamic;
            let mut dt = self.cfg.tick_ms as f64 / 1000.0;
            if let Some((prev, t)) = j.last {
                dt = now.duration_since(t).as_secs_f64();
                let used = ns.saturating_sub(prev) as f64 / 1e9;
                j.usage.observe(used, dt);
                d.window.push_back((used, dt));
                while d.window.len() > 1 && d.window.iter().skip(1).map(|w| w.1).sum::<f64>() >= window {
                    d.window.pop_front();
                }
                let (u, w) = d.window.iter().fold((0.0, 0.0), |a, x| (a.0 + x.0, a.1 + x.1));
                d.recent = if w > 0.0 { u / w } else { 0.0 };
                // Active: used at least 1% of a CPU lately, or its smoothed rate says it
                // still competes.
                j.active = d.recent > 0.01 || j.usage.cpus > 0.01;
            }
            // A job whose usage did not move ran nothing since the last tick, so it
            // cannot have forked or exited: its thread list stands (this keeps a machine
            // of sleeping jobs cheap to watch). Processes moved in or out by a request do
            // not run it either, so every list is re-read at least once a second.
            let ran = j.last.is_none_or(|(prev, _)| ns != prev) || full;
            j.last = Some((ns, now));
            d.threads_changed = false;
            if ran || d.threads.is_empty() {
                let t = self.cg.threads(&rel).unwrap_or_default();
                d.threads_changed = t != d.threads;
                d.threads = t;
            }
            if d.threads.is_empty() && now.duration_since(j.created) > GRACE {
                gone.push(i);
                continue;
            }
            if j.active {
                if let Some(&t) = d.threads.first() {
                    d.cpus = allot_linux::sched::get_affinity(t).unwrap_or_default();
                }
                // The lowest nice among its processes (thread-group leaders).
                d.nice = self.cg.procs(&rel).unwrap_or_default().iter().filter_map(|&p| procfs::stat(p).ok()).map(|s| s.nice).min().unwrap_or(0);
            }
            if need_waits && j.active {
                let w: u64 = d.threads.iter().filter_map(|t| procfs::schedstat_at(format!("/proc/{t}/schedstat")).ok()).map(|s| s.wait_ns).sum();
                // Waited more than 5% of the interval: it wants CPU it is not getting.
                d.waiting = w.saturating_sub(d.wait_ns) as f64 > 0.05 * dt * 1e9;
                d.wait_ns = w;
            } else {
                d.waiting = false;
            }
        }
        for &i in gone.iter().rev() {
            let j = self.jobs.remove(i);
            let _ = self.cg.remove(&j.rel());
        }
    }

    /// Seed 001 §3.4 acts per process: a niced process in a user's default job (shared
    /// with the user's other processes) gets a job of its own, so nice lowers that
    /// process and not the rest.
    fn split_niced(&mut self) {
        if !self.cfg.policy.nice_emulation {
            return;
        }
        let mut todo = vec![];
        for j in self.jobs.iter().filter(|j| j.id == 0 && j.active && !j.background) {
            let procs = self.cg.procs(&j.rel()).unwrap_or_default();
            if procs.len() < 2 {
                continue;
            }
            for p in procs {
                if procfs::stat(p).map(|s| s.nice != 0).unwrap_or(false) {
                    todo.push((p, j.currency.clone(), j.owner));
                }
            }
        }
        for (pid, cdir, owner) in todo.into_iter().take(16) {
            let Ok(fd) = PidFd::open(pid) else { continue };
            let cur = self.currencies.get(&cdir).cloned().unwrap_or_else(|| Currency::user(owner));
            let cmd = procfs::cmdline(pid).unwrap_or_default();
            let Ok(job) = self.new_job(&cur, owner, Tickets::default(), None, false, cmd.chars().take(256).collect(), false) else { continue };
            if self.place(&fd, &job.rel()).is_err() {
                let _ = self.cg.remove(&job.rel());
                continue;
            }
            self.jobs.push(job);
        }
    }

    fn decide_and_apply(&mut self, ent: &[f64], now: Instant) {
        let pol = self.cfg.policy.clone();
        let slices = self.features.custom_slices && pol.boost_slice_us > 0;
        let rule = BoostRule { below: pol.boost_below };

        // Soft caps: idle CPU (for release) and whether other jobs wait (for holding).
        let idle_now = if self.jobs.iter().any(|j| j.cap.is_some_and(|c| !c.hard)) { procfs::cpu_idle_ticks().ok() } else { None };
        let idle_per_cpu: Option<Vec<f64>> = match (&idle_now, &self.idle_prev) {
            (Some(n), Some((p, t))) => {
                let dt = now.duration_since(*t).as_secs_f64().max(1e-3) * procfs::clk_tck() as f64;
                Some(n.iter().enumerate().map(|(i, v)| v.saturating_sub(*p.get(i).unwrap_or(v)) as f64 / dt).collect())
            }
            _ => None,
        };
        self.idle_prev = idle_now.map(|v| (v, now));
        let waiting: Vec<bool> = self.jobs.iter().map(|j| j.dynamic.waiting).collect();

        // Nice emulation: per currency, over its active foreground jobs.
        let mut job_weight: Vec<f64> = self.jobs.iter().map(|j| j.tickets.get() as f64).collect();
        let mut cur_target: HashMap<String, u32> = HashMap::new();
        if pol.nice_emulation {
            let mut by_cur: BTreeMap<String, Vec<usize>> = BTreeMap::new();
            for (i, j) in self.jobs.iter().enumerate().filter(|(_, j)| !j.background) {
                by_cur.entry(j.currency.clone()).or_default().push(i);
            }
            for (cdir, idxs) in by_cur {
                let claims: Vec<NiceClaim> = idxs
                    .iter()
                    .map(|&i| NiceClaim { tickets: self.jobs[i].tickets.get() as f64, nice: self.jobs[i].dynamic.nice, active: self.jobs[i].active })
                    .collect();
                let funding = self.funding_of(&cdir) as f64;
                let (cw, jw) = nice_emulation(funding, &claims);
                for (k, &i) in idxs.iter().enumerate() {
                    job_weight[i] = jw[k];
                }
                cur_target.insert(cdir, (cw.round() as u32).clamp(1, 10_000));
            }
        }

        let ent_if_active = self.entitlements_if_active(ent);
        for i in 0..self.jobs.len() {
            let rel = self.jobs[i].rel();
            let j = &mut self.jobs[i];
            let d = &mut j.dynamic;

            // Boost. A job not measured yet has used nothing of what it deserves (seed 001
            // §3.3: f = 0, the maximum boost); if it is CPU-bound it loses the boost at the
            // next tick, and the quota below keeps it within its entitlement meanwhile.
            let want = pol.boost && boosted(rule, d.focus, j.active, d.recent, ent[i]);
            d.boosted = want;
            if slices {
                if want {
                    let boost_ns = pol.boost_slice_us * 1000;
                    // Nothing new to give a slice to, and nothing running that could have
                    // reset one: skip the idle.
                    let fresh = d.threads_changed || d.slices.len() != d.threads.len();
                    for &t in d.threads.iter().filter(|_| fresh || j.active) {
                        if d.slices.contains_key(&t) {
                            // A running job's task may have reset its own attributes (a
                            // policy change writes sched_runtime 0): give the slice again
                            // where it is back at the default; a slice of the user's own
                            // choosing stays.
                            if j.active && allot_linux::sched::get(t).is_ok_and(|a| a.sched_runtime == 0) {
                                let _ = allot_linux::sched::set_slice(t, boost_ns);
                            }
                            continue;
                        }
                        if let Ok(a) = allot_linux::sched::get(t) {
                            if (a.sched_policy == allot_linux::sched::SCHED_OTHER || a.sched_policy == allot_linux::sched::SCHED_BATCH)
                                && allot_linux::sched::set_slice(t, boost_ns).is_ok()
                            {
                                d.slices.insert(t, a.sched_runtime);
                            }
                        }
                    }
                    if d.threads_changed {
                        let live: std::collections::HashSet<i32> = d.threads.iter().copied().collect();
                        d.slices.retain(|t, _| live.contains(t));
                    }
                } else if !d.slices.is_empty() {
                    for (t, orig) in d.slices.drain() {
                        if d.threads.contains(&t) {
                            let _ = allot_linux::sched::set_slice(t, orig);
                        }
                    }
                }
            }

            // Weight: nice emulation, times the boost weight while boosted. Measured here
            // (docs/policy.md): the slice alone leaves a woken job behind hogs one time in
            // a hundred (it is not yet eligible); with the weight it is eligible at once.
            let mut w = job_weight[i];
            if want {
                w *= pol.boost_weight;
            }
            let w = (w.round() as u32).clamp(1, 10_000);
            if d.weight.unwrap_or(j.tickets.get()) != w && self.cg.set_weight(&rel, w).is_ok() {
                d.weight = Some(w);
            }

            // Soft cap: held while other jobs wait, released when its CPUs go idle.
            if let Some(c) = j.cap.filter(|c| !c.hard) {
                let others = waiting.iter().enumerate().any(|(k, &wt)| k != i && wt);
                let idle = match (&idle_per_cpu, d.threads.first()) {
                    (Some(per), Some(&t)) => {
                        let cpus = allot_linux::sched::get_affinity(t).unwrap_or_default();
                        cpus.iter().filter_map(|&c| per.get(c)).sum::<f64>()
                    }
                    _ => 0.0,
                };
                d.held = soft_cap_held(d.held, d.recent, c.cpus, others, idle);
            }

            // cpu.max: the least of the hard cap, a held soft cap, and — while boosted —
            // the entitlement, so the boost's weight buys latency but never CPU.
            let mut limit: Option<f64> = None;
            let mut lower = |x: f64| limit = Some(limit.map_or(x, |l: f64| l.min(x)));
            if let Some(c) = j.cap {
                if c.hard || d.held {
                    lower(c.cpus);
                }
            }
            if want {
                lower(ent_if_active[i].max(0.01));
            }
            let quota = limit.map(|l| Cap { cpus: l, hard: true }.quota_us(PERIOD_US));
            // Rewrite only on a real change (5%), not on every wobble of the entitlement.
            let differs = match (quota, d.quota) {
                (Some(a), Some(b)) => (a as f64 - b as f64).abs() > 0.05 * b as f64,
                (a, b) => a.is_some() != b.is_some(),
            };
            if differs && self.cg.set_max(&rel, quota.map(|q| Max { quota_us: q, period_us: PERIOD_US })).is_ok() {
                d.quota = quota;
            }
        }

        // Currency weights: funding, or the nice-emulated sum of base tickets.
        for (cdir, w) in cur_target {
            let applied = self.cur_weight.get(&cdir).copied().unwrap_or_else(|| self.funding_of(&cdir));
            if applied != w && self.cg.exists(&cdir) && self.cg.set_weight(&cdir, w).is_ok() {
                self.cur_weight.insert(cdir, w);
            }
        }
    }

    /// Takes back every dynamic adjustment: slices, weights, held soft caps.
    fn undo_dynamic(&mut self) {
        for j in &mut self.jobs {
            let rel = j.rel();
            for (t, orig) in j.dynamic.slices.drain() {
                let _ = allot_linux::sched::set_slice(t, orig);
            }
            if j.dynamic.weight.take().is_some() {
                let _ = self.cg.set_weight(&rel, j.tickets.get());
            }
            let hard = j.cap.filter(|c| c.hard).map(|c| c.quota_us(PERIOD_US));
            if j.dynamic.quota != hard {
                let _ = self.cg.set_max(&rel, hard.map(|q| Max { quota_us: q, period_us: PERIOD_US }));
                j.dynamic.quota = hard;
            }
            j.dynamic.held = false;
        }
        for cdir in self.cur_weight.keys().cloned().collect::<Vec<_>>() {
            let _ = self.cg.set_weight(&cdir, self.funding_of(&cdir));
        }
        self.cur_weight.clear();
    }

    /// Places users' processes that are not in allot yet into their user's default job.
    ///
    /// How: a scan of /proc every `scan_ms`. A pid seen before costs a hash lookup; a
    /// new pid costs one read of its stat and status; a pid that is not a candidate now
    /// (root's) costs one stat(2) of /proc/PID per scan, since a setuid may make it one.
    pub fn scan(&mut self) {
        if !self.cfg.users.auto_place {
            return;
        }
        let Ok(pids) = procfs::pids() else { return };
        let mut now_seen: HashMap<i32, Seen> = HashMap::with_capacity(pids.len());
        let me = std::process::id() as i32;
        for pid in pids {
            let prev = self.seen.get(&pid).copied();
            let verdict = match prev {
                Some(Seen::Done) => Seen::Done,
                Some(Seen::Watch) => {
                    // Cheap re-check: the owner of /proc/PID is the process's euid.
                    use std::os::unix::fs::MetadataExt;
                    match std::fs::metadata(format!("/proc/{pid}")) {
                        Ok(m) if self.candidate_uid(m.uid()) => self.consider(pid),
                        Ok(_) => Seen::Watch,
                        Err(_) => continue,
                    }
                }
                None if pid == me => Seen::Done,
                None => self.consider(pid),
            };
            now_seen.insert(pid, verdict);
        }
        self.seen = now_seen;
    }

    fn candidate_uid(&self, uid: u32) -> bool {
        if uid < self.cfg.users.min_uid || uid == 65534 {
            return false;
        }
        match &self.cfg.users.only {
            Some(list) => Self::in_list(list, uid),
            None => true,
        }
    }

    fn consider(&mut self, pid: i32) -> Seen {
        let Ok(st) = procfs::stat(pid) else { return Seen::Done };
        if st.is_kernel_thread() {
            return Seen::Done;
        }
        let Ok(ids) = procfs::ids(pid) else { return Seen::Done };
        if !self.candidate_uid(ids.euid) || ids.ruid != ids.euid {
            return Seen::Watch;
        }
        match self.cg.rel_of(pid) {
            Ok(Some(_)) => return Seen::Done,
            Ok(None) => {}
            Err(_) => return Seen::Done,
        }
        let Ok(fd) = PidFd::open(pid) else { return Seen::Done };
        let uid = ids.euid;
        let idx = match self.jobs.iter().position(|j| j.id == 0 && j.owner == uid) {
            Some(i) => i,
            None => {
                let cur = self.user_currency(uid);
                let Ok(job) = self.new_job(&cur, uid, Tickets::default(), None, false, String::new(), true) else { return Seen::Watch };
                self.jobs.push(job);
                self.jobs.len() - 1
            }
        };
        let rel = self.jobs[idx].rel();
        match self.place(&fd, &rel) {
            Ok(()) => Seen::Done,
            Err(_) => Seen::Watch,
        }
    }

    /// Clean stop. Dynamic adjustments would be undone here; an ephemeral tree (tests,
    /// benchmarks) is taken down, its remaining processes moved out first.
    pub fn shutdown(&mut self, ephemeral: bool) {
        self.undo_dynamic();
        if !ephemeral {
            return;
        }
        let mut rels: Vec<String> = self.jobs.iter().map(|j| j.rel()).collect();
        for bg in [false, true] {
            let base = if bg { BACKGROUND.to_string() } else { String::new() };
            for c in self.cg.children(&base).unwrap_or_default() {
                if !bg && c == BACKGROUND {
                    continue;
                }
                let crel = if bg { format!("{BACKGROUND}/{c}") } else { c.clone() };
                for j in self.cg.children(&crel).unwrap_or_default() {
                    rels.push(format!("{crel}/{j}"));
                }
                rels.push(crel);
            }
        }
        rels.sort();
        rels.dedup();
        rels.sort_by_key(|r| std::cmp::Reverse(r.matches('/').count()));
        rels.push(BACKGROUND.into());
        rels.push(String::new());
        for rel in rels {
            for _ in 0..20 {
                let procs = self.cg.procs(&rel).unwrap_or_default();
                if procs.is_empty() {
                    break;
                }
                for p in procs {
                    let _ = self.cg.release_pid(p);
                }
            }
            let _ = self.cg.remove(&rel);
        }
        self.jobs.clear();
    }
}
