/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * allot's sched_ext scheduler, the boost per wakeup (included by allot_stride.bpf.c after
 * struct job): the rule of allot_model::wake (crates/allot-model/src/wake.rs) in the same
 * integers and constants. A job's CPU use over a sliding WINDOW_NS in two buckets; a
 * waking task of a job below its line (BELOW of its entitlement over the window, or the
 * line user space gave it) is boosted for at most BOOST_SLICE, and never past the
 * larger of the two.
 */
#ifndef ALLOT_WAKE_H
#define ALLOT_WAKE_H

/* The boost's window, a boosted slice, and the line below which a job is boosted
 * (allot_model::wake: WINDOW_NS, BOOST_SLICE_NS, BELOW). */
#define WINDOW_NS 500000000ULL
#define BOOST_SLICE 2000000ULL
#define BELOW_NUM 1ULL
#define BELOW_DEN 2ULL

/* A boosted job's CPU use over the sliding window (allot_model::wake::Window). Written by
 * the BPF side only; two CPUs charging one job at once may lose a charge (the estimate
 * errs low by a slice at most). */
struct window {
	u64 bucket;
	u64 prev;
	u64 cur;
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 65536);
	__type(key, u64);
	__type(value, struct window);
} windows SEC(".maps");

/* The window's (prev, cur) as of now: a bucket that ended moves to prev. */
static void window_at(struct window *w, u64 now, u64 *prev, u64 *cur)
{
	u64 b = now / WINDOW_NS;

	*prev = 0;
	*cur = 0;
	if (b == w->bucket) {
		*prev = w->prev;
		*cur = w->cur;
	} else if (b == w->bucket + 1) {
		*prev = w->cur;
	}
}

/* The job's use over the window ending now (Window::used). */
static u64 window_used(u64 job, u64 now)
{
	struct window *w = bpf_map_lookup_elem(&windows, &job);
	u64 prev, cur, left, den = WINDOW_NS >> 10;

	if (!w)
		return 0;
	window_at(w, now, &prev, &cur);
	left = (WINDOW_NS - now % WINDOW_NS) >> 10;
	return cur + (prev * left + den - 1) / den;
}

static void window_charge(u64 job, u64 now, u64 ns)
{
	struct window zero = { .bucket = now / WINDOW_NS }, *w;
	u64 prev, cur;

	w = value_of(&windows, &job, &zero);
	if (!w)
		return;
	window_at(w, now, &prev, &cur);
	w->bucket = now / WINDOW_NS;
	w->prev = prev;
	w->cur = cur + ns;
}

/* The decision at a wakeup (allot_model::wake::at_wakeup): the boosted slice, or 0.
 * Boosted while the use is below the job's line (its own, or BELOW of its entitlement,
 * rounded up); the slice never takes the use past the larger of line and entitlement. */
static u64 wake_slice(u64 job, struct job *j, u64 now)
{
	u64 used, line, most;

	if (!j || !j->boost)
		return 0;
	line = j->line ? j->line : (j->boost * BELOW_NUM + BELOW_DEN - 1) / BELOW_DEN;
	used = window_used(job, now);
	if (used >= line)
		return 0;
	most = line > j->boost ? line : j->boost;
	return most - used < BOOST_SLICE ? most - used : BOOST_SLICE;
}

#endif
