//! Users and groups through glibc's NSS (so LDAP, SSSD, NIS and extrausers users count,
//! not only /etc/passwd), and which uids are human users.
//!
//! Lookups use the reentrant calls (getpwnam_r, getpwuid_r, getgrnam_r, getgrgid_r,
//! getgrouplist): safe from the daemon's request threads. A buffer too small (ERANGE) is
//! doubled up to 4 MiB (a directory group with tens of thousands of members fits).
//! `*_by_*` answer None both for "no such entry" and for "the source failed" (LDAP down):
//! the daemon then refuses, which is the safe side; `try_*` tell the two apart.
//!
//! NSS modules run inside this process (dlopen'ed by glibc per /etc/nsswitch.conf), and
//! a module may block on its network source: do lookups outside locks that the daemon's
//! loop needs. With nscd running, answers may come from its cache.

use crate::{Error, Result};
use std::ffi::{CStr, CString};
use std::os::raw::c_char;

/// A user account as NSS reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct User {
    /// Login name.
    pub name: String,
    /// User id.
    pub uid: u32,
    /// Primary group id.
    pub gid: u32,
}

/// A group as NSS reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Group {
    /// Group name.
    pub name: String,
    /// Group id.
    pub gid: u32,
    /// Supplementary members by name (users whose primary group this is are not listed).
    pub members: Vec<String>,
}

const FIRST_BUF: usize = 4096;
const MAX_BUF: usize = 4 << 20;

/// Runs a `get*_r` call, growing its buffer on ERANGE; `f` returns (status, found).
fn with_buffer<T>(call: &str, mut f: impl FnMut(&mut [u8]) -> (libc::c_int, Option<T>)) -> Result<Option<T>> {
    let mut buf = vec![0u8; FIRST_BUF];
    loop {
        let (rc, found) = f(&mut buf);
        match rc {
            0 => return Ok(found),
            libc::ERANGE if buf.len() < MAX_BUF => buf.resize(buf.len() * 2, 0),
            libc::EINTR => {}
            // getpwnam_r(3): these also mean "not found" for some NSS modules.
            libc::ENOENT | libc::ESRCH | libc::EBADF | libc::EPERM => return Ok(None),
            e => {
                let hint =
                    if e == libc::ERANGE { "entry larger than 4 MiB" } else { "check /etc/nsswitch.conf and that its sources (LDAP, SSSD) answer" };
                return Err(Error::Sys {
                    call: call.into(),
                    source: std::io::Error::new(
                        std::io::Error::from_raw_os_error(e).kind(),
                        format!("{}; {hint}", std::io::Error::from_raw_os_error(e)),
                    ),
                });
            }
        }
    }
}

fn string(p: *const c_char) -> String {
    if p.is_null() {
        return String::new();
    }
    // SAFETY: NSS fills NUL-terminated strings inside our buffer, alive for this call.
    unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
}

fn user_from(pw: &libc::passwd) -> User {
    User { name: string(pw.pw_name), uid: pw.pw_uid, gid: pw.pw_gid }
}

fn group_from(gr: &libc::group) -> Group {
    let mut members = Vec::new();
    if !gr.gr_mem.is_null() {
        // SAFETY: gr_mem is a NULL-terminated array of strings in our buffer.
        unsafe {
            let mut p = gr.gr_mem;
            while !(*p).is_null() {
                members.push(string(*p));
                p = p.add(1);
            }
        }
    }
    Group { name: string(gr.gr_name), gid: gr.gr_gid, members }
}

/// getpwnam_r: the user called `name`. Err when the NSS source failed.
pub fn try_user_by_name(name: &str) -> Result<Option<User>> {
    let Ok(c) = CString::new(name) else { return Ok(None) };
    with_buffer(&format!("getpwnam_r({name:?})"), |buf| {
        // SAFETY: all-zero passwd is valid; out-pointers and buffer live for the call.
        let mut pw: libc::passwd = unsafe { std::mem::zeroed() };
        let mut res: *mut libc::passwd = std::ptr::null_mut();
        let rc = unsafe { libc::getpwnam_r(c.as_ptr(), &mut pw, buf.as_mut_ptr().cast(), buf.len(), &mut res) };
        (rc, (rc == 0 && !res.is_null()).then(|| user_from(&pw)))
    })
}

/// getpwuid_r: the user with `uid`. Err when the NSS source failed.
pub fn try_user_by_uid(uid: u32) -> Result<Option<User>> {
    with_buffer(&format!("getpwuid_r({uid})"), |buf| {
        // SAFETY: as above.
        let mut pw: libc::passwd = unsafe { std::mem::zeroed() };
        let mut res: *mut libc::passwd = std::ptr::null_mut();
        let rc = unsafe { libc::getpwuid_r(uid, &mut pw, buf.as_mut_ptr().cast(), buf.len(), &mut res) };
        (rc, (rc == 0 && !res.is_null()).then(|| user_from(&pw)))
    })
}

/// getgrnam_r: the group called `name`. Err when the NSS source failed.
pub fn try_group_by_name(name: &str) -> Result<Option<Group>> {
    let Ok(c) = CString::new(name) else { return Ok(None) };
    with_buffer(&format!("getgrnam_r({name:?})"), |buf| {
        // SAFETY: all-zero group is valid; out-pointers and buffer live for the call.
        let mut gr: libc::group = unsafe { std::mem::zeroed() };
        let mut res: *mut libc::group = std::ptr::null_mut();
        let rc = unsafe { libc::getgrnam_r(c.as_ptr(), &mut gr, buf.as_mut_ptr().cast(), buf.len(), &mut res) };
        (rc, (rc == 0 && !res.is_null()).then(|| group_from(&gr)))
    })
}

/// getgrgid_r: the group with `gid`. Err when the NSS source failed.
pub fn try_group_by_gid(gid: u32) -> Result<Option<Group>> {
    with_buffer(&format!("getgrgid_r({gid})"), |buf| {
        // SAFETY: as above.
        let mut gr: libc::group = unsafe { std::mem::zeroed() };
        let mut res: *mut libc::group = std::ptr::null_mut();
        let rc = unsafe { libc::getgrgid_r(gid, &mut gr, buf.as_mut_ptr().cast(), buf.len(), &mut res) };
        (rc, (rc == 0 && !res.is_null()).then(|| group_from(&gr)))
    })
}

/// The user called `name`, from any NSS source; None if unknown or the source failed.
pub fn user_by_name(name: &str) -> Option<User> {
    try_user_by_name(name).ok().flatten()
}

/// The user with `uid`, from any NSS source; None if unknown or the source failed.
pub fn user_by_uid(uid: u32) -> Option<User> {
    try_user_by_uid(uid).ok().flatten()
}

/// The group called `name`, from any NSS source; None if unknown or the source failed.
pub fn group_by_name(name: &str) -> Option<Group> {
    try_group_by_name(name).ok().flatten()
}

/// The group with `gid`, from any NSS source; None if unknown or the source failed.
pub fn group_by_gid(gid: u32) -> Option<Group> {
    try_group_by_gid(gid).ok().flatten()
}

/// Every group `user` is in (getgrouplist: NSS's initgroups view, primary gid first).
/// Empty only if the lookup failed. For a connected client prefer the kernel's view
/// ([`crate::ipc::peer::peer_groups`]): it is what the process actually holds.
pub fn groups_of(user: &User) -> Vec<u32> {
    let Ok(name) = CString::new(user.name.as_str()) else { return vec![] };
    let mut n: libc::c_int = 64;
    loop {
        let mut v: Vec<libc::gid_t> = vec![0; n as usize];
        let mut got = n;
        // SAFETY: v holds `got` entries; glibc writes at most that many and sets `got`.
        let r = unsafe { libc::getgrouplist(name.as_ptr(), user.gid, v.as_mut_ptr(), &mut got) };
        if r >= 0 {
            v.truncate(got.max(0) as usize);
            return v;
        }
        // -1: too small; glibc stored the count it needs (bounded by NGROUPS_MAX).
        if got <= n || got > 65537 {
            return vec![];
        }
        n = got;
    }
}

/// systemd's dynamic users (DynamicUser=, nss-systemd): 61184..=65519
/// (https://systemd.io/UIDS-GIDS/), allocated to services for their lifetime.
pub const SYSTEMD_DYNAMIC: (u32, u32) = (61184, 65519);
/// The overflow uid `nobody`.
pub const NOBODY: u32 = 65534;

/// The uids of human users: UID_MIN..=UID_MAX from /etc/login.defs (1000..=60000 when
/// absent, as shadow's useradd assumes), less every /etc/subuid range (rootless
/// containers' subordinate uids: their owner can claim them on a socket from inside a
/// user namespace, see the `peer` module), systemd's dynamic-user range, `nobody`,
/// root, and the invalid ids 65535 and 4294967295.
///
/// login.defs governs only what useradd allocates locally: a site whose directory (LDAP,
/// SSSD id-mapping) hands out larger uids must raise UID_MAX there or override the range
/// ([`HumanUids::with_range`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HumanUids {
    min: u32,
    max: u32,
    /// Where min and max came from.
    range_from: String,
    /// Inclusive ranges that are never users, with why.
    excluded: Vec<(u32, u32, String)>,
}

/// A number as shadow reads login.defs and /etc/subuid (strtoul with base 0): decimal,
/// `0x` hex or leading-`0` octal; no sign, nothing trailing, must fit a uid.
fn parse_num(s: &str) -> Option<u32> {
    let s = s.trim();
    let (digits, radix) = if let Some(h) = s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        (h, 16)
    } else if s.len() > 1 && s.starts_with('0') {
        (&s[1..], 8)
    } else {
        (s, 10)
    };
    if digits.is_empty() || !digits.chars().all(|c| c.is_digit(radix)) {
        return None;
    }
    u32::from_str_radix(digits, radix).ok()
}

/// The value of `key` in login.defs text (`KEY value` lines, `#` comments, values maybe
/// in double quotes; the last valid occurrence wins, as in shadow's getdef).
fn login_def(text: &str, key: &str) -> Option<u32> {
    text.lines().rev().find_map(|l| {
        let l = l.trim();
        if l.starts_with('#') {
            return None;
        }
        let mut it = l.split_whitespace();
        (it.next()? == key).then_some(())?;
        let v = it.next()?;
        parse_num(v.strip_prefix('"').and_then(|v| v.strip_suffix('"')).unwrap_or(v))
    })
}

/// /etc/subuid (or /etc/subgid) lines `owner:start:count` (owner a name or a uid):
/// (start, end, owner). Comments, blank lines and malformed lines are skipped, as shadow
/// skips them; count 0 holds nothing.
pub fn subuid_ranges(text: &str) -> Vec<(u32, u32, String)> {
    text.lines()
        .filter_map(|l| {
            let l = l.trim();
            if l.is_empty() || l.starts_with('#') {
                return None;
            }
            let f: Vec<&str> = l.split(':').collect();
            if f.len() != 3 || f[0].trim().is_empty() {
                return None;
            }
            let (start, count) = (parse_num(f[1])?, parse_num(f[2])?);
            (count > 0).then(|| (start, start.saturating_add(count - 1), f[0].trim().to_string()))
        })
        .collect()
}

impl HumanUids {
    /// Reads /etc/login.defs and /etc/subuid (a missing or unreadable file counts as empty).
    pub fn load() -> Self {
        let read = |p: &str| std::fs::read_to_string(p).unwrap_or_default();
        Self::from_files(&read("/etc/login.defs"), &read("/etc/subuid"))
    }

    /// From the texts of login.defs and subuid (pure: for tests and other roots).
    pub fn from_files(login_defs: &str, subuid: &str) -> Self {
        let (lo, hi) = (login_def(login_defs, "UID_MIN"), login_def(login_defs, "UID_MAX"));
        let (min, max, range_from) = match (lo.unwrap_or(1000), hi.unwrap_or(60000)) {
            (a, b) if a <= b => (a, b, if lo.is_some() || hi.is_some() { "UID_MIN/UID_MAX, login.defs" } else { "defaults: login.defs sets none" }),
            _ => (1000, 60000, "defaults: login.defs has UID_MIN > UID_MAX"),
        };
        let mut excluded = vec![
            (0, 0, "root".to_string()),
            (SYSTEMD_DYNAMIC.0, SYSTEMD_DYNAMIC.1, "systemd dynamic users".to_string()),
            (NOBODY, NOBODY, "nobody".to_string()),
            (65535, 65535, "invalid (uint16 -1)".to_string()),
            (u32::MAX, u32::MAX, "invalid (-1)".to_string()),
        ];
        excluded.extend(subuid_ranges(subuid).into_iter().map(|(a, b, who)| (a, b, format!("subordinate uids of {who}, subuid"))));
        Self { min, max, range_from: range_from.to_string(), excluded }
    }

    /// The same exclusions with another range (a config override for directory uids).
    pub fn with_range(mut self, min: u32, max: u32) -> Self {
        (self.min, self.max, self.range_from) = (min, max, "configured".to_string());
        self
    }

    /// The range before exclusions: (min, max).
    pub fn range(&self) -> (u32, u32) {
        (self.min, self.max)
    }

    /// True when `uid` is a human user's.
    pub fn contains(&self, uid: u32) -> bool {
        (self.min..=self.max).contains(&uid) && !self.excluded.iter().any(|(a, b, _)| (*a..=*b).contains(&uid))
    }

    /// Why `uid` is never a user's even inside the range (a subordinate uid of someone's
    /// /etc/subuid range, systemd's dynamic users, nobody), if it is one of those.
    pub fn excluded_why(&self, uid: u32) -> Option<&str> {
        self.excluded.iter().find(|(a, b, _)| (*a..=*b).contains(&uid)).map(|(_, _, why)| why.as_str())
    }

    /// One line for `allot status`: the range and every exclusion that cuts into it.
    pub fn describe(&self) -> String {
        let cuts: Vec<String> = self
            .excluded
            .iter()
            .filter(|(a, b, _)| *a <= self.max && *b >= self.min)
            .map(|(a, b, why)| if a == b { format!("{a} ({why})") } else { format!("{a}..={b} ({why})") })
            .collect();
        let mut s = format!("human users are uids {}..={} ({})", self.min, self.max, self.range_from);
        if !cuts.is_empty() {
            s += &format!(" except {}", cuts.join(", "));
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn root_and_nobody_through_nss() {
        let root = user_by_uid(0).unwrap();
        assert_eq!((root.name.as_str(), root.gid), ("root", 0));
        assert_eq!(user_by_name("root"), Some(root.clone()));
        assert_eq!(group_by_gid(0).unwrap().name, "root");
        assert_eq!(group_by_name("root").unwrap().gid, 0);
        assert!(groups_of(&root).contains(&0));
        assert_eq!(user_by_name("no-such-user-allot"), None);
        assert_eq!(try_user_by_name("no-such-user-allot").unwrap(), None);
        assert_eq!(user_by_name("bad\0name"), None);
        assert_eq!(user_by_uid(4_000_000_000), None);
    }

    #[test]
    fn numbers_as_shadow_reads_them() {
        assert_eq!(parse_num("1000"), Some(1000));
        assert_eq!(parse_num(" 0x3e8 "), Some(1000));
        assert_eq!(parse_num("01750"), Some(1000));
        assert_eq!(parse_num("0"), Some(0));
        for bad in ["", "-1", "+5", "08", "0x", "1e3", "12abc", "4294967296"] {
            assert_eq!(parse_num(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn login_defs_odd_inputs() {
        let t = "# UID_MIN 5\n  UID_MIN\t\t 2000 # trailing comment\nUID_MAX\n UID_MAX \"0x7530\"\nUID_MIN nonsense\nuid_min 7\n";
        assert_eq!(login_def(t, "UID_MIN"), Some(2000));
        assert_eq!(login_def(t, "UID_MAX"), Some(30000));
        assert_eq!(login_def("UID_MIN 1000\nUID_MIN 1500\n", "UID_MIN"), Some(1500));
        assert_eq!(login_def("", "UID_MIN"), None);
        let h = HumanUids::from_files("", "");
        assert!(h.contains(1000) && h.contains(60000) && !h.contains(999) && !h.contains(60001));
        assert!(h.describe().contains("1000..=60000 (defaults"), "{}", h.describe());
        let inverted = HumanUids::from_files("UID_MIN 5000\nUID_MAX 10\n", "");
        assert!(inverted.contains(1000) && inverted.describe().contains("UID_MIN > UID_MAX"));
        let zero = HumanUids::from_files("UID_MIN 0\n", "");
        assert!(!zero.contains(0) && zero.contains(1));
    }

    #[test]
    fn subordinate_and_reserved_uids_are_not_users() {
        let subuid = "alice:100000:65536\n# comment\n\n1001:0x30000:10\nbad line\nbob:200000\ncarl:300000:0\n dave : 50000 : 5 \neve:-1:5\n";
        let r = subuid_ranges(subuid);
        assert_eq!(r, vec![(100000, 165535, "alice".into()), (0x30000, 0x30009, "1001".into()), (50000, 50004, "dave".into())]);
        let h = HumanUids::from_files("UID_MIN 1000\nUID_MAX 4000000000\n", subuid);
        for uid in [1000, 49999, 50005, 61183, 65520, 165536, 300000] {
            assert!(h.contains(uid), "{uid}");
        }
        for uid in [0, 999, 50000, 50004, 61184, 65519, 65534, 65535, 100000, 165535, 0x30005, u32::MAX] {
            assert!(!h.contains(uid), "{uid}");
        }
        let d = h.describe();
        assert!(d.contains("100000..=165535 (subordinate uids of alice, subuid)") && d.contains("61184..=65519 (systemd dynamic users)"), "{d}");
        assert!(!HumanUids::from_files("", "x:4294967295:10\n").contains(u32::MAX));
        assert!(h.clone().with_range(2000, 3000).contains(2500) && !h.with_range(2000, 3000).contains(1000));
        // The machine's own files parse.
        assert!(HumanUids::load().describe().starts_with("human users are uids"));
    }
}
