//! The tick's pace (core/pace.rs) and what a busy tick writes, against the fake kernel.

use super::core::Daemon;
use super::tests::{path_of, peer, run_req, start, world};
use crate::proto::Response;
use std::time::{Duration, Instant};

/// Calls the loop's pace every 100 ms from tick `from` to `to`, each job in `uses` using
/// that many CPUs meanwhile; returns the calls that ran a full tick.
fn pace(d: &mut Daemon, w: &super::fake::Shared, t0: Instant, from: u32, to: u32, uses: &[(&str, f64)]) -> Vec<u32> {
    let mut ticked = vec![];
    for k in from..to {
        for (dir, cpus) in uses {
            w.lock().unwrap().dirs.get_mut(*dir).unwrap().usage_ns += (cpus * 1e8) as u64;
        }
        if d.pace_tick(t0 + Duration::from_millis(100) * k) {
            ticked.push(k);
        }
    }
    ticked
}

#[test]
fn a_cpu_bound_job_is_planned_every_boost_window_and_a_new_or_woken_one_at_once() {
    let w = world();
    w.lock().unwrap().spawn(100, 3000, "/", "hog");
    w.lock().unwrap().spawn(200, 3001, "/", "sleeper");
    let mut d = start(&w, None);
    d.set_ncpu(1);
    let Ok(Response::Job(_)) = d.handle(run_req(None, None), &peer(&w, 3000, 100)) else { panic!("run refused") };
    let hog = path_of(&w, 100);
    assert_eq!(d.pace_fast(), Some(allot_model::pace::Fast::New), "a new job is measured at the next fast tick");
    let t0 = Instant::now();
    // New, then CPU-bound: the next tick after 100 ms measures it, then every 500 ms.
    let first = pace(&mut d, &w, t0, 0, 10, &[(&hog, 1.0)]);
    assert_eq!(first, [0, 1, 6], "fast while new, then the boost window: {first:?}");
    let steady = pace(&mut d, &w, t0, 10, 30, &[(&hog, 1.0)]);
    assert_eq!(d.pace_fast(), None);
    assert_eq!(steady.len(), 4, "a CPU-bound job alone: one tick per boost window (500 ms): {steady:?}");
    assert!(steady.windows(2).all(|p| p[1] - p[0] == 5), "{steady:?}");
    // Another user's job that sleeps: boosted (asleep), watched between slow ticks.
    let Ok(Response::Job(_)) = d.handle(run_req(None, None), &peer(&w, 3001, 200)) else { panic!("run refused") };
    let sleeper = path_of(&w, 200);
    pace(&mut d, &w, t0, 30, 40, &[(&hog, 1.0)]);
    let quiet = pace(&mut d, &w, t0, 40, 50, &[(&hog, 1.0)]);
    assert_eq!(quiet.len(), 2, "the sleeper asleep: still one tick per window: {quiet:?}");
    // It wakes now and then, below the model's active threshold (0.1% of a CPU): asleep
    // still, so no tick comes early.
    let light = pace(&mut d, &w, t0, 50, 60, &[(&hog, 1.0), (&sleeper, 0.001)]);
    assert_eq!(light, [51, 56], "a few wake-ups do not make the tick fast: {light:?}");
    let quiet = pace(&mut d, &w, t0, 60, 70, &[(&hog, 1.0)]);
    // It wakes: planned at the next 100 ms, not at the window's end.
    let last = *quiet.last().unwrap();
    let woke = pace(&mut d, &w, t0, last + 1, last + 2, &[(&hog, 1.0), (&sleeper, 0.5)]);
    assert_eq!(woke, [last + 1], "a boosted job that ran is planned at once");
}

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
