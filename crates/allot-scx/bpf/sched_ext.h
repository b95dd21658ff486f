/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * The few kernel types, constants and kfuncs allot's scheduler uses, declared by hand
 * instead of a generated vmlinux.h (3 MB). Structs carry only the fields read or
 * written and are marked preserve_access_index: libbpf relocates every access by field
 * name against the running kernel's BTF (CO-RE), and matches sched_ext_ops members by
 * name, so the partial layouts below load on any kernel that has these names.
 * Checked against Debian's 7.2.13 cloud kernel (bpftool btf dump of its vmlinux).
 */
#ifndef ALLOT_SCHED_EXT_H
#define ALLOT_SCHED_EXT_H

typedef unsigned char __u8;
typedef unsigned short __u16;
typedef unsigned int __u32;
typedef unsigned long long __u64;
typedef signed char __s8;
typedef short __s16;
typedef int __s32;
typedef long long __s64;
typedef __u16 __be16;
typedef __u32 __be32;
typedef __u32 __wsum;
typedef __u8 u8;
typedef __u32 u32;
typedef __u64 u64;
typedef __s32 s32;
typedef __s64 s64;
typedef _Bool bool;
#define true 1
#define false 0
#define NULL ((void *)0)

enum bpf_map_type { BPF_MAP_TYPE_HASH = 1, BPF_MAP_TYPE_ARRAY = 2, BPF_MAP_TYPE_TASK_STORAGE = 29 };
/* include/uapi/linux/bpf.h's opaque timer; CLOCK_MONOTONIC from include/uapi/linux/time.h */
struct bpf_timer {
	__u64 __opaque[2];
} __attribute__((aligned(8)));
#define CLOCK_MONOTONIC 1
enum { BPF_ANY = 0, BPF_NOEXIST = 1, BPF_F_NO_PREALLOC = 1, BPF_LOCAL_STORAGE_GET_F_CREATE = 1 };

#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>

#pragma clang attribute push(__attribute__((preserve_access_index)), apply_to = record)

struct kernfs_node {
	u64 id;
};

struct cgroup {
	struct kernfs_node *kn;
};

struct css_set {
	struct cgroup *dfl_cgrp;
};

struct sched_ext_entity {
	u32 flags;
	u32 weight;
	u64 slice;
	u64 dsq_vtime;
};

struct sched_entity {
	u64 sum_exec_runtime;
};

struct task_struct {
	int pid;
	struct sched_entity se;
	struct css_set *cgroups;
	struct sched_ext_entity scx;
};

enum scx_exit_kind {
	SCX_EXIT_NONE = 0,
	SCX_EXIT_DONE = 1,
	SCX_EXIT_ERROR = 1024,
};

struct scx_exit_info {
	enum scx_exit_kind kind;
	s64 exit_code;
	const char *reason;
	char *msg;
};

#pragma clang attribute pop

struct scx_init_task_args;
struct scx_exit_task_args;

/* sched_ext_ops: the callbacks allot implements, and its settings. libbpf matches the
 * members by name, so their order here is free: flags comes first, at offset 0 of the
 * struct_ops map's initial value, where user space sets it before load (src/lib.rs). */
struct sched_ext_ops {
	u64 flags;
	s32 (*select_cpu)(struct task_struct *p, s32 prev_cpu, u64 wake_flags);
	void (*enqueue)(struct task_struct *p, u64 enq_flags);
	void (*dispatch)(s32 cpu, struct task_struct *prev);
	void (*runnable)(struct task_struct *p, u64 enq_flags);
	void (*running)(struct task_struct *p);
	void (*stopping)(struct task_struct *p, bool runnable);
	void (*quiescent)(struct task_struct *p, u64 deq_flags);
	void (*enable)(struct task_struct *p);
	s32 (*init)(void);
	void (*exit)(struct scx_exit_info *info);
	u32 timeout_ms;
	char name[128];
};

/* Dispatch queues (include/linux/sched/ext.h). */
#define SCX_DSQ_FLAG_BUILTIN (1ULL << 63)
#define SCX_DSQ_LOCAL (SCX_DSQ_FLAG_BUILTIN | 2)
/* p->scx.flags: the task is runnable (enum scx_ent_flags). */
#define SCX_TASK_QUEUED 1U
/* enq_flags: the task woke up (ENQUEUE_WAKEUP). */
#define SCX_ENQ_WAKEUP 1ULL
/* enq_flags to scx_bpf_dsq_insert on a local queue: preempt the task running there (its
 * slice is cut to 0) and go first. */
#define SCX_ENQ_PREEMPT (1ULL << 32)
/* enq_flags: the task is the only one this CPU has (given only with SCX_OPS_ENQ_LAST). */
#define SCX_ENQ_LAST (1ULL << 41)
/* sched_ext_ops.flags: a CPU's last runnable task is enqueued, not kept running, so a
 * task over its hard cap can be held out even when nothing else would run. */
#define SCX_OPS_ENQ_LAST 2ULL
/* scx_bpf_kick_cpu: only if the CPU is idle. */
#define SCX_KICK_IDLE 1ULL
/* The default slice, 20 ms (SCX_SLICE_DFL). */
#define SCX_SLICE_DFL 20000000ULL
/* Only tasks whose policy is SCHED_EXT are this scheduler's; every other task stays in
 * the fair class (SCX_OPS_SWITCH_PARTIAL). */
#define SCX_OPS_SWITCH_PARTIAL 8ULL

/* sched_ext's weight of a nice-0 task (p->scx.weight: 1..10000, 100 at nice 0). */
#define SCX_WEIGHT_NICE0 100ULL

/* kfuncs, as the 7.2 kernel's BTF declares them. */
s32 scx_bpf_create_dsq(u64 dsq_id, s32 node) __ksym;
s32 scx_bpf_select_cpu_dfl(struct task_struct *p, s32 prev_cpu, u64 wake_flags, bool *is_idle) __ksym;
void scx_bpf_dsq_insert(struct task_struct *p, u64 dsq_id, u64 slice, u64 enq_flags) __ksym;
void scx_bpf_dsq_insert_vtime(struct task_struct *p, u64 dsq_id, u64 slice, u64 vtime, u64 enq_flags) __ksym;
bool scx_bpf_dsq_move_to_local(u64 dsq_id) __ksym;
void scx_bpf_kick_cpu(s32 cpu, u64 flags) __ksym;
s32 scx_bpf_task_cpu(const struct task_struct *p) __ksym;

/* Walking a dispatch queue (bpf_for_each(scx_dsq, p, DSQ, 0)) and moving a task out of it. */
struct bpf_iter_scx_dsq {
	u64 __opaque[6];
} __attribute__((aligned(8)));
int bpf_iter_scx_dsq_new(struct bpf_iter_scx_dsq *it, u64 dsq_id, u64 flags) __ksym;
struct task_struct *bpf_iter_scx_dsq_next(struct bpf_iter_scx_dsq *it) __ksym;
void bpf_iter_scx_dsq_destroy(struct bpf_iter_scx_dsq *it) __ksym;
bool scx_bpf_dsq_move_vtime(struct bpf_iter_scx_dsq *it__iter, struct task_struct *p, u64 dsq_id, u64 enq_flags) __ksym;
/* The iterator bpf_for_each declares, for a move inside its loop. */
#define BPF_FOR_EACH_ITER (&___it)

#define BPF_STRUCT_OPS(name, args...) SEC("struct_ops/" #name) BPF_PROG(name, ##args)
#define BPF_STRUCT_OPS_SLEEPABLE(name, args...) SEC("struct_ops.s/" #name) BPF_PROG(name, ##args)

#endif
