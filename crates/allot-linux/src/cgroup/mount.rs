//! What file system a path is on. A leaf: it imports nothing of the crate, so telling a
//! systemd host (`ipc::systemd_bus::is_systemd_host`) does not import the cgroup backends.

use std::path::Path;

/// True when `path` is (in) a cgroup2 file system as this process sees it (statfs).
pub fn is_cgroup2_mount(path: &Path) -> bool {
    use std::os::unix::ffi::OsStrExt;
    let Ok(c) = std::ffi::CString::new(path.as_os_str().as_bytes()) else { return false };
    let mut st: libc::statfs = unsafe { std::mem::zeroed() };
    // SAFETY: a valid NUL-terminated path and a zeroed statfs to fill.
    let ok = unsafe { libc::statfs(c.as_ptr(), &mut st) } == 0;
    ok && st.f_type == libc::CGROUP2_SUPER_MAGIC
}
