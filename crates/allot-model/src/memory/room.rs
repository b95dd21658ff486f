//! The memory available to users, bounded by what the machine really has room for
//! (docs/memory.md, "What the machine has room for").
//!
//! [`available`](super::available) is MemTotal less a fixed reserve for the system. What
//! the system (the kernel, its caches, the services, every slice that is no currency's)
//! really uses can be more: then users held within MemTotal less the reserve still run
//! the machine short, and the kernel's reclaim threads (kswapd, in no user's cgroup) take
//! CPU from every user alike (the fifth run in the systemd VM: A's slice held at its
//! `MemoryHigh=`, 107 MiB left for the system, kswapd 4.92 s). The kernel's own estimate of
//! what can still be had without swapping, `MemAvailable`, tells the room: the users'
//! memory plus it, less [`ROOM_MARGIN`], is what the users together may hold before the
//! machine runs short. That sum does not move while users grow or shrink (what one takes,
//! MemAvailable loses), only when the system's own use does.

use super::GUARD_MARGIN;

/// What is kept of the kernel's `MemAvailable` when the users hold all they may: the
/// charges between two ticks and a `MemoryHigh=` overshoot (the kernel throttles a group
/// above it after it charged a batch), so that free memory stays above the watermarks at
/// which kswapd wakes.
pub const ROOM_MARGIN: u64 = 2 * GUARD_MARGIN;

/// The memory available to users: `available` (MemTotal less the reserve, at most
/// `user.slice`'s own limit), and at most what the machine has room for now, the users'
/// memory (`users`, the sum of their currencies' charges and the background's, which
/// their reclaim takes first) plus the kernel's
/// `MemAvailable` (`mem_available`, None: not known) less [`ROOM_MARGIN`], rounded down to a
/// multiple of [`GUARD_MARGIN`]. `last` is what the previous step used: it is kept while
/// it is no more than the room and less than two [`GUARD_MARGIN`]s under it, so the value
/// (and every share and limit made from it) changes seldom; it falls at once when the
/// room does. A currency's `MemoryHigh=` is never below its protection
/// ([`soft_limit`](super::soft_limit)) and protections follow this value.
pub fn room(available: u64, users: u64, mem_available: Option<u64>, last: Option<u64>) -> u64 {
    let Some(free) = mem_available else { return available };
    let raw = users.saturating_add(free).saturating_sub(ROOM_MARGIN);
    if raw >= available {
        return available;
    }
    match last {
        Some(l) if l <= raw && raw - l < 2 * GUARD_MARGIN => l,
        _ => raw / GUARD_MARGIN * GUARD_MARGIN,
    }
}

/// The lesser of two bounds, either of which may be unknown (None): a limit on allot's
/// root and a container's above it, or the kernel's `MemAvailable` (the host's, in a
/// container) and the room left under a container's limit.
pub fn least(a: Option<u64>, b: Option<u64>) -> Option<u64> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

#[cfg(test)]
mod tests {
    use super::super::{plan, soft_limit, CurrencyMem};
    use super::*;

    const M: u64 = 1 << 20;

    fn cur(usage: u64) -> CurrencyMem {
        CurrencyMem { funding: 100, usage, cap: None, jobs: vec![] }
    }

    #[test]
    fn least_of_two_bounds_either_unknown() {
        assert_eq!(least(Some(3), Some(2)), Some(2));
        assert_eq!(least(None, Some(2)), Some(2));
        assert_eq!(least(Some(3), None), Some(3));
        assert_eq!(least(None, None), None);
    }

    #[test]
    fn room_bounds_what_the_users_may_hold_together() {
        // The fifth run's machine: 966 MiB, 870 available by the reserve. The system uses
        // more than the reserve: A 600 + B 162 and 80 MiB MemAvailable leave room for 810.
        assert_eq!(room(870 * M, 762 * M, Some(80 * M), None), 800 * M, "762 + 80 - 32 = 810, down to 16 MiB");
        // Room to spare: the reserve's value.
        assert_eq!(room(870 * M, 300 * M, Some(700 * M), None), 870 * M);
        assert_eq!(room(870 * M, 300 * M, None, None), 870 * M, "MemAvailable not known");
        assert_eq!(room(870 * M, 0, Some(10 * M), None), 0, "the system holds everything");
        // The same room however the users' memory moves between them and MemAvailable.
        assert_eq!(room(870 * M, 700 * M, Some(142 * M), None), room(870 * M, 762 * M, Some(80 * M), None));
    }

    #[test]
    fn room_changes_seldom() {
        // Kept while the room grows by less than 32 MiB; falls at once below it.
        assert_eq!(room(870 * M, 762 * M, Some(90 * M), Some(800 * M)), 800 * M);
        assert_eq!(room(870 * M, 762 * M, Some(101 * M), Some(800 * M)), 800 * M, "831 is less than 832");
        assert_eq!(room(870 * M, 762 * M, Some(102 * M), Some(800 * M)), 832 * M);
        assert_eq!(room(870 * M, 762 * M, Some(69 * M), Some(800 * M)), 784 * M, "799: under the last, down to 784");
        assert_eq!(room(870 * M, 762 * M, Some(200 * M), Some(800 * M)), 870 * M, "room to spare: the reserve's");
    }

    #[test]
    fn a_hog_stops_where_the_machine_keeps_its_margin() {
        // A grows past its share beside B's 162 MiB; the system holds 150 MiB of 966, so
        // MemAvailable is what A and B leave of the other 816 (a few MiB of it not to be had).
        let total_room = 816 * M;
        for a in [300 * M, 500 * M, 640 * M] {
            let free = total_room - a - 162 * M;
            let r = room(870 * M, a + 162 * M, Some(free), None);
            let p = plan(r, &[cur(a), cur(162 * M)]);
            let high = soft_limit(&p[0]).unwrap();
            assert_eq!((r, high), (784 * M, 592 * M), "816 - 32 = 784; 784 - 162 - 16 = 606, down to 592");
            assert!(total_room - high - 162 * M >= ROOM_MARGIN + GUARD_MARGIN, "A at its MemoryHigh= leaves MemAvailable its margin");
            assert!(soft_limit(&p[1]).unwrap() >= r / 2, "B: never below its protection");
        }
    }

    #[test]
    fn never_more_than_the_reserve_leaves() {
        for (u, f) in [(0, 0), (M, u64::MAX), (u64::MAX, u64::MAX), (500 * M, 400 * M)] {
            for last in [None, Some(0), Some(870 * M), Some(u64::MAX)] {
                let r = room(870 * M, u, Some(f), last);
                assert!(r <= 870 * M && r <= u.saturating_add(f).saturating_sub(ROOM_MARGIN), "{u} {f} {last:?}: {r}");
            }
        }
    }
}
