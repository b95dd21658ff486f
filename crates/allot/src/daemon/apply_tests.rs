//! The tick's apply step against the fake kernel: only differences are written, and every
//! failed write, of a cgroup file or of a thread's slice, is returned, counted and written
//! again at the next plan.

use super::tests::{path_of, peer, start, world};
use crate::proto::{Request, Response};

fn run(d: &mut super::core::Daemon, w: &super::fake::Shared, pid: i32) {
    let r = d
        .handle(
            Request::Run {
                tickets: allot_model::Tickets::new(50).ok(),
                currency: None,
                cap: None,
                background: false,
                force: false,
                mem: None,
                oom_group: false,
            },
            &peer(w, 3000, pid),
        )
        .unwrap();
    assert!(matches!(r, Response::Job(_)), "{r:?}");
}

#[test]
fn a_plan_that_changes_nothing_writes_nothing() {
    let w = world();
    w.lock().unwrap().spawn(100, 3000, "/", "allot run");
    let mut d = start(&w, None);
    run(&mut d, &w, 100);
    d.replan();
    let before = w.lock().unwrap().writes;
    d.replan();
    d.replan();
    assert_eq!(w.lock().unwrap().writes, before, "the applied state holds every value: nothing is written again");
    // Forgotten (an outside change, lost events): written once more, then quiet again.
    d.forget_applied(None);
    d.replan();
    let after = w.lock().unwrap().writes;
    assert!(after > before, "{after} > {before}");
    d.replan();
    assert_eq!(w.lock().unwrap().writes, after);
}

#[test]
fn plan_writes_nothing_and_apply_writes_what_it_planned() {
    let w = world();
    w.lock().unwrap().spawn(100, 3000, "/", "allot run");
    let mut d = start(&w, None);
    run(&mut d, &w, 100);
    d.forget_applied(None);
    let before = w.lock().unwrap().writes;
    let plan = d.plan();
    assert_eq!(w.lock().unwrap().writes, before, "planning touches no file");
    assert!(d.apply(&plan).is_empty(), "nothing refused");
    assert!(w.lock().unwrap().writes > before, "apply writes what was forgotten");
}

#[test]
fn a_refused_write_is_counted_and_written_again_until_it_holds() {
    let w = world();
    w.lock().unwrap().spawn(100, 3000, "/", "allot run");
    let mut d = start(&w, None);
    run(&mut d, &w, 100);
    let dir = path_of(&w, 100);
    assert_eq!(d.counters().write_errors, 0);
    w.lock().unwrap().refuse_writes.insert(dir.clone());
    d.forget_applied(None);
    d.replan();
    // The job's weight and cpu.max, each refused.
    assert_eq!(d.counters().write_errors, 2, "every failure returned and counted");
    d.replan();
    assert_eq!(d.counters().write_errors, 4, "a refused value is not taken for written: tried again");
    w.lock().unwrap().refuse_writes.clear();
    w.lock().unwrap().dirs.get_mut(&dir).unwrap().weight = 0;
    d.replan();
    assert_eq!(d.counters().write_errors, 4);
    let planned = d.planned().jobs.values().map(|p| p.weight).max().unwrap();
    assert_eq!(w.lock().unwrap().dirs[&dir].weight, planned, "written once the kernel takes it");
}

#[test]
fn a_refused_slice_write_is_a_failure() {
    let w = world();
    w.lock().unwrap().spawn(100, 3000, "/", "allot run");
    w.lock().unwrap().refuse_slices.insert(100);
    let mut d = start(&w, None);
    d.cfg_mut().policy.boost_slice_us = 100;
    // The fake kernel honours custom slices whatever this one does, or whatever policy the
    // test runs under (the probe reads its own thread: a SCHED_IDLE one reads "no").
    d.features_mut().custom_slices = true;
    run(&mut d, &w, 100);
    assert_eq!(w.lock().unwrap().slices.get(&100), None, "refused");
    assert_eq!(d.counters().write_errors, 1, "a slice write that failed is no longer silent");
}

/// The backend is chosen once at start from the controller, and answers for the host: on
/// allot's own tree allot weighs its root against outside load and names itself; on a
/// systemd host that split is systemd's, and nothing is written to the root.
#[test]
fn the_backend_chosen_at_start_answers_for_the_host() {
    for systemd in [false, true] {
        let w = world();
        w.lock().unwrap().systemd = systemd;
        // A weight nobody would write, to see whether the root is written at all.
        w.lock().unwrap().dirs.insert("/fake".into(), super::fake::Dir { weight: 77, ..Default::default() });
        let d = start(&w, None);
        let st = d.status();
        let root = w.lock().unwrap().dirs.get("/fake").map(|x| x.weight);
        if systemd {
            assert_eq!((st.manager.as_str(), st.outside_weight), ("systemd", None));
            assert_eq!(root, Some(77), "the root's weight is systemd's: never written");
        } else {
            assert_eq!((st.manager.as_str(), st.outside_weight), ("allot", Some(d.cfg().outside.weight)));
            assert_eq!(root, Some(d.cfg().outside.weight), "allot's root weighed against outside load");
        }
    }
}

/// `allot run` makes the job's directory and the plan of the same request writes its
/// values: its weight and its cpu.max are each written once, not once at rest by the
/// directory's maker and again by the plan.
#[test]
fn a_run_writes_the_job_s_weight_and_cpu_max_once() {
    let w = world();
    w.lock().unwrap().spawn(100, 3000, "/", "allot run");
    let mut d = start(&w, None);
    run(&mut d, &w, 100);
    let dir = path_of(&w, 100);
    let x = w.lock().unwrap().dirs[&dir].clone();
    let planned = d.planned().jobs.values().map(|p| p.weight).max().unwrap();
    assert_eq!(x.weight, planned, "the plan's weight is in the kernel");
    assert_eq!((x.weight_writes, x.max_writes), (1, 1), "each file written once in the request");
}
