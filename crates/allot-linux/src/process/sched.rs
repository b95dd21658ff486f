//! sched_setattr(2) / sched_getattr(2): policy, nice, priority and the EEVDF custom
//! slice (`sched_runtime` for SCHED_OTHER/BATCH, honoured since Linux 6.12).

use crate::{Error, Result};

/// SCHED_OTHER.
pub const SCHED_OTHER: u32 = 0;
/// SCHED_FIFO.
pub const SCHED_FIFO: u32 = 1;
/// SCHED_RR.
pub const SCHED_RR: u32 = 2;
/// SCHED_BATCH.
pub const SCHED_BATCH: u32 = 3;
/// SCHED_IDLE.
pub const SCHED_IDLE: u32 = 5;

/// struct sched_attr (include/uapi/linux/sched/types.h), first version plus util clamps.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SchedAttr {
    /// sizeof(struct sched_attr).
    pub size: u32,
    /// SCHED_*.
    pub sched_policy: u32,
    /// SCHED_FLAG_*.
    pub sched_flags: u64,
    /// Nice, for OTHER/BATCH.
    pub sched_nice: i32,
    /// RT priority, for FIFO/RR.
    pub sched_priority: u32,
    /// Deadline runtime; for fair tasks the requested slice in ns (6.12+).
    pub sched_runtime: u64,
    /// Deadline.
    pub sched_deadline: u64,
    /// Period.
    pub sched_period: u64,
    /// Utilization clamp min.
    pub sched_util_min: u32,
    /// Utilization clamp max.
    pub sched_util_max: u32,
}

/// The nice of a process (getpriority(2) on its pid: the thread-group leader's, as
/// /proc/PID/stat gives it, in one system call instead of an open, two reads and a close).
pub fn nice(pid: i32) -> Result<i32> {
    // SAFETY: errno is this thread's; getpriority has no memory arguments. It returns -1
    // for nice -1 too, so errno tells an error apart.
    unsafe {
        *libc::__errno_location() = 0;
        let n = libc::getpriority(libc::PRIO_PROCESS, pid as libc::id_t);
        if n == -1 && *libc::__errno_location() != 0 {
            return Err(Error::Sys { call: format!("getpriority({pid})"), source: std::io::Error::last_os_error() });
        }
        Ok(n)
    }
}

/// Sets the nice of a process (setpriority(2); `pid` 0: the caller). Lowering it needs
/// CAP_SYS_NICE.
pub fn set_nice(pid: i32, nice: i32) -> Result<()> {
    // SAFETY: setpriority has no memory arguments.
    if unsafe { libc::setpriority(libc::PRIO_PROCESS, pid as libc::id_t, nice) } != 0 {
        return Err(Error::Sys { call: format!("setpriority({pid}, {nice})"), source: std::io::Error::last_os_error() });
    }
    Ok(())
}

/// Reads a task's attributes.
pub fn get(tid: i32) -> Result<SchedAttr> {
    let mut a = SchedAttr { size: std::mem::size_of::<SchedAttr>() as u32, ..Default::default() };
    // SAFETY: a is a valid, correctly sized buffer.
    let r = unsafe { libc::syscall(libc::SYS_sched_getattr, tid, &mut a as *mut SchedAttr, a.size, 0) };
    if r < 0 {
        return Err(Error::Sys { call: format!("sched_getattr({tid})"), source: std::io::Error::last_os_error() });
    }
    Ok(a)
}

/// sched_attr flag: the task's children start with the default policy, nice and slice.
pub const SCHED_FLAG_RESET_ON_FORK: u64 = 0x01;

/// Sets a task's attributes.
pub fn set(tid: i32, attr: &SchedAttr) -> Result<()> {
    let mut a = *attr;
    a.size = std::mem::size_of::<SchedAttr>() as u32;
    // SAFETY: a is a valid, correctly sized struct.
    let r = unsafe { libc::syscall(libc::SYS_sched_setattr, tid, &a as *const SchedAttr, 0) };
    if r < 0 {
        return Err(Error::Sys {
            call: format!("sched_setattr({tid}, policy {} nice {} runtime {})", a.sched_policy, a.sched_nice, a.sched_runtime),
            source: std::io::Error::last_os_error(),
        });
    }
    Ok(())
}

/// Sets the EEVDF custom slice of a fair task, keeping its policy and nice. A real-time or
/// deadline task has no slice to set and is left as it is (nothing is written, so a
/// sandbox that refuses real-time policies, systemd's RestrictRealtime=, is never met).
pub fn set_slice(tid: i32, slice_ns: u64) -> Result<()> {
    let mut a = get(tid)?;
    if !matches!(a.sched_policy, SCHED_OTHER | SCHED_BATCH | SCHED_IDLE) {
        return Ok(());
    }
    a.sched_runtime = slice_ns;
    // Keep the task's reset-on-fork (sched_getattr reports it); no other flag is wanted.
    a.sched_flags &= SCHED_FLAG_RESET_ON_FORK;
    set(tid, &a)
}

/// Sets a fair task's policy (SCHED_OTHER, SCHED_BATCH or SCHED_IDLE) and nice, keeping its
/// slice and reset-on-fork. A real-time or deadline task is left as it is (Ok(false)): a
/// policy for fair tasks never demotes one an administrator made real-time.
pub fn set_fair_policy(tid: i32, policy: u32, nice: i32) -> Result<bool> {
    let mut a = get(tid)?;
    if !matches!(a.sched_policy, SCHED_OTHER | SCHED_BATCH | SCHED_IDLE) {
        return Ok(false);
    }
    a.sched_policy = policy;
    a.sched_nice = nice.clamp(-20, 19);
    a.sched_flags &= SCHED_FLAG_RESET_ON_FORK;
    set(tid, &a)?;
    Ok(true)
}

/// True if this kernel honours per-task custom slices: set one on this thread (to the
/// same value it has), read it back. Kernels before 6.12 ignore sched_runtime for fair
/// tasks and read back 0 or the default.
pub fn custom_slices_supported() -> bool {
    // SAFETY: gettid has no preconditions.
    let tid = unsafe { libc::syscall(libc::SYS_gettid) } as i32;
    let Ok(before) = get(tid) else { return false };
    if before.sched_policy != SCHED_OTHER && before.sched_policy != SCHED_BATCH {
        return false;
    }
    let want = 1_500_000;
    let ok = set_slice(tid, want).is_ok() && get(tid).map(|a| a.sched_runtime == want).unwrap_or(false);
    let _ = set(tid, &before);
    ok
}

/// Restricts a task to the given CPUs (sched_setaffinity(2)).
pub fn set_affinity(tid: i32, cpus: &[usize]) -> Result<()> {
    // SAFETY: cpu_set_t is plain data; CPU_SET only writes inside it.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    for &c in cpus {
        unsafe { libc::CPU_SET(c, &mut set) };
    }
    // SAFETY: set is a valid cpu_set_t of the size passed.
    let r = unsafe { libc::sched_setaffinity(tid, std::mem::size_of::<libc::cpu_set_t>(), &set) };
    if r < 0 {
        return Err(Error::Sys { call: format!("sched_setaffinity({tid}, {cpus:?})"), source: std::io::Error::last_os_error() });
    }
    Ok(())
}

/// The name of a scheduling policy number, as chrt(1) prints it.
pub fn policy_name(policy: u32) -> &'static str {
    match policy {
        SCHED_OTHER => "SCHED_OTHER",
        SCHED_FIFO => "SCHED_FIFO",
        SCHED_RR => "SCHED_RR",
        SCHED_BATCH => "SCHED_BATCH",
        SCHED_IDLE => "SCHED_IDLE",
        6 => "SCHED_DEADLINE",
        7 => "SCHED_EXT",
        _ => "SCHED_?",
    }
}

/// The CPUs a task may run on (sched_getaffinity).
pub fn get_affinity(tid: i32) -> Result<Vec<usize>> {
    // SAFETY: a zeroed cpu_set_t passed by pointer with its size.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        if libc::sched_getaffinity(tid, std::mem::size_of::<libc::cpu_set_t>(), &mut set) != 0 {
            return Err(Error::Sys { call: format!("sched_getaffinity({tid})"), source: std::io::Error::last_os_error() });
        }
        Ok((0..libc::CPU_SETSIZE as usize).filter(|&c| libc::CPU_ISSET(c, &set)).collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_own_attributes() {
        let a = get(0).unwrap();
        assert!(a.sched_policy == SCHED_OTHER || a.sched_policy == SCHED_BATCH || a.sched_policy == SCHED_IDLE);
        assert_eq!(a.size as usize, std::mem::size_of::<SchedAttr>());
    }

    #[test]
    fn a_zero_slice_gives_back_the_kernel_default() {
        assert!(custom_slices_supported(), "this kernel ignores sched_runtime for fair tasks (before 6.12); CI's kernels honour it");
        // SAFETY: gettid has no preconditions.
        let tid = unsafe { libc::syscall(libc::SYS_gettid) } as i32;
        let before = get(tid).unwrap().sched_runtime;
        set_slice(tid, 300_000).unwrap();
        assert_eq!(get(tid).unwrap().sched_runtime, 300_000);
        set_slice(tid, 0).unwrap();
        assert_eq!(get(tid).unwrap().sched_runtime, before, "0: the kernel's default slice again");
    }

    #[test]
    fn nice_agrees_with_proc_and_names_a_missing_pid() {
        // A child 7 nicer than this test (lowering it would need root; a test run under
        // `nice -n 19` stays at 19): getpriority and /proc/PID/stat agree.
        let want = (nice(std::process::id() as i32).unwrap() + 7).min(19);
        let mut c = std::process::Command::new("nice").args(["-n", "7", "sleep", "5"]).spawn().unwrap();
        let pid = c.id() as i32;
        let t0 = std::time::Instant::now();
        while crate::process::procfs::stat(pid).map(|s| s.comm != "sleep").unwrap_or(true) && t0.elapsed().as_secs() < 5 {
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        assert_eq!(nice(pid).unwrap(), want);
        assert_eq!(nice(pid).unwrap(), crate::process::procfs::stat(pid).unwrap().nice);
        let _ = c.kill();
        let _ = c.wait();
        let e = nice(0x3fff_ffff).unwrap_err().to_string();
        assert!(e.contains("getpriority(1073741823)"), "{e}");
    }
}
