//! A request checked into a [`Change`], and the one [`Daemon::commit`] that applies it:
//! the kernel's steps first, each with its undo (a directory made, a process moved), then
//! the desired state, saved before the change is acknowledged, then the plan applied at
//! once. A step that fails, or a state file that cannot be saved, takes every step back
//! and leaves the desired state as it was: all of a change or none of it (an acknowledged
//! change must survive a crash).

use super::super::core::Daemon;
use super::super::host::Proc;
use super::super::registry::{CurrencyId, JobId, JobSpec};
use super::super::trust::{Place, Target};
use super::R;
use crate::proto::Refusal;
use allot_model::{Cap, Funding};

/// What a checked request will do. Building it changes nothing but the job ids it takes.
#[derive(Default)]
pub(in crate::daemon) struct Change {
    /// Jobs made or changed, in order, each at most once.
    pub jobs: Vec<JobChange>,
    /// A currency's funding or cap.
    pub currency: Option<CurrencyChange>,
}

/// One job made or changed: its settings after the change, and the kernel's part.
pub(in crate::daemon) struct JobChange {
    /// The job as it will be.
    pub spec: JobSpec,
    /// What the kernel must do first.
    pub step: Step,
}

/// The kernel's part of a job change.
pub(in crate::daemon) enum Step {
    /// Nothing: the job keeps its directory (tickets, cap, focus).
    Settings,
    /// A new job: make its directory and move this process there.
    NewJob(Target),
    /// A new job for the calling process, which the peer holds (`run`): make its directory
    /// and move the caller there; it goes back to `back` if the change fails.
    Caller {
        /// Where the caller was.
        back: Back,
    },
    /// The job changes class (background or foreground): move its processes from the
    /// directory of `from`, the job as it is, to the spec's.
    Relocate {
        /// The job before the change.
        from: JobSpec,
    },
}

/// A currency's funding, cap, or both.
pub(in crate::daemon) struct CurrencyChange {
    /// The currency.
    pub id: CurrencyId,
    /// New funding (None: kept).
    pub funding: Option<Funding>,
    /// New cap (None: kept; Some(None): removed).
    pub cap: Option<Option<Cap>>,
}

/// A kernel change made by a commit, and how to take it back.
enum Undo {
    /// A process moved: put it back where it was.
    Moved { proc: Proc, back: Back },
    /// The calling process moved (held by the peer, not here): put it back.
    CallerMoved { back: Back },
    /// A directory made: remove it.
    Made(String),
}

/// Where a process goes back to: a directory of allot's tree, or a cgroup path.
pub(in crate::daemon) enum Back {
    /// Relative to allot's root.
    Rel(String),
    /// A path in the hierarchy, outside allot's tree.
    Path(String),
}

impl Daemon {
    /// Where a process at `place` goes back to if a change is taken back.
    pub(in crate::daemon) fn back_of_place(&self, place: &Place) -> Back {
        match place {
            Place::Job(id) => Back::Rel(self.desired().jobs[id].rel()),
            Place::Stray(rel) => Back::Rel(rel.clone()),
            Place::Source(p) | Place::Foreign(p) | Place::Session { path: p, .. } => Back::Path(p.clone()),
        }
    }

    /// Applies a checked change: all of it, or none of it and the refusal. `caller` is the
    /// calling process, for a [`Step::Caller`].
    pub(in crate::daemon) fn commit(&mut self, change: Change, caller: Option<&Proc>) -> R<()> {
        let mut undo = vec![];
        let mut specs = vec![];
        let mut emptied = vec![];
        for JobChange { spec, step } in change.jobs {
            let done = match step {
                Step::Settings => Ok(()),
                Step::NewJob(t) => self.new_job_with(&spec, t, &mut undo),
                Step::Caller { back } => match caller {
                    Some(c) => self.caller_into(&spec, c, back, &mut undo),
                    None => Err(Refusal::internal("the calling process is not held; nothing was changed")),
                },
                Step::Relocate { from } => {
                    emptied.push(from.rel());
                    self.relocate(&from, spec.background, &mut undo)
                }
            };
            if let Err(e) = done {
                self.rollback(undo, caller);
                return Err(e);
            }
            specs.push(spec);
        }
        let before = self.desired().clone();
        let ids: Vec<JobId> = specs.iter().map(|s| s.id).collect();
        for s in specs {
            // Its threads and processes now: the plan applied below reaches them (the boost
            // slice), and a directory removed before the next tick can still be repaired.
            let threads = self.tree().cg().threads(&s.rel()).unwrap_or_default();
            let procs = self.tree().cg().procs(&s.rel()).unwrap_or_default();
            self.track(s.id, threads, procs);
            self.registry_mut().put_job(s);
        }
        if let Some(c) = change.currency {
            if let Some(f) = c.funding {
                self.registry_mut().set_funding(c.id.clone(), f.get());
            }
            if let Some(cap) = c.cap {
                self.registry_mut().set_cap(c.id, cap);
            }
        }
        if let Err(e) = self.save() {
            self.registry_mut().restore(before);
            let dropped: Vec<JobId> = ids.iter().filter(|id| !self.desired().jobs.contains_key(id)).copied().collect();
            for id in &dropped {
                self.untrack(id);
            }
            self.rollback(undo, caller);
            return Err(unsaved(&e));
        }
        self.replan();
        // A memory cap or OOM group set, changed or cleared is written now (memory_job.rs),
        // and one the kernel refused is tried again when asked for again.
        let refused = |rel: String| self.memory().refused.keys().any(|(r, _)| *r == rel);
        let capped: Vec<JobSpec> = ids
            .iter()
            .filter_map(|id| self.desired().jobs.get(id))
            .filter(|s| {
                before
                    .jobs
                    .get(&s.id)
                    .map_or(s.mem.is_some() || s.oom_group, |b| b.mem != s.mem || b.oom_group != s.oom_group || b.background != s.background)
                    || refused(s.rel())
            })
            .cloned()
            .collect();
        self.apply_job_mem_now(&capped);
        // A relocated job's old directory, emptied, goes.
        for old in emptied {
            if self.tree().cg().procs(&old).is_ok_and(|p| p.is_empty()) {
                let _ = self.tree_mut().remove(&old);
                self.unwatch_rel(&old);
            }
        }
        Ok(())
    }

    fn rollback(&mut self, undo: Vec<Undo>, caller: Option<&Proc>) {
        for u in undo.into_iter().rev() {
            match u {
                Undo::Moved { proc, back } => self.move_back(&proc, &back),
                Undo::CallerMoved { back } => {
                    if let Some(c) = caller {
                        self.move_back(c, &back);
                    }
                }
                Undo::Made(rel) => {
                    let _ = self.tree_mut().remove(&rel);
                    self.unwatch_rel(&rel);
                }
            }
        }
    }

    fn move_back(&mut self, proc: &Proc, back: &Back) {
        match back {
            Back::Rel(rel) => {
                let _ = self.move_verified(proc, rel);
            }
            Back::Path(path) => {
                if self.host().alive(proc) {
                    let _ = self.tree().cg().move_to_path(path, proc.pid);
                }
            }
        }
    }

    /// Makes a job and moves a held process into it, recording both in `undo`.
    fn new_job_with(&mut self, spec: &JobSpec, t: Target, undo: &mut Vec<Undo>) -> R<()> {
        self.make_job_dir_for_plan(spec).map_err(Refusal::internal)?;
        undo.push(Undo::Made(spec.rel()));
        let back = self.back_of_place(&t.place);
        self.move_for_request(&t.proc, &spec.rel())?;
        // The job it left is read again at the next tick: emptied, it is reaped.
        if let Place::Job(id) = &t.place {
            self.read_again(id);
        }
        undo.push(Undo::Moved { proc: t.proc, back });
        Ok(())
    }

    /// Makes a job and moves the calling process into it, recording both in `undo`.
    fn caller_into(&mut self, spec: &JobSpec, caller: &Proc, back: Back, undo: &mut Vec<Undo>) -> R<()> {
        self.make_job_dir_for_plan(spec).map_err(Refusal::internal)?;
        undo.push(Undo::Made(spec.rel()));
        self.move_for_request(caller, &spec.rel())?;
        undo.push(Undo::CallerMoved { back });
        Ok(())
    }

    /// Moves a job's processes to its directory in the other class (repeated while it forks).
    fn relocate(&mut self, spec: &JobSpec, background: bool, undo: &mut Vec<Undo>) -> R<()> {
        let old = spec.rel();
        let mut to = spec.clone();
        to.background = background;
        self.make_job_dir_for_plan(&to).map_err(Refusal::internal)?;
        undo.push(Undo::Made(to.rel()));
        for _ in 0..100 {
            let procs = self.tree().cg().procs(&old).unwrap_or_default();
            if procs.is_empty() {
                return Ok(());
            }
            for pid in procs {
                let Ok(p) = self.host().open(pid) else { continue };
                if self.tree().cg().rel_of(pid).ok().flatten().as_deref() != Some(old.as_str()) {
                    continue;
                }
                match self.move_verified(&p, &to.rel()) {
                    Ok(()) => undo.push(Undo::Moved { proc: p, back: Back::Rel(old.clone()) }),
                    Err(super::super::tree::MoveError::Gone) => {}
                    Err(super::super::tree::MoveError::Kernel(k)) => {
                        return Err(Refusal::internal(format!("could not move process {pid} of {}: {k}", spec.id)))
                    }
                }
            }
        }
        Err(Refusal::busy(format!("{} keeps forking faster than it can be moved; nothing was changed", spec.id)))
    }
}

/// A refusal for a change the state file could not keep.
fn unsaved(e: &str) -> Refusal {
    Refusal::internal(format!(
        "nothing was changed: the state file could not be saved ({e}); allot makes no change it cannot keep across a restart (is the state directory full or read-only?)"
    ))
}
