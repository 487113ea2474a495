/*
 * search_bench.c - figures for the search (issue targets, printed, not asserted by time):
 *   megatron-1t on 3072 a100-80g GPUs, gbs 3072, the full joint space: under 1 s on one core;
 *   one plan evaluation under 2 microseconds;
 *   pruning is safe: the unpruned enumeration returns the same top 10 (this IS asserted);
 *   a 10-point GPU-count sweep for llama-3-70b under 5 s.
 * Usage: search_bench [SOURCE_DIR]
 */
#include <stdio.h>
#include <string.h>

#include "autoplan/partition.h"
#include "autoplan/search.h"

static int load(const char *dir, const char *rel, ap_model *m) {
    char path[4096];
    ap_err err;
    snprintf(path, sizeof path, "%s/%s", dir, rel);
    if (ap_model_load(path, m, &err) != AP_OK) {
        fprintf(stderr, "%s\n", err.msg);
        return 0;
    }
    return 1;
}

int main(int argc, char **argv) {
    const char *dir = argc > 1 ? argv[1] : AP_SOURCE_DIR;
    ap_model m;
    if (!load(dir, "examples/models/megatron-1t.json", &m)) return 1;
    ap_cluster c;
    ap_cluster_from_gpu(ap_gpu_find("a100-sxm4-80g"), 3072, &c);
    ap_search_opts o;
    ap_search_opts_init(&o);
    o.fixed.seq = m.seq_len;
    o.gbs = 3072;
    ap_err err;
    ap_search_result pr, un;
    if (ap_search(&m, &c, &o, &pr, &err) != AP_OK) {
        fprintf(stderr, "%s\n", err.msg);
        return 1;
    }
    printf("megatron-1t, 3072 x a100-sxm4-80g, gbs 3072:\n");
    printf("  pruned search:   %.3f s  (%lld enumerated, %lld legal, %lld evaluated, %lld pruned, %lld fit)\n",
           pr.search_s, (long long)pr.enumerated, (long long)pr.legal, (long long)pr.evaluated,
           (long long)pr.pruned, (long long)pr.fit);
    o.prune = 0;
    if (ap_search(&m, &c, &o, &un, &err) != AP_OK) return 1;
    printf("  unpruned search: %.3f s  (%lld evaluated)\n", un.search_s, (long long)un.evaluated);
    printf("  one plan evaluation: %.3f us (unpruned search time / plans evaluated)\n",
           1e6 * un.search_s / (double)(un.evaluated > 0 ? un.evaluated : 1));
    int same = pr.ntop == un.ntop;
    for (int i = 0; same && i < pr.ntop; i++)
        same = memcmp(&pr.top[i].plan, &un.top[i].plan, sizeof(ap_plan)) == 0;
    printf("  same top %d with and without pruning: %s\n", pr.ntop, same ? "yes" : "NO");
    if (pr.ntop > 0) {
        char lbl[160];
        printf("  best: %s, %.2f s/step, MFU %.1f%%\n", ap_plan_label(&pr.top[0].plan, lbl, sizeof lbl),
               pr.top[0].time.step_s, 100 * pr.top[0].tp.mfu);
    }
    /* the solvers on (issue 8): optimal stage split of every pipelined plan of the top 10, as
     * `autoplan plan` does (DP; ILP for comparison) */
    for (int sv = 0; sv < 2; sv++) {
        ap_partition_opts po;
        ap_partition_opts_init(&po);
        po.solver = sv ? AP_SOLVER_ILP : AP_SOLVER_DP;
        double t1 = ap_now_s();
        int solved = 0;
        for (int i = 0; i < pr.ntop; i++) {
            if (pr.top[i].plan.pp < 2) continue;
            ap_partition_result part;
            if (ap_partition_solve(&m, &c, &pr.top[i].plan, &po, &part, NULL) == AP_OK) solved++;
        }
        printf("  search + %s stage split of the top %d: %.3f s (%d pipelined plans split)\n",
               sv ? "ILP" : "DP", pr.ntop, pr.search_s + ap_now_s() - t1, solved);
    }
    ap_search_result_free(&pr);
    ap_search_result_free(&un);

    /* 10-point sweep for llama-3-70b */
    if (!load(dir, "examples/models/llama-3-70b.json", &m)) return 1;
    double t0 = ap_now_s();
    int counts[10] = {64, 128, 192, 256, 384, 512, 768, 1024, 1536, 2048};
    for (int i = 0; i < 10; i++) {
        ap_cluster_from_gpu(ap_gpu_find("h100-sxm"), counts[i], &c);
        ap_search_opts_init(&o);
        o.fixed.seq = 4096;
        o.gbs = 1024;
        if (ap_search(&m, &c, &o, &pr, &err) != AP_OK) return 1;
        ap_search_result_free(&pr);
    }
    printf("llama-3-70b, 10-point GPU-count sweep (64..2048 h100): %.3f s\n", ap_now_s() - t0);
    return same ? 0 : 1;
}
