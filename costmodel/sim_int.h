/*
 * sim_int.h - the simulator's internal result layout, shared by costmodel/sim.c (generation
 * and replay) and costmodel/simreport.c (accessors, descriptions, JSON). Not a public header:
 * callers use sim.h.
 */
#ifndef AP_SIM_INT_H
#define AP_SIM_INT_H

#include "autoplan/sim.h"

/* One simulated rank: the public view and the arrays it borrows from (owned here). */
typedef struct rank_store {
    ap_sim_rank r;
    ap_sim_op *ops;
    ap_sim_tensor *ts;
    ap_sim_event *ev;                 /* NULL unless opts.record_curves */
    int64_t *acurve, *rcurve;         /* per event (record_curves) */
    int64_t *opk_cat, *ope_cat;       /* per op x AP_SIM_NCAT (record_curves) */
    int32_t *opk_ev;                  /* per op (record_curves) */
    int32_t *live;                    /* tensors live at the allocated peak */
} rank_store;

struct ap_sim {
    ap_model m;
    ap_plan p;
    ap_sim_opts o;
    double capacity_bytes, budget_bytes, overhead_bytes;
    int nranks;
    rank_store *ranks;
};

#endif
