//! The *applied* state, typed: what the daemon last wrote to each node of allot's tree,
//! keyed by what the node is (allot's root, a currency in a class, a currency's scope, a
//! job by its [`JobId`]) rather than by its path. The plan's writes ([`Write`]) name their
//! node and the directory it is now; [`Applied`] answers whether a write would change
//! anything. A failed write is a [`Failure`], returned to the tick that logs and counts it.

use super::registry::{currency_rel, parse_leaf, Class, CurrencyId, JobId, JobSpec, BACKGROUND};
use std::collections::HashMap;
use std::fmt;

/// cpu.max period allot uses (the kernel's default).
pub const PERIOD_US: u64 = 100_000;

/// A node of allot's tree, by identity.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Node {
    /// allot's root (its weight against load outside allot).
    Root,
    /// A currency's directory in one of the two trees.
    Currency(Class, CurrencyId),
    /// The scope that holds a currency's jobs (systemd), weighed against its sessions.
    Scope(CurrencyId),
    /// A job.
    Job(JobId),
}

/// Where a scope's weight is kept and reported (the backend's key for a held write).
const SCOPE: &str = "/#scope";

impl Node {
    /// The node a directory of allot's tree is (None: not one whose values allot writes,
    /// such as the background root or a directory allot did not make).
    pub fn of_rel(rel: &str) -> Option<Node> {
        if rel.is_empty() {
            return Some(Node::Root);
        }
        if let Some(cur) = rel.strip_suffix(SCOPE) {
            return (!cur.contains('/')).then(|| Node::Scope(CurrencyId::from_dir(cur)));
        }
        if rel == BACKGROUND {
            return None;
        }
        let (class, rest) = match rel.strip_prefix(BACKGROUND).and_then(|r| r.strip_prefix('/')) {
            Some(r) => (Class::Background, r),
            None => (Class::Foreground, rel),
        };
        match rest.split_once('/') {
            None => Some(Node::Currency(class, CurrencyId::from_dir(rest))),
            Some((cdir, leaf)) if !leaf.contains('/') => parse_leaf(&CurrencyId::from_dir(cdir), leaf).map(|(id, _)| Node::Job(id)),
            Some(_) => None,
        }
    }
}

/// One setting of a node.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Setting {
    /// Its weight, in allot units.
    Weight(u32),
    /// The weight of a currency's scope (systemd).
    ScopeWeight(u32),
    /// Its cpu.max in CPUs (None: unlimited).
    Max(Option<f64>),
}

impl Setting {
    /// cpu.max's quota for a cap in CPUs: µs per [`PERIOD_US`], at least 1 ms.
    pub fn quota_us(cpus: Option<f64>) -> Option<u64> {
        cpus.map(|c| ((c * PERIOD_US as f64).round() as u64).max(1000))
    }
}

/// One value the plan wants in the tree: the node, the directory it is now, the setting.
#[derive(Debug, Clone, PartialEq)]
pub struct Write {
    /// What the node is.
    pub node: Node,
    /// Its directory relative to allot's root (a scope's: its currency's).
    pub rel: String,
    /// The value.
    pub setting: Setting,
}

impl Write {
    /// A job's setting.
    pub fn job(spec: &JobSpec, setting: Setting) -> Self {
        Self { node: Node::Job(spec.id), rel: spec.rel(), setting }
    }
    /// A currency's setting in a class.
    pub fn currency(class: Class, c: &CurrencyId, setting: Setting) -> Self {
        Self { node: Node::Currency(class, c.clone()), rel: currency_rel(class, c), setting }
    }
    /// The weight of a currency's scope.
    pub fn scope(c: &CurrencyId, w: u32) -> Self {
        Self { node: Node::Scope(c.clone()), rel: currency_rel(Class::Foreground, c), setting: Setting::ScopeWeight(w) }
    }
    /// allot's root's weight.
    pub fn root(w: u32) -> Self {
        Self { node: Node::Root, rel: String::new(), setting: Setting::Weight(w) }
    }
}

/// What was last written to one node (None: not known, write it).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Written {
    /// Weight in allot units (a scope's: its scope weight).
    pub weight: Option<u32>,
    /// Quota µs per PERIOD_US (Some(None): unlimited).
    pub max: Option<Option<u64>>,
}

impl Written {
    /// Whether `s` is what was last written.
    fn holds(&self, s: Setting) -> bool {
        match s {
            Setting::Weight(w) | Setting::ScopeWeight(w) => self.weight == Some(w),
            Setting::Max(cpus) => self.max == Some(Setting::quota_us(cpus)),
        }
    }
    /// Keeps `s` as written (`ok`), or as unknown so the next plan writes it again.
    fn set(&mut self, s: Setting, ok: bool) {
        match s {
            Setting::Weight(w) | Setting::ScopeWeight(w) => self.weight = ok.then_some(w),
            Setting::Max(cpus) => self.max = ok.then_some(Setting::quota_us(cpus)),
        }
    }
}

/// What was last written, per node. A node is *known* once allot made or adopted it (an
/// entry, possibly with nothing written yet); only known nodes get a currency's writes.
#[derive(Debug, Default)]
pub struct Applied {
    nodes: HashMap<Node, Written>,
}

impl Applied {
    /// Whether `s` is already in force at `node`.
    pub fn holds(&self, node: &Node, s: Setting) -> bool {
        self.nodes.get(node).is_some_and(|w| w.holds(s))
    }
    /// Records the outcome of writing `s` to `node`.
    pub fn record(&mut self, node: &Node, s: Setting, ok: bool) {
        self.nodes.entry(node.clone()).or_default().set(s, ok);
    }
    /// What was last written to `node`.
    pub fn get(&self, node: &Node) -> Option<&Written> {
        self.nodes.get(node)
    }
    /// Whether allot made or adopted `node`.
    pub fn knows(&self, node: &Node) -> bool {
        self.nodes.contains_key(node)
    }
    /// A node made or adopted: known, nothing written yet.
    pub fn made(&mut self, node: Node) {
        self.nodes.insert(node, Written::default());
    }
    /// A node removed.
    pub fn removed(&mut self, node: &Node) {
        self.nodes.remove(node);
    }
    /// Forgets what was written to `node` (it stays known), so the next plan writes it again.
    pub fn forget(&mut self, node: &Node) {
        self.nodes.insert(node.clone(), Written::default());
    }
    /// Forgets the weight written to `node` (changed from outside), so it is written again.
    pub fn forget_weight(&mut self, node: &Node) {
        self.nodes.entry(node.clone()).or_default().weight = None;
    }
    /// Forgets the cap written to `node` (changed from outside), so it is written again.
    pub fn forget_max(&mut self, node: &Node) {
        self.nodes.entry(node.clone()).or_default().max = None;
    }
    /// Forgets what was written everywhere.
    pub fn forget_all(&mut self) {
        for w in self.nodes.values_mut() {
            *w = Written::default();
        }
    }
    /// Every currency's directory (or slice) with a weight or cap written.
    pub fn written_currencies(&self) -> impl Iterator<Item = &Node> {
        self.nodes.iter().filter(|(n, w)| matches!(n, Node::Currency(..)) && (w.weight.is_some() || w.max.is_some())).map(|(n, _)| n)
    }
    /// Every node with a cap in force.
    pub fn capped(&self) -> impl Iterator<Item = &Node> {
        self.nodes.iter().filter(|(_, w)| matches!(w.max, Some(Some(_)))).map(|(n, _)| n)
    }
}

/// A write that failed: what, where, the value, and the error in the kernel's (or the
/// service manager's) words.
#[derive(Debug, Clone, PartialEq)]
pub struct Failure {
    /// What was being done ("set the weight of").
    pub what: &'static str,
    /// The directory, or the thread (`thread 1234`).
    pub place: String,
    /// The value, as written.
    pub value: String,
    /// Why it failed.
    pub error: String,
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "could not {} {} to {}: {}", self.what, self.place, self.value, self.error)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn directories_read_back_as_the_nodes_they_are() {
        assert_eq!(Node::of_rel(""), Some(Node::Root));
        assert_eq!(Node::of_rel(BACKGROUND), None);
        assert_eq!(Node::of_rel("user-1000"), Some(Node::Currency(Class::Foreground, CurrencyId::User(1000))));
        assert_eq!(Node::of_rel("background/ci"), Some(Node::Currency(Class::Background, CurrencyId::Named("ci".into()))));
        assert_eq!(Node::of_rel("user-1000/default"), Some(Node::Job(JobId::Default(1000))));
        assert_eq!(Node::of_rel("background/ci/j7-u1001"), Some(Node::Job(JobId::Numbered(7))));
        let named = |n: &str| CurrencyId::Named(n.into());
        assert_eq!(Node::of_rel(&format!("{BACKGROUND}x")), Some(Node::Currency(Class::Foreground, named(&format!("{BACKGROUND}x")))));
        assert_eq!(Node::of_rel("user-1000/#scope"), Some(Node::Scope(CurrencyId::User(1000))));
        assert_eq!(Node::of_rel("user-1000/stray"), None);
        assert_eq!(Node::of_rel("user-1000/default/deeper"), None);
        let j = JobSpec::new(JobId::Numbered(7), CurrencyId::User(1000), 1000);
        let w = Write::job(&j, Setting::Weight(5));
        assert_eq!(Node::of_rel(&w.rel), Some(w.node));
    }

    #[test]
    fn only_a_differing_value_is_written_and_a_failed_one_is_written_again() {
        let mut a = Applied::default();
        let n = Node::Job(JobId::Numbered(1));
        assert!(!a.holds(&n, Setting::Weight(100)));
        a.record(&n, Setting::Weight(100), true);
        assert!(a.holds(&n, Setting::Weight(100)));
        assert!(!a.holds(&n, Setting::Weight(200)));
        assert!(!a.holds(&n, Setting::Max(None)), "weight and cap are apart");
        a.record(&n, Setting::Max(Some(0.5)), true);
        assert!(a.holds(&n, Setting::Max(Some(0.5))));
        assert_eq!(a.capped().collect::<Vec<_>>(), vec![&n]);
        a.record(&n, Setting::Weight(200), false);
        assert!(!a.holds(&n, Setting::Weight(100)) && !a.holds(&n, Setting::Weight(200)), "a failed write is unknown");
        a.forget_all();
        assert!(a.knows(&n) && !a.holds(&n, Setting::Max(Some(0.5))));
    }
}
