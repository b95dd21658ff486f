//! A fake kernel for the daemon's unit tests: a cgroup tree and a process table in memory,
//! shared by a fake `CpuController` and a fake `Host`, so the core runs without root.

use super::host::{Facts, Host, OpenError, Proc, ProcInfo, ThreadSample};
use allot_linux::cgroup::systemd::{SliceMemory, SliceProp};
use allot_linux::cgroup::{CpuController, Delegation, Max, Version};
use allot_linux::process::machine::{CpuTimes, Creds};
use allot_linux::process::pidfd::PidFd;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

/// One cgroup directory.
#[derive(Debug, Clone, Default)]
pub struct Dir {
    pub weight: u32,
    pub max: Option<Max>,
    pub idle: bool,
    pub usage_ns: u64,
    /// Weight and cpu.max writes the kernel took here.
    pub weight_writes: u32,
    pub max_writes: u32,
}

/// One process.
#[derive(Debug, Clone)]
pub struct FakeProc {
    pub start: u64,
    pub uids: [u32; 4],
    pub kernel: bool,
    pub zombie: bool,
    pub nice: i32,
    pub cmdline: String,
    /// Its cgroup as /proc/PID/cgroup names it.
    pub path: String,
    pub threads: Vec<i32>,
    /// Its parent.
    pub ppid: i32,
    /// Its leader has exited while its other threads run (`threads[1..]`).
    pub leader_exited: bool,
}

/// The fake machine.
#[derive(Debug, Default)]
pub struct World {
    /// Directories by absolute cgroup path ("/fake", "/fake/user-1000", "/fake-background").
    pub dirs: BTreeMap<String, Dir>,
    pub procs: BTreeMap<i32, FakeProc>,
    pub slices: BTreeMap<i32, u64>,
    /// Per thread: (policy, nice) set with `set_policy` (absent: SCHED_OTHER at the
    /// process's nice).
    pub policies: BTreeMap<i32, (u32, i32)>,
    /// Per thread: run and wait ns (`thread`); absent: zero.
    pub runs: BTreeMap<i32, (u64, u64)>,
    /// How many times a thread's counters were read (/proc/TID/schedstat).
    pub thread_reads: usize,
    /// A process that exits at its first `set_policy` (before the write reaches it).
    pub exit_on_write: Option<i32>,
    /// A process that exits as it is moved (before the kernel takes it), and the
    /// process (uid, cgroup, command) that then takes its pid, if any.
    pub exit_on_move: Option<(i32, Option<Spawn>)>,
    pub next_start: u64,
    /// Reads of each directory's thread list (the kernel builds and sorts it per read).
    pub lists: BTreeMap<String, u32>,
    /// A systemd host: processes outside allot are in units (`units`, by cgroup path; a
    /// path not listed is a plain unit named by its leaf).
    pub systemd: bool,
    pub units: BTreeMap<String, allot_linux::ipc::systemd_bus::UnitOf>,
    /// Units looked up (each costs D-Bus calls on a real host).
    pub unit_lookups: u32,
    /// Jobs tied to login sessions (by leaf), as systemd would list their tethers.
    pub tethers: std::collections::BTreeSet<String>,
    /// Tethers the daemon knows of (what it listed last).
    pub tethers_known: std::collections::BTreeSet<String>,
    /// Signals sent: (pid, signal).
    pub signals: Vec<(i32, i32)>,
    /// Signals the daemon may not send (as without CAP_KILL): refused.
    pub no_kill_cap: bool,
    /// Directories whose weight and cpu.max writes are refused (EACCES), by absolute path.
    pub refuse_writes: std::collections::BTreeSet<String>,
    /// Threads whose slice writes are refused (EPERM) while they live.
    pub refuse_slices: std::collections::BTreeSet<i32>,
    /// Weight and cpu.max writes that reached the fake kernel.
    pub writes: u32,
    /// A systemd host's users' slices, as the memory step sees them (fake_slices.rs).
    pub slice_mem: super::fake_slices::SliceMem,
}

pub type Shared = Arc<Mutex<World>>;

/// Counts a weight or cpu.max write, refused where the world says so.
fn refused(w: &mut World, rel: &str) -> allot_linux::Result<()> {
    w.writes += 1;
    if w.refuse_writes.contains(&abs(rel)) {
        return Err(allot_linux::Error::Io { op: "write", path: abs(rel).into(), source: std::io::Error::from_raw_os_error(libc::EACCES) });
    }
    Ok(())
}

/// A process to spawn: (uid, cgroup, command).
pub type Spawn = (u32, String, String);

impl World {
    /// Adds a process in cgroup `path`; returns its pid.
    pub fn spawn(&mut self, pid: i32, uid: u32, path: &str, cmd: &str) -> i32 {
        self.next_start += 1;
        self.procs.insert(
            pid,
            FakeProc {
                start: self.next_start,
                uids: [uid; 4],
                kernel: false,
                zombie: false,
                nice: 0,
                cmdline: cmd.into(),
                path: path.into(),
                threads: vec![pid],
                ppid: 1,
                leader_exited: false,
            },
        );
        pid
    }

    /// Adds a child of `parent`, in its parent's cgroup, as `uid`; returns its pid.
    pub fn fork(&mut self, parent: i32, pid: i32, uid: u32) -> i32 {
        let (path, cmd) = self.procs.get(&parent).map(|p| (p.path.clone(), p.cmdline.clone())).unwrap_or_default();
        self.spawn(pid, uid, &path, &cmd);
        self.procs.get_mut(&pid).unwrap().ppid = parent;
        pid
    }
}

/// The fake cpu controller, rooted at `/fake` (background: `/fake-background`).
#[derive(Debug)]
pub struct FakeCg {
    pub w: Shared,
}

fn abs(rel: &str) -> String {
    if rel == super::registry::BACKGROUND {
        "/fake-background".into()
    } else if let Some(r) = rel.strip_prefix("background/") {
        format!("/fake-background/{r}")
    } else if rel.is_empty() {
        "/fake".into()
    } else {
        format!("/fake/{rel}")
    }
}

fn gone() -> allot_linux::Error {
    allot_linux::Error::Io { op: "write", path: "cgroup.procs".into(), source: std::io::Error::from_raw_os_error(libc::ESRCH) }
}

impl CpuController for FakeCg {
    fn version(&self) -> Version {
        Version::V2
    }
    fn root(&self) -> &Path {
        Path::new("/fake-mount/fake")
    }
    fn dir(&self, rel: &str) -> PathBuf {
        PathBuf::from(format!("/fake-mount{}", abs(rel)))
    }
    fn exists(&self, rel: &str) -> bool {
        self.w.lock().unwrap().dirs.contains_key(&abs(rel))
    }
    fn children(&self, rel: &str) -> allot_linux::Result<Vec<String>> {
        let a = abs(rel);
        let w = self.w.lock().unwrap();
        Ok(w.dirs.keys().filter_map(|k| k.strip_prefix(&format!("{a}/")).filter(|r| !r.contains('/')).map(String::from)).collect())
    }
    fn create(&self, rel: &str) -> allot_linux::Result<()> {
        let a = abs(rel);
        let mut w = self.w.lock().unwrap();
        let mut p = String::new();
        for part in a.split('/').filter(|x| !x.is_empty()) {
            p = format!("{p}/{part}");
            w.dirs.entry(p.clone()).or_insert(Dir { weight: 100, ..Default::default() });
        }
        Ok(())
    }
    fn remove(&self, rel: &str) -> allot_linux::Result<()> {
        let a = abs(rel);
        let mut w = self.w.lock().unwrap();
        let busy = w.procs.values().any(|p| p.path == a) || w.dirs.keys().any(|k| k.starts_with(&format!("{a}/")));
        if busy {
            return Err(allot_linux::Error::Io { op: "rmdir", path: a.into(), source: std::io::Error::from_raw_os_error(libc::EBUSY) });
        }
        w.dirs.remove(&a);
        Ok(())
    }
    fn set_weight(&self, rel: &str, units: u32) -> allot_linux::Result<()> {
        let mut w = self.w.lock().unwrap();
        refused(&mut w, rel)?;
        let d = w.dirs.get_mut(&abs(rel)).ok_or_else(gone)?;
        d.weight = units;
        d.weight_writes += 1;
        Ok(())
    }
    fn weight(&self, rel: &str) -> allot_linux::Result<u32> {
        Ok(self.w.lock().unwrap().dirs.get(&abs(rel)).ok_or_else(gone)?.weight)
    }
    fn set_max(&self, rel: &str, max: Option<Max>) -> allot_linux::Result<()> {
        let mut w = self.w.lock().unwrap();
        refused(&mut w, rel)?;
        let d = w.dirs.get_mut(&abs(rel)).ok_or_else(gone)?;
        d.max = max;
        d.max_writes += 1;
        Ok(())
    }
    fn max(&self, rel: &str) -> allot_linux::Result<Option<Max>> {
        Ok(self.w.lock().unwrap().dirs.get(&abs(rel)).ok_or_else(gone)?.max)
    }
    fn has_idle(&self) -> bool {
        true
    }
    fn set_idle(&self, rel: &str, idle: bool) -> allot_linux::Result<()> {
        self.w.lock().unwrap().dirs.get_mut(&abs(rel)).ok_or_else(gone)?.idle = idle;
        Ok(())
    }
    fn idle(&self, rel: &str) -> allot_linux::Result<bool> {
        Ok(self.w.lock().unwrap().dirs.get(&abs(rel)).ok_or_else(gone)?.idle)
    }
    fn procs(&self, rel: &str) -> allot_linux::Result<Vec<i32>> {
        let a = abs(rel);
        Ok(self.w.lock().unwrap().procs.iter().filter(|(_, p)| p.path == a).map(|(&k, _)| k).collect())
    }
    fn threads(&self, rel: &str) -> allot_linux::Result<Vec<i32>> {
        let a = abs(rel);
        *self.w.lock().unwrap().lists.entry(a.clone()).or_default() += 1;
        Ok(self.w.lock().unwrap().procs.values().filter(|p| p.path == a).flat_map(|p| p.threads.clone()).collect())
    }
    fn move_pid(&self, rel: &str, pid: i32) -> allot_linux::Result<()> {
        let a = abs(rel);
        let mut w = self.w.lock().unwrap();
        if !w.dirs.contains_key(&a) {
            return Err(gone());
        }
        if let Some((gone_pid, next)) = w.exit_on_move.take_if(|(p, _)| *p == pid) {
            w.procs.remove(&gone_pid);
            if let Some((uid, path, cmd)) = next {
                w.spawn(gone_pid, uid, &path, &cmd);
            }
        }
        match w.procs.get_mut(&pid) {
            Some(p) if !p.zombie => {
                p.path = a;
                Ok(())
            }
            _ => Err(gone()),
        }
    }
    fn release_pid(&self, pid: i32) -> allot_linux::Result<()> {
        self.move_to_path("/", pid)
    }
    fn usage_ns(&self, rel: &str) -> allot_linux::Result<u64> {
        let a = abs(rel);
        let w = self.w.lock().unwrap();
        if !w.dirs.contains_key(&a) {
            return Err(allot_linux::Error::Io { op: "read", path: a.into(), source: std::io::Error::from_raw_os_error(libc::ENOENT) });
        }
        Ok(w.dirs.iter().filter(|(k, _)| **k == a || k.starts_with(&format!("{a}/"))).map(|(_, d)| d.usage_ns).sum())
    }
    fn rel_of(&self, pid: i32) -> allot_linux::Result<Option<String>> {
        let path = self.path_of(pid)?;
        Ok(if path == "/fake-background" {
            Some(super::registry::BACKGROUND.into())
        } else if let Some(r) = path.strip_prefix("/fake-background/") {
            Some(format!("background/{r}"))
        } else if path == "/fake" {
            Some(String::new())
        } else {
            path.strip_prefix("/fake/").map(String::from)
        })
    }
    fn path_of(&self, pid: i32) -> allot_linux::Result<String> {
        self.w.lock().unwrap().procs.get(&pid).map(|p| p.path.clone()).ok_or_else(gone)
    }
    fn systemd(&self) -> bool {
        self.w.lock().unwrap().systemd
    }
    /// Always: sessions and tethers answer from the world's paths whether or not it is a
    /// systemd host (the sessions tests meet session scopes without one); unit_of only
    /// on one.
    fn delegation(&self) -> Option<&dyn Delegation> {
        Some(self)
    }
    fn slice_memory(&self) -> Option<&dyn SliceMemory> {
        self.w.lock().unwrap().systemd.then_some(self as _)
    }
    fn kill_all(&self, rel: &str) -> allot_linux::Result<()> {
        let a = abs(rel);
        let mut w = self.w.lock().unwrap();
        let pids: Vec<i32> = w.procs.iter().filter(|(_, p)| p.path == a && !p.zombie).map(|(&k, _)| k).collect();
        for pid in pids {
            w.procs.get_mut(&pid).unwrap().zombie = true;
            w.signals.push((pid, libc::SIGKILL));
        }
        Ok(())
    }
    fn mount(&self) -> &Path {
        Path::new("/fake-mount")
    }
    fn move_to_path(&self, path: &str, pid: i32) -> allot_linux::Result<()> {
        let mut w = self.w.lock().unwrap();
        let p = w.procs.get_mut(&pid).ok_or_else(gone)?;
        p.path = path.into();
        Ok(())
    }
}

/// logind's sessions, systemd's units (on a systemd world) and tethers.
impl Delegation for FakeCg {
    /// A process in a directory named `session-N.scope` is in login session N of its user
    /// (as logind would say on a systemd host).
    fn session_of(&self, pid: i32) -> allot_linux::Result<Option<allot_linux::ipc::systemd_bus::Session>> {
        let w = self.w.lock().unwrap();
        let p = w.procs.get(&pid).ok_or_else(gone)?;
        let leaf = p.path.rsplit('/').next().unwrap_or_default();
        // The session's user: its slice's (`user-UID.slice`), else the process's own.
        let owner = p.path.split('/').find_map(|c| c.strip_prefix("user-")?.strip_suffix(".slice")?.parse().ok()).unwrap_or(p.uids[0]);
        Ok(leaf.strip_prefix("session-").and_then(|s| s.strip_suffix(".scope")).map(|id| allot_linux::ipc::systemd_bus::Session {
            id: id.into(),
            uid: owner,
            scope: leaf.into(),
        }))
    }
    fn tether(&self, job: &str, _session_scope: &str) -> allot_linux::Result<()> {
        let mut w = self.w.lock().unwrap();
        w.tethers.insert(job.into());
        w.tethers_known.insert(job.into());
        Ok(())
    }
    fn cut_tethers(&self) -> allot_linux::Result<Vec<String>> {
        let mut w = self.w.lock().unwrap();
        let cut = w.tethers_known.difference(&w.tethers).cloned().collect();
        w.tethers_known = w.tethers.clone();
        Ok(cut)
    }
    fn untether(&self, job: &str) -> allot_linux::Result<()> {
        let mut w = self.w.lock().unwrap();
        w.tethers.remove(job);
        w.tethers_known.remove(job);
        Ok(())
    }
    fn tethered(&self) -> Vec<String> {
        self.w.lock().unwrap().tethers_known.iter().cloned().collect()
    }
    fn unit_of(&self, pid: i32) -> allot_linux::Result<Option<allot_linux::ipc::systemd_bus::UnitOf>> {
        let mut w = self.w.lock().unwrap();
        if !w.systemd {
            return Ok(None);
        }
        w.unit_lookups += 1;
        let path = w.procs.get(&pid).filter(|p| !p.zombie).ok_or_else(gone)?.path.clone();
        let leaf = path.rsplit('/').next().unwrap_or_default().to_string();
        Ok(Some(w.units.get(&path).cloned().unwrap_or(allot_linux::ipc::systemd_bus::UnitOf { name: leaf, cgroup: path, ..Default::default() })))
    }
    fn set_scope_weight(&self, _rel: &str, _units: u32) -> allot_linux::Result<()> {
        Ok(())
    }
    fn user_slices(&self) -> allot_linux::Result<Vec<u32>> {
        Ok(self.w.lock().unwrap().slice_mem.logged_in.clone())
    }
    /// systemd's defaults again (weight 100, no quota), on a slice that exists.
    fn take_back_slice(&self, rel: &str) -> allot_linux::Result<()> {
        if let Some(d) = self.w.lock().unwrap().dirs.get_mut(&abs(rel)) {
            d.weight = 100;
            d.max = None;
        }
        Ok(())
    }
}

/// The fake process table.
#[derive(Debug)]
pub struct FakeHost {
    pub w: Shared,
}

/// The daemon's own pid in the fake.
pub const ME: i32 = 4242;

impl Host for FakeHost {
    fn open(&self, pid: i32) -> Result<Proc, OpenError> {
        let w = self.w.lock().unwrap();
        let p = w.procs.get(&pid).ok_or(OpenError::Gone)?;
        Ok(Proc { pid, start: p.start, fd: None })
    }
    fn hold(&self, _fd: PidFd) -> Result<Proc, OpenError> {
        Err(OpenError::Other("no pidfds in the fake".into()))
    }
    fn alive(&self, p: &Proc) -> bool {
        self.w.lock().unwrap().procs.get(&p.pid).is_some_and(|x| x.start == p.start && !x.zombie)
    }
    fn info(&self, p: &Proc) -> Option<ProcInfo> {
        let w = self.w.lock().unwrap();
        let x = w.procs.get(&p.pid).filter(|x| x.start == p.start)?;
        Some(ProcInfo {
            creds: Creds { uid: x.uids, gid: x.uids },
            kernel_thread: x.kernel,
            zombie: x.zombie || x.leader_exited && x.threads.len() < 2,
            nice: x.nice,
            ppid: x.ppid,
            comm: x.cmdline.split_whitespace().next().unwrap_or("").chars().take(15).collect(),
            tid: if x.leader_exited { x.threads.get(1).copied().unwrap_or(p.pid) } else { p.pid },
        })
    }
    fn cmdline(&self, pid: i32) -> Option<String> {
        self.w.lock().unwrap().procs.get(&pid).map(|p| p.cmdline.clone())
    }
    fn children(&self, pid: i32) -> Vec<i32> {
        self.w.lock().unwrap().procs.iter().filter(|(_, p)| p.ppid == pid).map(|(&k, _)| k).collect()
    }
    fn facts(&self, pid: i32, _tid: i32) -> Facts {
        let w = self.w.lock().unwrap();
        let Some(p) = w.procs.get(&pid) else { return Facts::default() };
        Facts { groups: vec![p.uids[0]], exe: format!("/usr/bin/{}", p.cmdline.split_whitespace().next().unwrap_or("")), cmdline: p.cmdline.clone() }
    }
    fn pids(&self) -> Vec<i32> {
        self.w.lock().unwrap().procs.keys().copied().collect()
    }
    fn quick(&self, pid: i32) -> Option<(u32, u64)> {
        self.w.lock().unwrap().procs.get(&pid).map(|p| (p.uids[1], p.start))
    }
    fn start_of(&self, pid: i32) -> Option<u64> {
        self.w.lock().unwrap().procs.get(&pid).map(|p| p.start)
    }
    fn thread(&self, tid: i32) -> Option<ThreadSample> {
        let mut w = self.w.lock().unwrap();
        w.thread_reads += 1;
        let (run_ns, wait_ns) = w.runs.get(&tid).copied().unwrap_or_default();
        w.procs.values().any(|p| p.threads.contains(&tid)).then_some(ThreadSample { run_ns, wait_ns })
    }
    fn nice(&self, pid: i32) -> Option<i32> {
        self.w.lock().unwrap().procs.get(&pid).map(|p| p.nice)
    }
    fn affinity(&self, _tid: i32) -> Vec<usize> {
        vec![]
    }
    fn slice(&self, tid: i32) -> Option<u64> {
        Some(*self.w.lock().unwrap().slices.get(&tid).unwrap_or(&3_000_000))
    }
    fn set_slice(&self, tid: i32, ns: u64) -> Result<(), String> {
        let mut w = self.w.lock().unwrap();
        if w.refuse_slices.contains(&tid) {
            return Err(format!("sched_setattr({tid}): Operation not permitted"));
        }
        w.slices.insert(tid, ns);
        Ok(())
    }
    fn cpu_times(&self) -> Option<CpuTimes> {
        None
    }
    fn tids(&self, pid: i32) -> Vec<i32> {
        self.w.lock().unwrap().procs.get(&pid).map(|p| p.threads.clone()).unwrap_or_default()
    }
    fn task_start(&self, pid: i32, tid: i32) -> Option<u64> {
        self.w.lock().unwrap().procs.get(&pid).filter(|p| p.threads.contains(&tid) && !p.zombie).map(|p| p.start)
    }
    fn policy(&self, tid: i32) -> Option<(u32, i32)> {
        let w = self.w.lock().unwrap();
        let nice = w.procs.values().find(|p| p.threads.contains(&tid))?.nice;
        Some(w.policies.get(&tid).copied().unwrap_or((0, nice)))
    }
    fn set_policy(&self, tid: i32, policy: u32, nice: i32) -> Result<(), String> {
        let mut w = self.w.lock().unwrap();
        if let Some(pid) = w.exit_on_write.take() {
            w.procs.remove(&pid);
        }
        if !w.procs.values().any(|p| p.threads.contains(&tid)) {
            return Err(format!("sched_setattr({tid}): No such process"));
        }
        w.policies.insert(tid, (policy, nice));
        Ok(())
    }
    fn me(&self) -> i32 {
        ME
    }
    /// Recorded; SIGKILL ends the process (it becomes a zombie).
    fn signal(&self, p: &Proc, sig: i32) -> bool {
        let mut w = self.w.lock().unwrap();
        if w.no_kill_cap {
            return false;
        }
        w.signals.push((p.pid, sig));
        if sig == libc::SIGKILL {
            if let Some(x) = w.procs.get_mut(&p.pid) {
                x.zombie = true;
            }
        }
        true
    }
}

/// A systemd host's users' slices, answered from `slice_mem` (fake_slices.rs).
impl SliceMemory for FakeCg {
    fn slice_usage(&self, rel: &str) -> allot_linux::Result<u64> {
        let w = self.w.lock().unwrap();
        if w.slice_mem.stopped.contains(rel) {
            return Err(allot_linux::Error::Io {
                op: "read",
                path: format!("/fake/user.slice/{rel}/memory.current").into(),
                source: std::io::Error::from_raw_os_error(libc::ENOENT),
            });
        }
        Ok(w.slice_mem.usage.get(rel).copied().unwrap_or(0))
    }
    fn users_max(&self) -> allot_linux::Result<Option<u64>> {
        Ok(self.w.lock().unwrap().slice_mem.users_max)
    }
    fn above_users(&self) -> allot_linux::cgroup::memory::Bound {
        self.w.lock().unwrap().slice_mem.above
    }
    fn mem_available(&self) -> allot_linux::Result<u64> {
        let a = self.w.lock().unwrap().slice_mem.mem_available;
        a.ok_or_else(|| allot_linux::Error::Io {
            op: "read",
            path: "/fake/proc/meminfo".into(),
            source: std::io::Error::from_raw_os_error(libc::ENOENT),
        })
    }
    fn set_slice_memory(&self, rel: &str, p: SliceProp, bytes: Option<u64>) -> allot_linux::Result<()> {
        self.w.lock().unwrap().slice_mem.send(rel, p, bytes);
        Ok(())
    }
    fn set_users_low(&self, bytes: Option<u64>) -> allot_linux::Result<()> {
        self.w.lock().unwrap().slice_mem.send("user.slice", SliceProp::Low, bytes);
        Ok(())
    }
    fn slice_procs(&self, rel: &str) -> allot_linux::Result<Vec<i32>> {
        Ok(self.w.lock().unwrap().slice_mem.procs.get(rel).cloned().unwrap_or_default())
    }
    fn slice_oom_kills(&self, _rel: &str) -> allot_linux::Result<u64> {
        Ok(0)
    }
    fn slice_pressure(&self, rel: &str) -> allot_linux::cgroup::io::CgroupPressure {
        self.w.lock().unwrap().slice_mem.pressure.get(rel).copied().unwrap_or_default()
    }
    fn recursive_protection(&self) -> bool {
        self.w.lock().unwrap().slice_mem.recursive
    }
    fn set_job_memory(&self, rel: &str, high: Option<u64>, max: Option<u64>) -> allot_linux::Result<()> {
        self.w.lock().unwrap().slice_mem.job(rel, high, max)
    }
    fn set_job_oom_group(&self, rel: &str, whole: bool) -> allot_linux::Result<()> {
        self.w.lock().unwrap().slice_mem.oom_group(rel, whole)
    }
    fn job_usage(&self, rel: &str) -> allot_linux::Result<u64> {
        Ok(self.w.lock().unwrap().slice_mem.usage.get(rel).copied().unwrap_or(0))
    }
    fn reset_memory(&self, rel: Option<&str>) -> allot_linux::Result<()> {
        let unit = rel.unwrap_or("user.slice").to_string();
        let mut w = self.w.lock().unwrap();
        for p in SliceProp::ALL {
            w.slice_mem.send(&unit, p, None);
        }
        Ok(())
    }
}
