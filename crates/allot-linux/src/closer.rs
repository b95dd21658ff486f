//! Closing descriptors a socket peer sent, off the caller's thread (see `peer`): re-exported
//! as `peer::discard_fds` and `peer::discards_pending`.

use std::os::fd::OwnedFd;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc, OnceLock};

static PENDING: AtomicUsize = AtomicUsize::new(0);
static CLOSER: OnceLock<Option<mpsc::Sender<Vec<OwnedFd>>>> = OnceLock::new();

/// Closes descriptors a peer sent, on a dedicated thread: closing one can block (a TCP
/// socket with SO_LINGER, a FUSE file whose server does not answer flush), and the
/// caller must never wait on that. Batches are closed in order; if one close hangs for
/// good, later ones wait behind it ([`discards_pending`] shows how many). Falls back to
/// closing here only if the thread cannot be started.
pub fn discard_fds(fds: Vec<OwnedFd>) {
    if fds.is_empty() {
        return;
    }
    let tx = CLOSER.get_or_init(|| {
        let (tx, rx) = mpsc::channel::<Vec<OwnedFd>>();
        let spawned = std::thread::Builder::new().name("allot-fd-closer".into()).spawn(move || {
            for batch in rx {
                let n = batch.len();
                drop(batch);
                PENDING.fetch_sub(n, Ordering::SeqCst);
            }
        });
        spawned.ok().map(|_| tx)
    });
    let n = fds.len();
    PENDING.fetch_add(n, Ordering::SeqCst);
    let unsent = match tx {
        Some(tx) => tx.send(fds).err().map(|mpsc::SendError(fds)| fds),
        None => Some(fds),
    };
    if let Some(fds) = unsent {
        drop(fds);
        PENDING.fetch_sub(n, Ordering::SeqCst);
    }
}

/// Descriptors handed to [`discard_fds`] and not closed yet. Stays above zero if a close
/// hangs: worth reporting (`allot status`), and a reason to set [`crate::ipc::peer::set_passrights`].
pub fn discards_pending() -> usize {
    PENDING.load(Ordering::SeqCst)
}
