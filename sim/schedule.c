/*
 * schedule.c - the order in which a pipeline rank runs forward and backward passes (sim.h,
 * ap_sim_schedule), the one definition the simulator (sim.c) and the runtime (runtime/run.c)
 * both follow:
 * Megatron-LM's one-forward-one-backward schedule (Narayanan et al. 2021, Sec. 2.2; megatron/
 * core/pipeline_parallel/schedules.py forward_backward_pipelining_without_interleaving): rank i
 * runs pp - i - 1 warm-up forwards, then alternates one forward and one backward, then drains
 * the remaining backwards. With vp > 1 model chunks per rank, the interleaved schedule
 * (forward_backward_pipelining_with_interleaving): warm-up (pp - i - 1) * 2 + (vp - 1) * pp
 * chunk-forwards (all of them when the micro-batches equal pp), the k-th forward runs chunk
 * (k mod pp*vp) / pp on micro-batch (k / (pp*vp)) * pp + k mod pp, and backwards visit the
 * chunks in reverse (get_model_chunk_id).
 *
 * It only orders: the simulator generates each pass's tensors, the runtime executes them.
 */
#include "autoplan/sim.h"

int ap_sim_schedule(int pp, int vp, int64_t m, int stage, ap_sim_pass *items) {
    int64_t total = m * vp, warm;
    if (vp == 1) warm = pp - stage - 1;
    else if (m == pp) warm = total;
    else warm = (int64_t)(pp - stage - 1) * 2 + (int64_t)(vp - 1) * pp;
    if (warm > total) warm = total;
    int64_t group = (int64_t)pp * vp;
    int n = 0;
    for (int64_t f = 0, b = 0; f < total || b < total;) {
        /* warm-up forwards; then forward when forwards and backwards are level (steady 1F1B);
           otherwise backward (including the cool-down) */
        int fwd = f < warm || (f < total && f - warm == b);
        int64_t k = fwd ? f : b;
        int chunk = (int)((k % group) / pp);
        if (!fwd) chunk = vp - 1 - chunk;
        int64_t mb = vp == 1 ? k : (k / group) * pp + k % pp;
        items[n].fwd = fwd;
        items[n].chunk = chunk;
        items[n].mb = (int)mb;
        n++;
        if (fwd) f++;
        else b++;
    }
    return n;
}
