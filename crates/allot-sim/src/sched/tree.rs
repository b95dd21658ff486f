//! The currency graph as a tree of nodes shared by lottery and stride: node `c` for
//! currency `c`, and one root node for the base currency (Waldspurger & Weihl, OSDI
//! '94 §3.3 "ticket currencies": a currency is funded by tickets of its parent; a
//! ticket's base value is its share of its currency's value).

use super::Kernel;

/// Node index of the base currency.
pub fn root(k: &Kernel) -> usize {
    k.currencies.len()
}

/// Parent node of currency `c`.
pub fn parent(k: &Kernel, c: usize) -> usize {
    k.currencies[c].parent.unwrap_or(root(k))
}

/// A child of a node: a task or a currency node.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Holder {
    /// A task.
    Task(usize),
    /// A currency node.
    Node(usize),
}
