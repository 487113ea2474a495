/*
 * result.h - the JSON of a plan search as `autoplan plan` prints and caches it (output/result.c):
 * one entry per plan (the estimate JSON of ap_estimate_to_json with its label and confidence),
 * decoding an entry back into a plan, and checking a whole result against the request before it
 * is used.
 *
 * A result read from the plan cache (or imported into it) is input like any other: before it is
 * printed or turned into plan.json and trainer configs, ap_result_check decodes every plan in
 * it, runs the checks a fresh plan passes (ap_plan_check) and estimates it again; a result that
 * does not match what the search would answer is refused with the first reason, so the caller
 * warns and searches again.
 */
#ifndef AP_RESULT_H
#define AP_RESULT_H

#include "autoplan/estimate.h"
#include "autoplan/json.h"
#include "autoplan/search.h"

/* One plan of a result: ap_estimate_to_json plus "label", "confidence", when the plan has
 * per-chunk recompute counts "plan.stage_recompute", and when it has a heterogeneous placement
 * "plan.hetero" (planio.h). Caller frees; NULL when out of memory. */
ap_json *ap_result_plan_json(const ap_estimate *e, const ap_model *m);

/* The plan of an entry made by ap_result_plan_json, validated member by member (types and the
 * ranges of the plan's field table) and against model m (stage layers) and cluster c (the
 * placement). `where` names the entry in messages. Does not run ap_plan_check. */
ap_status ap_result_plan_decode(const ap_json *entry, const ap_model *m, const ap_cluster *c,
                                ap_plan *p, const char *where, ap_err *err);

/* Most plans a result may hold for so->top_k, and the most bytes of its text: a stored result
 * larger than this is refused before it is parsed. */
size_t ap_result_max_bytes(const ap_search_opts *so);

/* Check result `res` (the whole object printed by `plan --json`) against the search it claims to
 * answer: model m on cluster c with options so. Every plan and the closest plan must decode,
 * pass ap_plan_check, carry its own label, and have numbers that agree with each other and with
 * the request (output/result.c says which); at most so->top_k plans, ranked; the header fields
 * must be the request's; the strings bounded and one line. reestimate = 1 also estimates every
 * plan again (so->est) and compares step time and memory. AP_ERR_INPUT with the first
 * difference. */
ap_status ap_result_check(const ap_json *res, const ap_model *m, const ap_cluster *c,
                          const ap_search_opts *so, int reestimate, ap_err *err);

#endif
