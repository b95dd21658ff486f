/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * allot's sched_ext scheduler: stride scheduling (Waldspurger and Weihl, "Stride
 * Scheduling: Deterministic Proportional-Share Resource Management", 1995), the
 * deterministic form of lottery scheduling, over allot's hierarchy flattened by user
 * space: a currency's funding is split among its jobs by tickets, and a job's share
 * among its runnable tasks.
 *
 * Each task's pass is its p->scx.dsq_vtime. A task that ran for `used` ns advances its
 * pass by used * STRIDE_UNIT / share (its stride, scaled by the time it really used, as
 * the paper's nonuniform quanta; in the lottery mode times a draw, lottery.h), and the CPU
 * goes to the lowest pass: one vtime-ordered
 * dispatch queue. A task's quantum is its share of TARGET_NS (quantum.h), so that a task
 * of a small share (one of thousands of threads) still gets a turn well within the
 * kernel's watchdog. A task that rejoins after sleeping starts no lower than SCX_SLICE_DFL
 * of pass behind the global pass, so sleeping banks little credit (the paper's "remain",
 * bounded), and no lower than its job's pass (what all the job's tasks ran, at the job's
 * share), so the job as a whole gets no more than its share.
 *
 * Caps and background as the Entitlement Based Scheduler (EBS; Lee, "O(1) Entitlement
 * Based Scheduler", LKML 2004) holds them: a job with a
 * hard cap of C CPUs (or whose currency has one, cap.h) may use C * CAP_PERIOD ns of CPU
 * each CAP_PERIOD; once it has, it is
 * in the sinbin: its tasks wait in SINBIN_DSQ, never dispatched, until its usage rate
 * falls back (a period's budget repaid; use past the budget is carried as debt). A timer
 * every TICK_NS moves the tasks whose job left the sinbin back to the shared queue and
 * kicks their CPU. A background job's tasks wait in BG_DSQ, dispatched only when no other
 * task of allot's is runnable on that CPU (and, so that the kernel's watchdog never fires,
 * once a BG_GUARD if one waits that long), for BG_SLICE at a time.
 *
 * The latency policy per wakeup (Petrou et al., "Implementing Lottery Scheduling", 1999,
 * §3.2 abbreviated quanta and §3.3 windowed ticket boost; the rule is
 * allot_model::wake in crates/allot-model/src/wake.rs, which this follows in the same
 * integers): each job with a boost entitlement keeps its CPU use over a sliding
 * window_ns (two buckets; the loader sets it, wake.h). A task that wakes while its job
 * used less than BELOW of its entitlement over the window is boosted: its pass moves to the most credit a sleeper may
 * hold, it goes first on its CPU's local queue and preempts the task running there, and
 * it runs at most BOOST_SLICE, and no longer than what is left of the entitlement.
 *
 * Two ways to coexist, chosen by user space before load (the flags of allot_ops):
 * - partial (SCX_OPS_SWITCH_PARTIAL): only tasks user space set to SCHED_EXT are
 *   scheduled here; every other task stays in the kernel's fair class, which runs ahead
 *   of this class;
 * - all: every task is scheduled here; a task in no job allot describes is a job of its
 *   own with the share of its nice weight (a nice-0 task: 100 base units, as much as all
 *   of allot's jobs together when user space normalizes them to [outside] weight 100).
 */
#include "sched_ext.h"

char _license[] SEC("license") = "GPL";

/* The dispatch queue every managed task waits in, ordered by pass. */
#define SHARED_DSQ 0
/* Tasks of jobs over their hard cap (FIFO). */
#define SINBIN_DSQ 1
/* Background jobs' tasks, ordered by pass. */
#define BG_DSQ 2
/* A hard cap's accounting period, and how often the sinbin is looked at. */
#define CAP_PERIOD 100000000ULL
#define TICK_NS 5000000ULL
/* A background task's slice, and the longest it waits beside foreground work. */
#define BG_SLICE 2000000ULL
#define BG_GUARD 1000000000ULL
/* struct job's flags */
#define JOB_BACKGROUND 1ULL
/* Pass advanced by one ns of CPU at a share of 1 base unit. */
#define STRIDE_UNIT 1024ULL
/* Base units per unit of share user space writes (its SHARE_SCALE, src/lib.rs). */
#define SHARE_SCALE 1000ULL

/* A job: its cgroup's id (the directory's inode number) maps to this. Written by user
 * space only. */
struct job {
	/* The job's share of the machine in base units, flattened by user space (src/lib.rs
	 * flatten: [outside] weight split by currency funding, then by tickets). */
	u64 share;
	/* A hard cap: ns of CPU per CAP_PERIOD (0: none). */
	u64 cap;
	/* JOB_BACKGROUND */
	u64 flags;
	/* Its entitlement over window_ns, ns of CPU (0: never boosted). */
	u64 boost;
	/* Its currency's key when the currency has a hard cap (0: none), and that cap: ns of
	 * CPU per CAP_PERIOD for all the currency's jobs together (cap.h). */
	u64 group;
	u64 group_cap;
	/* Boosted while its use over window_ns is below this, ns (0: BELOW of boost; a
	 * configured boost_below, or focus: the whole window). */
	u64 line;
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 65536);
	__type(key, u64);
	__type(value, struct job);
} jobs SEC(".maps");

/* A job's tasks now runnable, by its cgroup id: written by the BPF side only (runnable
 * and quiescent callbacks), so user space rewriting a share never races a count. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 65536);
	__type(key, u64);
	__type(value, s64);
} runnable SEC(".maps");

/* The value of a job's entry in one of the BPF side's per-job maps (runnable, usages,
 * job_passes, windows), made from *init when there is none (BPF_NOEXIST: of two CPUs
 * making it at once, the first's stays); NULL when the map is full. User space deletes
 * these entries once the job's cgroup is gone (src/serve.rs: Scheduler::forget_job). */
static __always_inline void *value_of(void *map, u64 *job, void *init)
{
	void *v = bpf_map_lookup_elem(map, job);

	if (v)
		return v;
	bpf_map_update_elem(map, job, init, BPF_NOEXIST);
	return bpf_map_lookup_elem(map, job);
}

static s64 *runnable_of(u64 job)
{
	s64 zero = 0;

	return value_of(&runnable, &job, &zero);
}

#include "cap.h"

/* A job's pass, by its cgroup id: what all of its tasks ran, at the job's whole share
 * (where a task's own pass is charged at the job's share split among its runnable tasks).
 * A task of the job is queued no earlier than its job's pass, so a job whose tasks come
 * and go (sleepers, short-lived children) gets no more than its share: a task's own pass
 * alone let a sleeper that rejoins near the global pass run on its job's behalf
 * uncharged (a job of one hog and four sleepers took 0.5604 of a CPU against another
 * job's one hog at equal shares in the VM). allot_model::pass (crates/allot-model/src/
 * pass.rs) is this rule in the same integers, with a one-CPU simulation in its tests.
 * Written by the BPF side only; two CPUs charging one job at once may lose a charge. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 65536);
	__type(key, u64);
	__type(value, u64);
} job_passes SEC(".maps");

#include "wake.h"

static bool background(struct job *j)
{
	return j && (j->flags & JOB_BACKGROUND);
}

/* When a background task last started (BG_GUARD counts from it). */
static u64 bg_last;

/* The sinbin's timer. */
struct tick {
	struct bpf_timer timer;
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, u32);
	__type(value, struct tick);
} ticks SEC(".maps");

/* Per task: the job it was counted in while runnable, its slice when it started, and its
 * CPU time then (p->se.sum_exec_runtime: what its pass, a capped job and a boosted job's
 * window are charged, the time it really ran, which a slice that ran out past its end
 * undercounts by up to a tick). */
struct task_ctx {
	u64 job;
	bool counted;
	u64 slice;
	u64 exec;
};

struct {
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct task_ctx);
} task_ctxs SEC(".maps");

/* The global pass: the pass of the task last started. */
static u64 vtime_now;

/* Read by user space (src/bpf.rs keeps the same layout): why the scheduler left (the
 * kernel's exit kind, code, reason and message) and counters. */
struct scx_state {
	s64 exit_kind;
	s64 exit_code;
	u64 nr_enqueued;
	u64 nr_direct;
	u64 nr_unknown_job;
	u64 nr_sinbinned;
	u64 nr_released;
	u64 nr_boosted;
	u64 nr_not_boosted;
	char exit_reason[128];
	char exit_msg[1024];
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, u32);
	__type(value, struct scx_state);
} state SEC(".maps");

static void count(int which)
{
	u32 zero = 0;
	struct scx_state *s = bpf_map_lookup_elem(&state, &zero);

	if (!s)
		return;
	if (which == 0)
		__sync_fetch_and_add(&s->nr_enqueued, 1);
	else if (which == 1)
		__sync_fetch_and_add(&s->nr_direct, 1);
	else if (which == 2)
		__sync_fetch_and_add(&s->nr_unknown_job, 1);
	else if (which == 3)
		__sync_fetch_and_add(&s->nr_sinbinned, 1);
	else if (which == 4)
		__sync_fetch_and_add(&s->nr_released, 1);
	else if (which == 5)
		__sync_fetch_and_add(&s->nr_boosted, 1);
	else
		__sync_fetch_and_add(&s->nr_not_boosted, 1);
}

static u64 cgroup_id(struct task_struct *p)
{
	return BPF_CORE_READ(p, cgroups, dfl_cgrp, kn, id);
}

static struct task_ctx *ctx_of(struct task_struct *p)
{
	return bpf_task_storage_get(&task_ctxs, p, 0, BPF_LOCAL_STORAGE_GET_F_CREATE);
}

/* The task's share: its job's share split among the job's runnable tasks (`charged`:
 * counts a task in no job, once per charge). */
static u64 share_of(struct task_struct *p, bool charged)
{
	struct task_ctx *t = ctx_of(p);
	struct job *j;
	s64 n, *nr;
	u64 w;

	if (t)
		j = bpf_map_lookup_elem(&jobs, &t->job);
	else
		j = NULL;
	if (!j) {
		/* a task in no job: a job of its own, at its nice weight */
		if (charged)
			count(2);
		return p->scx.weight * SHARE_SCALE;
	}
	nr = bpf_map_lookup_elem(&runnable, &t->job);
	n = nr ? *nr : 1;
	if (n < 1)
		n = 1;
	w = j->share / n;
	return w ? w : 1;
}

#include "quantum.h"
#include "lottery.h"

static bool before(u64 a, u64 b)
{
	return (s64)(a - b) < 0;
}

s32 BPF_STRUCT_OPS(allot_select_cpu, struct task_struct *p, s32 prev_cpu, u64 wake_flags)
{
	bool is_idle = false;
	s32 cpu = scx_bpf_select_cpu_dfl(p, prev_cpu, wake_flags, &is_idle);
	u64 job = cgroup_id(p);
	struct job *j = bpf_map_lookup_elem(&jobs, &job);

	/* an idle CPU takes the task at once, unless its job is in the sinbin (enqueue
	 * holds it there) */
	if (is_idle && !held(job, j, bpf_ktime_get_ns())) {
		count(1);
		scx_bpf_dsq_insert(p, SCX_DSQ_LOCAL, background(j) ? BG_SLICE : SCX_SLICE_DFL, 0);
	}
	return cpu;
}

void BPF_STRUCT_OPS(allot_enqueue, struct task_struct *p, u64 enq_flags)
{
	u64 vtime = p->scx.dsq_vtime, job = cgroup_id(p), now = bpf_ktime_get_ns(), slice, *jp;
	struct job *j = bpf_map_lookup_elem(&jobs, &job);
	bool bg = background(j);
	u64 share = share_of(p, false), q = quantum(share);

	count(0);
	/* a sleeper rejoins at most SCX_SLICE_DFL of pass behind the global pass; no task is
	 * queued before its job's pass, nor more than its quantum's stride after it (a task
	 * ahead of its siblings waits a round of its job at most, not until all caught up:
	 * one of 1000 threads waited past the watchdog so; allot_model::pass::queue_at) */
	if (before(vtime, vtime_now - SCX_SLICE_DFL))
		vtime = vtime_now - SCX_SLICE_DFL;
	jp = j ? bpf_map_lookup_elem(&job_passes, &job) : NULL;
	if (jp && before(vtime, *jp))
		vtime = *jp;
	else if (jp && before(*jp + q * STRIDE_UNIT / share, vtime))
		vtime = *jp + q * STRIDE_UNIT / share;
	if (held(job, j, now)) {
		/* over its hard cap: the sinbin, until the timer releases it */
		count(3);
		p->scx.dsq_vtime = vtime;
		scx_bpf_dsq_insert(p, SINBIN_DSQ, SCX_SLICE_DFL, enq_flags);
		return;
	}
	if ((enq_flags & SCX_ENQ_WAKEUP) && !bg) {
		slice = wake_slice(job, j, now);
		if (slice) {
			/* boosted: the most credit a sleeper may hold, first on its CPU,
			 * preempting what runs there, for an abbreviated quantum */
			count(5);
			p->scx.dsq_vtime = vtime_now - SCX_SLICE_DFL;
			scx_bpf_dsq_insert(p, SCX_DSQ_LOCAL, slice, enq_flags | SCX_ENQ_PREEMPT);
			return;
		}
		if (j && j->boost)
			count(6); /* a job that may be boosted, over the line */
	}
	if (enq_flags & SCX_ENQ_LAST) {
		/* nothing else can run on this CPU (dispatch found nothing): it goes on */
		scx_bpf_dsq_insert(p, SCX_DSQ_LOCAL, bg ? BG_SLICE : SCX_SLICE_DFL, enq_flags);
		return;
	}
	scx_bpf_dsq_insert_vtime(p, bg ? BG_DSQ : SHARED_DSQ, bg ? BG_SLICE : q, vtime, enq_flags);
}

void BPF_STRUCT_OPS(allot_dispatch, s32 cpu, struct task_struct *prev)
{
	u64 job, now;
	struct job *j;

	if (scx_bpf_dsq_move_to_local(SHARED_DSQ))
		return;
	/* No foreground task waits for this CPU. A background one runs unless the task
	 * that ran is a foreground one still runnable and not in the sinbin (it goes on),
	 * or unless a background task has not run for BG_GUARD (the watchdog's margin). */
	now = bpf_ktime_get_ns();
	if (prev && (prev->scx.flags & SCX_TASK_QUEUED)) {
		job = cgroup_id(prev);
		j = bpf_map_lookup_elem(&jobs, &job);
		if (!background(j) && !held(job, j, now) && now - bg_last < BG_GUARD)
			return;
	}
	scx_bpf_dsq_move_to_local(BG_DSQ);
}

/* Every TICK_NS: the active shares summed again (quantum.h), and the sinbin's tasks whose
 * job's usage rate fell back under its cap go back to their queue, their CPU kicked if
 * it idles. */
static int tick_fn(void *map, int *key, struct bpf_timer *timer)
{
	u64 job, now = bpf_ktime_get_ns();
	struct task_struct *p;
	struct job *j;

	count_active();
	bpf_for_each(scx_dsq, p, SINBIN_DSQ, 0) {
		job = cgroup_id(p);
		j = bpf_map_lookup_elem(&jobs, &job);
		if (held(job, j, now))
			continue;
		if (scx_bpf_dsq_move_vtime(BPF_FOR_EACH_ITER, p, background(j) ? BG_DSQ : SHARED_DSQ, 0)) {
			count(4);
			scx_bpf_kick_cpu(scx_bpf_task_cpu(p), SCX_KICK_IDLE);
		}
	}
	bpf_timer_start(timer, TICK_NS, 0);
	return 0;
}

void BPF_STRUCT_OPS(allot_runnable, struct task_struct *p, u64 enq_flags)
{
	struct task_ctx *t = ctx_of(p);
	s64 *n;

	if (!t)
		return;
	t->job = cgroup_id(p);
	t->counted = false;
	if (!bpf_map_lookup_elem(&jobs, &t->job))
		return;
	n = runnable_of(t->job);
	if (n) {
		__sync_fetch_and_add(n, 1);
		t->counted = true;
	}
}

void BPF_STRUCT_OPS(allot_quiescent, struct task_struct *p, u64 deq_flags)
{
	struct task_ctx *t = ctx_of(p);
	s64 *n;

	if (!t || !t->counted)
		return;
	t->counted = false;
	n = bpf_map_lookup_elem(&runnable, &t->job);
	if (n)
		__sync_fetch_and_add(n, -1);
}

void BPF_STRUCT_OPS(allot_running, struct task_struct *p)
{
	u64 job = cgroup_id(p), now = bpf_ktime_get_ns();
	struct job *j = bpf_map_lookup_elem(&jobs, &job);
	struct task_ctx *t = ctx_of(p);
	u64 left;

	if (before(vtime_now, p->scx.dsq_vtime))
		vtime_now = p->scx.dsq_vtime;
	if (background(j))
		bg_last = now;
	/* a capped job's task stops when the job's (or its currency's) budget for this
	 * period is spent */
	left = cap_left(job, j, now);
	if (left && left < p->scx.slice)
		p->scx.slice = left;
	if (t) {
		t->slice = p->scx.slice;
		t->exec = p->se.sum_exec_runtime;
	}
}

/* The job's pass advances by what its task ran at the job's whole share; a job that was
 * idle rejoins at most SCX_SLICE_DFL behind the global pass, as a sleeper does. */
static void charge_job(u64 job, struct job *j, u64 used)
{
	u64 floor = vtime_now - SCX_SLICE_DFL, *jp;

	jp = value_of(&job_passes, &job, &floor);
	if (!jp)
		return;
	if (before(*jp, floor))
		*jp = floor;
	__sync_fetch_and_add(jp, used * STRIDE_UNIT / (j->share ? j->share : 1));
}

void BPF_STRUCT_OPS(allot_stopping, struct task_struct *p, bool runnable)
{
	struct task_ctx *t = ctx_of(p);
	u64 job = cgroup_id(p), used, now, ran;
	struct job *j;

	/* the CPU time it ran; the stride scaled by it. Not the part of the slice used: a
	 * task preempted by a boosted wakeup has its slice cut to 0 (SCX_ENQ_PREEMPT), and
	 * would be charged the whole slice (the 3:2:1 hogs beside a boosted probe read
	 * 0.4915 0.3437 0.1648 so); the slice is the fallback */
	if (t && p->se.sum_exec_runtime >= t->exec)
		used = p->se.sum_exec_runtime - t->exec;
	else
		used = (t && t->slice >= p->scx.slice ? t->slice : SCX_SLICE_DFL) - p->scx.slice;
	used = charged(used); /* times a draw in the lottery mode (lottery.h) */
	p->scx.dsq_vtime += used * STRIDE_UNIT / share_of(p, true);
	j = bpf_map_lookup_elem(&jobs, &job);
	if (j)
		charge_job(job, j, used);
	/* charged to a capped job's (and currency's) period and a boosted job's window: the
	 * CPU time it ran */
	if (j && t && p->se.sum_exec_runtime >= t->exec) {
		now = bpf_ktime_get_ns();
		ran = p->se.sum_exec_runtime - t->exec;
		cap_charge(job, j, now, ran);
		if (j->boost)
			window_charge(job, now, ran);
	}
}

void BPF_STRUCT_OPS(allot_enable, struct task_struct *p)
{
	struct task_ctx *t = ctx_of(p);

	p->scx.dsq_vtime = vtime_now;
	/* what it ran before it was the scheduler's is not charged: a task that stopped
	 * before this scheduler saw it start (as one running at the attach might) would pay
	 * for its whole life */
	if (t)
		t->exec = p->se.sum_exec_runtime;
}

s32 BPF_STRUCT_OPS_SLEEPABLE(allot_init)
{
	u32 zero = 0;
	struct tick *t;
	s32 err;

	err = scx_bpf_create_dsq(SHARED_DSQ, -1);
	if (!err)
		err = scx_bpf_create_dsq(SINBIN_DSQ, -1);
	if (!err)
		err = scx_bpf_create_dsq(BG_DSQ, -1);
	if (err)
		return err;
	t = bpf_map_lookup_elem(&ticks, &zero);
	if (!t)
		return -2;
	bpf_timer_init(&t->timer, &ticks, CLOCK_MONOTONIC);
	bpf_timer_set_callback(&t->timer, tick_fn);
	return bpf_timer_start(&t->timer, TICK_NS, 0);
}

void BPF_STRUCT_OPS(allot_exit, struct scx_exit_info *ei)
{
	u32 zero = 0;
	struct scx_state *s = bpf_map_lookup_elem(&state, &zero);

	if (!s)
		return;
	s->exit_kind = ei->kind;
	s->exit_code = ei->exit_code;
	bpf_probe_read_kernel_str(s->exit_reason, sizeof(s->exit_reason), ei->reason);
	bpf_probe_read_kernel_str(s->exit_msg, sizeof(s->exit_msg), ei->msg);
}

SEC(".struct_ops.link")
struct sched_ext_ops allot_ops = {
	.select_cpu = (void *)allot_select_cpu,
	.enqueue = (void *)allot_enqueue,
	.dispatch = (void *)allot_dispatch,
	.runnable = (void *)allot_runnable,
	.running = (void *)allot_running,
	.stopping = (void *)allot_stopping,
	.quiescent = (void *)allot_quiescent,
	.enable = (void *)allot_enable,
	.init = (void *)allot_init,
	.exit = (void *)allot_exit,
	.flags = SCX_OPS_SWITCH_PARTIAL | SCX_OPS_ENQ_LAST,
	/* the kernel's longest: a job of thousands of threads leaves each one a while between
	 * turns (allot_model::quantum::longest_wait_ns: 1000 threads against a hog on one
	 * CPU, about 8 s at 250 Hz), and 5 s ejected such a job's scheduler */
	.timeout_ms = 30000,
	.name = "allot_stride",
};
