//! Block devices, and whether the kernel divides each one's time by cgroup weight: only
//! the BFQ I/O scheduler (`io.bfq.weight`, v1 `blkio.bfq.weight`) and, on cgroup v2, the
//! io.cost controller where it is enabled for the device (`io.cost.qos`, `io.weight`)
//! honour weights. Other schedulers (none, mq-deadline, kyber) ignore them. Read only.

use std::path::Path;

/// One block device as `allot status` reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Device {
    /// Its name under /sys/block (vda, nvme0n1, sda).
    pub name: String,
    /// The active I/O scheduler (the bracketed one in queue/scheduler), if the device has one.
    pub scheduler: Option<String>,
    /// cgroup v2's io.cost controller is enabled for it.
    pub cost: bool,
}

impl Device {
    /// The kernel honours cgroup I/O weights on this device.
    pub fn honours_weight(&self) -> bool {
        self.scheduler.as_deref() == Some("bfq") || self.cost
    }

    /// Why (or why not), in words.
    pub fn why(&self) -> String {
        match (self.scheduler.as_deref(), self.cost) {
            (Some("bfq"), _) => "BFQ divides its time by weight".into(),
            (_, true) => "io.cost divides its time by weight".into(),
            (Some(s), false) => format!("the {s} scheduler ignores weights (BFQ or io.cost would honour them)"),
            (None, false) => "no I/O scheduler, and io.cost is not enabled for it".into(),
        }
    }
}

/// The block devices under `sys`/block that hold data (not loop, ram or zram devices, not
/// empty ones), with their I/O scheduler, and whether io.cost is enabled for each in
/// `cgroup2`/io.cost.qos (the cgroup v2 root, where there is one). Sorted by name.
pub fn devices(sys: &Path, cgroup2: Option<&Path>) -> Vec<Device> {
    let qos = cgroup2.and_then(|r| std::fs::read_to_string(r.join("io.cost.qos")).ok()).unwrap_or_default();
    let mut out = vec![];
    for e in std::fs::read_dir(sys.join("block")).into_iter().flatten().flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        if ["loop", "ram", "zram"].iter().any(|p| name.starts_with(p)) {
            continue;
        }
        let dir = e.path();
        let read = |f: &str| std::fs::read_to_string(dir.join(f)).unwrap_or_default();
        if read("size").trim() == "0" {
            continue;
        }
        let scheduler = active_scheduler(&read("queue/scheduler"));
        let dev = read("dev").trim().to_string();
        let cost = !dev.is_empty() && qos.lines().any(|l| cost_enabled(l, &dev));
        out.push(Device { name, scheduler, cost });
    }
    out.sort_by(|a, b| a.name.cmp(&b.name));
    out
}

/// The bracketed name in queue/scheduler ("none [mq-deadline] kyber bfq" -> mq-deadline).
pub fn active_scheduler(s: &str) -> Option<String> {
    let a = s.find('[')?;
    let b = s[a..].find(']')? + a;
    Some(s[a + 1..b].to_string()).filter(|n| !n.is_empty())
}

/// One line of io.cost.qos ("MAJ:MIN enable=1 ctrl=auto ...") enables io.cost for `dev`.
fn cost_enabled(line: &str, dev: &str) -> bool {
    let mut w = line.split_whitespace();
    w.next() == Some(dev) && w.any(|kv| kv == "enable=1")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A /sys-like tree of files, removed when dropped.
    struct Fixture(std::path::PathBuf);
    impl Drop for Fixture {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    fn dev(root: &Path, name: &str, sched: &str, dev: &str, size: &str) {
        let d = root.join("block").join(name);
        std::fs::create_dir_all(d.join("queue")).unwrap();
        std::fs::write(d.join("queue/scheduler"), sched).unwrap();
        std::fs::write(d.join("dev"), format!("{dev}\n")).unwrap();
        std::fs::write(d.join("size"), format!("{size}\n")).unwrap();
    }

    #[test]
    fn the_bracketed_scheduler_is_the_active_one() {
        assert_eq!(active_scheduler("none [mq-deadline] kyber bfq\n").as_deref(), Some("mq-deadline"));
        assert_eq!(active_scheduler("[none] mq-deadline\n").as_deref(), Some("none"));
        assert_eq!(active_scheduler("none\n"), None, "a device with no choice");
        assert_eq!(active_scheduler("[] x"), None);
        assert_eq!(active_scheduler("[unclosed"), None);
    }

    #[test]
    fn bfq_and_io_cost_honour_weights_and_nothing_else_does() {
        let root = std::env::temp_dir().join(format!("allot-block-{}", std::process::id()));
        let _f = Fixture(root.clone());
        dev(&root, "vda", "none [mq-deadline] kyber bfq\n", "254:0", "41943040");
        dev(&root, "sda", "mq-deadline kyber [bfq] none\n", "8:0", "1000");
        dev(&root, "nvme0n1", "[none] mq-deadline\n", "259:0", "1000");
        dev(&root, "loop0", "[none]\n", "7:0", "1000");
        dev(&root, "zram0", "[none]\n", "252:0", "1000");
        dev(&root, "sr0", "[mq-deadline]\n", "11:0", "0");
        let cg = root.join("cg");
        std::fs::create_dir_all(&cg).unwrap();
        std::fs::write(cg.join("io.cost.qos"), "259:0 enable=1 ctrl=auto rpct=0.00 rlat=250000\n254:0 enable=0 ctrl=auto\n").unwrap();
        let d = devices(&root, Some(&cg));
        let names: Vec<&str> = d.iter().map(|d| d.name.as_str()).collect();
        assert_eq!(names, ["nvme0n1", "sda", "vda"], "loop, zram and empty devices are left out");
        let by = |n: &str| d.iter().find(|d| d.name == n).unwrap().clone();
        assert!(by("sda").honours_weight() && by("sda").why().contains("BFQ"));
        assert!(by("nvme0n1").honours_weight() && by("nvme0n1").why().contains("io.cost"));
        assert!(!by("vda").honours_weight(), "io.cost disabled and mq-deadline: {:?}", by("vda"));
        assert!(by("vda").why().contains("mq-deadline scheduler ignores weights"));
        let without = devices(&root, None);
        assert!(!without.iter().find(|d| d.name == "nvme0n1").unwrap().honours_weight(), "no cgroup v2 root: no io.cost");
    }

    /// Hostile: a device whose name is not UTF-8 is listed (its name with the bad bytes
    /// replaced, safe to print) and its scheduler read from its own directory; one whose
    /// files are garbage reads as having no scheduler, never as honouring weights.
    #[test]
    fn a_device_name_that_is_not_utf8_and_garbage_files_are_survived() {
        use std::os::unix::ffi::OsStrExt;
        let root = std::env::temp_dir().join(format!("allot-block-hostile-{}", std::process::id()));
        let _f = Fixture(root.clone());
        let name = std::ffi::OsStr::from_bytes(b"sd\xff\x1b[2J");
        let d = root.join("block").join(name);
        std::fs::create_dir_all(d.join("queue")).unwrap();
        std::fs::write(d.join("queue/scheduler"), "mq-deadline [bfq]\n").unwrap();
        std::fs::write(d.join("dev"), "8:0\n").unwrap();
        std::fs::write(d.join("size"), "100\n").unwrap();
        dev(&root, "vdb", "\u{0}\u{ff}[\n", "x", "1");
        std::fs::write(root.join("block/vdb/queue/scheduler"), [0xffu8, b'[', 0xfe, b']']).unwrap();
        let devs = devices(&root, None);
        assert_eq!(devs.len(), 2, "{devs:?}");
        assert_eq!(devs[0].name, "sd\u{fffd}\u{1b}[2J", "the bad byte replaced; escapes are for_terminal's to neutralise");
        assert!(devs[0].honours_weight(), "its own scheduler was read");
        assert_eq!(devs[1].scheduler, None, "a scheduler file that is not UTF-8 reads as none");
        assert!(!devs[1].honours_weight());
    }
}
