//! Fenwick (binary indexed) tree of integer weights: set a weight, total, and find
//! the slot holding the k-th unit, each in O(log n). This is the partial-sum tree
//! that makes a lottery draw O(log n) (Waldspurger & Weihl, OSDI '94, §4.2 "tree of
//! partial ticket sums").

/// Weights are u64 so that sums are exact and draws are reproducible bit for bit.
#[derive(Debug, Clone, Default)]
pub struct Fenwick {
    tree: Vec<u64>, // 1-based
    vals: Vec<u64>,
    total: u64,
}

impl Fenwick {
    /// An empty tree.
    pub fn new() -> Fenwick {
        Fenwick { tree: vec![0], vals: Vec::new(), total: 0 }
    }

    /// Number of slots.
    pub fn len(&self) -> usize {
        self.vals.len()
    }

    /// True when it has no slots.
    pub fn is_empty(&self) -> bool {
        self.vals.is_empty()
    }

    /// Sum of all weights.
    pub fn total(&self) -> u64 {
        self.total
    }

    /// Weight of a slot.
    pub fn get(&self, slot: usize) -> u64 {
        self.vals[slot]
    }

    /// Appends a slot with weight 0 and returns its index (amortised O(log n)).
    pub fn push(&mut self) -> usize {
        let i = self.vals.len() + 1; // 1-based index of the new slot
        self.vals.push(0);
        // tree[i] covers (i - lowbit(i), i]; all those slots but i exist already.
        let low = i & i.wrapping_neg();
        let mut sum = 0;
        let mut j = i - 1;
        while j > i - low {
            sum += self.tree[j];
            j -= j & j.wrapping_neg();
        }
        self.tree.push(sum);
        i - 1
    }

    /// Sets the weight of `slot`.
    pub fn set(&mut self, slot: usize, w: u64) {
        let old = self.vals[slot];
        if old == w {
            return;
        }
        self.vals[slot] = w;
        self.total = self.total - old + w;
        let mut i = slot + 1;
        let n = self.tree.len();
        while i < n {
            self.tree[i] = self.tree[i] - old + w;
            i += i & i.wrapping_neg();
        }
    }

    /// The slot whose cumulative range contains unit `u` (0 <= u < total).
    pub fn find(&self, mut u: u64) -> usize {
        debug_assert!(u < self.total);
        let n = self.tree.len() - 1;
        let mut pos = 0usize;
        let mut step = if n == 0 { 0 } else { 1usize << (usize::BITS - 1 - n.leading_zeros()) };
        while step > 0 {
            let next = pos + step;
            if next <= n && self.tree[next] <= u {
                u -= self.tree[next];
                pos = next;
            }
            step >>= 1;
        }
        pos // 0-based slot = (1-based pos + 1) - 1
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn find_matches_linear_scan() {
        let mut f = Fenwick::new();
        let ws = [3u64, 0, 5, 1, 0, 7, 2, 9, 4, 0, 6];
        for (i, w) in ws.iter().enumerate() {
            let s = f.push();
            assert_eq!(s, i);
            f.set(s, *w);
        }
        f.set(4, 2);
        let mut ws = ws.to_vec();
        ws[4] = 2;
        assert_eq!(f.total(), ws.iter().sum::<u64>());
        for u in 0..f.total() {
            let mut acc = 0;
            let mut want = 0;
            for (i, w) in ws.iter().enumerate() {
                if u < acc + w {
                    want = i;
                    break;
                }
                acc += w;
            }
            assert_eq!(f.find(u), want, "u={u}");
        }
    }
}
