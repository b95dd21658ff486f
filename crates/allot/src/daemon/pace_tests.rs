//! What a busy tick writes, against the fake kernel.

use super::tests::{path_of, peer, run_req, start, world};
use crate::proto::Response;
use std::time::{Duration, Instant};

#[test]
fn a_busy_tick_with_no_niced_process_to_split_leaves_the_state_file_alone() {
    let w = world();
    w.lock().unwrap().spawn(100, 3000, "/", "hog");
    let dir = std::env::temp_dir().join(format!("allot-pace-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let state = dir.join("state.json");
    let mut d = start(&w, Some(state.clone()));
    let Ok(Response::Job(_)) = d.handle(run_req(None, None), &peer(&w, 3000, 100)) else { panic!("run refused") };
    let hog = path_of(&w, 100);
    let saved = || std::fs::metadata(&state).unwrap().modified().unwrap();
    let before = saved();
    std::thread::sleep(Duration::from_millis(20));
    let t0 = Instant::now();
    for k in 0..10u32 {
        w.lock().unwrap().dirs.get_mut(&hog).unwrap().usage_ns += 100_000_000;
        d.tick_at(t0 + Duration::from_millis(100) * k);
    }
    // Each save writes a new file and renames it over the state file.
    assert_eq!(saved(), before, "ten busy ticks saved the state file");
    std::fs::remove_dir_all(&dir).unwrap();
}
