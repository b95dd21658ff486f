//! The I/O step against the fake kernel and fixtures of files: a currency's funding and
//! its jobs' tickets written as I/O weights on allot's tree (cgroup v2 and v1), and as
//! `IOWeight=` on a systemd host's slices, taken back at stop.

use crate::daemon::registry::CurrencyId;
use crate::daemon::tests::{start, world};
use allot_linux::cgroup::io::Io;
use allot_linux::cgroup::Version;
use std::path::{Path, PathBuf};

/// A tree of files, removed when dropped.
struct Fixture(PathBuf);
impl Drop for Fixture {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn files(dir: &Path, names: &[&str]) {
    std::fs::create_dir_all(dir).unwrap();
    for n in names {
        std::fs::write(dir.join(n), "").unwrap();
    }
}

fn read(p: PathBuf) -> String {
    std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

/// Users 3000 (funding 300) and 3001 (100), each with its default job, on an I/O
/// hierarchy of `version` whose directories have `weight_files`.
fn two_users(tag: &str, version: Version, weight_files: &[&str]) -> (Fixture, PathBuf, crate::daemon::core::Daemon) {
    let w = world();
    w.lock().unwrap().spawn(100, 3000, "/", "sh");
    w.lock().unwrap().spawn(101, 3001, "/", "sh");
    let mut d = start(&w, None);
    d.scan();
    let mount = std::env::temp_dir().join(format!("allot-io-step-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&mount);
    let root = mount.join("fake");
    files(&mount, &["cgroup.subtree_control"]);
    files(&root, &["cgroup.subtree_control"]);
    for c in ["user-3000", "user-3001"] {
        files(&root.join(c), &[&["cgroup.subtree_control"], weight_files].concat());
        files(&root.join(c).join("default"), weight_files);
    }
    d.io_mut().io = Some(Io::at(version, mount.clone(), root.clone()));
    d.registry_mut().set_funding(CurrencyId::User(3000), 300);
    (Fixture(mount), root, d)
}

#[test]
fn v2_funding_and_tickets_become_io_weight_and_bfq_weight_once() {
    let (f, root, mut d) = two_users("v2", Version::V2, &["io.weight", "io.bfq.weight"]);
    d.apply_io();
    assert_eq!(read(root.join("user-3000/io.weight")), "default 300");
    assert_eq!(read(root.join("user-3000/io.bfq.weight")), "default 300");
    assert_eq!(read(root.join("user-3001/io.weight")), "default 100");
    assert_eq!(read(root.join("user-3000/default/io.weight")), "default 100", "the job's tickets");
    for dir in [f.0.clone(), root.clone(), root.join("user-3000"), root.join("user-3001")] {
        assert_eq!(read(dir.join("cgroup.subtree_control")), "+io", "io delegated through {}", dir.display());
    }
    let v = d.io_view();
    assert!(v.shared, "{v:?}");
    assert_eq!(v.how.as_deref(), Some("io.bfq.weight and io.weight in allot's tree"));
    // Nothing changed: nothing written (the file is left as overwritten by hand).
    std::fs::write(root.join("user-3000/io.weight"), "untouched").unwrap();
    d.apply_io();
    assert_eq!(read(root.join("user-3000/io.weight")), "untouched");
    // Funding changes: written again.
    d.registry_mut().set_funding(CurrencyId::User(3000), 500);
    d.apply_io();
    assert_eq!(read(root.join("user-3000/io.weight")), "default 500");
    // The currency's pressure, read from its cgroup; a garbled file gives none.
    std::fs::write(
        root.join("user-3000/io.pressure"),
        "some avg10=3.50 avg60=1.00 avg300=0.00 total=2500000\nfull avg10=1.25 avg60=0.00 avg300=0.00 total=500000\n",
    )
    .unwrap();
    std::fs::write(root.join("user-3000/memory.pressure"), "some avg10=nan\n").unwrap();
    let p = d.currency_pressure(&CurrencyId::User(3000));
    assert_eq!(p.memory, None);
    let io = p.io.unwrap();
    assert_eq!((io.some_avg10, io.some_s, io.full_avg10, io.full_s), (3.5, 2.5, Some(1.25), Some(0.5)));
}

#[test]
fn v1_writes_the_bfq_weight_where_it_is_and_status_says_what_was_written() {
    let (_f, root, mut d) = two_users("v1", Version::V1, &["blkio.bfq.weight"]);
    std::fs::write(root.join("user-3000/io.pressure"), "some avg10=3.50 avg60=1.00 avg300=0.00 total=2500000\n").unwrap();
    assert!(d.currency_pressure(&CurrencyId::User(3000)).is_empty(), "cgroup v1 has no pressure per cgroup");
    assert!(!d.io_view().shared, "nothing written yet");
    assert_eq!(d.io_view().how.as_deref(), Some("no weight file in allot's blkio tree yet (blkio.bfq.weight or blkio.weight)"));
    d.apply_io();
    assert_eq!(read(root.join("user-3000/blkio.bfq.weight")), "300");
    assert_eq!(read(root.join("user-3001/default/blkio.bfq.weight")), "100");
    assert_eq!(d.io_view().how.as_deref(), Some("blkio.bfq.weight in allot's tree"));
    assert_eq!(d.io_view().failed, None);
}

#[test]
fn no_io_controller_shares_nothing_and_says_so() {
    let w = world();
    let mut d = start(&w, None);
    d.io_mut().io = None;
    d.apply_io();
    let v = d.io_view();
    assert!(!v.shared);
    assert_eq!(v.how.as_deref(), Some("no I/O controller beside allot's tree"));
}

#[test]
fn on_systemd_each_slice_gets_its_funding_as_io_weight_and_it_is_taken_back() {
    let w = world();
    {
        let mut x = w.lock().unwrap();
        x.systemd = true;
        x.slice_mem.logged_in = vec![120, 3000, 3001];
    }
    let mut d = start(&w, None);
    d.registry_mut().set_funding(CurrencyId::User(3000), 300);
    w.lock().unwrap().slice_mem.sent.clear();
    d.apply_io();
    let sent = std::mem::take(&mut w.lock().unwrap().slice_mem.sent);
    assert_eq!(
        sent,
        ["user-3000 IOWeight=100", "user-3001 IOWeight=33"],
        "funding 300:100, the largest as 100; logged-in human users; nothing for uid 120"
    );
    d.apply_io();
    assert!(w.lock().unwrap().slice_mem.sent.is_empty(), "nothing changed, nothing sent");
    assert_eq!(d.io_view().how.as_deref(), Some("IOWeight= on each currency's slice (the least, 1, on the background's), through systemd"));
    // A slice's pressure is the currency's, read through the slice (fake: as given).
    let psi = allot_linux::process::procfs::Psi {
        some: allot_linux::process::procfs::PsiLine { avg10: 20.0, avg60: 5.0, total_us: 3_000_000 },
        full: Some(allot_linux::process::procfs::PsiLine { avg10: 10.0, avg60: 1.0, total_us: 1_000_000 }),
    };
    w.lock().unwrap().slice_mem.pressure.insert("user-3000".into(), allot_linux::cgroup::io::CgroupPressure { memory: Some(psi), io: None });
    let p = d.currency_pressure(&CurrencyId::User(3000));
    let m = p.memory.unwrap();
    assert_eq!((m.some_avg10, m.some_s, m.full_avg10, m.full_s, p.io), (20.0, 3.0, Some(10.0), Some(1.0), None));
    assert!(d.currency_pressure(&CurrencyId::User(3001)).is_empty());
    // Turned off: IOWeight= taken back (and nothing of the slices' memory), nothing sent
    // while off; on again, sent again.
    d.cfg_mut().io.by_share = false;
    d.apply_io();
    let mut sent = std::mem::take(&mut w.lock().unwrap().slice_mem.sent);
    sent.sort();
    assert_eq!(sent, ["user-3000 IOWeight=none", "user-3001 IOWeight=none"]);
    d.apply_io();
    assert!(w.lock().unwrap().slice_mem.sent.is_empty(), "off: nothing sent");
    d.cfg_mut().io.by_share = true;
    d.apply_io();
    assert_eq!(d.io().written.len(), 2, "on again: both slices weighed again");
    d.undo_io();
    let mut sent = std::mem::take(&mut w.lock().unwrap().slice_mem.sent);
    sent.sort();
    assert!(sent.contains(&"user-3000 IOWeight=none".to_string()), "{sent:?}");
}

#[test]
fn a_stopped_slice_is_neither_set_nor_taken_back() {
    // Setting a property of a user slice that stopped brought it back in the systemd VM
    // (left running after allot's purge): only a running slice is weighed.
    let w = world();
    {
        let mut x = w.lock().unwrap();
        x.systemd = true;
        x.slice_mem.logged_in = vec![3000, 3001];
        x.slice_mem.stopped.insert("user-3001".into());
    }
    let mut d = start(&w, None);
    w.lock().unwrap().slice_mem.sent.clear();
    d.apply_io();
    let sent = std::mem::take(&mut w.lock().unwrap().slice_mem.sent);
    assert_eq!(sent, ["user-3000 IOWeight=100"], "nothing for the stopped slice");
    // user-3000's slice stops before the daemon does: nothing is sent to it at stop.
    w.lock().unwrap().slice_mem.stopped.insert("user-3000".into());
    d.undo_io();
    assert!(w.lock().unwrap().slice_mem.sent.is_empty(), "{:?}", w.lock().unwrap().slice_mem.sent);
}

#[test]
fn the_background_weighs_the_least_and_the_switch_gives_every_weight_back() {
    let (f, root, mut d) = two_users("bg", Version::V2, &["io.weight", "io.bfq.weight"]);
    let sibling = f.0.join("fake-background");
    files(&sibling, &["io.weight", "io.bfq.weight"]);
    d.apply_io();
    assert_eq!(read(sibling.join("io.weight")), "default 1", "allot's background sibling weighs the least");
    assert_eq!(read(sibling.join("io.bfq.weight")), "default 1");
    assert_eq!(read(root.join("user-3000/io.weight")), "default 300");
    assert!(d.io_view().shared);
    // Turned off (as a reload would): every weight given back as the kernel's default, and
    // nothing written again.
    d.cfg_mut().io.by_share = false;
    d.apply_io();
    for dir in [root.join("user-3000"), root.join("user-3001"), root.join("user-3000/default"), sibling.clone()] {
        assert_eq!(read(dir.join("io.weight")), "default 100", "{} given back", dir.display());
    }
    assert!(d.io().written.is_empty());
    std::fs::write(root.join("user-3000/io.weight"), "untouched").unwrap();
    d.apply_io();
    assert_eq!(read(root.join("user-3000/io.weight")), "untouched", "off: nothing written");
    let v = d.io_view();
    assert!(!v.shared && v.how.as_deref().is_some_and(|h| h.contains("[io] by_share = false")), "{v:?}");
    // On again: written again. (A kernel file is written in place: the fixture's regular
    // file is emptied first, or "default 1" over "default 100" would read "default 100".)
    std::fs::write(sibling.join("io.weight"), "").unwrap();
    d.cfg_mut().io.by_share = true;
    d.apply_io();
    assert_eq!((read(root.join("user-3000/io.weight")), read(sibling.join("io.weight"))), ("default 300".into(), "default 1".into()));
}

#[test]
fn on_systemd_the_background_slice_weighs_the_least_while_background_jobs_run() {
    let w = world();
    {
        let mut x = w.lock().unwrap();
        x.systemd = true;
        x.spawn(100, 3000, "/user.slice/user-3000.slice/session-4.scope", "sh");
        x.slice_mem.logged_in = vec![3000];
    }
    let mut d = start(&w, None);
    let sent = |w: &crate::daemon::fake::Shared| {
        std::mem::take(&mut w.lock().unwrap().slice_mem.sent).into_iter().filter(|s| s.contains("IOWeight")).collect::<Vec<_>>()
    };
    d.apply_io();
    assert_eq!(sent(&w), ["user-3000 IOWeight=100"], "no background job: no background slice to weigh");
    let bg = crate::proto::Request::Run { tickets: None, currency: None, cap: None, background: true, force: false, mem: None, oom_group: false };
    d.handle(bg, &crate::daemon::tests::peer(&w, 3000, 100)).unwrap();
    d.apply_io();
    assert_eq!(sent(&w), ["background IOWeight=1"], "the smallest IOWeight= systemd takes");
    d.apply_io();
    assert!(sent(&w).is_empty(), "nothing changed, nothing sent");
    // Turned off: taken back with the slices'; at stop too.
    d.cfg_mut().io.by_share = false;
    d.apply_io();
    let mut off = sent(&w);
    off.sort();
    assert_eq!(off, ["background IOWeight=none", "user-3000 IOWeight=none"]);
    d.cfg_mut().io.by_share = true;
    d.apply_io();
    assert_eq!(sent(&w).len(), 2, "on again: both weighed again");
    d.undo_io();
    assert!(sent(&w).contains(&"background IOWeight=none".to_string()));
}
