//! `allot_linux::process::users` finds users that exist only in a non-files NSS source.
//!
//! Debian's libnss-extrausers (installed by .ci/run) reads /var/lib/extrausers/passwd and
//! group. The host's /etc/nsswitch.conf and /var/lib/extrausers are never touched: a
//! child process is started inside a private mount namespace (unshare(CLONE_NEWNS), /
//! made private, a temporary nsswitch.conf and extrausers directory bind-mounted over
//! the real ones, an empty directory over nscd's socket directory), and that child — a
//! fresh exec of this test binary, so glibc reads the temporary nsswitch.conf — does the
//! lookups. Needs root; fails, never skips.

mod common;

use allot_linux::process::users::*;
use common::*;
use std::ffi::CString;
use std::os::unix::process::CommandExt;
use std::path::Path;

const TEST: &str = "a_user_only_in_extrausers_is_found";
const NAME: &str = "allotnssprobe";
const UID: u32 = 61234;

fn child_checks() {
    let maps = || std::fs::read_to_string("/proc/self/maps").unwrap();
    assert!(!maps().contains("libnss_extrausers"), "loaded before any lookup?");
    let u = user_by_name(NAME).expect("the extrausers user is not found through NSS");
    assert_eq!(u, User { name: NAME.into(), uid: UID, gid: 61235 });
    assert_eq!(user_by_uid(UID), Some(u.clone()));
    assert!(maps().contains("libnss_extrausers.so"), "glibc answered without loading libnss_extrausers:\n{}", maps());
    for sock in ["/run/nscd/socket", "/var/run/nscd/socket"] {
        assert!(!Path::new(sock).exists(), "{sock} exists: nscd could answer from its cache");
    }
    let g = group_by_name("allotnssx").unwrap();
    assert_eq!((g.gid, g.members.clone()), (61236, vec![NAME.to_string(), "someoneelse".to_string()]));
    assert_eq!(group_by_gid(61235).unwrap().name, "allotnssg");
    let mut gs = groups_of(&u);
    gs.sort();
    assert_eq!(gs, vec![61235, 61236]);
    // The old procfs names, now wrappers, see the same.
    assert_eq!(allot_linux::process::procfs::user_uid(NAME), Some(UID));
    assert_eq!(allot_linux::process::procfs::user_name(UID).as_deref(), Some(NAME));
    assert_eq!(allot_linux::process::procfs::group_members("allotnssx").map(|(g, _)| g), Some(61236));
    // Files still answer first.
    assert_eq!(user_by_uid(0).unwrap().name, "root");
    println!("nss child: {NAME} found through libnss_extrausers");
}

#[test]
#[ignore = "root: kernel tier, run by scripts/test"]
fn a_user_only_in_extrausers_is_found() {
    if role().is_some() {
        return child_checks();
    }
    require_root();
    assert!(
        Path::new("/var/lib/extrausers").is_dir(),
        "/var/lib/extrausers is missing: install Debian's libnss-extrausers (apt-get install libnss-extrausers; .ci/run does)"
    );
    assert_eq!(user_by_name(NAME), None, "{NAME} already exists on this host; the test needs a name only extrausers has");
    assert_eq!(user_by_uid(UID), None, "uid {UID} already exists on this host");
    let nsswitch_before = std::fs::read("/etc/nsswitch.conf").unwrap();
    let extrausers_before: Vec<_> = std::fs::read_dir("/var/lib/extrausers").unwrap().map(|e| e.unwrap().file_name()).collect();

    let dir = TempDir::new("nss");
    std::fs::write(dir.join("nsswitch.conf"), "passwd: files extrausers\ngroup: files extrausers\n").unwrap();
    std::fs::create_dir(dir.join("extrausers")).unwrap();
    std::fs::write(dir.join("extrausers/passwd"), format!("{NAME}:x:{UID}:61235:allot NSS probe:/nonexistent:/usr/sbin/nologin\n")).unwrap();
    std::fs::write(dir.join("extrausers/group"), format!("allotnssg:x:61235:\nallotnssx:x:61236:{NAME},someoneelse\n")).unwrap();
    std::fs::create_dir(dir.join("empty")).unwrap();

    let c = |p: &Path| CString::new(p.as_os_str().as_encoded_bytes()).unwrap();
    let (conf, users, empty) = (c(&dir.join("nsswitch.conf")), c(&dir.join("extrausers")), c(&dir.join("empty")));
    let (etc_conf, var_users, root) = (c(Path::new("/etc/nsswitch.conf")), c(Path::new("/var/lib/extrausers")), c(Path::new("/")));
    let nscd = Path::new("/run/nscd").is_dir().then(|| c(Path::new("/run/nscd")));
    let mut cmd = client(TEST, "nss-child", None, &[], &[]);
    // SAFETY: only raw syscalls between fork and exec, on strings made before the fork.
    unsafe {
        cmd.pre_exec(move || {
            let bind = |from: &CString, to: &CString| libc::mount(from.as_ptr(), to.as_ptr(), std::ptr::null(), libc::MS_BIND, std::ptr::null());
            if libc::unshare(libc::CLONE_NEWNS) != 0
                || libc::mount(std::ptr::null(), root.as_ptr(), std::ptr::null(), libc::MS_REC | libc::MS_PRIVATE, std::ptr::null()) != 0
                || bind(&conf, &etc_conf) != 0
                || bind(&users, &var_users) != 0
                || nscd.as_ref().is_some_and(|n| bind(&empty, n) != 0)
            {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let out = cmd.output().expect("start the NSS child in a private mount namespace (unshare, mount --make-rprivate /, bind mounts)");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success() && stdout.contains("found through libnss_extrausers"), "NSS child failed:\n{stdout}\n{stderr}");

    // Nothing outside the child changed, and this process still cannot see the user.
    assert_eq!(std::fs::read("/etc/nsswitch.conf").unwrap(), nsswitch_before);
    let extrausers_after: Vec<_> = std::fs::read_dir("/var/lib/extrausers").unwrap().map(|e| e.unwrap().file_name()).collect();
    assert_eq!(extrausers_after, extrausers_before);
    assert_eq!(user_by_name(NAME), None);
}
