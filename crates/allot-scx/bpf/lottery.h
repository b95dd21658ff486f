/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * allot's sched_ext scheduler, the lottery mode (included by allot_stride.bpf.c): the draw
 * of allot_model::lottery (crates/allot-model/src/lottery.rs) in the same integers. In
 * the lottery mode a task's turn is charged as the CPU time it ran times X, an
 * exponential draw of mean 1, so its pass (and its job's) advances by its stride times X:
 * a race of Poisson processes at rates in proportion to the shares, whose next winner is
 * the lottery's (Waldspurger and Weihl, "Lottery Scheduling", 1994), and a task that used
 * part of its quantum holds compensation tickets until its next turn (Petrou et al.,
 * "Implementing Lottery Scheduling", 1999, §2.2). User space sets the mode before attach.
 */
#ifndef ALLOT_LOTTERY_H
#define ALLOT_LOTTERY_H

/* 1.0 in the draw's fixed point, its fractional bits, ln 2 x 2^16 */
#define DRAW_ONE 1024ULL
#define DRAW_FRAC_BITS 10
#define LN2_Q16 45426ULL

/* Its one entry: the mode (1 the lottery mode, 0 stride scheduling; user space sets it),
 * and the draws made and their sum in DRAW_ONE units (user space reads them). Laid out as
 * src/lib.rs reads it. */
struct draw {
	u64 lottery;
	u64 draws;
	u64 sum;
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, u32);
	__type(value, struct draw);
} draw_mode SEC(".maps");

/* -ln((r + 1) / 2^32) in DRAW_ONE units (allot_model::lottery::exp_draw) */
static u64 exp_draw(u32 r)
{
	u64 v = (u64)r + 1, y, frac = 0, k = 32;
	int i;

	/* floor(log2 v), and v as a fraction in [1, 2) with 30 bits after the point */
	for (i = 0; i < 32 && !(v >> k); i++)
		k--;
	y = k >= 30 ? v >> (k - 30) : v << (30 - k);
	for (i = 0; i < DRAW_FRAC_BITS; i++) {
		y = (y * y) >> 30;
		frac <<= 1;
		if (y >= (2ULL << 30)) {
			y >>= 1;
			frac |= 1;
		}
	}
	return (((32ULL << DRAW_FRAC_BITS) - ((k << DRAW_FRAC_BITS) | frac)) * LN2_Q16) >> 16;
}

/* The CPU time a turn of `used` ns is charged as: itself, or in the lottery mode itself
 * times a draw (allot_model::lottery::charge; used is far below 2^49 ns) */
static u64 charged(u64 used)
{
	u32 zero = 0;
	struct draw *d = bpf_map_lookup_elem(&draw_mode, &zero);
	u64 x;

	if (!d || !d->lottery)
		return used;
	x = exp_draw(bpf_get_prandom_u32());
	__sync_fetch_and_add(&d->draws, 1);
	__sync_fetch_and_add(&d->sum, x);
	return used * x / DRAW_ONE;
}

#endif
