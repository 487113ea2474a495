/*
 * print_hetero.c - `autoplan simulate` for plans with a Gemini placement or DeepSpeed offload
 * devices (hetero.h): the step's traffic and time, GPU and host memory over the iteration
 * (operator by operator, downsampled to a table), the verdict and what binds; --json prints
 * ap_hetero_to_json, --trace writes its Chrome trace.
 */
#include "cli.h"
#include "autoplan/hetero.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>


static void gib(double b, char *buf, size_t n) { snprintf(buf, n, "%.2f", b / AP_GIB); }

static void print_summary(const ap_hetero *h, const ap_resolved *ctx) {
    const ap_hetero_summary *s = ap_hetero_summary_of(h);
    char a[32], b[32], c[32], d[32], l[128];
    printf("%s: %s on %d x %s (ZeRO group %d), %lld micro-batch%s per step\n", s->name,
           ap_plan_label(&ctx->plan, l, sizeof l), ctx->cluster.gpus, ctx->cluster.gpu.name,
           s->zero_size, (long long)s->micro_batches, s->micro_batches == 1 ? "" : "es");
    if (s->kind == AP_HETERO_GEMINI)
        printf("chunks    %d of %.2fM elements (fp16 + fp32 pairs), %.2fM elements unused by the "
               "search's measure%s; the optimizer of %.0f%% of the chunk memory on the host\n",
               s->nchunks, s->chunks.chunk_elems / 1e6, s->chunks.waste_elems / 1e6,
               s->chunks.keep_gathered ? ", kept gathered" : "",
               100 * s->offload_optim_frac_effective);
    printf("step      %s   %.0f tokens/s   MFU %.1f%%\n", ap_fmt_seconds(s->step_s, a, sizeof a),
           s->tokens_per_s, 100 * s->mfu);
    char t[7][32];
    printf("  compute %s, exposed transfers %s, exposed collectives %s, CPU Adam %s, GPU Adam "
           "%s, NVMe optimizer %s, overhead %s\n",
           ap_fmt_seconds(s->compute_s, t[0], sizeof t[0]),
           ap_fmt_seconds(s->transfer_exposed_s, t[1], sizeof t[1]),
           ap_fmt_seconds(s->collective_exposed_s, t[2], sizeof t[2]),
           ap_fmt_seconds(s->cpu_adam_s, t[3], sizeof t[3]),
           ap_fmt_seconds(s->gpu_adam_s, t[4], sizeof t[4]),
           ap_fmt_seconds(s->nvme_optimizer_s, t[5], sizeof t[5]),
           ap_fmt_seconds(s->overhead_s, t[6], sizeof t[6]));
    printf("PCIe      per step: host->GPU %s (%s busy), GPU->host %s (%s busy)\n",
           ap_fmt_bytes(s->h2d_bytes, a, sizeof a), ap_fmt_seconds(s->h2d_s, b, sizeof b),
           ap_fmt_bytes(s->d2h_bytes, c, sizeof c), ap_fmt_seconds(s->d2h_s, d, sizeof d));
    if (s->nvme_read_bytes > 0 || s->nvme_write_bytes > 0)
        printf("NVMe      per step: read %s, write %s (%s busy)\n",
               ap_fmt_bytes(s->nvme_read_bytes, a, sizeof a),
               ap_fmt_bytes(s->nvme_write_bytes, b, sizeof b),
               ap_fmt_seconds(s->nvme_s, c, sizeof c));
    if (s->gather_bytes > 0 || s->reduce_bytes > 0)
        printf("ZeRO      per step: all-gather %s, reduce-scatter %s\n",
               ap_fmt_bytes(s->gather_bytes, a, sizeof a), ap_fmt_bytes(s->reduce_bytes, b, sizeof b));
    gib(s->gpu_peak_bytes, a, sizeof a);
    gib(s->gpu_capacity_bytes, b, sizeof b);
    gib(s->gpu_model_peak_bytes, c, sizeof c);
    gib(s->gpu_nonmodel_at_peak_bytes, d, sizeof d);
    printf("GPU       peak %s GiB of %s GiB (headroom %.2f GiB); model data up to %s GiB, "
           "non-model %s GiB at the peak\n", a, b, s->headroom_bytes / AP_GIB, c, d);
    gib(s->host_peak_bytes, a, sizeof a);
    gib(s->host_pinned_bytes, b, sizeof b);
    gib(s->host_bytes_per_node, c, sizeof c);
    gib(s->host_capacity_bytes, d, sizeof d);
    printf("host      %s GiB per GPU (%s GiB pinned), %s GiB per node of %s GiB (90%% usable)\n",
           a, b, c, d);
    if (s->nvme_bytes_per_node > 0)
        printf("NVMe      %s per node of %s\n", ap_fmt_bytes(s->nvme_bytes_per_node, a, sizeof a),
               ap_fmt_bytes(s->nvme_capacity_bytes, b, sizeof b));
    if (s->fits) {
        printf("verdict   fits\n");
    } else {
        printf("verdict   does not fit: %s binds", ap_binding_name(s->binding));
        if (s->failure[0]) printf("; %s", s->failure);
        else if (s->binding == AP_BIND_GPU && s->first_over_op >= 0)
            printf("; first over at %s by %s", s->over_op,
                   ap_fmt_bytes(s->over_bytes, a, sizeof a));
        printf("\n");
    }
}

/* GPU and host memory per operator, at most `rows` rows (each the maximum of its run). */
static void print_curve(const ap_hetero *h, int rows) {
    int n;
    const ap_hetero_oprec *r = ap_hetero_ops(h, &n);
    if (n == 0) return;
    printf("\nGPU and host memory over the step (GiB; each row the maximum over its operators), "
           "PCIe MB moved\n");
    printf("  %-52s %8s %8s %8s %8s %9s %9s\n", "operator", "model", "non-mod", "device", "host",
           "H2D MB", "D2H MB");
    int per = (n + rows - 1) / rows;
    for (int i = 0; i < n; i += per) {
        ap_hetero_oprec mx = r[i];
        double h2d = 0, d2h = 0;
        for (int j = i; j < n && j < i + per; j++) {
            if (r[j].gpu_bytes > mx.gpu_bytes) mx = r[j];
            if (r[j].host_bytes > mx.host_bytes) mx.host_bytes = r[j].host_bytes;
            h2d += (double)r[j].h2d_bytes;
            d2h += (double)r[j].d2h_bytes;
        }
        char d[128];
        printf("  %-52.52s %8.2f %8.2f %8.2f %8.2f %9.1f %9.1f\n",
               ap_hetero_op_describe(&mx, d, sizeof d), mx.gpu_model_bytes / AP_GIB,
               mx.gpu_nonmodel_bytes / AP_GIB, mx.gpu_bytes / AP_GIB, mx.host_bytes / AP_GIB, h2d / 1e6,
               d2h / 1e6);
    }
}

int ap_cli_simulate_hetero(const ap_resolved *ctx, const char *trace, int json) {
    ap_err err = {{0}};
    ap_hetero_opts o;
    ap_hetero_opts_init(&o);
    o.headroom_bytes = ctx->est.headroom_bytes;
    o.profile = ctx->est.profile; /* --profile: the kernel tables the estimate uses */
    o.kernels = ctx->est.kernels;
    o.nccl_eager = ctx->est.nccl_eager;
    ap_hetero *h = NULL;
    ap_status st = ap_hetero_run(&ctx->model, &ctx->cluster, &ctx->plan, &o, &h, &err);
    if (st != AP_OK) return ap_cli_fail(st == AP_ERR_INFEASIBLE ? AP_ERR_INPUT : st, &err);
    if (trace) {
        ap_json *t = ap_hetero_trace_json(h);
        char *text = t ? ap_json_print(t, 0) : NULL;
        ap_json_free(t);
        int to_stdout = !strcmp(trace, "-"); /* the trace instead of the summary */
        if (!text) st = ap_err_set(&err, AP_ERR_NOMEM, "out of memory for the trace");
        else if (to_stdout) st = printf("%s\n", text) < 0 ? AP_ERR_IO : AP_OK;
        else st = ap_write_file_atomic(trace, text, strlen(text), &err);
        if (st == AP_ERR_IO && to_stdout) ap_err_set(&err, st, "cannot write the trace");
        free(text);
        if (st != AP_OK || to_stdout) {
            ap_hetero_free(h);
            return st != AP_OK ? ap_cli_fail(st, &err) : 0;
        }
    }
    if (json) {
        ap_json *j = ap_hetero_to_json(h, 256);
        char lbl[128];
        if (j) ap_json_add_string(j, "model", ctx->model.name);
        if (j) ap_json_add_string(j, "plan", ap_plan_label(&ctx->plan, lbl, sizeof lbl));
        char *text = j ? ap_json_print(j, 1) : NULL;
        ap_json_free(j);
        ap_hetero_free(h);
        if (!text) {
            fprintf(stderr, "autoplan: out of memory\n");
            return 1;
        }
        printf("%s\n", text);
        free(text);
        return 0;
    }
    print_summary(h, ctx);
    print_curve(h, 40);
    if (trace) printf("\ntrace written to %s (open in ui.perfetto.dev)\n", trace);
    ap_hetero_free(h);
    return 0;
}
