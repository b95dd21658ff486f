//! What the daemon tells: `show` (jobs and currencies, with what the plan really gives
//! and what is applied now) and `status`. `show` respects /proc privacy: an ordinary user
//! sees their own jobs whole and other users' jobs without pids or command lines, unless
//! the admin sets `privacy.show_other_users`. Command lines are read from the kernel now
//! (what the process shows in /proc), never taken from a client.

use super::core::Daemon;
use super::registry::{CurrencyId, JobId, JobSpec};
use super::trust::{user_label, Peer};
use crate::proto::{CurrencyView, JobView, ShowView, StatusView};
use allot_model::plan::entitlements_if_joined;
use std::collections::HashMap;

/// A command line longer than this is cut (with "…").
const MAX_COMMAND: usize = 512;

/// A command line as `show` gives it: at most [`MAX_COMMAND`] characters, cut with "…".
fn cut_command(c: &str) -> String {
    if c.chars().count() > MAX_COMMAND {
        c.chars().take(MAX_COMMAND - 1).collect::<String>() + "…"
    } else {
        c.to_string()
    }
}

/// Reads what `show` left unread (each job's pids, its first process's command line), in
/// the connection's thread: bounded reads of the kernel's files (`cgroup.procs`, and the
/// command line to 4 KiB), so a user whose jobs have huge command lines or many
/// processes costs their own connection the time, not the loop.
pub fn fill(v: &mut ShowView) {
    for (i, file) in std::mem::take(&mut v.unread) {
        let Some(j) = v.jobs.get_mut(i) else { continue };
        let mut text = vec![];
        let _ = std::fs::File::open(&file).and_then(|f| std::io::Read::read_to_end(&mut std::io::Read::take(f, MAX_PIDS_BYTES), &mut text));
        let pids: Vec<i32> = String::from_utf8_lossy(&text).lines().filter_map(|l| l.trim().parse().ok()).collect();
        j.command = Some(pids.first().and_then(|&p| allot_linux::process::procfs::cmdline(p).ok()).map(|c| cut_command(&c)).unwrap_or_default());
        j.pids = Some(pids);
    }
}

/// `cgroup.procs` is read to this many bytes: 100,000 pids and more.
const MAX_PIDS_BYTES: u64 = 1 << 20;

impl Daemon {
    /// A job's id as `show` prints it: `3`, or `alice/default`.
    pub fn show_id(&self, j: &JobSpec) -> String {
        j.id.shown()
    }

    /// Each planned job's entitlement and whether it is active: an idle job's is what it
    /// would get if it woke now, computed once for all jobs (a `show` is built in the loop).
    fn entitlements(&self) -> HashMap<JobId, (f64, bool)> {
        let Some((cur, jobs, ids)) = &self.planned().inputs else { return HashMap::new() };
        let params = allot_model::plan::Params { boost: false, nice_emulation: self.cfg().policy.nice_emulation, ..Default::default() };
        let m = allot_model::plan::Machine { ncpu: self.ncpu(), outside: self.obs().machine.outside, busy: self.obs().machine.busy() };
        let idle = entitlements_if_joined(&params, &m, cur, jobs);
        ids.iter()
            .zip(idle)
            .map(|(id, idle)| match idle {
                Some(e) => (*id, (e, false)),
                None => (*id, (self.planned().jobs.get(id).map_or(0.0, |p| p.entitlement), true)),
            })
            .collect()
    }

    fn job_view(&self, j: &JobSpec, reveal: bool, entitlements: &HashMap<JobId, (f64, bool)>) -> JobView {
        let t = self.obs().jobs.get(&j.id);
        let p = self.planned().jobs.get(&j.id);
        let (entitlement, active) = entitlements.get(&j.id).copied().unwrap_or((0.0, false));
        let rel = j.rel();
        let (pids, command) = if reveal && self.serving().defer_reads() {
            // Read by the connection's thread ([`fill`]): the loop serves everyone.
            (Some(vec![]), Some(String::new()))
        } else if reveal {
            let pids = self.tree().cg().procs(&rel).unwrap_or_default();
            let cmd = pids.first().and_then(|&p| self.host().cmdline(p)).map(|c| cut_command(&c));
            (Some(pids), Some(cmd.unwrap_or_default()))
        } else {
            (None, None)
        };
        JobView {
            id: self.show_id(j),
            uid: j.owner,
            user: user_label(j.owner),
            currency: self.currency_name(&j.currency),
            tickets: j.tickets.get(),
            funding: self.funding_of(&j.currency),
            entitlement,
            active,
            usage: t.map_or(0.0, |t| t.rate.cpus),
            cap: if j.background { Some("0".into()) } else { j.cap.map(|c| c.to_string()) },
            mem: j.mem.map(|m| m.to_string()),
            oom_group: j.oom_group,
            background: j.background,
            held: p.is_some_and(|p| p.held),
            boost: p.is_some_and(|p| p.boosted),
            focus: j.focus,
            nice: t.map_or(0, |t| t.nice),
            niced: p.is_some_and(|p| p.niced),
            recent: t.and_then(|t| t.usage).map_or(0.0, |u| u.window),
            runnable: t.map_or(0, |t| t.runnable),
            weight: p.map_or(j.tickets.get(), |p| p.weight),
            quota: p.and_then(|p| p.quota),
            pids,
            command,
            dir: self.tree().cg().dir(&rel).display().to_string(),
            cgroup: rel,
        }
    }

    /// `show`.
    pub fn show(&self, peer: &Peer, user: Option<&str>) -> Result<ShowView, String> {
        let only = match user {
            Some(u) => Some(
                allot_linux::process::procfs::user_uid(u)
                    .or_else(|| u.parse().ok())
                    .ok_or_else(|| format!("unknown user {u:?}: give a user name or uid"))?,
            ),
            None => None,
        };
        let open = peer.is_root() || self.cfg().privacy.show_other_users;
        let shown: Vec<&JobSpec> = self.desired().jobs.values().filter(|j| only.is_none_or(|u| j.owner == u)).collect();
        let entitlements = self.entitlements();
        let jobs: Vec<JobView> = shown.iter().map(|j| self.job_view(j, open || j.owner == peer.uid, &entitlements)).collect();
        let unread = if self.serving().defer_reads() {
            shown
                .iter()
                .enumerate()
                .filter(|(_, j)| open || j.owner == peer.uid)
                .filter_map(|(i, j)| self.tree().cg().procs_files(&j.rel()).into_iter().next().map(|f| (i, f)))
                .collect()
        } else {
            vec![]
        };
        let mut currencies = self.currency_views();
        if let Some(u) = only {
            currencies.retain(|c| jobs.iter().any(|j| j.currency == c.name) || c.name == user_label(u));
        }
        Ok(ShowView { ncpu: self.ncpu(), outside: self.obs().machine.outside, jobs, currencies, hidden: !open, unread })
    }

    /// Every currency: with jobs, funded, named in the config, or sharing memory (on a
    /// systemd host a logged-in user's slice is protected whether or not it has jobs).
    pub fn currency_views(&self) -> Vec<CurrencyView> {
        let mut ids: Vec<CurrencyId> = self.desired().jobs.values().map(|j| j.currency.clone()).collect();
        ids.extend(self.memory().view.keys().cloned());
        ids.extend(self.desired().funding.keys().cloned());
        ids.extend(self.desired().caps.keys().cloned());
        ids.extend(self.cfg().currencies.keys().map(|n| CurrencyId::Named(n.clone())));
        ids.sort();
        ids.dedup();
        ids.iter()
            .map(|c| {
                let jobs: Vec<&JobSpec> = self.desired().jobs.values().filter(|j| &j.currency == c).collect();
                let active = jobs.iter().filter(|j| self.obs().jobs.get(&j.id).and_then(|t| t.usage).is_some_and(|u| u.active())).count();
                CurrencyView {
                    name: self.currency_name(c),
                    kind: match c {
                        CurrencyId::User(_) => "user".into(),
                        CurrencyId::Named(_) => "named".into(),
                    },
                    funding: self.funding_of(c),
                    cap: self.currency_cap(c).map(|x| x.to_string()),
                    weight: self.planned().currencies.get(c).copied().unwrap_or_else(|| self.funding_of(c)),
                    jobs: jobs.len(),
                    active,
                    usage: allot_model::usage::cpus_used(jobs.iter().filter_map(|j| self.obs().jobs.get(&j.id)).map(|t| t.rate.cpus).sum()),
                    memory: self.memory_view(c),
                }
            })
            .collect()
    }

    /// `log`: root sees every record; a user, the records of requests they made and of
    /// changes to their jobs.
    pub fn log(&self, peer: &Peer, user: Option<&str>, job: Option<&str>, limit: Option<usize>) -> Result<crate::proto::Response, String> {
        let only = match user {
            Some(u) => Some(
                allot_linux::process::procfs::user_uid(u)
                    .or_else(|| u.parse().ok())
                    .ok_or_else(|| format!("unknown user {u:?}: give a user name or uid"))?,
            ),
            None => None,
        };
        let limit = limit.unwrap_or(50).clamp(1, 100_000);
        let mine = |r: &crate::proto::AuditRecord| peer.is_root() || r.uid == peer.uid || r.owners.contains(&peer.uid);
        let records = self.serving().audit().read(limit, |r| {
            mine(r) && only.is_none_or(|u| r.uid == u || r.owners.contains(&u)) && job.is_none_or(|j| r.jobs.iter().any(|x| x == j))
        });
        Ok(crate::proto::Response::Log(crate::proto::LogView { records }))
    }

    /// `status`.
    pub fn status(&self) -> StatusView {
        let f = &self.features();
        StatusView {
            version: env!("CARGO_PKG_VERSION").into(),
            protocol: crate::proto::PROTOCOL,
            pid: std::process::id(),
            uptime_s: self.serving().started().elapsed().as_secs(),
            cgroup_version: format!("{:?}", self.tree().cg().version()).to_lowercase(),
            cgroup_root: self.tree().cg().root().display().to_string(),
            manager: self.backend().manager().into(),
            ncpu: self.ncpu(),
            jobs: self.desired().jobs.len(),
            features: [("cpu_idle", f.cpu_idle), ("custom_slices", f.custom_slices), ("psi", f.psi), ("delay_accounting", f.delay_accounting)]
                .into_iter()
                .map(|(k, v)| (k.to_string(), v))
                .collect(),
            degraded: f.degraded().into_iter().chain(self.memory().degraded(self.cfg().memory.enable)).collect(),
            tracking: self.placement().tracking(),
            placement: self.placement().describe(self.cfg()),
            rt: self.rt_note().to_string(),
            outside: self.obs().machine.outside,
            outside_weight: self.backend().outside_weight(self.cfg()),
            scheduler: self.scheduler_view(),
            io: self.io_view(),
            counters: self.counters().clone(),
            last_reload: self.serving().last_reload().cloned(),
        }
    }
}
