//! Users' names and uids through NSS, remembered for a minute: a leaf that placement names
//! without importing trust.rs (whose impl Daemon imports the core).

/// A user's name for messages (or the uid).
pub fn user_label(uid: u32) -> String {
    remembered(&NAMES, uid, || allot_linux::process::procfs::user_name(uid)).unwrap_or_else(|| uid.to_string())
}

/// The uid NSS gives a user name (remembered like [`user_label`]).
pub fn uid_of(name: &str) -> Option<u32> {
    remembered(&UIDS, name.to_string(), || allot_linux::process::procfs::user_uid(name))
}

/// How long an NSS answer is kept: `show` names the user of every job and `may_use`
/// checks config lists by name, in the loop, and a lookup reads files or waits on a
/// directory server (LDAP, SSSD). A user added or renamed shows within a minute.
const REMEMBER: std::time::Duration = std::time::Duration::from_secs(60);

type Remembered<K, V> = std::sync::Mutex<Option<std::collections::HashMap<K, (Option<V>, std::time::Instant)>>>;
static NAMES: Remembered<u32, String> = std::sync::Mutex::new(None);
static UIDS: Remembered<String, u32> = std::sync::Mutex::new(None);

fn remembered<K: std::hash::Hash + Eq, V: Clone>(m: &Remembered<K, V>, key: K, look: impl FnOnce() -> Option<V>) -> Option<V> {
    let now = std::time::Instant::now();
    let mut g = m.lock().unwrap_or_else(|e| e.into_inner());
    let map = g.get_or_insert_with(Default::default);
    if let Some((v, at)) = map.get(&key) {
        if now.duration_since(*at) < REMEMBER {
            return v.clone();
        }
    }
    let v = look();
    // Bounded: past 4096 names (a storm of lookups of made-up names) all are forgotten.
    if map.len() >= 4096 {
        map.clear();
    }
    map.insert(key, (v.clone(), now));
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nss_answers_are_remembered_and_bounded() {
        let m: Remembered<u32, String> = std::sync::Mutex::new(None);
        let mut looked = 0;
        for _ in 0..3 {
            let v = remembered(&m, 7, || {
                looked += 1;
                None
            });
            assert_eq!(v, None);
        }
        assert_eq!(looked, 1, "a miss is remembered too: a made-up name costs one lookup a minute");
        for k in 0..5000 {
            remembered(&m, k, || Some(k.to_string()));
        }
        assert!(m.lock().unwrap().as_ref().unwrap().len() <= 4096);
    }
}
