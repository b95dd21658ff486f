//! The kernel readings' tests: the wait rate's arithmetic, and this process sampled twice
//! (with the metrics tests' shared replies: a file of its own, as metrics_tests.rs imports
//! readings.rs).

use super::*;

#[test]
fn wait_is_a_share_of_runnable_time_and_a_thread_count() {
    // One thread that ran 1/3 and waited 2/3 of a second (three hogs on one CPU).
    let w = wait_of(333_000_000, 667_000_000, 1.0);
    assert!((w.ratio - 0.667).abs() < 1e-9 && (w.threads - 0.667).abs() < 1e-9, "{w:?}");
    // Two threads waiting all of a half-second window.
    let w = wait_of(0, 1_000_000_000, 0.5);
    assert_eq!((w.ratio, w.threads), (1.0, 2.0));
    assert_eq!(wait_of(0, 0, 1.0), Wait { ratio: 0.0, threads: 0.0 });
}

#[test]
fn this_process_is_sampled_twice_and_its_wait_appears_the_second_time() {
    let me = std::process::id() as i32;
    let show = ShowView {
        ncpu: 1,
        outside: 0.0,
        jobs: vec![crate::metrics::tests::job("1", Some(vec![me]))],
        currencies: vec![],
        hidden: false,
        unread: vec![],
    };
    let status = crate::metrics::tests::status();
    let mut s = Sampler::new(&status);
    let first = s.sample(&show);
    assert_eq!(first.jobs["1"].wait, None, "one sample has no rate");
    assert_eq!(first.window_s, None);
    let t0 = Instant::now();
    while t0.elapsed().as_millis() < 20 {
        std::hint::black_box(0u64.wrapping_add(1));
    }
    let second = s.sample(&show);
    let w = second.jobs["1"].wait.expect("the second sample has a rate");
    assert!((0.0..=1.0).contains(&w.ratio), "{w:?}");
    assert!(second.window_s.unwrap() > 0.0);
}
