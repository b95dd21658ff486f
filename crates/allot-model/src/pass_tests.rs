use super::*;

const MS: u64 = 1_000_000;

#[test]
fn a_sleeper_rejoins_at_most_lag_behind() {
    assert_eq!(queue_at(5, 100 * LAG, None), 99 * LAG);
    assert_eq!(queue_at(99 * LAG + 7, 100 * LAG, None), 99 * LAG + 7);
    // near zero the floor wraps, as the BPF side's u64 does: a pass of 0 stays
    assert_eq!(queue_at(0, 0, None), 0);
    assert_eq!(queue_at(3, LAG / 2, None), 3);
}

#[test]
fn no_task_is_queued_before_its_job_s_pass() {
    assert_eq!(queue_at(10, 10, Some(500)), 500);
    assert_eq!(queue_at(900, 10, Some(500)), 900);
    // the job's pass floors the sleeper's floor too
    assert_eq!(queue_at(5, 100 * LAG, Some(100 * LAG + 3)), 100 * LAG + 3);
}

#[test]
fn a_job_is_charged_at_its_whole_share_from_at_most_lag_behind() {
    assert_eq!(charge_job(Some(1000), 1000, 50_000, 1024), 1000 + 50_000);
    // idle for long: rolled up to LAG behind the global pass first
    assert_eq!(charge_job(Some(1), 10 * LAG, 1024, 1024), 9 * LAG + 1024);
    assert_eq!(charge_job(None, 10 * LAG, 0, 1024), 9 * LAG);
    assert_eq!(stride(1, 0), STRIDE_UNIT, "a share of 0 counts as 1");
    assert_eq!(stride(u64::MAX, 1), u64::MAX, "saturates, never wraps");
}

/// A task of the one-CPU simulation: its job, its pass, the CPU it needs before it sleeps
/// (`u64::MAX`: a hog), how long it then sleeps, and when it is runnable again.
struct Task {
    job: usize,
    own: u64,
    burst: u64,
    sleep: u64,
    need: u64,
    wakes_at: Option<u64>,
    queued: Option<(u64, u64)>,
}

fn hog(job: usize) -> Task {
    Task { job, own: 0, burst: u64::MAX, sleep: 0, need: u64::MAX, wakes_at: None, queued: None }
}

fn sleeper(job: usize, burst: u64, sleep: u64) -> Task {
    Task { job, own: 0, burst, sleep, need: burst, wakes_at: None, queued: None }
}

/// One CPU for 5 s and then `for_ns` under the rule above, quanta of 20 ms, no
/// preemption; each job's share `shares[j]`, split among its runnable tasks. `job_pass`:
/// with the job's pass as a floor (the rule) or without (a pass per task alone). The CPU
/// each job and each task got after the first 5 s (the credit a job or a task starts
/// with, up to LAG, spent; the VM's checks also measure after 5 s), as fractions.
fn run(tasks: &mut [Task], shares: &[u64], job_pass: bool, for_ns: u64) -> (Vec<f64>, Vec<f64>) {
    const WARM: u64 = 5_000 * MS;
    let for_ns = WARM + for_ns;
    let (mut now, mut global, mut seq) = (0u64, 0u64, 0u64);
    let mut jobs: Vec<Option<u64>> = vec![None; shares.len()];
    let mut runnable = vec![0u64; shares.len()];
    let (mut got, mut by_task) = (vec![0u64; shares.len()], vec![0u64; tasks.len()]);
    for t in tasks.iter_mut() {
        runnable[t.job] += 1;
        seq += 1;
        t.queued = Some((0, seq));
    }
    while now < for_ns {
        for t in tasks.iter_mut() {
            if t.wakes_at.is_some_and(|w| w <= now) {
                t.wakes_at = None;
                runnable[t.job] += 1;
                seq += 1;
                t.queued = Some((queue_at(t.own, global, if job_pass { jobs[t.job] } else { None }), seq));
            }
        }
        let next = tasks.iter().enumerate().filter_map(|(i, t)| t.queued.map(|q| (q, i))).min_by(|((a, sa), _), ((b, sb), _)| {
            if a == b {
                sa.cmp(sb)
            } else if before(*a, *b) {
                std::cmp::Ordering::Less
            } else {
                std::cmp::Ordering::Greater
            }
        });
        let Some(((at, _), i)) = next else {
            now = tasks.iter().filter_map(|t| t.wakes_at).min().expect("a task sleeps");
            continue;
        };
        let t = &mut tasks[i];
        t.queued = None;
        if before(global, at) {
            global = at;
        }
        let ran = t.need.min(20 * MS).min(for_ns - now);
        if now >= WARM {
            got[t.job] += ran;
            by_task[i] += ran;
        }
        now += ran;
        t.own = at.wrapping_add(stride(ran, shares[t.job] / runnable[t.job].max(1)));
        jobs[t.job] = Some(charge_job(jobs[t.job], global, ran, shares[t.job]));
        if t.need != u64::MAX {
            t.need -= ran;
        }
        if t.need == 0 {
            t.need = t.burst;
            t.wakes_at = Some(now + t.sleep);
            runnable[t.job] -= 1;
        } else {
            seq += 1;
            t.queued = Some((queue_at(t.own, global, if job_pass { jobs[t.job] } else { None }), seq));
        }
    }
    let f = |v: Vec<u64>| v.into_iter().map(|x| x as f64 / (now - WARM) as f64).collect();
    (f(got), f(by_task))
}

/// The VM's `sleepers` check in the model: job 0 one hog; job 1 a hog and four tasks that
/// run 3 ms every 50 ms; equal shares. With the job's pass each job gets half; with a
/// pass per task alone the sleepers' job took more (0.5604 in the VM).
#[test]
fn a_job_of_sleepers_gets_its_share_and_no_more() {
    let mk =
        || vec![hog(0), hog(1), sleeper(1, 3 * MS, 50 * MS), sleeper(1, 3 * MS, 50 * MS), sleeper(1, 3 * MS, 50 * MS), sleeper(1, 3 * MS, 50 * MS)];
    let (with, _) = run(&mut mk(), &[50_000, 50_000], true, 20_000 * MS);
    assert!((with[1] - 0.5).abs() < 0.01, "the sleepers' job got {:.4} with its job's pass", with[1]);
    eprintln!("the sleepers' job: {:.4} with its job's pass", with[1]);
    let (without, _) = run(&mut mk(), &[50_000, 50_000], false, 20_000 * MS);
    eprintln!("the sleepers' job: {:.4} with a pass per task alone", without[1]);
    assert!(without[1] > 0.55, "a pass per task alone gave the sleepers' job {:.4}: the job's pass is what holds it", without[1]);
}

/// Tickets 3:2:1 and insulation (one hog against a job of five) hold with the job's pass:
/// single-task jobs and jobs of hogs were already fair; the floor must not move them.
#[test]
fn shares_of_hogs_hold_with_the_job_s_pass() {
    let (got, _) = run(&mut [hog(0), hog(1), hog(2)], &[30_000, 20_000, 10_000], true, 20_000 * MS);
    for (g, want) in got.iter().zip([0.5, 1.0 / 3.0, 1.0 / 6.0]) {
        assert!((g - want).abs() < 0.01, "3:2:1 gave {got:?}");
    }
    let (got, tasks) = run(&mut [hog(0), hog(1), hog(1), hog(1), hog(1), hog(1)], &[50_000, 50_000], true, 20_000 * MS);
    assert!((got[0] - 0.5).abs() < 0.01, "insulation gave {got:?}");
    for t in &tasks[1..] {
        assert!((t - 0.1).abs() < 0.01, "each of the five hogs should get 0.1: {tasks:?}");
    }
}
