/*
 * partition.h - optimal split of consecutive transformer layers onto pipeline stages
 * (planner/partition.c: dynamic programming; planner/ilp.c: the same problem as a GLPK integer
 * program).
 *
 * Problem (issue 8): for a plan with pp = p stages and m micro-batches per step, choose layer
 * counts n_0..n_{p-1} (consecutive layers, each n_r >= min_layers, summing to L) minimising the
 * 1F1B pipeline time
 *     T = sum_r (t_f + t_b)_r + (m - 1) * max_r (t_f + t_b)_r
 * (Narayanan et al. 2021 Sec. 2.2; estimate.c "pipe" for vp = 1), subject to every stage's
 * device memory (its model states + its min(p - r, m) in-flight micro-batches) fitting the
 * capacity minus headroom. Stage times and memory come from the cost model (stagecost.h),
 * so the embedding on stage 0 and the LM head with fp32 logits on the last stage are priced
 * exactly as estimate.c prices them. The p2p term of the step does not depend on the split.
 *
 * Recompute choice (opts.choose_recompute, plans with full recomputation): each stage also
 * chooses how many of its layers it recomputes (1..n, estimate.c's per-stage count) when the
 * trainer has `per_stage_recompute` (Colossal-AI); with only `recompute_partial` (Megatron
 * --recompute-num-layers) one count K for every stage is chosen by solving the partition for
 * each K; otherwise every layer is recomputed. A stage's time grows and its memory shrinks with
 * its count, so for a given range the least count that fits is best for both terms of T: the
 * DP stays exact with one entry per range (the ILP keeps every count as its own binary and
 * tests check that both agree).
 *
 * Joint plan-wide choices (opts.choose_mode, opts.choose_offload): the granularity (none /
 * selective / full, those in the trainer's recompute_mask; with full the counts above) and the
 * CPU offload fractions of optimizer states and parameters (a discrete set, default 0, 0.25,
 * 0.5, 0.75, 1) are plan-wide in every trainer (Megatron: one --recompute-granularity and
 * --recompute-num-layers, one --optimizer-offload-fraction; DeepSpeed / Colossal-AI: one
 * offload ratio), so each combination is a variant with its own stage table; the trainer's
 * table (ap_plan_check through the cost model) refuses the variants it cannot run (fractions
 * below 1 without ZeRO-3 or Megatron's distributed optimizer, parameter offload without ZeRO-3,
 * FSDP / torchtitan offloading both together). The objective is
 *     J = T + X_q
 * with X_q the variant's optimizer step plus exposed offload time (PCIe shared per switch, CPU
 * Adam over host DRAM shared by the node's GPUs: estimate.c) on its uniform split; X depends on
 * a split only through the stage with the most parameters, which this problem does not
 * optimise. Offload shrinks a stage's device bytes and grows its host bytes; a stage fits when
 * its device peak fits the GPU and the node's GPUs, each holding as much host memory as it
 * does, fit the node's CPU memory (estimate.c host_fits), so both memories are per-stage
 * constraints. The DP solves every variant (exact per variant; Megatron's counts stop early as
 * above) and keeps the least J; the ILP (planner/ilp.c) is one program over all variants that
 * could beat the DP's J (a lower bound from the DP with memory ignored), one binary per variant.
 * Not expressible with the cost model today: no recompute on some stages and full on others
 * (stage_recompute 0 means "the plan's count"), per-stage offload fractions.
 *
 * Interleaved plans (vp > 1, p * v model chunks): the cost model prices a rank from the total
 * of its chunks (its layers, its in-flight chunks) and T = (S + (m v - 1) M) / v (estimate.c
 * "pipe"), so the same DP runs over per-rank totals (at least v * min_layers each) and each
 * rank's total is spread evenly over its v chunks (ap_stage_chunk_layers). That is exact for
 * models whose layers are all of one kind (all dense or all MoE) and recompute of all or no
 * layers; with a per-chunk recompute count it is optimal among even layouts. Models mixing
 * dense and MoE layers are refused for vp > 1 (AP_ERR_INPUT), as is the recompute choice.
 *
 * Expressibility (trainer table, plan.h): a trainer without `uneven_stages` gets the uniform
 * split; with `uneven_first_last_only` only the first and last stage may differ from the
 * others (vp = 1).
 *
 * Not modelled in T: the data-parallel reduction and optimizer time, which depend on the stage
 * with the most parameters; ap_partition_result carries ap_estimate_plan's full step time of the
 * chosen split for reporting.
 */
#ifndef AP_PARTITION_H
#define AP_PARTITION_H

#include "autoplan/search.h"
#include "autoplan/stagecost.h"

typedef enum { AP_SOLVER_DP = 0, AP_SOLVER_ILP, AP_SOLVER_AUTO } ap_solver;

typedef struct ap_partition_opts {
    int min_layers;          /* layers per stage at least; default 1 */
    ap_solver solver;        /* default AUTO (= DP for this partition-only problem) */
    long ilp_node_limit;     /* branch-and-bound nodes per GLPK solve (a count: deterministic,
                                unlike GLPK's wall-time tm_lim); default 20000 */
    int first_last_only;     /* 1: only the first and last stage may differ from the others
                                (Megatron's --decoder-first/last-pipeline-num-layers; the
                                baseline of issue 8); default 0 */
    int choose_recompute;    /* 1: also choose recomputed layers per stage (see above); the
                                plan must have recompute FULL unless choose_mode; default 0 */
    int choose_mode;         /* 1: also choose the recompute granularity (none / selective /
                                full, those in the trainer's recompute_mask) jointly with the
                                split; with full, the layer counts as choose_recompute; the
                                plan's recompute is ignored; vp 1 only; default 0 */
    int choose_offload;      /* 1: also choose the plan-wide CPU offload fractions of optimizer
                                states and (where the trainer allows: ZeRO-3) parameters from
                                offload_fracs, under per-stage GPU memory and per-node CPU
                                memory; vp 1 only; default 0 */
    int noffload_fracs;      /* size of offload_fracs; default 5 */
    double offload_fracs[8]; /* the discrete fractions tried; default 0, .25, .5, .75, 1 */
    int ilp_fault;           /* test hook: 1 = make GLPK raise an error while the model is built
                                (exercises glp_error_hook and the fallback); default 0 */
    double upper_s;          /* > 0: only a split whose objective is below this is wanted (the
                                search passes what its k-th plan allows): stage costs that alone
                                would exceed it are not evaluated, and when no fitting split
                                beats it the answer is the plan's uniform split with capped = 1;
                                default 0 (none) */
    double upper_pipe_s;     /* > 0: the same for the pipeline time T plus the least optimizer
                                and offload time any split of the variant pays (estimate.h
                                x_floor_s): a cap on the step less what no split changes;
                                default 0 */
    ap_estimate_opts est;    /* headroom, calibration */
} ap_partition_opts;

void ap_partition_opts_init(ap_partition_opts *o);
/* "dp" | "ilp" | "auto"; AP_ERR_INPUT otherwise. */
ap_status ap_solver_parse(const char *s, ap_solver *out, ap_err *err);
const char *ap_solver_name(ap_solver s);

typedef struct ap_partition_result {
    int pp, vp;
    int64_t micro_batches;               /* m */
    int nchunks;                         /* pp * vp */
    int recompute_layers;                /* the plan-wide count (chosen, or the plan's) */
    ap_recompute recompute;              /* the granularity (chosen, or the plan's) */
    double offload_optimizer;            /* plan-wide fractions (chosen, or the plan's) */
    double offload_params;
    double extra_s;                      /* optimizer step + exposed offload time of the chosen
                                            variant as the objective counts it (see above); 0
                                            when only one granularity and offload is open */
    double objective_s;                  /* what the solvers minimise: pipe_s + extra_s */
    double host_bytes_per_node;          /* ap_estimate_plan's, of the chosen plan */
    int variants;                        /* plan-wide variants considered (1 without choices) */
    double pipe_s;                       /* T of the split: (S + (m v - 1) M) / v */
    double step_s;                       /* ap_estimate_plan's whole step time of the split
                                            (T + p2p + dp reduction + optimizer + ...) */
    double max_stage_s;
    double peak_device_bytes;
    int fits;                            /* every stage fits */
    int optimal;                         /* 1: proven optimal (DP, or GLPK GLP_OPT); 0: the ILP
                                            stopped at its node limit with a feasible answer */
    ap_solver solver;                    /* who produced the answer (DP after a fallback) */
    int fell_back;                       /* ILP asked, failed; this is the DP answer */
    int capped;                          /* no fitting split beats opts.upper_s or
                                            upper_pipe_s (the uniform split is returned) */
    int restricted;                      /* the trainer restricts the split (uniform, or
                                            first/last only) */
    long evals;                          /* cost-model evaluations used */
    double solve_s;                      /* wall time */
    char note[256];                      /* one line: fallback reason, restriction, gap */
    /* per chunk and per rank: the first nchunks and pp entries are the result's (the rest,
     * 9.6 kB with the scalars, is not cleared for each solve) */
    int stage_layers[AP_MAX_CHUNKS];     /* layers per model chunk, pipeline order (plan.h) */
    int stage_recompute[AP_MAX_CHUNKS];  /* layers recomputed per chunk when chosen per stage,
                                            else -1 (the plan's) */
    int rank_layers[AP_MAX_STAGES];      /* layers per pipeline rank (all its chunks) */
    double stage_s[AP_MAX_STAGES];       /* (t_f + t_b) per micro-batch, per rank */
    double stage_device_bytes[AP_MAX_STAGES];
} ap_partition_result;

/* Optimal split of plan p's layers onto its p->pp stages (p->pp * p->vp chunks). On success
 * out->fits says whether any split fits; when none does, out holds the split with the smallest
 * peak memory and the call still returns AP_OK ("no split fits" is a result). `o` may be NULL.
 * Returns AP_ERR_INPUT for pp * vp * min_layers > L, vp > 1 with mixed layer kinds or with
 * the recompute choice; the cost model's status otherwise.
 * The ILP solver falls back to the DP answer (out->fell_back, out->note) when GLPK fails or
 * finds nothing within the node limit. Thread-safe: GLPK solves take turns (ilp.c). */
ap_status ap_partition_solve(const ap_model *m, const ap_cluster *c, const ap_plan *p,
                             const ap_partition_opts *o, ap_partition_result *out, ap_err *err);

/* Evaluate a given split (layers of the pp * vp chunks; per-stage recompute counts rc[0..pp-1]
 * or NULL for the plan's, vp = 1 only) under the same objective: fills out's per-stage fields,
 * pipe_s, step_s and fits (solver fields left 0). Used for the baselines and the final report. */
ap_status ap_partition_eval(const ap_model *m, const ap_cluster *c, const ap_plan *p,
                            const ap_estimate_opts *est, const int *layers, const int *rc,
                            ap_partition_result *out, ap_err *err);

/* Copy the split into plan q: nchunks = pp, stage_layers, stage_recompute, recompute_layers,
 * recompute and the offload fractions. */
void ap_partition_apply(const ap_partition_result *r, ap_plan *q);

/* The GLPK integer program for the same problem (planner/ilp.c): L layers onto pp stages,
 * m micro-batches, stage costs from `tab` (built for the plan); with per_stage_rc every stage
 * also picks its recomputed layers (a binary per range with its least fitting count: more
 * recomputation is slower and only needed to fit, so the other counts are dominated);
 * fixed_rc > 0 makes every stage recompute min(fixed_rc, n) layers (Megatron's one count).
 * `upper_s` > 0 is a known achievable T (e.g. the DP's): a stage is left out of the model when
 * no split through it can beat that (alone: T >= m t; with the least sums and slowest stages
 * the DP's prefix and suffix passes give before and after it), and ranges longer than one that
 * alone exceeds it are not priced. Fills the split, pipe_s, max_stage_s, fits = 1 and optimal
 * (1 for GLP_OPT, 0 for GLP_FEAS after the node limit). Returns AP_ERR_SOLVER (err says why)
 * when GLPK raises an error, stops without an integer solution, or proves that no split fits.
 * Solver output goes to the debug log only. Solves from several threads take turns. */
ap_status ap_partition_ilp(ap_stage_table *tab, int L, int pp, int64_t m, int per_stage_rc,
                           int fixed_rc, const ap_partition_opts *o, double upper_s,
                           ap_partition_result *out, ap_err *err);

/* One plan-wide variant of the joint integer program: its stage table (borrowed for the call),
 * per_stage_rc / fixed_rc as above, and extra_s, a time added to the objective when the
 * variant is chosen (its optimizer + offload time). */
typedef struct ap_ilp_variant {
    ap_stage_table *tab;
    int per_stage_rc;
    int fixed_rc;
    double extra_s;
} ap_ilp_variant;

/* The joint program over nvar variants: every stage binary belongs to one variant; one binary
 * z_q per variant, sum z = 1, and each rank's chosen stage belongs to the chosen variant;
 * minimise sum t y + (m - 1) M + sum extra_q z_q. *var_out: the chosen variant. upper_s bounds
 * that objective (stages with m t + extra_q above it are left out). Otherwise as
 * ap_partition_ilp (which is this with one variant and extra 0). */
ap_status ap_partition_ilp_joint(const ap_ilp_variant *variants, int nvar, int L, int pp,
                                 int64_t m, const ap_partition_opts *o, double upper_s,
                                 ap_partition_result *out, int *var_out, ap_err *err);


#endif
