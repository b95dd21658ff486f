//! Whether this kernel can run a sched_ext scheduler (a BPF program in the kernel's
//! sched_ext class, Linux 6.12+), and if not, why: read from sysfs and the kernel's
//! config, rooted at a path so tests give a fake root. No policy: the daemon decides.

use std::path::Path;

/// What the kernel offers for sched_ext.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ScxSupport {
    /// A BPF scheduler can be loaded (sched_ext in the kernel, with BTF).
    pub available: bool,
    /// Why not, or what was found, in words.
    pub why: String,
}

/// The first kernel release with sched_ext.
pub const FIRST_RELEASE: (u32, u32) = (6, 12);

/// Reads the running kernel, rooted at `/`.
pub fn detect() -> ScxSupport {
    let release = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
    detect_at(Path::new("/"), release.trim())
}

/// Reads a kernel's files under `root` (`root`/sys, /proc/config.gz, /boot/config-RELEASE).
pub fn detect_at(root: &Path, release: &str) -> ScxSupport {
    let sys = root.join("sys/kernel/sched_ext");
    let btf = root.join("sys/kernel/btf/vmlinux");
    let no = |why: String| ScxSupport { available: false, why };
    if let Ok(state) = std::fs::read_to_string(sys.join("state")) {
        if !btf.exists() {
            return no(format!(
                "kernel {release} has sched_ext but no BTF (/sys/kernel/btf/vmlinux is missing; it needs CONFIG_DEBUG_INFO_BTF): a BPF scheduler cannot load"
            ));
        }
        let ops = std::fs::read_to_string(sys.join("root/ops")).unwrap_or_default();
        let running = match (state.trim(), ops.trim()) {
            ("disabled", _) => "no BPF scheduler loaded".to_string(),
            (s, "") => format!("state {s}"),
            (s, o) => format!("state {s}, scheduler {o} loaded"),
        };
        return ScxSupport { available: true, why: format!("kernel {release} has sched_ext ({running})") };
    }
    if let Some((major, minor)) = version(release) {
        if (major, minor) < FIRST_RELEASE {
            return no(format!("kernel {release} predates sched_ext (Linux {}.{}+)", FIRST_RELEASE.0, FIRST_RELEASE.1));
        }
    }
    match config(root, release) {
        Some((from, text)) => match text.lines().find(|l| l.starts_with("CONFIG_SCHED_CLASS_EXT=") || l.starts_with("# CONFIG_SCHED_CLASS_EXT ")) {
            Some(l) if l.starts_with("CONFIG_SCHED_CLASS_EXT=y") => {
                no(format!("kernel {release} is built with CONFIG_SCHED_CLASS_EXT=y ({from}) but /sys/kernel/sched_ext is missing: is sysfs mounted at /sys?"))
            }
            _ => no(format!("kernel {release} was built without sched_ext (CONFIG_SCHED_CLASS_EXT is not set in {from})")),
        },
        None => no(format!(
            "kernel {release} has no sched_ext (/sys/kernel/sched_ext is missing; its config, /boot/config-{release} or /proc/config.gz, is not readable to say why)"
        )),
    }
}

/// `6.18.44-foo` → (6, 18).
fn version(release: &str) -> Option<(u32, u32)> {
    let mut it = release.split(|c: char| !c.is_ascii_digit());
    Some((it.next()?.parse().ok()?, it.next()?.parse().ok()?))
}

/// The kernel's config and where it was read: /boot/config-RELEASE, else /proc/config.gz
/// (through `gzip -dc`: a few hundred KiB, read once).
fn config(root: &Path, release: &str) -> Option<(String, String)> {
    let boot = root.join(format!("boot/config-{release}"));
    if let Ok(t) = std::fs::read_to_string(&boot) {
        return Some((format!("/boot/config-{release}"), t));
    }
    let gz = root.join("proc/config.gz");
    let out = std::process::Command::new("gzip").arg("-dc").arg(&gz).stderr(std::process::Stdio::null()).output().ok()?;
    (out.status.success() && !out.stdout.is_empty()).then(|| ("/proc/config.gz".into(), String::from_utf8_lossy(&out.stdout).into_owned()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn root(files: &[(&str, &str)]) -> std::path::PathBuf {
        use std::sync::atomic::{AtomicUsize, Ordering};
        static N: AtomicUsize = AtomicUsize::new(0);
        let d = std::env::temp_dir().join(format!("allot-scx-detect-{}-{}", std::process::id(), N.fetch_add(1, Ordering::SeqCst)));
        let _ = std::fs::remove_dir_all(&d);
        for (p, text) in files {
            let f = d.join(p);
            std::fs::create_dir_all(f.parent().unwrap()).unwrap();
            std::fs::write(f, text).unwrap();
        }
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn sched_ext_with_btf_is_available() {
        let r = root(&[("sys/kernel/sched_ext/state", "disabled\n"), ("sys/kernel/btf/vmlinux", "")]);
        let s = detect_at(&r, "7.2.13+deb14-cloud-amd64");
        assert!(s.available, "{s:?}");
        assert_eq!(s.why, "kernel 7.2.13+deb14-cloud-amd64 has sched_ext (no BPF scheduler loaded)");
        let r = root(&[("sys/kernel/sched_ext/state", "enabled\n"), ("sys/kernel/sched_ext/root/ops", "simple\n"), ("sys/kernel/btf/vmlinux", "")]);
        assert!(detect_at(&r, "7.2").why.contains("state enabled, scheduler simple loaded"));
        let _ = std::fs::remove_dir_all(&r);
    }

    #[test]
    fn each_reason_is_named() {
        type Files<'a> = &'a [(&'a str, &'a str)];
        let cases: &[(Files, &str, &str)] = &[
            (&[("sys/kernel/sched_ext/state", "disabled\n")], "7.2.0", "no BTF"),
            (&[], "6.1.0-56-cloud-amd64", "predates sched_ext (Linux 6.12+)"),
            (
                &[("boot/config-6.18.4", "CONFIG_BPF_SYSCALL=y\n# CONFIG_SCHED_CLASS_EXT is not set\n")],
                "6.18.4",
                "built without sched_ext (CONFIG_SCHED_CLASS_EXT is not set in /boot/config-6.18.4)",
            ),
            (&[("boot/config-6.18.4", "CONFIG_BPF_SYSCALL=y\n")], "6.18.4", "built without sched_ext"),
            (&[("boot/config-6.13.0", "CONFIG_SCHED_CLASS_EXT=y\n")], "6.13.0", "is sysfs mounted at /sys?"),
            (&[], "6.18.4", "not readable to say why"),
        ];
        for (files, release, want) in cases {
            let r = root(files);
            let s = detect_at(&r, release);
            let _ = std::fs::remove_dir_all(&r);
            assert!(!s.available && s.why.contains(want), "{release} {files:?}: {s:?}");
        }
    }

    #[test]
    fn a_compressed_config_is_read() {
        let r = root(&[("plain", "# CONFIG_SCHED_CLASS_EXT is not set\n")]);
        let gz = std::process::Command::new("gzip").arg("-c").arg(r.join("plain")).output().expect("gzip runs");
        std::fs::create_dir_all(r.join("proc")).unwrap();
        std::fs::write(r.join("proc/config.gz"), gz.stdout).unwrap();
        let s = detect_at(&r, "6.18.44-fc-v669");
        let _ = std::fs::remove_dir_all(&r);
        assert!(!s.available && s.why.contains("not set in /proc/config.gz"), "{s:?}");
    }
}
