//! Which signals the client takes. The system bus lets any local user send any
//! connection a unicast signal (the stock policy allows `send_type="signal"`), with any
//! path, interface and member; only the sender field is the bus's own. So a signal is
//! taken only when its sender is the connection that owns the name we expect it from
//! (learned with GetNameOwner and followed through NameOwnerChanged, which only the bus
//! itself can send), and its path, interface, member and string arguments are those of a
//! [`Match`] we added. Everything else is skipped by the caller before its body is read.

use super::message::{Message, SIGNAL};
use super::wire::Value;
use std::collections::VecDeque;

/// The bus itself: its name, path and interface.
pub const DRIVER: &str = "org.freedesktop.DBus";
/// The bus's object path.
pub const DRIVER_PATH: &str = "/org/freedesktop/DBus";

/// At most this many taken signals wait to be asked for: they come only from trusted
/// senders, but nobody may be asking.
pub const MAX_QUEUED: usize = 64;

/// A signal the client takes: from the owner of `sender` (a well-known name, a unique
/// name, or the bus), on `path` and `interface`, named `member`, with these string
/// arguments (`argN='…'` of a match rule).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Match {
    /// The bus name it must come from.
    pub sender: String,
    /// Object path.
    pub path: String,
    /// Interface.
    pub interface: String,
    /// Signal name.
    pub member: String,
    /// `(N, value)`: argument N must be the string `value`.
    pub args: Vec<(u8, String)>,
}

fn quote(v: &str) -> String {
    // Match rules quote with '…'; an apostrophe is written as '\'' (outside the quotes).
    format!("'{}'", v.replace('\'', "'\\''"))
}

impl Match {
    /// A signal from `sender` on `path`, `interface`, named `member`.
    pub fn new(sender: &str, path: &str, interface: &str, member: &str) -> Self {
        Self { sender: sender.into(), path: path.into(), interface: interface.into(), member: member.into(), args: vec![] }
    }

    /// Also requires string argument `n` to be `value`.
    pub fn arg(mut self, n: u8, value: &str) -> Self {
        self.args.push((n, value.into()));
        self
    }

    /// The rule for AddMatch and RemoveMatch.
    pub fn rule(&self) -> String {
        let mut r = format!(
            "type='signal',sender={},path={},interface={},member={}",
            quote(&self.sender),
            quote(&self.path),
            quote(&self.interface),
            quote(&self.member)
        );
        for (n, v) in &self.args {
            r.push_str(&format!(",arg{n}={}", quote(v)));
        }
        r
    }

    /// The header fits (the sender is checked by the caller).
    fn header_fits(&self, h: &Message) -> bool {
        h.kind == SIGNAL
            && h.path.as_deref() == Some(self.path.as_str())
            && h.interface.as_deref() == Some(self.interface.as_str())
            && h.member.as_deref() == Some(self.member.as_str())
    }

    /// The decoded body's string arguments fit.
    fn args_fit(&self, m: &Message) -> bool {
        self.args.iter().all(|(n, v)| matches!(m.body.get(*n as usize), Some(Value::Str(s)) if s == v))
    }

    /// The rule that tells us who owns `name` (only the bus can send it).
    pub fn owner_changes(name: &str) -> Self {
        Match::new(DRIVER, DRIVER_PATH, DRIVER, "NameOwnerChanged").arg(0, name)
    }
}

/// The matches, the owners of the names they name, and the signals taken.
#[derive(Debug, Default)]
pub(crate) struct Signals {
    matches: Vec<Match>,
    /// Well-known name → its owner's unique name ("" while nobody owns it).
    owners: Vec<(String, String)>,
    queue: VecDeque<Message>,
}

impl Signals {
    /// True when `name` must be followed to check senders, and is not yet.
    pub(crate) fn untracked(&self, name: &str) -> bool {
        !(name.starts_with(':') || name == DRIVER || self.owners.iter().any(|(n, _)| n == name))
    }

    /// Records who owns `name` now ("" for nobody).
    pub(crate) fn set_owner(&mut self, name: &str, owner: &str) {
        match self.owners.iter_mut().find(|(n, _)| n == name) {
            Some(o) => o.1 = owner.into(),
            None => self.owners.push((name.into(), owner.into())),
        }
    }

    /// Stops following `name` (its owner could not be learned).
    pub(crate) fn forget_owner(&mut self, name: &str) {
        self.owners.retain(|(n, _)| n != name);
    }

    /// The unique name that owns `name`, if it is followed and owned.
    pub(crate) fn owner(&self, name: &str) -> Option<&str> {
        self.owners.iter().find(|(n, _)| n == name).map(|(_, o)| o.as_str()).filter(|o| !o.is_empty())
    }

    /// True when `sender` speaks for `name` now; None when `name` is not followed (then
    /// nothing can be said).
    pub(crate) fn speaks_for(&self, name: &str, sender: Option<&str>) -> Option<bool> {
        let sender = sender?;
        if name.starts_with(':') || name == DRIVER {
            return Some(sender == name);
        }
        let (_, owner) = self.owners.iter().find(|(n, _)| n == name)?;
        Some(!owner.is_empty() && sender == owner)
    }

    pub(crate) fn add(&mut self, m: Match) {
        if !self.matches.contains(&m) {
            self.matches.push(m);
        }
    }

    pub(crate) fn remove(&mut self, m: &Match) {
        self.matches.retain(|x| x != m);
    }

    fn owner_change(&self, h: &Message) -> bool {
        h.sender.as_deref() == Some(DRIVER) && !self.owners.is_empty() && Match::owner_changes("").header_fits(h)
    }

    /// Whether a message, known by its header alone, is worth reading: an owner change
    /// from the bus, or a signal from the right sender that fits a match.
    pub(crate) fn wanted(&self, h: &Message) -> bool {
        self.owner_change(h) || self.matches.iter().any(|m| m.header_fits(h) && self.speaks_for(&m.sender, h.sender.as_deref()) == Some(true))
    }

    /// Takes a decoded wanted signal: follows owner changes, queues what fits a match.
    pub(crate) fn take(&mut self, m: Message) {
        if self.owner_change(&m) {
            if let [Value::Str(name), Value::Str(_), Value::Str(new)] = &m.body[..] {
                if self.owners.iter().any(|(n, _)| n == name) {
                    let (name, new) = (name.clone(), new.clone());
                    self.set_owner(&name, &new);
                }
            }
        }
        let fits = self.matches.iter().any(|x| x.header_fits(&m) && x.args_fit(&m) && self.speaks_for(&x.sender, m.sender.as_deref()) == Some(true));
        if fits {
            if self.queue.len() >= MAX_QUEUED {
                self.queue.pop_front();
            }
            self.queue.push_back(m);
        }
    }

    /// The first queued signal for which `want` holds.
    pub(crate) fn pop(&mut self, want: impl Fn(&Message) -> bool) -> Option<Message> {
        let i = self.queue.iter().position(want)?;
        self.queue.remove(i)
    }

    pub(crate) fn clear(&mut self) {
        self.queue.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn signal(sender: &str, path: &str, iface: &str, member: &str, body: Vec<Value>) -> Message {
        Message {
            kind: SIGNAL,
            sender: Some(sender.into()),
            path: Some(path.into()),
            interface: Some(iface.into()),
            member: Some(member.into()),
            body,
            ..Default::default()
        }
    }

    const SD: &str = "org.freedesktop.systemd1";
    const P: &str = "/org/freedesktop/systemd1";
    const M: &str = "org.freedesktop.systemd1.Manager";

    fn job(sender: &str, unit: &str) -> Message {
        signal(sender, P, M, "JobRemoved", vec![Value::U32(1), Value::Path("/j/1".into()), Value::str(unit), Value::str("done")])
    }

    #[test]
    fn only_the_owner_of_the_name_is_believed() {
        let mut s = Signals::default();
        s.add(Match::new(SD, P, M, "JobRemoved").arg(2, "a.scope"));
        assert!(s.untracked(SD));
        // Not followed yet: nobody speaks for it.
        assert!(!s.wanted(&job(":1.5", "a.scope")));
        s.set_owner(SD, ":1.5");
        assert!(s.wanted(&job(":1.5", "a.scope")));
        assert!(!s.wanted(&job(":1.6", "a.scope")), "another connection");
        assert!(!s.wanted(&signal(":1.5", "/other", M, "JobRemoved", vec![])), "another path");
        assert!(!s.wanted(&signal(":1.5", P, "x.Y", "JobRemoved", vec![])), "another interface");
        assert!(!s.wanted(&signal(":1.5", P, M, "UnitNew", vec![])), "another member");
        // An argument that does not fit is read (the header fits) but not queued.
        s.take(job(":1.5", "b.scope"));
        assert!(s.pop(|_| true).is_none());
        s.take(job(":1.5", "a.scope"));
        assert!(s.pop(|_| true).is_some());
    }

    #[test]
    fn owner_changes_are_taken_from_the_bus_only() {
        let mut s = Signals::default();
        s.add(Match::new(SD, P, M, "JobRemoved"));
        s.set_owner(SD, ":1.5");
        let change = |sender: &str, new: &str| {
            signal(sender, DRIVER_PATH, DRIVER, "NameOwnerChanged", vec![Value::str(SD), Value::str(":1.5"), Value::str(new)])
        };
        // A user cannot send as the bus: its "NameOwnerChanged" is not even read.
        assert!(!s.wanted(&change(":1.9", ":1.9")));
        assert!(s.wanted(&change(DRIVER, ":1.7")));
        s.take(change(DRIVER, ":1.7"));
        assert_eq!(s.owner(SD), Some(":1.7"));
        assert!(!s.wanted(&job(":1.5", "a.scope")), "the old owner");
        assert!(s.wanted(&job(":1.7", "a.scope")), "the new owner");
        s.take(change(DRIVER, ""));
        assert_eq!(s.owner(SD), None);
        assert!(!s.wanted(&job(":1.7", "a.scope")), "nobody owns it");
    }

    #[test]
    fn the_queue_is_bounded() {
        let mut s = Signals::default();
        s.add(Match::new(":1.5", P, M, "JobRemoved"));
        for _ in 0..MAX_QUEUED * 3 {
            s.take(job(":1.5", "a.scope"));
        }
        assert_eq!(s.queue.len(), MAX_QUEUED);
    }

    #[test]
    fn rules_quote_their_values() {
        let m = Match::new(SD, P, M, "JobRemoved").arg(2, "it's.scope");
        assert_eq!(
            m.rule(),
            "type='signal',sender='org.freedesktop.systemd1',path='/org/freedesktop/systemd1',\
             interface='org.freedesktop.systemd1.Manager',member='JobRemoved',arg2='it'\\''s.scope'"
        );
    }
}
