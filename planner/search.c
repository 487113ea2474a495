/*
 * search.c - exhaustive plan enumeration with safe pruning (see search.h for the space and the
 * pruning rules). The space is walked point by point (space.c: degrees, ZeRO and offload, which
 * fix the model states of a group); inside a group the recompute level and micro-batch vary.
 * Only the top K fitting estimates are kept, so memory stays O(K).
 *
 * Structure: eval() estimates one plan and keeps it; search_group() applies the two pruning
 * rules to one group; a chunk is CHUNK_POINTS consecutive points (fewer where a point whose
 * plans are simulated operator by operator ends it) searched into its own result. The walk
 * passes the space twice: the points the cost model prices, then those simulated, which
 * start once every priced chunk has merged, with the priced plans' ranking bound (place);
 * ap_search() runs the chunks on worker threads and merges their results in chunk order, then
 * (resplit) hands the pipelined candidates to resplit.c. A cost-model error on a plan the
 * trainer's rules accept stops the search and is returned with the plan named (a plan the
 * heterogeneous simulation finds it cannot run, AP_ERR_INFEASIBLE, is only not evaluated).
 *
 * Determinism: the chunks are fixed by the space, not by the threads, and a chunk's result
 * (its top K, closest plan, counters, candidates and visit records) is folded into the answer
 * only after every chunk before it, so the answer is the same bit for bit whatever the thread
 * count. A chunk is placed in its slot with the answer's ranking bound as it stands; what is
 * slower than that bound (which only falls) enters neither the chunk's ranking nor its kept
 * candidates, and whether a plan is dropped there or later, it is not in the answer: the answer
 * does not depend on when chunks are placed. At most WINDOW chunks per thread are in flight, so
 * memory stays O(threads x K).
 * max_evals holds in the same order: a chunk may make the estimates left when it is placed;
 * one that the chunks merged before it left fewer and that needed more is searched again at
 * its merge, under what is left (the chunk where the bound falls, and those in flight after it,
 * which then estimate nothing).
 * Locks: the walk of the space (take) has its own, so reading the next chunk's points does not
 * hold up the merges and the placing of chunks in slots (place), which share the other.
 */
/* glibc's adaptive mutex (init_lock); the build's _POSIX_C_SOURCE alone hides it */
#define _GNU_SOURCE
#include "search_int.h"
#include "autoplan/hetero.h"
#include "autoplan/threads.h"

#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

const char *ap_search_version(void) { return "search-9"; }

void ap_search_opts_init(ap_search_opts *o) {
    memset(o, 0, sizeof *o);
    ap_plan_init(&o->fixed);
    o->fixed.tp = o->fixed.pp = o->fixed.dp = o->fixed.cp = o->fixed.ep = o->fixed.vp = 0;
    o->fixed.etp = 0; /* free: the experts unsplit (space.c etp_values) */
    o->fixed.mbs = 0;
    o->fixed.zero = -1;
    o->top_k = 10;
    o->prune = 1;
    o->max_mbs = 64;
    o->tie_margin = AP_VALIDATED_TIME_ERROR;
    ap_estimate_opts_init(&o->est);
}

void ap_search_result_free(ap_search_result *r) {
    if (!r) return;
    ap_free(r->top);
    r->top = NULL;
    r->ntop = 0;
}

ap_confidence ap_estimate_confidence(const ap_estimate *e) {
    if (!e->fits) return AP_CONF_OOM;
    if (e->device_peak_bytes * (1.0 + AP_VALIDATED_MEMORY_ERROR) + e->headroom_bytes >
        e->capacity_bytes)
        return AP_CONF_TIGHT;
    return AP_CONF_FITS;
}

const char *ap_confidence_name(ap_confidence c) {
    return c == AP_CONF_FITS ? "fits" : c == AP_CONF_TIGHT ? "tight" : "oom";
}

int ap_estimate_better(const ap_estimate *a, const ap_estimate *b) {
    if (a->time.step_s != b->time.step_s) return a->time.step_s < b->time.step_s;
    return a->device_peak_bytes < b->device_peak_bytes;
}

int ap_estimate_measured_first(const ap_estimate *a, const ap_estimate *b) {
    return (a->device_peak_bytes > 0) - (b->device_peak_bytes > 0);
}

/* ---- one chunk -------------------------------------------------------------------------------- */

/* Points per chunk: the unit of work of a thread and of the ordered merge. */
#define CHUNK_POINTS 16
/* Chunks in flight per thread (finished ones wait for those before them to merge). */
#define WINDOW 4
/* Chunk i's time cut also takes the answer's ranking bound as it stood after chunk i - LAG
 * merged (time_cut): a fixed lag, so it is the same whatever the threads; at most LAG chunks
 * are in flight, so chunk i - LAG has merged when chunk i is placed. */
#define LAG 64

/* What a chunk found: the search's counters, its top K (ids: indices into its candidates),
 * its closest plan, its candidates and its visit records. */
typedef struct {
    ap_search_result r;       /* counters, closest; r.top unused */
    topk top;
    double best_overshoot;
    rs_cand *cands;
    int64_t ncand, capc;
    unsigned char *recs;      /* nrec records of o->visit_rec_size bytes (visit_keep) */
    int64_t nrec, caprec;
    int64_t cap;              /* estimates the chunk may make (max_evals less those before it;
                                 INT64_MAX without max_evals) */
    double outer_bound;       /* the answer's ranking bound when the chunk was placed (see
                                 eval) */
    double lag_bound;         /* the answer's ranking bound after chunk (this one - LAG)
                                 merged; INFINITY for the first LAG chunks (time_cut) */
    double lag_cls[32];       /* under a tie margin, each complication's full step
                                 (topk_full_steps) at the same moment: INFINITY while it has
                                 room (class_cut) */
    double *kbest;            /* a max-heap of the nkbest (<= top_k) least step times of the
                                 chunk's fitting estimates: the chunk's time cut (time_cut) */
    int nkbest;
    int stop_unfit;           /* its simulations stop once their plan cannot fit */
    double stop_over;         /* > 0: and once their overshoot passes it */
    ap_status st;
    ap_err err;
} chunk_out;

/* A worker's scratch and the chunk it writes. */
typedef struct {
    const ap_model *m;
    const ap_cluster *c;
    const ap_search_opts *o;
    const ap_space *space;
    chunk_out *out;
    ap_estimate scratch;
    ap_plan_group g;
    ap_plan p;
    rs_scratch rs;
    const ap_space_point *pt; /* the point being searched */
    int resplit;
    ap_hetero_cache chunk_cache; /* Gemini's chunk search, shared by a group's plans */
    ap_estimate_opts est;        /* the search's, with this worker's layer-price memo */
    ap_estimate_opts est_checked;/* the same for plans eval has just checked (plan_checked),
                                    with the run's calibration and kernel tables */
    int in_place;                /* scratch.plan is the group's base plan since the last full
                                    copy: a member needs only its own fields (estimate_member) */
    /* the group's legality, ap_plan_check's verdict per member: point_ok && rc_ok[il] &&
     * mb_ok[im] (plan.h ap_plan_rc_ok; group_legality) */
    int point_ok;
    unsigned char rc_ok[AP_GROUP_MAX_RC], mb_ok[AP_GROUP_MAX_MBS];
    _Atomic int *found;          /* any_fit: set once a plan fits (search_run.found) */
    ap_estimate *least;          /* a simulated group's least-memory member as group_cannot_fit
                                    found it fitting, for eval (allocated on first use) */
    int least_ok;
    int pre;                     /* s->scratch holds the member's estimate already (past_cut) */
    /* the workers' states lie side by side (enumerate): the fields above, written on every
     * estimate, would otherwise share a cache line with the next worker's m, c, o and out,
     * read on every estimate (false sharing: megatron-1t on 3072 GPUs spent 8.4% more CPU in
     * its chunks on 2 threads than on 1, 6.5% with the gap) */
    char gap[128];
} search_state;

/* Member (il, im) is the simulated least-memory member group_cannot_fit kept (s->least). */
static int least_kept(const search_state *s, int il, int im) {
    return s->least_ok && il == s->g.most_rc && im == 0;
}

/* Member (il, im) of s->g passes ap_plan_check. */
static int legal(const search_state *s, int il, int im) {
    return s->point_ok && s->rc_ok[il] && s->mb_ok[im];
}

/* The group's legality in factors (plan.h): the recompute and micro-batch checks per level and
 * size, the rest once, on one member that passes both (none: no member is legal). */
static void group_legality(search_state *s) {
    int il0 = -1, im0 = -1;
    for (int il = 0; il < s->g.nrc; il++) {
        ap_plan_group_member(&s->g, il, 0, &s->p);
        s->rc_ok[il] = (unsigned char)ap_plan_rc_ok(&s->p, s->m);
        if (s->rc_ok[il] && il0 < 0) il0 = il;
    }
    for (int im = 0; im < s->g.nmbs; im++) {
        ap_plan_group_member(&s->g, 0, im, &s->p);
        s->mb_ok[im] = (unsigned char)ap_plan_mb_ok(&s->p);
        if (s->mb_ok[im] && im0 < 0) im0 = im;
    }
    s->point_ok = 0;
    if (il0 >= 0 && im0 >= 0) {
        ap_plan_group_member(&s->g, il0, im0, &s->p);
        s->point_ok = ap_plan_check(&s->p, s->m, s->c, s->o->allow_cross_node_tp, NULL) == AP_OK;
    }
}

static double time_cut(const search_state *s);

/* Member (il, im) of the group, s->p, by the cost model, or for Gemini placements and DeepSpeed
 * offload devices by the operator-by-operator simulation (hetero.h), into s->scratch. The cost
 * model reads the plan in place (ap_estimate_plan): scratch.plan is the group's base plan,
 * copied once per group, with the member's fields set as in s->p (ap_plan_group_member), and
 * the attention kernel the group's first estimate resolved (ap_attn_default reads none of a
 * member's fields, so every member resolves it alike). */
static ap_status estimate_member(search_state *s, int il, int im, ap_err *err) {
    if (ap_hetero_applies(&s->p)) {
        s->in_place = 0;
        /* a plan past the time cut cannot matter to the answer (search.h "Pruning"), nor under
           answer_only one slower than either bound (eval): it is not simulated where its
           compute alone is past them (partial 3, counted as pruned) */
        double b = INFINITY;
        if (s->o->answer_only) {
            b = topk_bound(&s->out->top);
            if (s->out->outer_bound < b) b = s->out->outer_bound;
        } else if (s->o->prune && !s->o->visit && !s->o->visit_keep) {
            b = time_cut(s);
        }
        s->est.sim_cutoff_s = b < INFINITY ? b : 0;
        return ap_hetero_estimate(s->m, s->c, &s->p, &s->est, &s->chunk_cache, &s->scratch, err);
    }
    if (!s->in_place) {
        s->scratch.plan = s->g.base;
        s->in_place = 1;
    }
    ap_plan_group_member(&s->g, il, im, &s->scratch.plan);
    /* every plan estimated here has just passed ap_plan_check (eval, group_cannot_fit) */
    return ap_estimate_plan(s->m, s->c, &s->scratch.plan, &s->est_checked, &s->scratch, err);
}

/* The trainer's space has plans simulated operator by operator (ap_space_point_simulated):
 * Colossal-AI's Gemini placements, DeepSpeed's offload devices. */
static int simulates(const ap_search_opts *o) {
    return o->fixed.trainer == AP_TRAINER_COLOSSALAI || o->fixed.trainer == AP_TRAINER_DEEPSPEED;
}

/* How far plan e is from fitting: the larger of its device peak with the headroom past the
 * capacity and its host share past 90% of the node's memory, each a fraction of that
 * capacity (ap_hetero_opts.stop_over stops simulations by the same measure). */
static double overshoot(const ap_estimate *e) {
    double over = (e->device_peak_bytes + e->headroom_bytes - e->capacity_bytes) /
                  e->capacity_bytes;
    if (!e->host_fits && e->host_capacity_bytes > 0) {
        double h = (e->host_bytes_per_node - 0.9 * e->host_capacity_bytes) / e->host_capacity_bytes;
        if (h > over) over = h;
    }
    return over;
}

static void consider_closest(ap_search_result *r, double *best_overshoot, const ap_estimate *e) {
    /* a stopped simulation's figures are partial: no closest plan (one stopped on its
       overshoot is not near enough to be); those stopped as unfit are counted */
    if (e->partial) {
        r->stopped += e->partial == 1;
        return;
    }
    double over = overshoot(e);
    /* a measured plan first, then the least overshoot, then the ranking */
    int first = r->have_closest ? ap_estimate_measured_first(e, &r->closest) : 1;
    if (first > 0 ||
        (first == 0 && (over < *best_overshoot ||
                        (over == *best_overshoot && ap_estimate_better(e, &r->closest))))) {
        ap_estimate_copy(&r->closest, e);
        r->have_closest = 1;
        *best_overshoot = over;
    }
}

/* A fitting pipelined plan: a candidate for the re-split, with its lower bounds; kept (*kept)
 * unless its bounds and its step are past the answer's bound when the chunk was placed (that
 * bound only falls, and the re-split takes no candidate past it: resplit.c), so a chunk keeps
 * the few that can still enter the ranking. Every candidate is counted (r.candidates). */
static ap_status add_candidate(search_state *s, int il, int im, int *kept, ap_err *err) {
    chunk_out *o = s->out;
    *kept = 0;
    o->r.candidates++;
    if (o->ncand == o->capc) {
        int64_t cap = o->capc ? 2 * o->capc : 64;
        rs_cand *nc = ap_realloc(o->cands, (size_t)cap * sizeof *nc);
        if (!nc) return ap_err_set(err, AP_ERR_NOMEM, "out of memory for the re-split candidates");
        o->cands = nc;
        o->capc = cap;
    }
    rs_cand *x = &o->cands[o->ncand];
    x->pt = *s->pt;
    x->rc = il;
    x->mb = im;
    x->step_s = s->scratch.time.step_s;
    x->peak_bytes = s->scratch.device_peak_bytes;
    x->cls = plan_complication(&s->scratch.plan, o->top.cp_short_seq);
    x->fixed_s = s->scratch.time.pp_comm_s + s->scratch.time.overhead_s;
    int useful;
    ap_status st = rs_lower_bound(s->m, s->c, s->o, &s->est_checked, &s->scratch, &s->rs, x,
                                  o->outer_bound, &useful, err);
    if (st != AP_OK) return st;
    if (!useful && x->step_s > o->outer_bound) return AP_OK;
    o->ncand++;
    *kept = 1;
    return AP_OK;
}

/* The visit record of the estimate in s->scratch, when visit_keep keeps one. */
static ap_status keep_record(search_state *s, ap_err *err) {
    chunk_out *o = s->out;
    const size_t sz = s->o->visit_rec_size;
    if (o->nrec == o->caprec) {
        int64_t cap = o->caprec ? 2 * o->caprec : 256;
        unsigned char *q = ap_realloc(o->recs, (size_t)cap * sz);
        if (!q) return ap_err_set(err, AP_ERR_NOMEM, "out of memory for the visit records");
        o->recs = q;
        o->caprec = cap;
    }
    o->nrec += s->o->visit_keep(s->o->visit_ctx, &s->scratch, o->recs + (size_t)o->nrec * sz) != 0;
    return AP_OK;
}

/* A fitting estimate's step time into the chunk's heap of its top_k least (time_cut). */
static void kbest_add(search_state *s, double t) {
    chunk_out *o = s->out;
    const int k = s->o->top_k;
    double *h = o->kbest;
    int i;
    if (o->nkbest < k) {
        for (i = o->nkbest++; i > 0 && h[(i - 1) / 2] < t; i = (i - 1) / 2) h[i] = h[(i - 1) / 2];
        h[i] = t;
        return;
    }
    if (!(t < h[0])) return;
    /* the largest leaves: t sifts down from the root */
    for (i = 0;;) {
        int c = 2 * i + 1;
        if (c >= k) break;
        if (c + 1 < k && h[c + 1] > h[c]) c++;
        if (!(h[c] > t)) break;
        h[i] = h[c];
        i = c;
    }
    h[i] = t;
}

/* The step time past which no member can matter to the answer (search.h "Pruning"): the
 * least of the top_k-th least step time of the chunk's fitting estimates times 1 + the tie
 * margin, the answer's ranking bound after chunk (this one - LAG) merged, and step_bound_s
 * (the answer's ranking holds only plans no slower than its own k-th step times 1 + the
 * margin, and its k-th is no slower than that of any chunk or of any set of chunks merged;
 * the re-split only lowers it); INFINITY while none is known. It depends on the chunk's own
 * estimates and on chunks LAG before it, so the counters do not depend on the threads. */
static double time_cut(const search_state *s) {
    const chunk_out *o = s->out;
    double cut = o->lag_bound;
    if (o->nkbest == s->o->top_k && o->kbest[0] >= 0) {
        double c = s->o->tie_margin > 0 ? o->kbest[0] * (1 + s->o->tie_margin) : o->kbest[0];
        if (c < cut) cut = c;
    }
    if (s->o->step_bound_s > 0 && s->o->step_bound_s < cut) cut = s->o->step_bound_s;
    return cut;
}

/* Evaluate one plan (member il, im of the group): *verdict 1 = fits, 0 = legal but does not
 * fit, -1 = illegal (or past max_evals). A cost-model failure on a legal plan is an error. */
static ap_status eval(search_state *s, int il, int im, int *verdict, ap_err *err) {
    ap_search_result *r = &s->out->r;
    const ap_plan *p = &s->p;
    const int pre = s->pre;
    s->pre = 0;
    *verdict = -1;
    r->enumerated++;
    if (!legal(s, il, im)) return AP_OK;
    r->legal++;
    if (r->evaluated >= s->out->cap) {
        r->capped = 1;
        return AP_OK;
    }
    ap_status st = AP_OK;
    if (pre) {
        /* estimated by past_cut */
    } else if (least_kept(s, il, im)) { /* simulated once already */
        ap_estimate_copy(&s->scratch, s->least);
        s->least_ok = 0;
    } else {
        st = estimate_member(s, il, im, err);
    }
    if (st == AP_ERR_INFEASIBLE) return AP_OK; /* the simulator's verdict: it cannot run */
    if (st != AP_OK) {
        char lbl[160];
        ap_err_prefix(err, "estimating %s", ap_plan_label(p, lbl, sizeof lbl));
        return st;
    }
    if (s->scratch.partial == 3) { /* not simulated: past the cut */
        r->pruned++;
        return AP_OK;
    }
    r->evaluated++;
    if (s->o->visit) s->o->visit(s->o->visit_ctx, &s->scratch);
    else if (s->o->visit_keep && (st = keep_record(s, err)) != AP_OK) return st;
    if (!s->scratch.fits) {
        consider_closest(r, &s->out->best_overshoot, &s->scratch);
        *verdict = 0;
        return AP_OK;
    }
    r->fit++;
    *verdict = 1;
    if (s->o->any_fit) *s->found = 1;
    kbest_add(s, s->scratch.time.step_s);
    /* Colossal-AI's stage manager takes one layer count per pipeline rank: an interleaved
       plan keeps uniform chunks there (uneven_stages_no_vp), so it is no re-split candidate;
       nor is a torchtitan plan recomputing K layers per chunk (uniform chunks only) */
    const ap_trainer_caps *tr = ap_trainer_get(p->trainer);
    int cand = s->resplit && p->pp > 1 && !(p->vp > 1 && tr->uneven_stages_no_vp) &&
               !(p->recompute_layers > 0 && tr->recompute_partial_divides_chunk);
    int kept = 0;
    if (cand && (st = add_candidate(s, il, im, &kept, err)) != AP_OK) return st;
    /* A plan slower than the answer's bound when the chunk was placed cannot be in the final
     * ranking: that bound (the K-th step time, times 1 + the tie margin) only falls as chunks
     * merge, and every plan that ranks a final entry is no slower than it. So the chunk's
     * ranking skips it: the answer is the same whenever the chunk was placed, and the chunk
     * copies (and merges) only the few plans that can still enter. */
    if (!(s->scratch.time.step_s > s->out->outer_bound) &&
        topk_offer(&s->out->top, &s->scratch, kept ? s->out->ncand - 1 : -1) < 0)
        return ap_err_set(err, AP_ERR_NOMEM, "out of memory for the ranking");
    return AP_OK;
}

/* Count members [rc0, rc1) x [mb0, mb1) as enumerated and, when legal, pruned (not
 * estimated). */
static void count_pruned(search_state *s, int rc0, int rc1, int mb0, int mb1) {
    ap_search_result *r = &s->out->r;
    for (int il = rc0; il < rc1; il++)
        for (int im = mb0; im < mb1; im++) {
            r->enumerated++;
            if (legal(s, il, im)) {
                r->legal++;
                r->pruned++;
            }
        }
}

/* Group bound (search.h): the least-memory member (the smallest micro-batch, the most
 * recomputation) does not fit, so no member does. It is estimated outside the counters; when
 * it is legal and does not fit it is still a candidate for the closest plan. A simulated member
 * past the time cut has no verdict (partial 3): each member is then tried on its own. */
static ap_status group_cannot_fit(search_state *s, int *cannot, ap_err *err) {
    *cannot = 0;
    if (!legal(s, s->g.most_rc, 0)) return AP_OK;
    ap_plan_group_member(&s->g, s->g.most_rc, 0, &s->p);
    ap_status st = estimate_member(s, s->g.most_rc, 0, err);
    if (st == AP_ERR_INFEASIBLE) return AP_OK; /* the simulator's verdict: it cannot run */
    if (st != AP_OK) {
        char lbl[160];
        ap_err_prefix(err, "estimating %s", ap_plan_label(&s->p, lbl, sizeof lbl));
        return st;
    }
    if (s->scratch.fits && !s->scratch.partial && ap_hetero_applies(&s->p)) {
        /* a simulation costs thousands of estimates: eval takes this one back */
        if (!s->least) s->least = ap_malloc(sizeof *s->least);
        if (s->least) {
            ap_estimate_copy(s->least, &s->scratch);
            s->least_ok = 1;
        }
    }
    if (s->scratch.fits || s->scratch.partial == 3) return AP_OK; /* 3: no verdict */
    consider_closest(&s->out->r, &s->out->best_overshoot, &s->scratch);
    *cannot = 1;
    return AP_OK;
}

/* Under a tie margin, the step below which a plan of s->p's degrees, ZeRO stage and offload
 * must come to enter the ranking's complication it would take, as the answer stood after
 * chunk (this one - LAG) merged: the most of the full steps of the complications its plans
 * can take: fitting or tight, and where it is pipelined with or without offload (the
 * re-split's joint choice picks it). A complication only fills further while the chunks
 * merge, and a plan no faster than its K-th is turned away (topk.c offer_tied; a pipelined
 * plan's re-split is passed over for the same reason, resplit.c class_cut); INFINITY while one
 * of them has room. */
static double class_cut(const search_state *s) {
    const ap_plan *p = &s->g.base; /* the members differ in recompute and micro-batch only */
    if (s->o->tie_margin <= 0) return INFINITY;
    return complication_cut(s->out->lag_cls, plan_complication(p, s->out->top.cp_short_seq),
                            p->pp > 1);
}

/* Whether member (il, im), s->p, is past the time cut (search.h "Pruning"): the bound of its
 * degrees and micro-batch (lb[im], worked out on first use; < 0 unknown) is past it, or past
 * ccut, the group's class_cut. */
static ap_status past_cut(search_state *s, int il, int im, double *lb, double ccut, int *past,
                          ap_err *err) {
    *past = 0;
    if (!legal(s, il, im)) return AP_OK;
    double cut = time_cut(s);
    if (ccut < cut) cut = ccut;
    if (cut == INFINITY) return AP_OK;
    if (lb[im] < 0 && rs_own_sibling(&s->p) && s->out->r.evaluated < s->out->cap &&
        !ap_hetero_applies(&s->p) && !least_kept(s, il, im)) {
        /* the member is the bound's sibling: its own estimate gives the bound, and eval
         * takes it (s->pre) unless the bound prunes it */
        ap_status st = estimate_member(s, il, im, err);
        if (st != AP_OK) {
            char lbl[160];
            ap_err_prefix(err, "estimating %s", ap_plan_label(&s->p, lbl, sizeof lbl));
            return st;
        }
        lb[im] = rs_member_bound_own(s->m, &s->p, &s->scratch, &s->rs);
        s->pre = !(lb[im] > cut);
    }
    if (lb[im] < 0) {
        ap_status st = rs_member_bound(s->m, s->c, s->o, &s->est_checked, &s->p, &s->rs, &lb[im],
                                       err);
        if (st != AP_OK) return st;
    }
    *past = lb[im] > cut;
    return AP_OK;
}

/* One group (s->g): skipped whole when its least-memory member does not fit; within a
 * recompute level the micro-batch loop stops at the first size that does not fit (larger ones
 * only use more memory); a member whose degrees and micro-batch cannot come under the chunk's
 * time cut is not estimated (past_cut). Pruned members are counted, not estimated. */
static ap_status search_group(search_state *s, ap_err *err) {
    const int prune = s->o->prune;
    /* the time cut needs every estimate's verdict free to skip (no visitor sees them) and
     * the cost model's stage times (a simulated placement prices its own) */
    const int cut = prune && !s->o->visit && !s->o->visit_keep &&
                    !ap_space_point_simulated(s->space, s->pt);
    double lb[AP_GROUP_MAX_MBS];
    ap_status st;
    s->p = s->g.base;
    s->in_place = 0;
    group_legality(s);
    s->least_ok = 0;
    if (prune) {
        int cannot;
        if ((st = group_cannot_fit(s, &cannot, err)) != AP_OK) return st;
        if (cannot) {
            count_pruned(s, 0, s->g.nrc, 0, s->g.nmbs);
            return AP_OK;
        }
    }
    for (int im = 0; im < s->g.nmbs; im++) lb[im] = -1;
    const double ccut = cut ? class_cut(s) : INFINITY;
    for (int il = 0; il < s->g.nrc; il++)
        for (int im = 0; im < s->g.nmbs; im++) {
            ap_plan_group_member(&s->g, il, im, &s->p);
            int v, past = 0;
            if (cut && (st = past_cut(s, il, im, lb, ccut, &past, err)) != AP_OK) return st;
            if (past) {
                count_pruned(s, il, il + 1, im, im + 1);
                continue;
            }
            if ((st = eval(s, il, im, &v, err)) != AP_OK) return st;
            if (v == 0 && prune) {
                count_pruned(s, il, il + 1, im + 1, s->g.nmbs);
                break;
            }
        }
    return AP_OK;
}

/* Search the n points of one chunk into s->out (reset first). */
static void search_chunk(search_state *s, const ap_space_point *pts, int n) {
    chunk_out *o = s->out;
    s->est.sim_stop_unfit = o->stop_unfit;
    s->est.sim_stop_over = o->stop_over;
    /* a visitor reads a stopped simulation's figures (search.h visit) */
    s->est.sim_stop_early = !s->o->visit && !s->o->visit_keep;
    topk_clear(&o->top);
    o->ncand = 0;
    o->nrec = 0;
    /* the counters and the closest plan's flag (the estimates in r, kilobytes, are read only
     * where have_closest says one was written: clearing them was most of a chunk's set-up) */
    o->r.enumerated = o->r.legal = o->r.evaluated = o->r.fit = o->r.pruned = 0;
    o->r.candidates = 0;
    o->r.capped = o->r.have_closest = 0;
    o->best_overshoot = 0;
    o->nkbest = 0;
    o->st = AP_OK;
    for (int i = 0; i < n && o->st == AP_OK && !(s->o->any_fit && *s->found); i++) {
        s->pt = &pts[i];
        ap_space_group(s->space, &pts[i], &s->g);
        o->st = search_group(s, &o->err);
    }
}

/* ---- threads and the ordered merge -------------------------------------------------------- */

/* The candidates of one merged chunk, in the enumeration's order. */
typedef struct {
    rs_cand *v;
    int64_t n;
} cand_block;

typedef struct {
    const ap_model *m;
    const ap_cluster *c;
    const ap_search_opts *o;
    int stop_unfit;           /* simulations stop once their plan cannot fit (any_fit,
                                 no_closest) */
    ap_space space;           /* the workers' (ap_space_group) */
    ap_space walk;            /* the same space, walked (take) */
    pthread_mutex_t space_mu; /* the walk: walk, next, exhausted, sim_walk (take) */
    pthread_mutex_t mu;       /* the rest: slots, merging, the answer */
    pthread_cond_t cv;
    int64_t next;             /* next chunk to take */
    int64_t merged;           /* chunks merged so far */
    int exhausted;            /* the space has no more points (or any_fit found a plan) */
    int sim_walk;             /* the walk is in its second pass: the simulated points (take) */
    int64_t first_sim;        /* the index of its first chunk (INT64_MAX before; run->mu) */
    double priced_bound;      /* the answer's ranking bound once every chunk before first_sim
                                 merged: the priced plans' (INFINITY before) */
    int priced_fits;          /* and whether a priced plan fits then */
    double priced_over;       /* none fits: the priced closest plan's overshoot (0: none) */
    int nslots;
    chunk_out *slots;         /* chunk i in slots[i % nslots] */
    ap_space_point *pts;      /* nslots x CHUNK_POINTS: the points of each slot */
    int *npts;                /* points of each slot's chunk; -1: not finished */
    double lag_ring[2 * LAG]; /* the answer's ranking bound after chunk j merged, at j % (2 LAG) */
    double lag_cls_ring[2 * LAG][32]; /* and its complications' full steps */
    _Atomic int found;        /* any_fit: a plan fits */
    ap_space_point *frugal;   /* any_fit: the simulated points, most frugal first (take) */
    int64_t nfrugal, next_frugal;
    int frugal_read;          /* frugal holds them (or failed to: the walk's order then) */
    /* the answer: counters and closest plan in *r, the rest folded like a chunk's in acc
     * (its candidates in the chunks' arrays, blk, joined in acc.cands when the walk ends) */
    ap_search_result *r;
    chunk_out acc;
    cand_block *blk;
    int64_t nblk, capblk;
    /* the search's estimate options with what every estimate of the run would look up itself
     * (ap_estimate_opts_resolve: the GPU's calibration and kernel tables) */
    ap_estimate_opts eo;
    ap_calib cal;
    struct ap_kernels *built;
} search_run;

/* Fold chunk slot `k` into the answer (run->mu held). */
static void merge_chunk(search_run *run, chunk_out *o) {
    ap_search_result *r = run->r;
    if (run->acc.st != AP_OK) return;
    if (o->st != AP_OK) {
        run->acc.st = o->st;
        run->acc.err = o->err;
        return;
    }
    r->enumerated += o->r.enumerated;
    r->legal += o->r.legal;
    r->evaluated += o->r.evaluated;
    r->fit += o->r.fit;
    r->pruned += o->r.pruned;
    r->stopped += o->r.stopped;
    r->capped |= o->r.capped;
    r->candidates += o->r.candidates;
    /* the chunk's candidates change hands (its slot starts a new array): copying them onto
     * one growing array here, under the lock, moved each several times */
    if (o->ncand > 0) {
        if (run->nblk == run->capblk) {
            int64_t cap = run->capblk ? 2 * run->capblk : 64;
            cand_block *nb = ap_realloc(run->blk, (size_t)cap * sizeof *nb);
            if (!nb) {
                run->acc.st = ap_err_set(&run->acc.err, AP_ERR_NOMEM, "out of memory for the re-split "
                                     "candidates");
                return;
            }
            run->blk = nb;
            run->capblk = cap;
        }
        run->blk[run->nblk++] = (cand_block){o->cands, o->ncand};
        o->cands = NULL;
        o->capc = 0;
    }
    for (int64_t i = 0; i < o->nrec; i++)
        run->o->visit_fold(run->o->visit_ctx, o->recs + (size_t)i * run->o->visit_rec_size);
    for (int i = 0; i < o->top.n; i++) {
        const int64_t id = topk_id(&o->top, i);
        if (topk_offer_rank(&run->acc.top, &o->top, i, id < 0 ? -1 : run->acc.ncand + id) < 0) {
            run->acc.st = ap_err_set(&run->acc.err, AP_ERR_NOMEM, "out of memory for the ranking");
            return;
        }
    }
    run->acc.ncand += o->ncand;
    if (o->r.have_closest) consider_closest(r, &run->acc.best_overshoot, &o->r.closest);
}

/* Estimates left under max_evals after the chunks merged so far (run->mu held). */
static int64_t cap_left(const search_run *run) {
    if (run->o->max_evals <= 0) return INT64_MAX;
    return run->r->evaluated < run->o->max_evals ? run->o->max_evals - run->r->evaluated : 0;
}

/* A chunk's points as read from the space, before the chunk has a slot. */
typedef struct {
    int64_t i;                /* the chunk's index: the order the space gives the points */
    int n;
    int sim;                  /* of the walk's second pass (simulated points) */
    ap_space_point pts[CHUNK_POINTS];
} taken;

/* How frugal a simulated point is with device memory, higher first (take): the state bytes
 * it moves off the GPU (offload fractions; DeepSpeed's NVMe level offloads both wholly), then
 * the ranks its layers' activations are split over (tp x cp). */
static int frugal_cmp(const ap_space_point *a, const ap_space_point *b, int ds) {
    const double oa = a->offload_optimizer + a->offload_params + (ds && a->hetero_extra ? 2 : 0);
    const double ob = b->offload_optimizer + b->offload_params + (ds && b->hetero_extra ? 2 : 0);
    if (oa != ob) return oa > ob ? -1 : 1;
    const int ma = a->tp * a->cp, mb = b->tp * b->cp;
    return ma != mb ? (ma > mb ? -1 : 1) : 0;
}

/* any_fit's second pass: every simulated point read from the walk into run->frugal, sorted
 * most frugal first (a stable insertion sort: the walk's order breaks ties). Only whether a
 * plan fits is asked, and one fitting simulation answers it, so the points likeliest to fit
 * are simulated first (a verdict of a model that fits took 20 simulations, now one); where
 * none fits, every point is simulated either way. Out of memory leaves the walk's order. */
static void read_frugal(search_run *run) {
    run->frugal_read = 1;
    const int ds = run->o->fixed.trainer == AP_TRAINER_DEEPSPEED;
    int64_t cap = 0;
    ap_space_point pt;
    ap_space w = run->walk;
    while (ap_space_next(&w, &pt)) {
        if (!ap_space_point_simulated(&w, &pt)) continue;
        if (run->nfrugal == cap) {
            cap = cap ? 2 * cap : 64;
            ap_space_point *v = ap_realloc(run->frugal, (size_t)cap * sizeof *v);
            if (!v) {
                ap_free(run->frugal);
                run->frugal = NULL;
                run->nfrugal = 0;
                return;
            }
            run->frugal = v;
        }
        int64_t j = run->nfrugal++;
        for (; j > 0 && frugal_cmp(&pt, &run->frugal[j - 1], ds) < 0; j--)
            run->frugal[j] = run->frugal[j - 1];
        run->frugal[j] = pt;
    }
    if (run->frugal) run->walk = w; /* the walk is spent: the points are in frugal */
}

/* Read the next chunk's points from the space (run->space_mu, not run->mu: merging and
 * placing chunks do not wait on the walk); 0 when there are none. */
static int take(search_run *run, taken *c) {
    int got = 0;
    pthread_mutex_lock(&run->space_mu);
    if (run->o->any_fit && run->found) run->exhausted = 1;
    while (!run->exhausted && !got) {
        /* the walk passes twice: the points the cost model prices, then those simulated, so
         * that every simulation starts with the priced plans' ranking bound and verdict
         * (place). A simulated point ends its chunk: one costs thousands of estimates, so a
         * few of them would hold a whole chunk, and the whole search, on one thread (the
         * answer depends neither on where chunks end nor on their order) */
        int n = 0, more = 1;
        if (run->sim_walk && run->o->any_fit && !run->frugal_read) read_frugal(run);
        if (run->frugal) { /* one simulated point a chunk, as below */
            more = run->next_frugal < run->nfrugal;
            if (more) c->pts[n++] = run->frugal[run->next_frugal++];
        }
        while (!run->frugal && n < CHUNK_POINTS &&
               (more = ap_space_next(&run->walk, &c->pts[n]))) {
            int simulated = ap_space_point_simulated(&run->walk, &c->pts[n]);
            if (simulated != run->sim_walk) continue; /* not asked this pass */
            n++;
            if (simulated) break;
        }
        if (n > 0) {
            c->i = run->next++;
            c->n = n;
            c->sim = run->sim_walk;
            got = 1;
        }
        if (n == 0 || !more) {
            if (run->sim_walk || !simulates(run->o)) {
                run->exhausted = 1;
            } else {
                ap_space_init(&run->walk, run->m, run->c, run->o); /* from the start */
                run->sim_walk = 1;
                pthread_mutex_lock(&run->mu);
                run->first_sim = run->next;
                pthread_mutex_unlock(&run->mu);
            }
        }
    }
    pthread_mutex_unlock(&run->space_mu);
    return got;
}

/* Give a taken chunk its slot, i % nslots, once the chunk nslots before it has merged (the
 * chunk of the least index not merged is always placed, so the wait ends); -1 when the search
 * failed (run->mu held). */
static int place(search_run *run, const taken *c) {
    const int64_t i = c->i;
    /* a simulated point waits for the priced plans' bound: every chunk before first_sim */
    while (run->acc.st == AP_OK &&
           (i >= run->merged + run->nslots || (c->sim && run->merged < run->first_sim)))
        pthread_cond_wait(&run->cv, &run->mu);
    if (run->acc.st != AP_OK) return -1;
    int k = (int)(i % run->nslots);
    memcpy(run->pts + (size_t)k * CHUNK_POINTS, c->pts, (size_t)c->n * sizeof *c->pts);
    run->npts[k] = -c->n - 1; /* placed, not finished */
    /* what is left now; chunks before it that are not merged yet may leave less (worker) */
    run->slots[k].cap = cap_left(run);
    double b = topk_bound(&run->acc.top);
    if (run->o->step_bound_s > 0 && run->o->step_bound_s < b) b = run->o->step_bound_s;
    run->slots[k].outer_bound = b;
    run->slots[k].lag_bound = i >= LAG ? run->lag_ring[(i - LAG) % (2 * LAG)] : INFINITY;
    for (int cl = 0; cl < 32; cl++)
        run->slots[k].lag_cls[cl] = i >= LAG ? run->lag_cls_ring[(i - LAG) % (2 * LAG)][cl]
                                             : INFINITY;
    if (c->sim && run->priced_bound < run->slots[k].lag_bound)
        run->slots[k].lag_bound = run->priced_bound;
    /* a simulation's figures matter to the closest plan alone, read only when nothing fits:
     * once a priced plan fits, it stops as soon as its plan cannot fit; while none does, as
     * soon as it overshoots more than the priced closest plan (which then stays nearer) */
    run->slots[k].stop_unfit = run->stop_unfit || (c->sim && run->priced_fits);
    run->slots[k].stop_over = c->sim && !run->priced_fits ? run->priced_over : 0;
    return k;
}

static void *worker(void *arg) {
    search_run *run = ((void **)arg)[0];
    search_state *s = ((void **)arg)[1];
    taken c;
    int have = take(run, &c);
    pthread_mutex_lock(&run->mu);
    while (have) {
        int k = place(run, &c), n = c.n;
        if (k < 0) break;
        s->out = &run->slots[k];
        pthread_mutex_unlock(&run->mu);
        search_chunk(s, run->pts + (size_t)k * CHUNK_POINTS, n);
        have = take(run, &c);
        pthread_mutex_lock(&run->mu);
        run->npts[k] = n;
        /* fold every finished chunk that is next in order (a slot not finished, or free, has
         * npts < 0) */
        while (run->npts[run->merged % run->nslots] >= 0) {
            int km = (int)(run->merged % run->nslots);
            chunk_out *o = &run->slots[km];
            /* a chunk searched under a larger cap than is left now is the chunk it would be
             * under what is left unless the cap stopped it, it made more estimates than are
             * left or it failed (on an estimate it may not make): then it is searched again */
            int64_t left = cap_left(run);
            if (o->cap != left && (o->st != AP_OK || o->r.capped || o->r.evaluated > left)) {
                o->cap = left;
                s->out = o;
                search_chunk(s, run->pts + (size_t)km * CHUNK_POINTS, run->npts[km]);
            }
            merge_chunk(run, o);
            run->lag_ring[run->merged % (2 * LAG)] = topk_bound(&run->acc.top);
            topk_full_steps(&run->acc.top, run->lag_cls_ring[run->merged % (2 * LAG)]);
            if (run->merged + 1 == run->first_sim) { /* the last priced chunk */
                run->priced_bound = run->lag_ring[run->merged % (2 * LAG)];
                run->priced_fits = run->acc.top.n > 0;
                double over = run->r->have_closest ? overshoot(&run->r->closest) : 0;
                run->priced_over = !run->priced_fits && over > 0 ? over : 0;
            }
            run->npts[km] = -1;
            run->merged++;
        }
        pthread_cond_broadcast(&run->cv);
    }
    pthread_mutex_unlock(&run->mu);
    return NULL;
}

/* The merge lock: held a few microseconds per chunk, so a waiter spins briefly before it
 * sleeps where the C library offers it (glibc's adaptive mutex): sleeping and waking took
 * longer than the wait on two cores. */
static void init_lock(pthread_mutex_t *mu) {
#ifdef PTHREAD_ADAPTIVE_MUTEX_INITIALIZER_NP
    pthread_mutexattr_t a;
    if (pthread_mutexattr_init(&a) == 0) {
        int ok = pthread_mutexattr_settype(&a, PTHREAD_MUTEX_ADAPTIVE_NP) == 0 &&
                 pthread_mutex_init(mu, &a) == 0;
        pthread_mutexattr_destroy(&a);
        if (ok) return;
    }
#endif
    pthread_mutex_init(mu, NULL);
}

static int threads_of(const ap_search_opts *o) {
    if (o->visit) return 1;
    int n = o->threads;
    if (n <= 0) n = ap_online_cores();
    return n > 256 ? 256 : n;
}

/* Allocate the run's slots and answer; AP_ERR_NOMEM on failure (free_run is safe after). */
static ap_status init_run(search_run *run, int nthreads, int top_k, ap_err *err) {
    run->nslots = nthreads * WINDOW < LAG ? nthreads * WINDOW : LAG;
    run->slots = ap_calloc((size_t)run->nslots, sizeof *run->slots);
    run->pts = ap_malloc((size_t)run->nslots * CHUNK_POINTS * sizeof *run->pts);
    run->npts = ap_malloc((size_t)run->nslots * sizeof *run->npts);
    if (!run->slots || !run->pts || !run->npts)
        return ap_err_set(err, AP_ERR_NOMEM, "out of memory for the search");
    /* every ranking grows on demand (topk_offer) */
    topk t0 = {.k = top_k, .margin = run->o->tie_margin,
               .cp_short_seq = ap_cp_short_seq(run->m), .ids_provisional = rs_applies(run->o)};
    run->acc.top = t0;
    for (int k = 0; k < run->nslots; k++) {
        run->npts[k] = -1;
        run->slots[k].top = t0;
        run->slots[k].kbest = ap_malloc((size_t)top_k * sizeof *run->slots[k].kbest);
        if (!run->slots[k].kbest)
            return ap_err_set(err, AP_ERR_NOMEM, "out of memory for the search");
    }
    return AP_OK;
}

static void free_run(search_run *run) {
    for (int k = 0; run->slots && k < run->nslots; k++) {
        topk_free(&run->slots[k].top);
        ap_free(run->slots[k].kbest);
        ap_free(run->slots[k].cands);
        ap_free(run->slots[k].recs);
    }
    ap_free(run->slots);
    ap_free(run->built);
    ap_free(run->pts);
    ap_free(run->npts);
    topk_free(&run->acc.top);
    ap_free(run->acc.cands);
    for (int64_t b = 0; b < run->nblk; b++) ap_free(run->blk[b].v);
    ap_free(run->blk);
    ap_free(run->frugal);
}

/* The merged chunks' candidates into one array, acc.cands (their ids index it). */
static ap_status join_cands(search_run *run, ap_err *err) {
    if (run->acc.ncand == 0) return AP_OK;
    rs_cand *v = ap_malloc((size_t)run->acc.ncand * sizeof *v);
    if (!v) return ap_err_set(err, AP_ERR_NOMEM, "out of memory for the re-split candidates");
    int64_t at = 0;
    for (int64_t b = 0; b < run->nblk; b++) {
        memcpy(v + at, run->blk[b].v, (size_t)run->blk[b].n * sizeof *v);
        at += run->blk[b].n;
        ap_free(run->blk[b].v);
    }
    run->nblk = 0;
    run->acc.cands = v;
    return AP_OK;
}

/* Run the enumeration on nthreads workers: the calling thread and nthreads - 1 helpers
 * (threads.h; a helper that cannot start leaves its share to the others). */
static ap_status enumerate(search_run *run, int nthreads, ap_err *err) {
    /* each state is set whole below (the compound literal clears what it does not name) */
    search_state *st = ap_malloc((size_t)nthreads * sizeof *st);
    void **args = ap_calloc((size_t)nthreads * 3, sizeof *args);
    if (!st || !args) {
        ap_free(st);
        ap_free(args);
        return ap_err_set(err, AP_ERR_NOMEM, "out of memory for the search threads");
    }
    /* the simulations' templates, one store for the threads (hetero.h) */
    ap_hetero_store *own = NULL, *store = run->o->hetero_templates;
    if (!store && simulates(run->o)) store = own = ap_hetero_store_new();
    void **targ = args + 2 * nthreads; /* the helpers' arguments: &args[2], &args[4], ... */
    for (int i = 0; i < nthreads; i++) {
        st[i] = (search_state){.m = run->m, .c = run->c, .o = run->o, .space = &run->space,
                               .resplit = run->o->resplit && rs_applies(run->o),
                               .est = run->o->est, .found = &run->found};
        st[i].est.cache = ap_estimate_cache_new(); /* NULL: estimates without the memo */
        /* the memo's signatures, written as entries are filled (NULL: none shared) */
        st[i].rs.sig = ap_malloc(RS_MEMO * sizeof *st[i].rs.sig);
        st[i].rs.z2 = ap_malloc(RS_Z2 * sizeof *st[i].rs.z2); /* NULL: none */
        st[i].chunk_cache.shared = store;
        st[i].est_checked = st[i].est;
        st[i].est_checked.plan_checked = 1;
        st[i].est_checked.calib = run->eo.calib;
        st[i].est_checked.kernels = run->eo.kernels;
        args[2 * i] = run;
        args[2 * i + 1] = &st[i];
        if (i > 0) targ[i - 1] = &args[2 * i];
    }
    ap_tasks team;
    if (nthreads > 1) ap_tasks_start(&team, nthreads - 1, worker, targ);
    worker(&args[0]);
    if (nthreads > 1) ap_tasks_wait(&team);
    for (int i = 0; i < nthreads; i++) {
        ap_estimate_cache_free(st[i].est.cache);
        ap_free(st[i].rs.sig);
        ap_free(st[i].rs.z2);
        ap_hetero_cache_free(&st[i].chunk_cache);
        ap_free(st[i].least);
    }
    ap_hetero_store_free(own);
    ap_free(st);
    ap_free(args);
    return AP_OK;
}

/* Where the trainer's space has points simulated operator by operator (Colossal-AI's Gemini,
 * DeepSpeed's offload devices), each the cost of a thousand estimates, the walk asks the points
 * the cost model prices first (take) and the simulations start from what they found (place):
 * - any_fit: a fitting priced plan answers it, and nothing is simulated. Otherwise the
 *   simulations stop once their plan cannot fit (a stopped plan is no closest plan).
 * - When a priced plan fits, the answer has a fitting plan, so no closest plan is read, and
 *   the simulations stop once their plan cannot fit (a plan that cannot fit does not rank).
 *   When none fits, they stop once their overshoot passes the priced plans' closest's: the
 *   closest is no farther, so a plan past it cannot be it, and the closest plan is the one the
 *   unstopped search finds.
 * no_closest says the caller reads none: the simulations stop once their plan cannot fit.
 * Stopped simulations are left out of the closest plan and counted in r->stopped. */
ap_status ap_search(const ap_model *m, const ap_cluster *c, const ap_search_opts *o,
                    ap_search_result *r, ap_err *err) {
    double t0 = ap_now_s();
    memset(r, 0, sizeof *r);
    if (o->top_k < 1 || o->top_k > 10000)
        return ap_err_set(err, AP_ERR_INPUT, "--top must be in [1, 10000]");
    if (o->gbs < 1) return ap_err_set(err, AP_ERR_INPUT, "the global batch must be >= 1");
    if (!(o->tie_margin >= 0 && o->tie_margin <= 1))
        return ap_err_set(err, AP_ERR_INPUT, "the tie margin must be in [0, 1]");
    if (o->visit_keep && (!o->visit_fold || o->visit_rec_size == 0))
        return ap_err_set(err, AP_ERR_INPUT, "visit_keep needs visit_fold and a record size");
    if (o->est.ranks_only)
        return ap_err_set(err, AP_ERR_INPUT, "a search ranks whole estimates (ranks_only unset)");
    const int nthreads = threads_of(o);
    search_run *run = ap_calloc(1, sizeof *run);
    if (!run) return ap_err_set(err, AP_ERR_NOMEM, "out of memory for the search");
    run->m = m;
    run->c = c;
    run->o = o;
    run->stop_unfit = o->any_fit || o->no_closest;
    run->r = r;
    run->first_sim = INT64_MAX;
    run->priced_bound = INFINITY;
    run->eo = o->est;
    ap_estimate_opts_resolve(&run->eo, &c->gpu, &run->cal, &run->built);
    ap_space_init(&run->space, m, c, o);
    run->walk = run->space;
    ap_status st = init_run(run, nthreads, o->top_k, err);
    if (st == AP_OK) {
        pthread_mutex_init(&run->space_mu, NULL);
        init_lock(&run->mu);
        pthread_cond_init(&run->cv, NULL);
        st = enumerate(run, nthreads, err);
        pthread_cond_destroy(&run->cv);
        pthread_mutex_destroy(&run->mu);
        pthread_mutex_destroy(&run->space_mu);
    }
    if (st == AP_OK && run->acc.st != AP_OK) {
        st = run->acc.st;
        *err = run->acc.err;
    }
    if (st == AP_OK) st = join_cands(run, err);
    if (st == AP_OK && rs_applies(o) && !(o->any_fit && run->acc.top.n > 0))
        st = rs_rank(m, c, o, run->acc.cands, run->acc.ncand, &run->acc.top, nthreads, r, err);
    topk *t = &run->acc.top;
    if (st == AP_OK) st = rs_fill(m, c, o, run->acc.cands, t, 1, err);
    if (st == AP_OK) {
        if (t->n > 0) r->fastest = *topk_at(t, 0);
        topk_rank_ties(t);
        st = rs_fill(m, c, o, run->acc.cands, t, t->k, err);
    }
    if (st == AP_OK) {
        r->top = topk_take(t, &r->ntop);
        if (r->ntop == -2)
            st = ap_err_set(err, AP_ERR_INTERNAL, "a provisional plan reached the answer");
        else if (r->ntop < 0)
            st = ap_err_set(err, AP_ERR_NOMEM, "out of memory for the answer");
    }
    r->threads = nthreads;
    free_run(run);
    ap_free(run);
    if (st != AP_OK) ap_search_result_free(r);
    r->search_s = ap_now_s() - t0;
    return st;
}

/* ---- several searches ------------------------------------------------------------------------ */

typedef struct {
    const ap_model *m;
    const ap_cluster *clusters;
    const ap_search_opts *o;
    ap_search_result *res;
    ap_status *st;
    ap_err *errs;
    int n, next;
    pthread_mutex_t mu;
} many_run;

static void *many_worker(void *arg) {
    many_run *mr = arg;
    ap_search_opts o = *mr->o;
    o.threads = 1;
    for (;;) {
        pthread_mutex_lock(&mr->mu);
        int i = mr->next++;
        pthread_mutex_unlock(&mr->mu);
        if (i >= mr->n) break;
        mr->st[i] = ap_search(mr->m, &mr->clusters[i], &o, &mr->res[i], &mr->errs[i]);
    }
    return NULL;
}

ap_status ap_search_many(const ap_model *m, const ap_cluster *clusters, int n,
                         const ap_search_opts *o, ap_search_result *res, ap_status *st,
                         ap_err *errs) {
    int nt = threads_of(o);
    if (nt > n) nt = n;
    if (nt <= 1) {
        for (int i = 0; i < n; i++) st[i] = ap_search(m, &clusters[i], o, &res[i], &errs[i]);
        return AP_OK;
    }
    many_run mr = {m, clusters, o, res, st, errs, n, 0, PTHREAD_MUTEX_INITIALIZER};
    /* nt - 1 helpers (threads.h) and this thread pull the searches */
    ap_tasks team;
    ap_tasks_start_same(&team, nt - 1, many_worker, &mr);
    many_worker(&mr);
    ap_tasks_wait(&team);
    return AP_OK;
}
