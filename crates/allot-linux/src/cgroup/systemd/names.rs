//! Pure mapping between the daemon's relative paths and systemd units, and back from a
//! process's cgroup to a relative path. No I/O: what systemd knows (a scope's cgroup)
//! comes in as arguments.
//!
//! | daemon's path | unit | cgroup |
//! |---|---|---|
//! | `user-1000` | `allot:user-1000.scope` in `user-1000.slice` (funding: the slice's CPUWeight) | the scope's |
//! | `ci` | `allot:ci.scope` in `user-allot_ci.slice` | the scope's |
//! | `user-1000/j7-u1000` | — | `<scope>/j7-u1000` |
//! | `background` | `allot:background.scope` in `allot_background.slice` (CPUWeight=idle) | the scope's |
//! | `background/ci/j9-u1001` | — | `<background scope>/ci/j9-u1001` |
//! | `""` | none (allot has no root of its own) | — |

use std::time::{Duration, Instant};

/// Where a scope keeps its holder (a leading dot: no currency or job can take the name).
pub const HOLDER: &str = ".holder";

/// The name of the background class (`allot_linux::cgroup::BACKGROUND`).
const BACKGROUND: &str = super::super::BACKGROUND;

/// Which of allot's scopes.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Key {
    /// A currency's jobs (`user-1000`, `ci`).
    Currency(String),
    /// The background class.
    Background,
}

impl Key {
    /// The daemon's path of the scope itself.
    pub fn rel(&self) -> &str {
        match self {
            Key::Currency(c) => c,
            Key::Background => BACKGROUND,
        }
    }
}

/// What a relative path names.
#[derive(Debug, Clone, PartialEq)]
pub enum Place {
    /// `""`: allot's root, which on systemd is no directory.
    Root,
    /// A scope's own cgroup (a currency, or `background`).
    Scope(Key),
    /// A directory inside a scope, relative to it (`j7-u1000`, `ci`, `ci/j9-u1001`).
    Inside(Key, String),
}

/// Reads a relative path. Components must be names allot could have made: not empty,
/// `.` or `..`, not starting with a dot (the holder's), at most two levels in the
/// background scope and one in a currency's.
pub fn parse(rel: &str) -> Result<Place, String> {
    if rel.is_empty() {
        return Ok(Place::Root);
    }
    let parts: Vec<&str> = rel.split('/').collect();
    if let Some(bad) = parts.iter().find(|p| p.is_empty() || p.starts_with('.')) {
        return Err(format!("{rel:?} is not a path allot makes (component {bad:?})"));
    }
    let (key, rest) = if parts[0] == BACKGROUND { (Key::Background, &parts[1..]) } else { (Key::Currency(parts[0].to_string()), &parts[1..]) };
    let depth = if key == Key::Background { 2 } else { 1 };
    match rest.len() {
        0 => Ok(Place::Scope(key)),
        n if n <= depth => Ok(Place::Inside(key, rest.join("/"))),
        _ => Err(format!("{rel:?} is deeper than allot's tree (currency/job, background/currency/job)")),
    }
}

/// Unit names for one allot root (`--cgroup-root`, "allot" by default).
#[derive(Debug, Clone)]
pub struct Names {
    root: String,
}

impl Names {
    /// Names for this root (already checked: [A-Za-z0-9._-]).
    pub fn new(root: &str) -> Self {
        Self { root: root.to_string() }
    }

    /// The root's name.
    pub fn root(&self) -> &str {
        &self.root
    }

    /// The scope: `<root>:<currency>.scope`, `<root>:background.scope`. The `:` cannot
    /// occur in a root or currency name, so a name parses back to one root and currency.
    /// (`@` would read better, but systemd refuses instance names for transient units.)
    pub fn scope(&self, key: &Key) -> String {
        format!("{}:{}.scope", self.root, key.rel())
    }

    /// The glob that lists this root's scopes.
    pub fn pattern(&self) -> String {
        format!("{}:*.scope", self.root)
    }

    /// The scope's slice: a user's own `user-UID.slice` (logind's), a named currency's
    /// `user-<root>_<name>.slice` beside it, the background's `<root>_background.slice`
    /// at the top. Dashes nest slices, so they are escaped (`systemd-escape`).
    pub fn slice(&self, key: &Key) -> String {
        let esc = crate::ipc::systemd_bus::escape;
        match key {
            Key::Currency(c) => match user_uid(c) {
                Some(uid) => format!("user-{uid}.slice"),
                None => format!("user-{}_{}.slice", esc(&self.root), esc(c)),
            },
            Key::Background => format!("{}_background.slice", esc(&self.root)),
        }
    }

    /// The key of one of this root's scope names.
    pub fn key_of(&self, unit: &str) -> Option<Key> {
        let cur = unit.strip_suffix(".scope")?.strip_prefix(&self.root)?.strip_prefix(':')?;
        if cur == BACKGROUND {
            return Some(Key::Background);
        }
        let ok = !cur.is_empty() && cur.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'_');
        ok.then(|| Key::Currency(cur.to_string()))
    }
}

/// `user-UID` → UID.
pub fn user_uid(currency: &str) -> Option<u32> {
    let n = currency.strip_prefix("user-")?;
    (!n.is_empty() && n.bytes().all(|b| b.is_ascii_digit())).then(|| n.parse().ok())?
}

/// The daemon's path of a process's cgroup (as /proc/PID/cgroup names it), given the
/// cgroups of allot's scopes; None when it is in none of them.
pub fn rel_of<'a>(path: &str, scopes: impl IntoIterator<Item = (&'a Key, &'a String)>) -> Option<String> {
    for (key, cg) in scopes {
        if cg.is_empty() {
            continue;
        }
        if path == cg {
            return Some(key.rel().to_string());
        }
        if let Some(rest) = path.strip_prefix(cg.as_str()).and_then(|r| r.strip_prefix('/')) {
            return Some(format!("{}/{rest}", key.rel()));
        }
    }
    None
}

/// Holds back writes of a unit property: at most one per `interval` per directory, the
/// latest value winning (the daemon may re-weigh a currency every tick under nice
/// emulation; each write is a D-Bus call and a drop-in file in PID 1).
#[derive(Debug)]
pub struct Limiter {
    interval: Duration,
    slots: std::collections::BTreeMap<String, Slot>,
}

#[derive(Debug, Default)]
struct Slot {
    sent: Option<u32>,
    at: Option<Instant>,
    pending: Option<u32>,
}

/// What to do with an offered value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Offer {
    /// Send it now (then call [`Limiter::sent`]).
    Send,
    /// Held back; [`Limiter::due`] returns it when its time comes.
    Held,
    /// It is what was last sent: nothing to do.
    Same,
}

impl Limiter {
    /// At most one write per `interval` per directory.
    pub fn new(interval: Duration) -> Self {
        Self { interval, slots: Default::default() }
    }

    /// A new value for `rel`.
    pub fn offer(&mut self, rel: &str, value: u32, now: Instant) -> Offer {
        let s = self.slots.entry(rel.to_string()).or_default();
        if s.sent == Some(value) {
            s.pending = None;
            return Offer::Same;
        }
        if s.at.is_none_or(|t| now.duration_since(t) >= self.interval) {
            Offer::Send
        } else {
            s.pending = Some(value);
            Offer::Held
        }
    }

    /// `value` was sent to `rel` at `now`.
    pub fn sent(&mut self, rel: &str, value: u32, now: Instant) {
        let s = self.slots.entry(rel.to_string()).or_default();
        *s = Slot { sent: Some(value), at: Some(now), pending: None };
    }

    /// Sending to `rel` failed: the next offer sends again.
    pub fn failed(&mut self, rel: &str) {
        if let Some(s) = self.slots.get_mut(rel) {
            s.sent = None;
            s.pending = None;
        }
    }

    /// The value last sent to `rel`, if any (and not failed since).
    pub fn sent_value(&self, rel: &str) -> Option<u32> {
        self.slots.get(rel).and_then(|s| s.sent)
    }

    /// The held value of `rel`, if any.
    pub fn pending(&self, rel: &str) -> Option<u32> {
        self.slots.get(rel).and_then(|s| s.pending)
    }

    /// Held values whose time has come.
    pub fn due(&self, now: Instant) -> Vec<(String, u32)> {
        self.slots
            .iter()
            .filter_map(|(r, s)| {
                let v = s.pending?;
                s.at.is_none_or(|t| now.duration_since(t) >= self.interval).then(|| (r.clone(), v))
            })
            .collect()
    }

    /// Forgets `rel` (its unit is gone).
    pub fn forget(&mut self, rel: &str) {
        self.slots.remove(rel);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cur(c: &str) -> Key {
        Key::Currency(c.into())
    }

    #[test]
    fn paths_parse() {
        assert_eq!(parse(""), Ok(Place::Root));
        assert_eq!(parse("user-1000"), Ok(Place::Scope(cur("user-1000"))));
        assert_eq!(parse("user-1000/j7-u1000"), Ok(Place::Inside(cur("user-1000"), "j7-u1000".into())));
        assert_eq!(parse("ci/default"), Ok(Place::Inside(cur("ci"), "default".into())));
        assert_eq!(parse("background"), Ok(Place::Scope(Key::Background)));
        assert_eq!(parse("background/ci"), Ok(Place::Inside(Key::Background, "ci".into())));
        assert_eq!(parse("background/ci/j9-u1001"), Ok(Place::Inside(Key::Background, "ci/j9-u1001".into())));
        for bad in ["/x", "x/", "x//y", "user-1000/.holder", "..", "a/b/c", "background/a/b/c", "user-1/./j"] {
            assert!(parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn units_are_named_and_read_back() {
        let n = Names::new("allot");
        assert_eq!(n.scope(&cur("user-1000")), "allot:user-1000.scope");
        assert_eq!(n.slice(&cur("user-1000")), "user-1000.slice");
        assert_eq!(n.scope(&cur("ci")), "allot:ci.scope");
        assert_eq!(n.slice(&cur("ci")), "user-allot_ci.slice");
        assert_eq!(n.slice(&cur("my-ci")), "user-allot_my\\x2dci.slice", "a dash would nest the slice");
        assert_eq!(n.slice(&cur("user-x")), "user-allot_user\\x2dx.slice", "not a uid: a named currency");
        assert_eq!(n.scope(&Key::Background), "allot:background.scope");
        assert_eq!(n.slice(&Key::Background), "allot_background.slice");
        assert_eq!(n.pattern(), "allot:*.scope");
        assert_eq!(n.key_of("allot:user-1000.scope"), Some(cur("user-1000")));
        assert_eq!(n.key_of("allot:background.scope"), Some(Key::Background));
        assert_eq!(n.key_of("allot:ci.scope"), Some(cur("ci")));
        // Another root's scopes, and names allot does not make, are not ours.
        assert_eq!(n.key_of("allot-test-1:user-1000.scope"), None);
        assert_eq!(n.key_of("allot:.scope"), None);
        assert_eq!(n.key_of("allot:Ci.scope"), None);
        assert_eq!(n.key_of("allot:user-1000.service"), None);
        let t = Names::new("allot-test-1-0");
        assert_eq!(t.slice(&Key::Background), "allot\\x2dtest\\x2d1\\x2d0_background.slice");
        assert_eq!(t.key_of("allot-test-1-0:user-5.scope"), Some(cur("user-5")));
        assert_eq!(t.key_of("allot:user-5.scope"), None);
        assert_eq!(user_uid("user-1000"), Some(1000));
        assert_eq!(user_uid("user-"), None);
        assert_eq!(user_uid("user-99999999999"), None);
    }

    #[test]
    fn cgroups_map_back_to_paths() {
        let scopes: Vec<(Key, String)> = vec![
            (cur("user-1000"), "/user.slice/user-1000.slice/allot:user-1000.scope".into()),
            (cur("ci"), "/user.slice/user-allot_ci.slice/allot:ci.scope".into()),
            (Key::Background, "/allot_background.slice/allot:background.scope".into()),
            (cur("gone"), String::new()),
        ];
        let m = |p: &str| rel_of(p, scopes.iter().map(|(k, c)| (k, c)));
        assert_eq!(m("/user.slice/user-1000.slice/allot:user-1000.scope/j7-u1000").as_deref(), Some("user-1000/j7-u1000"));
        assert_eq!(m("/user.slice/user-1000.slice/allot:user-1000.scope").as_deref(), Some("user-1000"));
        assert_eq!(m("/user.slice/user-1000.slice/allot:user-1000.scope/.holder").as_deref(), Some("user-1000/.holder"));
        assert_eq!(m("/allot_background.slice/allot:background.scope/ci/j9-u1001").as_deref(), Some("background/ci/j9-u1001"));
        assert_eq!(m("/user.slice/user-allot_ci.slice/allot:ci.scope/j8-u1001").as_deref(), Some("ci/j8-u1001"));
        assert_eq!(m("/user.slice/user-1000.slice/session-3.scope"), None);
        assert_eq!(m("/user.slice/user-1000.slice/allot:user-1000.scope2/x"), None, "a prefix that is not a parent");
        assert_eq!(m("/"), None);
    }

    #[test]
    fn the_limiter_sends_at_most_once_an_interval_and_the_latest_value() {
        let t0 = Instant::now();
        let s = |ms: u64| t0 + Duration::from_millis(ms);
        let mut l = Limiter::new(Duration::from_secs(1));
        assert_eq!(l.offer("a", 100, s(0)), Offer::Send);
        l.sent("a", 100, s(0));
        assert_eq!(l.offer("a", 100, s(10)), Offer::Same);
        assert_eq!(l.offer("a", 150, s(250)), Offer::Held);
        assert_eq!(l.offer("a", 175, s(500)), Offer::Held);
        assert_eq!(l.pending("a"), Some(175));
        assert_eq!(l.due(s(900)), vec![]);
        assert_eq!(l.due(s(1000)), vec![("a".to_string(), 175)]);
        l.sent("a", 175, s(1000));
        assert!(l.due(s(5000)).is_empty());
        // Back to the sent value before the held one went out: nothing to send.
        assert_eq!(l.offer("a", 200, s(1100)), Offer::Held);
        assert_eq!(l.offer("a", 175, s(1200)), Offer::Same);
        assert!(l.due(s(3000)).is_empty());
        // Other directories have their own interval.
        assert_eq!(l.offer("b", 1, s(1200)), Offer::Send);
        // A failure sends again at the next offer.
        l.failed("a");
        assert_eq!(l.offer("a", 175, s(1300)), Offer::Held, "still within a's interval");
        assert_eq!(l.offer("a", 175, s(2000)), Offer::Send);
    }
}
