//! Stalls on memory and I/O: whether a process waits on memory or on its disks rather
//! than on the CPU, and whose use caused it. `allot why` samples what the kernel gives per
//! task and per cgroup (the task's state and wait channel, its major faults and I/O
//! counters, its memory cgroup's refaults and pressure) and passes the numbers here; the
//! verdict and its reason are decided here, so each threshold is tested on numbers alone.
//!
//! A memory stall is a task waiting for memory: in reclaim, faulting pages back in, or
//! reading its file cache again after the kernel reclaimed it to make room for someone's
//! growth (a refault: the page was evicted from the working set and is read back). An I/O
//! stall is a task blocked on its disk with no sign of memory pressure behind it.

/// What a stall waits on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StallKind {
    /// Reclaim, major faults, or its cache read back after it was reclaimed.
    Memory,
    /// Its disk (or another device), with no sign of memory pressure behind it.
    Io,
}

/// The numbers a stall is judged on, over one sampling window. Shares are 0..1; `None`
/// where the kernel does not give the number (or not to the one asking).
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct StallFacts {
    /// Share of samples in which some thread of the process was in uninterruptible sleep
    /// (state D: waiting in the kernel, on a page, a disk or reclaim).
    pub blocked_share: f64,
    /// Share of samples in which some thread waited in a memory function (reclaim,
    /// compaction, the memory cgroup's charge or throttle, swap), by its wait channel.
    pub reclaim_share: f64,
    /// Major page faults per second (pages read back from disk or swap).
    pub major_faults_per_s: f64,
    /// Bytes per second it read through read(2) and the like, cached or not.
    pub read_per_s: Option<f64>,
    /// Bytes per second it made the storage read (what the page cache did not hold).
    pub disk_read_per_s: Option<f64>,
    /// Bytes per second it made the storage write.
    pub disk_write_per_s: Option<f64>,
    /// Pages per second refaulted in its memory cgroup: cache read back after reclaim.
    pub refaults_per_s: Option<f64>,
    /// Share of the window it waited for block I/O, by delay accounting (where on).
    pub io_delay_share: Option<f64>,
    /// Share of the window in which some task of its cgroup stalled on memory (PSI
    /// memory "some" of its cgroup; None: the kernel keeps none per cgroup, as v1).
    pub cgroup_memory_pressure: Option<f64>,
    /// Share of the window in which some task of its cgroup stalled on I/O (PSI io
    /// "some" of its cgroup; None as above).
    pub cgroup_io_pressure: Option<f64>,
    /// Its memory domain's use against its limit (the nearest memory cgroup with a
    /// limit, or the machine's memory), 0..1.
    pub domain_full: Option<f64>,
}

/// Blocked (state D, or delayed on block I/O) at least this share of the window: stalled.
/// A task reading cached files or doing brief disk writes is almost never seen in D; one
/// whose reads go to the disk one page at a time is, a fifth of its time or more.
pub const STALLED: f64 = 0.1;
/// At least this many major faults a second: it is faulting its memory back in (each
/// one a disk read of at least 4 KiB that the task waits for).
pub const MAJOR_FAULTS: f64 = 20.0;
/// At least this many pages a second refaulted in its memory cgroup (1 MiB/s of 4 KiB
/// pages): its working set is being reclaimed and read back.
pub const REFAULTS: f64 = 256.0;
/// At least this share of what it read missed the page cache (with its cgroup
/// refaulting): it reads back what was reclaimed.
pub const REREAD: f64 = 0.25;
/// Its cgroup stalled on memory (or I/O) at least this share of the window (PSI some).
pub const MEMORY_PRESSURE: f64 = 0.1;
/// Waiting in memory functions at least this share of samples.
pub const RECLAIMING: f64 = 0.05;
/// Its memory domain at least this full: reclaim there takes from whatever it holds.
pub const DOMAIN_FULL: f64 = 0.95;
/// Another claimant's I/O at least this rate (bytes/s) can be named as the cause.
pub const IO_RIVAL: f64 = 1024.0 * 1024.0;

/// Kernel functions (or parts of their names) a task sleeps in while it waits for memory:
/// direct reclaim and its throttle, compaction, the memory cgroup's charge and its
/// `memory.high` throttle, swap, the page allocator and the OOM killer. A page being read
/// (folio_wait_bit_common) is not among them: that is a wait for I/O, whatever caused it.
pub const MEMORY_WAITS: [&str; 10] =
    ["reclaim", "shrink_", "compact", "mem_cgroup", "memcg", "try_charge", "swap", "alloc_pages", "oom", "congestion_wait"];

/// Whether a wait channel (/proc/PID/wchan: the kernel function a task sleeps in) is a
/// wait for memory.
pub fn memory_wait(wchan: &str) -> bool {
    MEMORY_WAITS.iter().any(|m| wchan.contains(m))
}

/// Whether the process stalled on memory or I/O, with the evidence in words; None when it
/// did not stall (or waited in the kernel on something that is neither).
pub fn judge(f: &StallFacts) -> Option<(StallKind, String)> {
    let waited = f.blocked_share.max(f.io_delay_share.unwrap_or(0.0));
    let missed = match (f.read_per_s, f.disk_read_per_s) {
        (Some(r), Some(d)) if r > 0.0 => (d / r).min(1.0),
        _ => 0.0,
    };
    // Reading its cache back: most of what it reads comes from disk while its cgroup
    // refaults. On a busy machine such a reader waits for the CPU between its reads as
    // much as for the disk, so it may be seen in D less than STALLED of the time.
    let rereads = missed >= REREAD && f.refaults_per_s.is_some_and(|r| r >= REFAULTS);
    if waited < STALLED && f.major_faults_per_s < MAJOR_FAULTS && !rereads {
        return None;
    }
    let mut memory = vec![];
    if f.reclaim_share >= RECLAIMING {
        memory.push(format!("it waited in memory reclaim in {:.0}% of samples", f.reclaim_share * 100.0));
    }
    if f.major_faults_per_s >= MAJOR_FAULTS {
        memory.push(format!("it took {:.0} major page faults a second", f.major_faults_per_s));
    }
    if let Some(r) = f.refaults_per_s.filter(|r| *r >= REFAULTS) {
        memory.push(format!("its memory cgroup read back {r:.0} reclaimed pages a second (refaults): its cache is taken to make room"));
    }
    if let Some(p) = f.cgroup_memory_pressure.filter(|p| *p >= MEMORY_PRESSURE) {
        memory.push(format!("its cgroup stalled on memory {:.0}% of the window (PSI)", p * 100.0));
    }
    if let Some(d) = f.domain_full.filter(|d| *d >= DOMAIN_FULL) {
        if !memory.is_empty() {
            memory.push(format!("its memory is {:.0}% full", d * 100.0));
        }
    }
    let mut io = vec![format!("it was blocked in the kernel (state D) in {:.0}% of samples", f.blocked_share * 100.0)];
    if let Some(d) = f.io_delay_share.filter(|d| *d > 0.0) {
        io.push(format!("it waited for block I/O {:.0}% of the window (delay accounting)", d * 100.0));
    }
    if let Some(disk) = f.disk_read_per_s.filter(|d| *d > 0.0) {
        let missed =
            f.read_per_s.filter(|r| *r > 0.0).map(|r| format!(" ({:.0}% of what it read missed the page cache)", (disk / r).min(1.0) * 100.0));
        io.push(format!("it read {} a second from disk{}", bytes(disk), missed.unwrap_or_default()));
    }
    if let Some(w) = f.disk_write_per_s.filter(|w| *w > 0.0) {
        io.push(format!("it wrote {} a second to disk", bytes(w)));
    }
    let io_pressure = f.cgroup_io_pressure.filter(|p| *p >= MEMORY_PRESSURE);
    if let Some(p) = io_pressure {
        io.push(format!("its cgroup stalled on I/O {:.0}% of the window (PSI)", p * 100.0));
    }
    if !memory.is_empty() {
        io.extend(memory);
        return Some((StallKind::Memory, io.join("; ")));
    }
    let moved = f.disk_read_per_s.unwrap_or(0.0) + f.disk_write_per_s.unwrap_or(0.0) > 0.0
        || f.io_delay_share.is_some_and(|d| d >= STALLED)
        || io_pressure.is_some();
    (waited >= STALLED && moved).then(|| (StallKind::Io, io.join("; ")))
}

/// A claimant of memory or I/O: a currency (or a user, or a cgroup, where allot has no
/// job there) with what it holds (bytes) or moves (bytes a second) and its share.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Holder {
    /// Its name as allot shows it: "currency alice", "user bob (no allot job)".
    pub name: String,
    /// Bytes it holds (memory) or moves a second (I/O).
    pub bytes: f64,
    /// Its funded share of memory, bytes, where allot shares memory.
    pub share: Option<f64>,
    /// The stalled process's own.
    pub own: bool,
    /// Its largest processes, largest first.
    pub pids: Vec<i32>,
}

/// Whose memory use caused a memory stall: where shares are known, the claimant furthest
/// above its share (none: everyone within their share, so the stall is the memory being
/// too small for what is protected); otherwise the largest holder. May be its own.
pub fn memory_culprit(holders: &[Holder]) -> Option<&Holder> {
    if holders.iter().any(|h| h.share.is_some()) {
        return holders
            .iter()
            .filter_map(|h| h.share.map(|s| (h, h.bytes - s)))
            .filter(|(_, over)| *over > 0.0)
            .max_by(|a, b| a.1.total_cmp(&b.1))
            .map(|(h, _)| h);
    }
    holders.iter().filter(|h| h.bytes > 0.0).max_by(|a, b| a.bytes.total_cmp(&b.bytes))
}

/// Whose I/O caused an I/O stall: the other claimant moving the most, at least
/// [`IO_RIVAL`]; else its own, if it moves anything (it is its own disk's bottleneck).
pub fn io_culprit(holders: &[Holder]) -> Option<&Holder> {
    let busiest = |own: bool| holders.iter().filter(|h| h.own == own).max_by(|a, b| a.bytes.total_cmp(&b.bytes));
    busiest(false).filter(|h| h.bytes >= IO_RIVAL).or_else(|| busiest(true).filter(|h| h.bytes > 0.0))
}

/// The cause in words, for the reason.
pub fn cause_words(kind: StallKind, h: &Holder) -> String {
    let whose = if h.own { format!("its own {}", h.name) } else { h.name.clone() };
    match (kind, h.share) {
        (StallKind::Memory, Some(s)) => {
            format!("{whose} uses {} against its share of {}: its use is what the kernel reclaims for", bytes(h.bytes), bytes(s))
        }
        (StallKind::Memory, None) => format!("{whose} holds the most memory there ({})", bytes(h.bytes)),
        (StallKind::Io, _) => format!("{whose} moves the most data ({} a second)", bytes(h.bytes)),
    }
}

/// Bytes for people, as allot writes memory sizes ("384M", "1.5G").
pub fn bytes(b: f64) -> String {
    crate::memory::human_size(b.max(0.0) as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The reader of the kernel test, as sampled on this machine's v1 memory controller:
    /// in D a quarter of the time, three quarters of its reads from disk, its cgroup
    /// refaulting tens of thousands of pages a second.
    fn reader() -> StallFacts {
        StallFacts {
            blocked_share: 0.25,
            read_per_s: Some(600e6),
            disk_read_per_s: Some(450e6),
            refaults_per_s: Some(60_000.0),
            domain_full: Some(0.99),
            ..Default::default()
        }
    }

    #[test]
    fn a_reader_whose_cache_is_reclaimed_stalls_on_memory() {
        let (k, why) = judge(&reader()).unwrap();
        assert_eq!(k, StallKind::Memory);
        assert!(
            why.contains("state D) in 25%") && why.contains("75% of what it read missed") && why.contains("refaults") && why.contains("99% full"),
            "{why}"
        );
    }

    #[test]
    fn the_same_reads_without_memory_pressure_are_an_io_stall() {
        let f = StallFacts { refaults_per_s: Some(REFAULTS - 1.0), domain_full: Some(0.99), ..reader() };
        let (k, why) = judge(&f).unwrap();
        assert_eq!(k, StallKind::Io);
        assert!(!why.contains("full"), "a full domain alone is no memory stall: {why}");
        // Blocked on something that moves no data (a lock, NFS): neither.
        assert_eq!(judge(&StallFacts { blocked_share: 0.5, ..Default::default() }), None);
        // Its cgroup's I/O pressure says I/O where another user's counters are not readable.
        let f = StallFacts { blocked_share: 0.5, cgroup_io_pressure: Some(MEMORY_PRESSURE), ..Default::default() };
        let (k, why) = judge(&f).unwrap();
        assert!(k == StallKind::Io && why.contains("its cgroup stalled on I/O 10% of the window"), "{why}");
        // Delay accounting alone is enough to say I/O.
        assert_eq!(judge(&StallFacts { io_delay_share: Some(STALLED), ..Default::default() }).map(|x| x.0), Some(StallKind::Io));
    }

    #[test]
    fn a_reader_seen_in_d_rarely_still_stalls_on_memory_when_it_rereads_its_cache() {
        // Sampled on this machine with 12 tasks runnable: in D 9% of samples.
        let f = StallFacts { blocked_share: 0.09, ..reader() };
        assert_eq!(judge(&f).map(|x| x.0), Some(StallKind::Memory));
        // Cached reads (a quarter missed at most) or no refaults: no stall.
        assert_eq!(judge(&StallFacts { disk_read_per_s: Some(600e6 * (REREAD - 0.01)), ..f.clone() }), None);
        assert_eq!(judge(&StallFacts { refaults_per_s: Some(0.0), ..f }), None);
    }

    #[test]
    fn below_every_threshold_there_is_no_stall() {
        assert_eq!(judge(&StallFacts { blocked_share: STALLED - 0.01, refaults_per_s: None, ..reader() }), None);
        assert_eq!(judge(&StallFacts::default()), None);
        // Major faults alone are a memory stall even if it is rarely seen in D.
        let f = StallFacts { major_faults_per_s: MAJOR_FAULTS, ..Default::default() };
        assert_eq!(judge(&f).map(|x| x.0), Some(StallKind::Memory));
        // Memory pressure of its cgroup, or reclaim, with the task blocked.
        for f in [
            StallFacts { blocked_share: STALLED, cgroup_memory_pressure: Some(MEMORY_PRESSURE), ..Default::default() },
            StallFacts { blocked_share: STALLED, reclaim_share: RECLAIMING, ..Default::default() },
        ] {
            assert_eq!(judge(&f).map(|x| x.0), Some(StallKind::Memory), "{f:?}");
        }
    }

    fn h(name: &str, gib: f64, share: Option<f64>, own: bool) -> Holder {
        Holder { name: name.into(), bytes: gib * 1073741824.0, share: share.map(|s| s * 1073741824.0), own, pids: vec![] }
    }

    #[test]
    fn the_memory_culprit_is_furthest_above_its_share_or_the_largest() {
        let shared = [h("a", 3.0, Some(4.0), true), h("b", 5.0, Some(2.0), false), h("c", 6.0, Some(5.0), false)];
        assert_eq!(memory_culprit(&shared).unwrap().name, "b", "3G over beats 1G over though c holds more");
        assert_eq!(memory_culprit(&[h("a", 3.0, Some(4.0), true), h("b", 1.0, Some(2.0), false)]), None, "all within their share");
        let unshared = [h("a", 3.0, None, true), h("b", 5.0, None, false)];
        assert_eq!(memory_culprit(&unshared).unwrap().name, "b");
        assert_eq!(memory_culprit(&[h("a", 3.0, None, true)]).unwrap().name, "a", "its own");
        assert!(cause_words(StallKind::Memory, &shared[1]).contains("b uses 5G against its share of 2G"));
        assert!(cause_words(StallKind::Memory, &unshared[0]).starts_with("its own a holds the most memory there (3G)"));
    }

    #[test]
    fn the_io_culprit_is_the_busiest_other_then_its_own() {
        let mib = 1.0 / 1024.0;
        let hs = [h("a", 50.0 * mib, None, true), h("b", 20.0 * mib, None, false), h("c", 30.0 * mib, None, false)];
        assert_eq!(io_culprit(&hs).unwrap().name, "c");
        let quiet = [h("a", 50.0 * mib, None, true), h("b", 0.5 * mib, None, false)];
        assert_eq!(io_culprit(&quiet).unwrap().name, "a");
        assert_eq!(io_culprit(&[h("a", 0.0, None, true)]), None);
        assert!(cause_words(StallKind::Io, &hs[2]).contains("moves the most data (30M a second)"));
    }

    #[test]
    fn memory_waits_are_told_from_io_waits() {
        for w in ["try_to_free_mem_cgroup_pages", "mem_cgroup_handle_over_high", "throttle_direct_reclaim", "swap_readpage", "__alloc_pages_slowpath"]
        {
            assert!(memory_wait(w), "{w}");
        }
        for w in ["folio_wait_bit_common", "io_schedule", "blk_mq_get_tag", "do_sys_poll", ""] {
            assert!(!memory_wait(w), "{w}");
        }
    }

    #[test]
    fn bytes_are_written_in_binary_units() {
        assert_eq!((bytes(0.0), bytes(1536.0), bytes(384.0 * 1048576.0), bytes(-5.0)), ("0".into(), "1.5K".into(), "384M".into(), "0".into()));
    }
}
