//! The uids `allot-lab selftest` and the benchmarks run their processes as, chosen when they
//! start from a range (`--test-uids LO-HI`, or `ALLOT_TEST_UIDS`; [`DEFAULT`] otherwise).
//! No account is made: the kernel runs a process as any uid. So a uid is taken only when
//! nobody has it — on a site whose users come from LDAP or SSSD, a fixed uid may be a real
//! person's, who would then own the tests' CPU hogs:
//!
//! - NSS knows no user with that uid and no group with that gid (the processes run with
//!   gid = uid), and the lookup did not fail;
//! - no /etc/subuid or /etc/subgid range holds it (a rootless container's user may be
//!   running as it), nor is it one of systemd's dynamic users, nobody, or an invalid id;
//! - no running process has it as its real or effective uid.
//!
//! [`choose`] is the choice itself, pure; [`TestUids::pick`] gathers what it needs from
//! this machine.

use allot_linux::process::users;
use clap::Args;
use std::collections::BTreeSet;
use std::fmt;
use std::str::FromStr;

/// The range taken when neither `--test-uids` nor `ALLOT_TEST_UIDS` gives one: the top of
/// useradd's and adduser's default range (UID_MAX 60000, LAST_UID 59999), which both fill
/// from the bottom, so a local account is least likely here; 200 uids, the most a
/// benchmark runs as (`bench daemon`'s 100 users) with room to spare.
pub const DEFAULT: &str = "59800-59999";

/// The most uids a range may hold: when few are free, every one is looked up in NSS.
pub const MAX_LEN: u32 = 65536;

/// An inclusive range of uids, `LO-HI` (or one uid, `N`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UidRange {
    /// The first uid.
    pub lo: u32,
    /// The last uid.
    pub hi: u32,
}

impl UidRange {
    /// How many uids it holds.
    pub fn count(&self) -> u64 {
        u64::from(self.hi) - u64::from(self.lo) + 1
    }
}

impl fmt::Display for UidRange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}-{}", self.lo, self.hi)
    }
}

impl FromStr for UidRange {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        let bad =
            |why: &str| format!("test uids must be a range LO-HI of uids 1..4294967294 holding at most {MAX_LEN} (e.g. {DEFAULT}), got {s:?}: {why}");
        let num = |t: &str| t.trim().parse::<u32>().map_err(|_| bad(&format!("{:?} is not a uid", t.trim())));
        let (lo, hi) = match s.split_once('-') {
            Some((a, b)) => (num(a)?, num(b)?),
            None => (num(s)?, num(s)?),
        };
        if lo == 0 {
            return Err(bad("uid 0 is root"));
        }
        if hi == u32::MAX {
            return Err(bad("4294967295 is the invalid uid -1"));
        }
        if lo > hi {
            return Err(bad("LO is above HI"));
        }
        let r = UidRange { lo, hi };
        if r.count() > u64::from(MAX_LEN) {
            return Err(bad(&format!("it holds {}", r.count())));
        }
        Ok(r)
    }
}

/// `--test-uids`, for the commands that run processes as other uids.
#[derive(Debug, Clone, Args)]
pub struct TestUids {
    /// The uids to run test processes as, LO-HI: only those that no user or group has in
    /// NSS (passwd, group, LDAP, SSSD), that no /etc/subuid or /etc/subgid range holds and
    /// that no running process has are taken; no account is made.
    #[arg(long = "test-uids", value_name = "LO-HI", env = "ALLOT_TEST_UIDS", default_value = DEFAULT)]
    pub test_uids: UidRange,
}

impl TestUids {
    /// `n` free uids of the range on this machine, lowest first; an error naming the range
    /// and what holds its uids when fewer are free.
    pub fn pick(&self, n: usize) -> anyhow::Result<Vec<u32>> {
        let read = |p: &str| std::fs::read_to_string(p).unwrap_or_default();
        let mut reserved = reserved_ids();
        reserved.extend(users::subuid_ranges(&read("/etc/subuid")).into_iter().map(|(a, b, who)| (a, b, format!("/etc/subuid range of {who}"))));
        reserved.extend(users::subuid_ranges(&read("/etc/subgid")).into_iter().map(|(a, b, who)| (a, b, format!("/etc/subgid range of {who}"))));
        choose(self.test_uids, n, &reserved, &running_uids()?, known).map_err(anyhow::Error::msg)
    }
}

/// Ids that are never anyone's own to run as: root, systemd's dynamic users, nobody and
/// the invalid ids (as allot-linux's `HumanUids` excludes them).
fn reserved_ids() -> Vec<(u32, u32, String)> {
    vec![
        (0, 0, "root".into()),
        (users::SYSTEMD_DYNAMIC.0, users::SYSTEMD_DYNAMIC.1, "systemd's dynamic users".into()),
        (users::NOBODY, users::NOBODY, "nobody".into()),
        (65535, 65535, "the invalid id 65535".into()),
    ]
}

/// Who NSS says has `id`, as a user or as a group; a failed lookup counts as someone
/// (a directory that did not answer may know them).
fn known(id: u32) -> Option<String> {
    match users::try_user_by_uid(id) {
        Ok(Some(u)) => return Some(format!("user {}", u.name)),
        Ok(None) => {}
        Err(e) => return Some(format!("the user lookup failed: {e}")),
    }
    match users::try_group_by_gid(id) {
        Ok(Some(g)) => Some(format!("group {}", g.name)),
        Ok(None) => None,
        Err(e) => Some(format!("the group lookup failed: {e}")),
    }
}

/// The real and effective uids of every process now (one that ends while read is skipped).
fn running_uids() -> anyhow::Result<BTreeSet<u32>> {
    let pids = allot_linux::process::procfs::pids().map_err(|e| anyhow::anyhow!("list the processes running now: {e}"))?;
    Ok(pids.into_iter().filter_map(|p| allot_linux::process::procfs::ids(p).ok()).flat_map(|i| [i.ruid, i.euid]).collect())
}

/// The first `n` uids of `range` that are free: in no `reserved` range (start, end, whose),
/// not in `running`, and unknown to `known` (which names who has a uid; it is asked only
/// about uids that pass the other two, lowest first, and no further than needed). When
/// fewer are free, the error names the range, how many each cause held (with the first
/// few of each) and what to do.
pub fn choose(
    range: UidRange,
    n: usize,
    reserved: &[(u32, u32, String)],
    running: &BTreeSet<u32>,
    mut known: impl FnMut(u32) -> Option<String>,
) -> Result<Vec<u32>, String> {
    let mut free = Vec::with_capacity(n);
    // What holds the uids that are not free, per cause: (uids, the first few holders,
    // whether there are more holders).
    let mut held: [(usize, Vec<String>, bool); 3] = Default::default();
    let mut note = |cause: usize, what: String| {
        let (count, eg, more) = &mut held[cause];
        *count += 1;
        if !eg.contains(&what) {
            if eg.len() < 3 {
                eg.push(what);
            } else {
                *more = true;
            }
        }
    };
    for uid in range.lo..=range.hi {
        if free.len() == n {
            return Ok(free);
        }
        if let Some((a, b, whose)) = reserved.iter().find(|(a, b, _)| (*a..=*b).contains(&uid)) {
            note(0, if a == b { format!("{a}: {whose}") } else { format!("{a}..={b}: {whose}") });
        } else if running.contains(&uid) {
            note(1, uid.to_string());
        } else if let Some(who) = known(uid) {
            note(2, format!("{uid}: {who}"));
        } else {
            free.push(uid);
        }
    }
    if free.len() == n {
        return Ok(free);
    }
    let part = |(count, eg, more): &(usize, Vec<String>, bool), what: &str| {
        (*count > 0).then(|| format!("{count} {what} ({}{})", eg.join("; "), if *more { "; ..." } else { "" }))
    };
    let parts: Vec<String> = [
        part(&held[2], "known to NSS as a user or group"),
        part(&held[0], "reserved or in a subordinate range"),
        part(&held[1], "running a process"),
    ]
    .into_iter()
    .flatten()
    .collect();
    Err(format!(
        "the test uid range {range} has {} free uid{}, {n} needed{}{}; give a range of uids that no one has with --test-uids LO-HI (or ALLOT_TEST_UIDS)",
        free.len(),
        if free.len() == 1 { "" } else { "s" },
        if parts.is_empty() { "" } else { "; of its uids, " },
        parts.join(", ")
    ))
}

/// The `[users]` section of a private daemon's config that places exactly `uids` (none
/// need be in login.defs' range: the section sets the range to theirs).
pub fn users_config(uids: &[u32]) -> String {
    let only = uids.iter().map(|u| format!("\"{u}\"")).collect::<Vec<_>>().join(", ");
    match (uids.iter().min(), uids.iter().max()) {
        (Some(lo), Some(hi)) => format!("[users]\nmin_uid = {lo}\nmax_uid = {hi}\nonly = [{only}]\n"),
        _ => "[users]\nonly = []\n".to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn r(s: &str) -> UidRange {
        s.parse().unwrap()
    }

    fn nobody(_: u32) -> Option<String> {
        None
    }

    #[test]
    fn ranges_parse_and_bad_ones_are_named() {
        assert_eq!(r("2900-2999"), UidRange { lo: 2900, hi: 2999 });
        assert_eq!(r(" 5 - 5 "), UidRange { lo: 5, hi: 5 });
        assert_eq!(r("7000"), UidRange { lo: 7000, hi: 7000 });
        assert_eq!(r(DEFAULT).count(), 200);
        assert_eq!(r("2900-2999").to_string(), "2900-2999");
        for (bad, why) in [
            ("0-10", "uid 0 is root"),
            ("10-4294967295", "invalid uid -1"),
            ("3000-2900", "LO is above HI"),
            ("1-70000", "it holds 70000"),
            ("abc", "\"abc\" is not a uid"),
            ("-5", "\"\" is not a uid"),
            ("5-", "\"\" is not a uid"),
            ("1-2-3", "\"2-3\" is not a uid"),
            ("4294967296", "is not a uid"),
        ] {
            let e = bad.parse::<UidRange>().unwrap_err();
            assert!(e.contains(why) && e.contains(&format!("{bad:?}")) && e.contains("LO-HI"), "{bad}: {e}");
        }
    }

    #[test]
    fn the_lowest_free_uids_are_taken_and_no_more_are_looked_up() {
        let mut asked = vec![];
        let got = choose(r("2900-2999"), 2, &[], &BTreeSet::new(), |u| {
            asked.push(u);
            (u == 2900).then(|| "user alice".to_string())
        });
        assert_eq!(got, Ok(vec![2901, 2902]));
        assert_eq!(asked, [2900, 2901, 2902], "NSS is asked only until enough are free");
        assert_eq!(choose(r("2900-2999"), 0, &[], &BTreeSet::new(), nobody), Ok(vec![]));
    }

    #[test]
    fn a_subordinate_range_over_part_of_the_range_is_skipped() {
        let subuid = allot_linux::process::users::subuid_ranges("bob:2850:100\n");
        let reserved: Vec<_> = subuid.into_iter().map(|(a, b, w)| (a, b, format!("/etc/subuid range of {w}"))).collect();
        let got = choose(r("2800-2999"), 52, &reserved, &BTreeSet::new(), nobody).unwrap();
        assert_eq!(got[..50], (2800..2850).collect::<Vec<_>>()[..]);
        assert_eq!(got[50..], [2950, 2951], "the uids after bob's range, none inside it");
    }

    #[test]
    fn a_malformed_subuid_line_hides_nothing_else() {
        // shadow skips a line it cannot read; the lines around it still hold their uids.
        let subuid = allot_linux::process::users::subuid_ranges("carl:2900:2\ncarl:2902\nnot a line\ndave:2904:x\neve:2905:1\n");
        assert_eq!(subuid, vec![(2900, 2901, "carl".to_string()), (2905, 2905, "eve".to_string())]);
        let got = choose(r("2900-2907"), 4, &subuid, &BTreeSet::new(), nobody).unwrap();
        assert_eq!(got, [2902, 2903, 2904, 2906]);
    }

    #[test]
    fn running_processes_hold_their_uids() {
        let running: BTreeSet<u32> = [2901, 2903].into();
        assert_eq!(choose(r("2901-2905"), 3, &[], &running, nobody), Ok(vec![2902, 2904, 2905]));
    }

    #[test]
    fn a_fully_used_range_is_one_error_naming_it_and_what_holds_it() {
        let reserved = vec![(2905, 2909, "/etc/subgid range of bob".to_string())];
        let running: BTreeSet<u32> = [2903].into();
        let e = choose(r("2900-2909"), 2, &reserved, &running, |u| (u < 2905 && u != 2903).then(|| format!("user u{u}"))).unwrap_err();
        assert_eq!(
            e,
            "the test uid range 2900-2909 has 0 free uids, 2 needed; of its uids, 4 known to NSS as a user or group (2900: user u2900; 2901: user u2901; 2902: user u2902; ...), \
             5 reserved or in a subordinate range (2905..=2909: /etc/subgid range of bob), 1 running a process (2903); \
             give a range of uids that no one has with --test-uids LO-HI (or ALLOT_TEST_UIDS)"
        );
        let one_short = choose(r("2900-2901"), 3, &[], &BTreeSet::new(), nobody).unwrap_err();
        assert!(one_short.starts_with("the test uid range 2900-2901 has 2 free uids, 3 needed;"), "{one_short}");
        let failed = choose(r("2900-2900"), 1, &[], &BTreeSet::new(), |_| Some("the user lookup failed: LDAP timed out".into())).unwrap_err();
        assert!(failed.contains("1 known to NSS as a user or group (2900: the user lookup failed: LDAP timed out)"), "{failed}");
    }

    #[test]
    fn the_daemon_config_places_exactly_the_chosen_uids() {
        assert_eq!(users_config(&[59801, 59800]), "[users]\nmin_uid = 59800\nmax_uid = 59801\nonly = [\"59801\", \"59800\"]\n");
        assert_eq!(users_config(&[]), "[users]\nonly = []\n");
    }

    #[test]
    fn this_machine_yields_free_uids_that_nss_does_not_know() {
        // A range no site uses: the top of the 32-bit space, below the invalid id.
        let t = TestUids { test_uids: r("4294901760-4294967294") };
        let got = t.pick(3).unwrap();
        assert_eq!(got.len(), 3);
        for u in got {
            assert_eq!(allot_linux::process::users::try_user_by_uid(u).unwrap(), None, "{u}");
        }
        // A uid of this machine's passwd (daemon, bin, ...) is never taken.
        if let Some((name, uid, _)) = allot_linux::process::procfs::passwd().into_iter().find(|(_, u, _)| (1..61184).contains(u)) {
            let e = TestUids { test_uids: UidRange { lo: uid, hi: uid } }.pick(1).unwrap_err().to_string();
            assert!(e.contains("has 0 free uids") && (e.contains(&format!("{uid}: user {name}")) || e.contains("running a process")), "{e}");
        }
    }
}
