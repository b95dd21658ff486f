/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * allot's sched_ext scheduler, the boost per wakeup (included by allot_stride.bpf.c after
 * struct job): the rule of allot_model::wake (crates/allot-model/src/wake.rs) in the same
 * integers and constants. A job's CPU use over a sliding window_ns in two buckets; a
 * waking task of a job below its line (BELOW of its entitlement over the window, or the
 * line user space gave it) is boosted for at most BOOST_SLICE, and never past the
 * larger of the two.
 */
#ifndef ALLOT_WAKE_H
#define ALLOT_WAKE_H

/* A boosted slice, the line below which a job is boosted, and the part of the bucket
 * before still covered in 1/2^FRAC_BITS (allot_model::wake: BOOST_SLICE_NS, BELOW,
 * FRAC_BITS). */
#define BOOST_SLICE 2000000ULL
#define BELOW_NUM 1ULL
#define BELOW_DEN 2ULL
#define FRAC_BITS 16

/* The boost window, ns: the loader sets it before the load (allot_model::wake::window_ns:
 * 50 ms..60 s, the daemon's [policy] boost_window_ms; 500 ms when none is given). In a
 * section of its own, so that the loader finds it as the whole of its map's value. */
const volatile u64 window_ns SEC(".rodata.window") = 500000000ULL;

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
	u64 b = now / window_ns;

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
	u64 prev, cur, frac, win = window_ns;

	if (!w || !win)
		return 0;
	window_at(w, now, &prev, &cur);
	/* (window - now % window) << 16 fits 64 bits for a window up to 2^47 ns */
	frac = (((win - now % win) << FRAC_BITS) + win - 1) / win;
	return cur + (prev * frac + (1ULL << FRAC_BITS) - 1) / (1ULL << FRAC_BITS);
}

static void window_charge(u64 job, u64 now, u64 ns)
{
	struct window zero = { .bucket = now / window_ns }, *w;
	u64 prev, cur;

	w = value_of(&windows, &job, &zero);
	if (!w)
		return;
	window_at(w, now, &prev, &cur);
	w->bucket = now / window_ns;
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
