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
 * the paper's nonuniform quanta), and the CPU goes to the lowest pass: one vtime-ordered
 * dispatch queue. A task that rejoins after sleeping starts no lower than SCX_SLICE_DFL
 * of pass behind the global pass, so sleeping banks little credit (the paper's "remain",
 * bounded).
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

static s64 *runnable_of(u64 job)
{
	s64 zero = 0, *n = bpf_map_lookup_elem(&runnable, &job);

	if (n)
		return n;
	bpf_map_update_elem(&runnable, &job, &zero, BPF_NOEXIST);
	return bpf_map_lookup_elem(&runnable, &job);
}

/* Per task: the job it was counted in while runnable. */
struct task_ctx {
	u64 job;
	bool counted;
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
	else
		__sync_fetch_and_add(&s->nr_unknown_job, 1);
}

static u64 cgroup_id(struct task_struct *p)
{
	return BPF_CORE_READ(p, cgroups, dfl_cgrp, kn, id);
}

static struct task_ctx *ctx_of(struct task_struct *p)
{
	return bpf_task_storage_get(&task_ctxs, p, 0, BPF_LOCAL_STORAGE_GET_F_CREATE);
}

/* The task's share: its job's share split among the job's runnable tasks. */
static u64 task_share(struct task_struct *p)
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

static bool before(u64 a, u64 b)
{
	return (s64)(a - b) < 0;
}

s32 BPF_STRUCT_OPS(allot_select_cpu, struct task_struct *p, s32 prev_cpu, u64 wake_flags)
{
	bool is_idle = false;
	s32 cpu = scx_bpf_select_cpu_dfl(p, prev_cpu, wake_flags, &is_idle);

	if (is_idle) {
		count(1);
		scx_bpf_dsq_insert(p, SCX_DSQ_LOCAL, SCX_SLICE_DFL, 0);
	}
	return cpu;
}

void BPF_STRUCT_OPS(allot_enqueue, struct task_struct *p, u64 enq_flags)
{
	u64 vtime = p->scx.dsq_vtime;

	count(0);
	/* a sleeper rejoins at most SCX_SLICE_DFL of pass behind the global pass */
	if (before(vtime, vtime_now - SCX_SLICE_DFL))
		vtime = vtime_now - SCX_SLICE_DFL;
	scx_bpf_dsq_insert_vtime(p, SHARED_DSQ, SCX_SLICE_DFL, vtime, enq_flags);
}

void BPF_STRUCT_OPS(allot_dispatch, s32 cpu, struct task_struct *prev)
{
	scx_bpf_dsq_move_to_local(SHARED_DSQ);
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
	if (before(vtime_now, p->scx.dsq_vtime))
		vtime_now = p->scx.dsq_vtime;
}

void BPF_STRUCT_OPS(allot_stopping, struct task_struct *p, bool runnable)
{
	/* the part of the slice it used; the stride scaled by it */
	u64 used = SCX_SLICE_DFL - p->scx.slice;

	p->scx.dsq_vtime += used * STRIDE_UNIT / task_share(p);
}

void BPF_STRUCT_OPS(allot_enable, struct task_struct *p)
{
	p->scx.dsq_vtime = vtime_now;
}

s32 BPF_STRUCT_OPS_SLEEPABLE(allot_init)
{
	return scx_bpf_create_dsq(SHARED_DSQ, -1);
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
	.flags = SCX_OPS_SWITCH_PARTIAL,
	.timeout_ms = 5000,
	.name = "allot_stride",
};
