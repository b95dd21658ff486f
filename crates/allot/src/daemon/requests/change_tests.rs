//! One `commit` for every request: a change applied whole, or, when the state file cannot
//! keep it, taken back whole (kernel moves, directories, desired state) and refused as
//! internal.
use super::super::tests::{path_of, peer, set_req, start, world};
use crate::proto::{CapChange, ErrorKind, Request, Response};
use allot_model::Funding;

fn set(pids: Vec<i64>, tickets: Option<i64>, background: Option<bool>) -> Request {
    set_req(&pids, tickets, background, false)
}

#[test]
fn a_change_of_class_moves_the_job_and_its_old_directory_goes() {
    let w = world();
    w.lock().unwrap().spawn(100, 3000, "/", "a");
    let mut d = start(&w, None);
    d.scan();
    let a = peer(&w, 3000, 100);
    let Response::Changed(c) = d.handle(set(vec![100], Some(7), None), &a).unwrap() else { panic!() };
    let fg = path_of(&w, 100);
    assert!(fg.starts_with("/fake/user-3000/j"), "{fg}");
    // The same job twice in one request changes once.
    let Response::Changed(c2) = d.handle(set(vec![100, 100], None, Some(true)), &a).unwrap() else { panic!() };
    assert_eq!(c2.jobs, c.jobs);
    let bg = path_of(&w, 100);
    assert!(bg.starts_with("/fake-background/user-3000/j"), "{bg}");
    assert!(!w.lock().unwrap().dirs.contains_key(&fg), "the emptied foreground directory is removed");
    let job = d.desired().jobs.values().find(|j| j.background).expect("the job, now background");
    assert_eq!(job.tickets.get(), 7, "its tickets kept");
}

#[test]
fn a_change_the_state_file_cannot_keep_is_taken_back_whole() {
    let w = world();
    {
        let mut x = w.lock().unwrap();
        x.spawn(100, 3000, "/", "a");
        x.spawn(101, 3000, "/", "b");
    }
    let dir = std::env::temp_dir().join(format!("allot-change-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let mut d = start(&w, Some(dir.join("state.json")));
    d.scan();
    let a = peer(&w, 3000, 100);
    // A job of 100's own, saved, then a background change of it to take back later.
    d.handle(set(vec![100], Some(7), None), &a).unwrap();
    let own = path_of(&w, 100);
    // The state directory becomes a file: no save can succeed now.
    std::fs::remove_dir_all(&dir).unwrap();
    std::fs::write(&dir, "").unwrap();
    let before = d.desired().clone();
    // Job directories (a currency's, made fresh on the way, is left empty: make_job_dir's).
    let job_dirs = || w.lock().unwrap().dirs.keys().filter(|k| k.contains("/j")).cloned().collect::<Vec<_>>();
    let dirs = job_dirs();
    let unsaved = |r: Result<Response, crate::proto::Refusal>| {
        let e = r.unwrap_err();
        assert_eq!(e.kind, ErrorKind::Internal, "{e:?}");
        assert!(e.message.starts_with("nothing was changed: the state file could not be saved"), "{e:?}");
    };
    // New jobs for two processes, one of which also changes class: all taken back.
    unsaved(d.handle(set(vec![101, 100], Some(9), Some(true)), &a));
    assert_eq!((path_of(&w, 100), path_of(&w, 101)), (own.clone(), "/fake/user-3000/default".to_string()));
    // run: the caller goes back where it was.
    unsaved(d.handle(
        Request::Run { tickets: None, currency: None, cap: None, background: false, force: false, mem: None, oom_group: false },
        &peer(&w, 3000, 101),
    ));
    assert_eq!(path_of(&w, 101), "/fake/user-3000/default");
    // fund: funding and cap as they were.
    let root = peer(&w, 0, 1);
    unsaved(d.handle(Request::Fund { currency: Some("3000".into()), funding: Funding::new(300).ok(), cap: CapChange::Clear }, &root));
    // As it was, but for the job ids the refused requests took (never given out again).
    let now = d.desired();
    assert_eq!((&now.jobs, &now.funding, &now.caps), (&before.jobs, &before.funding, &before.caps), "the desired state is as it was");
    assert_eq!(job_dirs(), dirs, "no job directory made is left behind");
    let _ = std::fs::remove_file(&dir);
}
