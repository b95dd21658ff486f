//! What a task does next: each behaviour (workload.rs) as a small state machine the
//! engine steps whenever the task has finished its last action.

use crate::rng::Rng;
use crate::time::{Ns, FOREVER, MS};
use crate::workload::Behaviour;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Action {
    Run(Ns),
    Sleep(Ns),
    SleepUntil(Ns),
    Block(u8, Ns),
    Fork(Ns),
    WaitChildren,
    Send(Ns),
    WaitRequest,
    Exit,
}

#[derive(Debug, Clone, Default)]
pub(super) struct BState {
    step: u8,
    next_deadline: Ns,
    started: bool,
    pub(super) children: u64,
    phase: usize,
    sub: Option<Box<BState>>,
}

/// Steps a behaviour. `chunked` turns an endless CPU burst into 1 ms pieces so that a
/// phased task notices its phase change.
#[allow(clippy::too_many_arguments)]
pub(super) fn next_action(
    b: &Behaviour,
    st: &mut BState,
    start: Ns,
    now: Ns,
    rng: &mut Rng,
    chunked: bool,
    res: &[(String, u8)],
    iters: &mut u64,
) -> Action {
    match b {
        Behaviour::Cpu { work } => {
            if chunked && work.is_none() {
                return Action::Run(MS);
            }
            if st.step == 0 {
                st.step = 1;
                Action::Run(work.unwrap_or(FOREVER))
            } else {
                Action::Exit
            }
        }
        Behaviour::Spinner { .. } => Action::Run(FOREVER),
        Behaviour::Periodic { work, sleep, absolute, jitter } => {
            if !st.started {
                st.started = true;
                st.next_deadline = start;
            }
            let mut jit = |v: Ns| {
                if *jitter > 0.0 {
                    ((v as f64) * (1.0 + jitter * (2.0 * rng.f64() - 1.0))).round().max(1.0) as Ns
                } else {
                    v
                }
            };
            if st.step == 0 {
                st.step = 1;
                Action::Run(jit(*work))
            } else {
                st.step = 0;
                *iters += 1;
                if *absolute {
                    st.next_deadline += *sleep;
                    Action::SleepUntil(st.next_deadline)
                } else {
                    Action::Sleep(jit(*sleep))
                }
            }
        }
        Behaviour::Interactive { work, think } => {
            if st.step == 0 {
                st.step = 1;
                Action::Sleep(rng.exp(*think as f64).round() as Ns)
            } else {
                st.step = 0;
                *iters += 1;
                Action::Run(*work)
            }
        }
        Behaviour::Phased { phases } => {
            // The phase containing `now`; the last one lasts forever.
            let mut idx = phases.len() - 1;
            let mut pstart = start + phases[..idx].iter().map(|p| p.0).sum::<Ns>();
            let mut acc = start;
            for (i, (len, _)) in phases.iter().enumerate() {
                if now < acc + len {
                    idx = i;
                    pstart = acc;
                    break;
                }
                acc += len;
            }
            if st.sub.is_none() || st.phase != idx {
                st.phase = idx;
                st.sub = Some(Box::default());
            }
            let sub = st.sub.as_mut().unwrap();
            next_action(&phases[idx].1, sub, pstart, now, rng, true, res, iters)
        }
        Behaviour::ForkHeavy { parent_work, child_work, children } => match st.step {
            0 => {
                st.step = 1;
                Action::Run(*parent_work)
            }
            1 => {
                if children.map(|n| st.children >= n).unwrap_or(false) {
                    return Action::Exit;
                }
                st.children += 1;
                st.step = 2;
                Action::Fork(*child_work)
            }
            _ => {
                st.step = 0;
                *iters += 1;
                Action::WaitChildren
            }
        },
        Behaviour::Server => Action::WaitRequest,
        Behaviour::Client { work, period, request, spin, .. } => {
            if !st.started {
                st.started = true;
                st.next_deadline = start;
            }
            match st.step {
                0 => {
                    st.step = 1;
                    Action::Run(*work)
                }
                1 => {
                    st.step = 2;
                    *iters += 1;
                    Action::Send(*request)
                }
                2 if *spin && *period > 0 => {
                    // Busy-wait to the next frame: one more burst, then start it.
                    st.next_deadline += *period;
                    st.step = 0;
                    Action::Run(st.next_deadline.saturating_sub(now))
                }
                _ => {
                    if *period > 0 {
                        st.next_deadline += *period;
                        st.step = 0;
                        Action::SleepUntil(st.next_deadline)
                    } else {
                        st.step = 1;
                        Action::Run(*work)
                    }
                }
            }
        }
        Behaviour::Kernel { work, resource, block } => {
            if st.step == 0 {
                st.step = 1;
                Action::Run(*work)
            } else {
                st.step = 0;
                *iters += 1;
                let prio = res.iter().find(|(n, _)| n == resource).map(|(_, p)| *p).unwrap_or(20);
                Action::Block(prio, *block)
            }
        }
    }
}
