//! The CPU side of the engine: taking a task off a CPU (why it stopped), filling idle
//! CPUs (the RT class first, then the scheduler under test), and the scheduler tick.

use super::{Ev, Latency, Next, Sim};
use crate::sched::{Pick, Running, Stop, TaskState, Wake};
use crate::time::FOREVER;
use crate::workload::{Behaviour, Policy};

impl Sim {
    pub(super) fn stop_running(&mut self, c: usize, why: Stop) {
        let t = self.cpus[c].cur.take().expect("cpu running");
        self.account(t);
        self.cpus[c].gen += 1;
        self.cpus[c].idle_since = self.k.now;
        let ran = self.k.now - self.tasks[t].pick_at;
        self.tasks[t].off_since = Some(self.k.now);
        if why.runnable() {
            self.tasks[t].res.involuntary += 1;
            self.k.tasks[t].state = TaskState::Runnable;
            self.tasks[t].runnable_since = self.k.now;
            self.tasks[t].woke = false;
        } else {
            self.tasks[t].res.voluntary += 1;
            self.k.tasks[t].state = match why {
                Stop::Block => TaskState::Blocked,
                Stop::Exit => TaskState::Exited,
                _ => TaskState::Sleeping,
            };
        }
        match self.tasks[t].policy {
            Policy::Fifo(p) => {
                if why.runnable() {
                    // A preempted FIFO task goes back to the head of its priority.
                    self.rt_queue.push((p, 0, t));
                }
            }
            Policy::Normal => self.sched.stop(&self.k, t, ran, why),
        }
    }

    pub(super) fn cpu_stop(&mut self, c: usize) {
        let t = self.cpus[c].cur.expect("cpu running");
        self.account(t);
        if self.tasks[t].burst == 0 {
            match self.advance(t) {
                Next::Run => {
                    if self.k.now < self.cpus[c].slice_end {
                        let end = (self.k.now + self.tasks[t].burst).min(self.cpus[c].slice_end);
                        self.cpus[c].gen += 1;
                        let g = self.cpus[c].gen;
                        self.push(end, Ev::CpuStop(c, g));
                    } else {
                        self.stop_running(c, Stop::Expired);
                    }
                }
                Next::Sleep(at, w, state) => {
                    let why = if matches!(w, Wake::Kernel(_)) { Stop::Block } else { Stop::Sleep };
                    self.k.tasks[t].state = state;
                    self.stop_running(c, why);
                    self.sleep(t, at, state);
                }
                Next::Exit => {
                    self.stop_running(c, Stop::Exit);
                    self.exit(t);
                }
            }
        } else {
            self.stop_running(c, Stop::Expired);
        }
    }

    pub(super) fn dispatch_idle(&mut self) {
        for c in 0..self.cpus.len() {
            if self.cpus[c].cur.is_some() {
                continue;
            }
            let pick = if !self.rt_queue.is_empty() {
                // Highest RT priority, then FIFO order.
                let (i, _) = self.rt_queue.iter().enumerate().max_by(|a, b| a.1 .0.cmp(&b.1 .0).then(b.1 .1.cmp(&a.1 .1))).unwrap();
                let (_, _, t) = self.rt_queue.remove(i);
                Some(Pick { task: t, slice: FOREVER })
            } else {
                let p = self.sched.pick(&self.k, c);
                if p.is_some() {
                    self.decisions += 1;
                }
                p
            };
            if let Some(p) = pick {
                self.dispatch(c, p);
            }
        }
    }

    pub(super) fn dispatch(&mut self, c: usize, p: Pick) {
        let now = self.k.now;
        let t = p.task;
        debug_assert_eq!(self.k.tasks[t].state, TaskState::Runnable, "{}", self.k.tasks[t].name);
        self.idle += now - self.cpus[c].idle_since;
        let tr = &mut self.tasks[t];
        let lat = now - tr.runnable_since;
        tr.res.latencies.push(Latency { at: tr.runnable_since, lat, wake: tr.woke });
        tr.res.ready += lat;
        tr.res.dispatches += 1;
        tr.pick_at = now;
        tr.seg_start = now;
        if let Behaviour::Spinner { period } = tr.behaviour {
            if let Some(off) = tr.off_since.take() {
                // Deadlines start + k*period in (off, now] found it off the CPU.
                let k0 = if off <= tr.start { 0 } else { (off - tr.start).div_ceil(period) };
                let mut d = tr.start + k0 * period;
                while d <= now {
                    if d < self.duration && now > d {
                        tr.res.lateness.push(now - d);
                    }
                    d += period;
                }
            }
        }
        self.k.tasks[t].state = TaskState::Running(c);
        let cpu = &mut self.cpus[c];
        cpu.cur = Some(t);
        if cpu.last != Some(t) {
            self.context_switches += 1;
        }
        cpu.last = Some(t);
        cpu.slice_end = now.saturating_add(p.slice.max(1));
        cpu.gen += 1;
        let g = cpu.gen;
        let end = (now + self.tasks[t].burst.max(1)).min(self.cpus[c].slice_end);
        self.push(end, Ev::CpuStop(c, g));
    }

    pub(super) fn tick(&mut self) {
        let running: Vec<Option<Running>> = self
            .cpus
            .iter()
            .map(|c| {
                c.cur.filter(|&t| self.tasks[t].policy == Policy::Normal).map(|t| Running {
                    task: t,
                    ran: self.k.now - self.tasks[t].pick_at,
                    cpu: self.live_cpu(t),
                })
            })
            .collect();
        let resched = self.sched.tick(&self.k, &running);
        for c in resched {
            if running.get(c).copied().flatten().is_some() {
                self.stop_running(c, Stop::Expired);
            }
        }
    }
}
