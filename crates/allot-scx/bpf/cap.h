/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * allot's sched_ext scheduler, hard caps (included by allot_stride.bpf.c): the sinbin of
 * the Entitlement Based Scheduler (EBS; Lee, "O(1) Entitlement Based Scheduler", LKML
 * 2004) for a job and for its currency. A job with a hard cap of C CPUs may use
 * C * CAP_PERIOD ns of CPU each CAP_PERIOD; so may all the jobs of a currency with a cap
 * together (struct job's group: the currency's key, which user space gives every job of
 * that currency, with the same group_cap). A job over either budget is held: its tasks
 * wait in the sinbin until the period's budget is repaid (use past it is carried as
 * debt). A currency's budget is one for all its jobs, background ones included, where the
 * cgroup backend caps its foreground and background trees apart.
 */
#ifndef ALLOT_CAP_H
#define ALLOT_CAP_H

/* A budget's use: the period it is in (ns / CAP_PERIOD) and the CPU used in it, past
 * periods' excess carried as debt. Written by the BPF side only. */
struct usage {
	u64 period;
	u64 used;
};

/* A capped job's use, by its cgroup id. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 65536);
	__type(key, u64);
	__type(value, struct usage);
} usages SEC(".maps");

/* A capped currency's use, by its key (struct job's group). */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 65536);
	__type(key, u64);
	__type(value, struct usage);
} currency_usages SEC(".maps");

/* The budget's use, its period rolled forward to now's (each period past repays a
 * budget of `cap`); NULL when the map is full. */
static struct usage *usage_of(void *map, u64 key, u64 cap, u64 now)
{
	struct usage zero = { .period = now / CAP_PERIOD, .used = 0 }, *u;
	u64 k;

	u = value_of(map, &key, &zero);
	if (!u)
		return NULL;
	if (now / CAP_PERIOD != u->period) {
		k = now / CAP_PERIOD - u->period;
		if (k > 64 || u->used <= k * cap)
			u->used = 0;
		else
			u->used -= k * cap;
		u->period = now / CAP_PERIOD;
	}
	return u;
}

/* What is left of a budget of `cap` in this period: U64_MAX uncapped, 0 spent. */
static u64 left_of(void *map, u64 key, u64 cap, u64 now)
{
	struct usage *u;

	if (!cap)
		return (u64)-1;
	u = usage_of(map, key, cap, now);
	if (!u)
		return (u64)-1;
	return u->used >= cap ? 0 : cap - u->used;
}

/* What the job may still run this period: the lesser of its own budget and its
 * currency's. */
static u64 cap_left(u64 job, struct job *j, u64 now)
{
	u64 a, b;

	if (!j)
		return (u64)-1;
	a = left_of(&usages, job, j->cap, now);
	b = j->group ? left_of(&currency_usages, j->group, j->group_cap, now) : (u64)-1;
	return a < b ? a : b;
}

/* The job is in the sinbin: over its hard cap, or its currency's, in this period. */
static bool held(u64 job, struct job *j, u64 now)
{
	return j && (j->cap || j->group_cap) && cap_left(job, j, now) == 0;
}

/* `ran` ns charged to the job's budget and its currency's. */
static void cap_charge(u64 job, struct job *j, u64 now, u64 ran)
{
	struct usage *u;

	if (j->cap) {
		u = usage_of(&usages, job, j->cap, now);
		if (u)
			__sync_fetch_and_add(&u->used, ran);
	}
	if (j->group && j->group_cap) {
		u = usage_of(&currency_usages, j->group, j->group_cap, now);
		if (u)
			__sync_fetch_and_add(&u->used, ran);
	}
}

#endif
