/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * allot's sched_ext scheduler, the quantum (included by allot_stride.bpf.c after the jobs
 * and runnable maps): the rule of allot_model::quantum (crates/allot-model/src/quantum.rs)
 * in the same integers. A task's quantum is its share of TARGET_NS, of the shares of the
 * jobs with a runnable task, held to MIN_SLICE..MAX_SLICE: so a task waits about
 * TARGET_NS between turns whatever its share (a task of 2% of the active shares or more
 * keeps the default 20 ms: shorter quanta moved a job of sleepers' share), or, below a
 * tick (sched_ext ends a slice at a tick), a tick × the active shares / its share: 2000
 * threads against a hog on one CPU wait about 16 s at 250 Hz, where a fixed 20 ms
 * quantum left them 80 s, past the kernel's watchdog. The pass is charged for the time a
 * task ran; even so a job of 1000 threads did not hold its share (docs/scx.md, "Many
 * tasks").
 */
#ifndef ALLOT_QUANTUM_H
#define ALLOT_QUANTUM_H

#define TARGET_NS 1000000000ULL
#define MIN_SLICE 100000ULL
#define MAX_SLICE 20000000ULL

/* The shares of the foreground jobs with a runnable task, summed again every TICK_NS by
 * the timer from the runnable counts and the jobs' shares (a sum kept by increments
 * would drift each time user space rewrites a share). */
static u64 active_share;

static long add_active(void *map, u64 *job, s64 *n, u64 *sum)
{
	struct job *j;

	if (*n <= 0)
		return 0;
	j = bpf_map_lookup_elem(&jobs, job);
	if (j && !(j->flags & JOB_BACKGROUND))
		*sum += j->share;
	return 0;
}

static void count_active(void)
{
	u64 sum = 0;

	bpf_for_each_map_elem(&runnable, add_active, &sum, 0);
	active_share = sum;
}

/* The quantum of a task of this share (allot_model::quantum::slice_ns). */
static u64 quantum(u64 share)
{
	u64 active = active_share, s;

	if (active < share)
		active = share;
	if (!active)
		active = 1;
	/* shares are at most 10000 nice-0 tasks' worth (1e7 base units): no overflow */
	if (share > 1000000000ULL)
		return MAX_SLICE;
	s = TARGET_NS * share / active;
	if (s < MIN_SLICE)
		return MIN_SLICE;
	return s > MAX_SLICE ? MAX_SLICE : s;
}

#endif
