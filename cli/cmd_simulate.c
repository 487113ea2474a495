/*
 * cmd_simulate.c - `autoplan simulate`: replay one training iteration of a plan event by event
 * on every pipeline rank (sim/sim.c) through an allocator model, and show when and why
 * memory peaks: peak per stage, the breakdown and the largest live tensors at the peak, and,
 * when the plan does not fit, the first operation over the budget, what is alive then and what
 * to change. The analytical estimate is printed beside it for comparison (docs/simulator.md
 * explains where they differ); neither is derived from the other.
 *
 * Exit codes as `estimate`: 2 for bad input or a plan the trainer cannot run; 0 otherwise,
 * including a plan that does not fit (fits false).
 */
#include "cli.h"
#include "autoplan/hetero.h"
#include "autoplan/planio.h"
#include "autoplan/sim.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>


/* What to change, from what is alive when rank r first exceeds the budget. Writes up to `max`
 * one-line suggestions into out[]. */
static int suggest(const ap_plan *p, const ap_sim_rank *r, int nstages, char out[][200], int max) {
    const int64_t *cat = r->over_cat_bytes;
    int inflight = r->over_inflight;
    double total = 0;
    for (int c = 0; c < AP_SIM_NCAT; c++) total += (double)cat[c];
    double states = (double)(cat[AP_SIM_CAT_PARAMS] + cat[AP_SIM_CAT_GRADS] +
                             cat[AP_SIM_CAT_OPTIMIZER]);
    double act = (double)(cat[AP_SIM_CAT_ACTIVATIONS] + cat[AP_SIM_CAT_OTHER]);
    const ap_trainer_caps *caps = ap_trainer_get(p->trainer);
    int n = 0;
    double logits = (double)r->over_logits_bytes;
    if (r->stage == nstages - 1 && logits > 0.2 * total && n < max)
        snprintf(out[n++], 200,
                 "the last stage holds %.2f GiB of logits for one micro-batch: give it fewer "
                 "layers (--stage-layers) or raise --tp (the vocabulary is split by tp)",
                 logits / AP_GIB);
    /* both remedies when both parts matter, the larger part's first */
    for (int pass = 0; pass < 2; pass++) {
        int do_act = (pass == 0) == (act >= states);
        double part = do_act ? act : states;
        if (part < 0.25 * total) continue;
        if (do_act) {
            if (p->recompute == AP_RECOMPUTE_NONE && n < max)
                snprintf(out[n++], 200,
                         "--recompute selective%s (activations are %.0f%% of the live memory, "
                         "%d micro-batch%s in flight)",
                         p->flash_attn ? " or --recompute full" : "", 100.0 * act / total,
                         inflight, inflight == 1 ? "" : "es");
            else if (p->recompute == AP_RECOMPUTE_SELECTIVE && n < max)
                snprintf(out[n++], 200, "--recompute full (keeps only each layer's input)");
            else if (p->recompute == AP_RECOMPUTE_FULL && p->recompute_layers > 0 && n < max)
                snprintf(out[n++], 200,
                         "recompute more layers per chunk (--recompute-layers %d, or 0 for all)",
                         p->recompute_layers * 2);
            if (p->tp > 1 && !p->sp && caps && caps->sp && n < max)
                snprintf(out[n++], 200, "--sp: sequence parallelism splits the norm and dropout "
                                        "activations by tp");
            if (p->mbs > 1 && n < max)
                snprintf(out[n++], 200,
                         "--mbs %lld: smaller micro-batches (more gradient accumulation)",
                         (long long)(p->mbs / 2));
        } else {
            if (p->zero < 1 && p->dp * p->cp > 1 && caps && (caps->zero_mask & 2u) && n < max)
                snprintf(out[n++], 200,
                         "--zero 1: shard the optimizer states over data parallel (%.2f GiB of "
                         "model states here)",
                         states / AP_GIB);
            if (p->zero < 3 && p->dp * p->cp > 1 && caps && (caps->zero_mask & 8u) &&
                (p->pp == 1 || (caps->zero_mask_with_pp & 8u)) && n < max)
                snprintf(out[n++], 200, "--zero 3: shard parameters and gradients too");
            if (p->offload_optimizer < 1 && caps && caps->offload_optimizer && n < max)
                snprintf(out[n++], 200, "--offload-optimizer 1: move optimizer states and master "
                                        "weights to host memory");
        }
    }
    if (n < max)
        snprintf(out[n++], 200,
                 "more model parallelism (--tp %d or --pp %d) to spread parameters and layers",
                 p->tp * 2, p->pp * 2);
    return n;
}

static ap_json *over_json(const ap_sim *s, const ap_sim_rank *r) {
    ap_json *o = ap_json_new_object();
    if (!o) return NULL;
    char buf[256];
    const int64_t *cat = r->over_cat_bytes;
    int inflight = r->over_inflight;
    ap_json *cj = ap_json_new_object();
    int ok = cj && ap_json_add_number(o, "stage", r->stage) == AP_OK &&
             ap_json_add_string(o, "op", ap_sim_op_describe(s, r, r->over_op, buf, sizeof buf)) ==
                 AP_OK &&
             ap_json_add_number(o, "inflight_microbatches", inflight) == AP_OK;
    for (int c = 0; ok && c < AP_SIM_NCAT; c++)
        ok = ap_json_add_number(cj, ap_sim_category_name(c), (double)cat[c]) == AP_OK;
    if (!ok) ap_json_free(cj);
    if (!ok || ap_json_add(o, "live", cj) != AP_OK) { /* a failed add frees cj */
        ap_json_free(o);
        return NULL;
    }
    char sug[6][200];
    int ns = suggest(ap_sim_plan(s), r, ap_sim_nranks(s), sug, 6);
    ap_json *arr = ap_json_new_array();
    if (ap_json_add(o, "suggestions", arr) != AP_OK) {
        ap_json_free(o);
        return NULL;
    }
    for (int i = 0; i < ns; i++)
        if (ap_json_push(arr, ap_json_new_string(sug[i])) != AP_OK) {
            ap_json_free(o);
            return NULL;
        }
    return o;
}

/* First rank (by event order within ranks, lowest stage first) that exceeds the budget. */
static const ap_sim_rank *first_over(const ap_sim *s) {
    for (int i = 0; i < ap_sim_nranks(s); i++)
        if (ap_sim_rank_at(s, i)->over_event >= 0) return ap_sim_rank_at(s, i);
    return NULL;
}

/* The iteration of rank r in 64 columns, each the maximum of its events (from the summary
 * curve: 256 points make 4 per column, the same runs of events), in ten levels from the
 * persistent baseline (' ') to the reserved peak ('@'). */
static void print_curve(const ap_sim_rank *r) {
    char b1[32], b2[32];
    if (r->curve_points <= 0) return;
    static const char lv[] = " .:-=+*#%@";
    char al[65], re[65];
    int n = r->curve_points, cols = n < 64 ? n : 64;
    double top = (double)r->reserved_peak_bytes, base = (double)r->baseline_bytes;
    double span = top - base > 1 ? top - base : 1;
    for (int k = 0; k < cols; k++) {
        int b = k * n / cols, e = (k + 1) * n / cols;
        int64_t amax = 0, rmax = 0;
        for (int i = b; i < e; i++) {
            if (r->curve_allocated[i] > amax) amax = r->curve_allocated[i];
            if (r->curve_reserved[i] > rmax) rmax = r->curve_reserved[i];
        }
        double fa = ((double)amax - base) / span, fr = ((double)rmax - base) / span;
        al[k] = lv[fa <= 0 ? 0 : fa >= 1 ? 9 : (int)(9.0 * fa + 0.5)];
        re[k] = lv[fr <= 0 ? 0 : fr >= 1 ? 9 : (int)(9.0 * fr + 0.5)];
    }
    al[cols] = re[cols] = 0;
    printf("\nstage %d over the iteration, setup to optimizer step (' ' = model states %s, "
           "'@' = %s):\n",
           r->stage, ap_fmt_bytes(base, b2, sizeof b2), ap_fmt_bytes(top, b1, sizeof b1));
    printf("  allocated |%s|\n  reserved  |%s|\n", al, re);
}

static void print_text(const ap_sim *s, const ap_estimate *e, int have_est, int top) {
    const ap_plan *p = ap_sim_plan(s);
    const ap_model *m = ap_sim_model(s);
    char b1[32], b2[32], b3[32], b4[32], lbl[128], buf[256];
    printf("simulate: %s  %s  (%s schedule, %lld micro-batches per step)\n", ap_cli_safe(m->name),
           ap_plan_label(p, lbl, sizeof lbl), p->vp > 1 ? "interleaved 1F1B" : "1F1B",
           (long long)p->grad_accum);
    const ap_sim_opts *so = ap_sim_options(s);
    printf("allocator: %s%s; device = reserved + %s (CUDA context, cuBLAS, NCCL)\n",
           ap_alloc_mode_name(so->allocator),
           so->expandable_segments ? " (expandable segments)" : "",
           ap_fmt_bytes(ap_sim_overhead_bytes(s), b1, sizeof b1));
    printf("\n%-5s %6s %12s %12s %12s %6s %9s  %s\n", "stage", "layers", "allocated", "reserved",
           "device", "frag", "in-flight", "peak at");
    for (int i = 0; i < ap_sim_nranks(s); i++) {
        const ap_sim_rank *r = ap_sim_rank_at(s, i);
        printf("%-5d %6d %12s %12s %12s %5.1f%% %9d  %s\n", r->stage, r->layers,
               ap_fmt_bytes((double)r->allocated_peak_bytes, b1, sizeof b1),
               ap_fmt_bytes((double)r->reserved_peak_bytes, b2, sizeof b2),
               ap_fmt_bytes((double)r->device_peak_bytes, b3, sizeof b3), 100.0 * r->fragmentation,
               r->inflight_at_peak, ap_sim_op_describe(s, r, r->peak_op, buf, sizeof buf));
    }
    int w = ap_sim_worst_rank(s);
    const ap_sim_rank *r = ap_sim_rank_at(s, w);
    print_curve(r);
    printf("\nworst stage %d at its allocated peak (%s):\n", r->stage,
           ap_sim_op_describe(s, r, r->peak_op, buf, sizeof buf));
    for (int c = 0; c < AP_SIM_NCAT; c++)
        printf("  %-12s %12s  %5.1f%%\n", ap_sim_category_name(c),
               ap_fmt_bytes((double)r->peak_cat_bytes[c], b1, sizeof b1),
               r->allocated_peak_bytes > 0
                   ? 100.0 * (double)r->peak_cat_bytes[c] / (double)r->allocated_peak_bytes
                   : 0.0);
    /* what is alive, grouped by tensor kind (layers and micro-batches summed) */
    double gb[AP_SIM_NKINDS][2] = {{0}};
    int gn[AP_SIM_NKINDS][2] = {{0}}, gc[AP_SIM_NKINDS][2] = {{0}};
    for (int k = 0; k < r->nlive_at_peak; k++) {
        const ap_sim_tensor *t = &r->tensors[r->live_at_peak[k]];
        gb[t->kind][t->is_grad ? 1 : 0] += (double)t->bytes;
        gn[t->kind][t->is_grad ? 1 : 0]++;
        gc[t->kind][t->is_grad ? 1 : 0] = t->cat;
    }
    printf("\nlive at the peak by kind (stage %d, %d tensors):\n", r->stage, r->nlive_at_peak);
    for (int shown = 0; shown < top; shown++) {
        int bk = -1, bg = 0;
        for (int k = 0; k < AP_SIM_NKINDS; k++)
            for (int g = 0; g < 2; g++)
                if (gn[k][g] > 0 && (bk < 0 || gb[k][g] > gb[bk][bg])) {
                    bk = k;
                    bg = g;
                }
        if (bk < 0) break;
        printf("  %12s  %-11s %s%s (%d tensor%s)\n", ap_fmt_bytes(gb[bk][bg], b1, sizeof b1),
               ap_sim_category_name(gc[bk][bg]), bg ? "grad of " : "", ap_sim_kind_name(bk),
               gn[bk][bg], gn[bk][bg] == 1 ? "" : "s");
        gn[bk][bg] = 0;
    }
    printf("\nlargest live tensors at the peak, model states aside:\n");
    for (int k = 0, shown = 0; k < r->nlive_at_peak && shown < top; k++) {
        const ap_sim_tensor *t = &r->tensors[r->live_at_peak[k]];
        if (t->persistent || t->cat == AP_SIM_CAT_GRADS) continue;
        printf("  %12s  %-11s %s\n", ap_fmt_bytes((double)t->bytes, b1, sizeof b1),
               ap_sim_category_name(t->cat), ap_sim_tensor_describe(t, m->layers, buf, sizeof buf));
        shown++;
    }
    if (have_est) {
        double apk = 0;
        for (int i = 0; i < ap_sim_nranks(s); i++)
            if ((double)ap_sim_rank_at(s, i)->allocated_peak_bytes > apk)
                apk = (double)ap_sim_rank_at(s, i)->allocated_peak_bytes;
        printf("\nanalytical estimate: allocated %s, device %s (simulator allocated %+.1f%%; "
               "docs/simulator.md explains the differences)\n",
               ap_fmt_bytes(e->allocated_peak_bytes, b1, sizeof b1),
               ap_fmt_bytes(e->device_peak_bytes, b2, sizeof b2),
               e->allocated_peak_bytes > 0 ? 100.0 * (apk / e->allocated_peak_bytes - 1) : 0.0);
    }
    double cap = ap_sim_capacity_bytes(s), budget = ap_sim_budget_bytes(s);
    if (cap <= 0) return;
    double dev = (double)r->device_peak_bytes;
    const ap_sim_rank *o = first_over(s);
    if (!o) {
        printf("\nfits: device peak %s + headroom %s <= %s\n", ap_fmt_bytes(dev, b1, sizeof b1),
               ap_fmt_bytes(cap - budget, b2, sizeof b2), ap_fmt_bytes(cap, b3, sizeof b3));
        return;
    }
    const int64_t *cat = o->over_cat_bytes;
    int inflight = o->over_inflight;
    printf("\nDOES NOT FIT: device peak %s + headroom %s > %s (%s over)\n",
           ap_fmt_bytes(dev, b1, sizeof b1), ap_fmt_bytes(cap - budget, b2, sizeof b2),
           ap_fmt_bytes(cap, b3, sizeof b3), ap_fmt_bytes(dev - budget, b4, sizeof b4));
    printf("first over the budget: %s; live:",
           ap_sim_op_describe(s, o, o->over_op, buf, sizeof buf));
    int first = 1;
    for (int c = 0; c < AP_SIM_NCAT; c++) {
        if (cat[c] <= 0) continue;
        printf("%s %s %s", first ? "" : ",", ap_sim_category_name(c),
               ap_fmt_bytes((double)cat[c], b1, sizeof b1));
        if (c == AP_SIM_CAT_ACTIVATIONS)
            printf(" (%d micro-batch%s in flight)", inflight, inflight == 1 ? "" : "es");
        first = 0;
    }
    printf("\nwhat to change:\n");
    char sug[6][200];
    int ns = suggest(p, o, ap_sim_nranks(s), sug, 6);
    for (int i = 0; i < ns; i++) printf("  - %s\n", sug[i]);
}

/* The model, cluster and plan: from --plan plan.json (nothing else may describe them then), or
 * from MODEL and the plan flags. */
static ap_status load_inputs(ap_flags *fl, ap_resolved *ctx, ap_err *err) {
    ap_status st;
    /* the trace's path before any work (a missing directory is bad input, not a failed write
       after the simulation) */
    const char *trace = ap_flags_value(fl, "trace");
    if (trace && !strcmp(trace, "-") && ap_flags_isset(fl, "json"))
        return ap_err_set(err, AP_ERR_INPUT, "--json: not with --trace - (the trace is then the "
                          "standard output; write it to a file to have both)");
    if (trace && strcmp(trace, "-") != 0 &&
        (st = ap_cli_check_out_path("--trace", trace, err)) != AP_OK)
        return st;
    const char *planfile = ap_flags_value(fl, "plan");
    if (!planfile) {
        static ap_request rq;
        char profile[64], note[320];
        if ((st = ap_cli_request(fl, &rq, NULL, NULL, err)) != AP_OK ||
            (st = ap_request_resolve(&rq, AP_REQUEST_ESTIMATE, ctx, err)) != AP_OK)
            return st;
        return ap_cli_profile(fl, ctx, profile, note, err);
    }
    /* every cluster and plan flag but the budget kept free and the allocator setting, which
       are the simulation's own */
    static const char *const keep[] = {"headroom", "expandable-segments", "nccl-version", NULL};
    if ((st = ap_cli_refuse_with_plan(fl, keep, "the plan and cluster", err)) != AP_OK) return st;
    if (fl->npos > 0)
        return ap_err_set(err, AP_ERR_INPUT, "give MODEL or --plan, not both (plan.json holds the "
                          "model)");
    if ((st = ap_planfile_read(planfile, &ctx->model, &ctx->cluster, &ctx->plan, NULL, err)) !=
        AP_OK)
        return st;
    ap_estimate_opts_init(&ctx->est);
    if ((st = ap_flag_bytes(fl, "headroom", &ctx->est.headroom_bytes, err)) != AP_OK) return st;
    if ((st = ap_cli_nccl_version(fl, &ctx->est.nccl_eager, err)) != AP_OK) return st;
    ctx->allow_cross_node_tp = 1; /* the plan was accepted when it was written */
    return AP_OK;
}

/* `--trace -`: the trace is the output */
static ap_status stdout_sink(void *ctx, const char *data, size_t len, ap_err *err) {
    (void)ctx;
    if (fwrite(data, 1, len, stdout) != len)
        return ap_err_set(err, AP_ERR_IO, "standard output: write failed");
    return AP_OK;
}

/* The allocator the replay models (--allocator, --expandable-segments), the budget kept free
 * and the bytes outside the allocator (the estimate's, with its NCCL) */
static ap_status allocator_opts(ap_flags *fl, ap_resolved *ctx, ap_sim_opts *so, ap_err *err) {
    ap_status st;
    if (ap_flags_isset(fl, "allocator") &&
        (st = ap_alloc_mode_parse(ap_flags_value(fl, "allocator"), &so->allocator, err)) != AP_OK)
        return st;
    so->expandable_segments = ap_flags_isset(fl, "expandable-segments");
    if (so->expandable_segments && so->allocator == AP_ALLOC_ARENA)
        return ap_err_set(err, AP_ERR_INPUT, "--expandable-segments: only with --allocator "
                          "caching");
    ctx->est.allocator_expandable = so->expandable_segments;
    so->device_overhead_bytes = ap_mem_device_overhead_bytes(&ctx->plan, ctx->est.nccl_eager);
    so->headroom_bytes = ctx->est.headroom_bytes;
    return AP_OK;
}

int ap_cmd_simulate(int argc, char **argv) {
    static ap_flags fl;
    ap_err err = {{0}};
    int help = 0;
    fl.n = 0;
    ap_cli_cluster_flags(&fl);
    ap_cli_plan_flags(&fl);
    ap_flags_add(&fl, "plan", AP_FLAG_VALUE, "FILE",
                 "simulate the plan in plan.json (model, cluster and plan from the file)");
    ap_flags_add(&fl, "allocator", AP_FLAG_VALUE, "A",
                 "allocator model: caching (PyTorch, default) or arena (offsets by liveness)");
    ap_flags_add(&fl, "trace", AP_FLAG_VALUE, "FILE",
                 "write a Chrome/Perfetto trace (counters per category, a slice per operation); "
                 "- writes it to standard output instead of the summary");
    ap_flags_add(&fl, "top", AP_FLAG_VALUE, "N", "live tensors listed at the peak (default 10)");
    ap_flags_add(&fl, "json", AP_FLAG_BOOL, NULL, "print the result as JSON");
    ap_flags_add(&fl, "threads", AP_FLAG_VALUE, "N", "pipeline stages replayed at once (default: "
                 "one per core; one with --trace; the result does not depend on it)");
    ap_status st = ap_flags_parse(&fl, argc, argv, 1, &help, &err);
    if (help) {
        ap_flags_print_help(&fl,
                            "autoplan simulate MODEL --gpus N [plan flags] | --plan plan.json "
                            "[--allocator caching|arena] [--trace out.json] [--json]",
                            "Replay one training iteration of a plan allocation by allocation on "
                            "every pipeline stage;\nshow the memory peak per stage, what is live "
                            "there, and the first operation over the budget.");
        return 0;
    }
    if (st != AP_OK) return ap_cli_fail(st, &err);
    static ap_resolved ctx;
    memset(&ctx, 0, sizeof ctx);
    ap_sim_opts so;
    ap_sim_opts_init(&so);
    if ((st = load_inputs(&fl, &ctx, &err)) != AP_OK) return ap_cli_fail(st, &err);
    if ((st = ap_plan_check(&ctx.plan, &ctx.model, &ctx.cluster, ctx.allow_cross_node_tp,
                            &err)) != AP_OK)
        return ap_cli_fail(st == AP_ERR_INFEASIBLE ? AP_ERR_INPUT : st, &err);
    /* Gemini placements and DeepSpeed offload devices: GPU and host memory over the iteration
       and the PCIe traffic, operator by operator (hetero.h) */
    if (ap_hetero_applies(&ctx.plan))
        return ap_cli_simulate_hetero(&ctx, ap_flags_value(&fl, "trace"),
                                      ap_flags_isset(&fl, "json"));
    if ((st = allocator_opts(&fl, &ctx, &so, &err)) != AP_OK) return ap_cli_fail(st, &err);
    int64_t top = 10, threads = 0;
    if ((st = ap_flag_int(&fl, "top", 0, 100000, &top, &err)) != AP_OK ||
        (st = ap_flag_int(&fl, "threads", 1, 1024, &threads, &err)) != AP_OK)
        return ap_cli_fail(st, &err);
    so.threads = (int)threads;
    const char *trace = ap_flags_value(&fl, "trace");
    int to_stdout = trace && !strcmp(trace, "-");
    /* curves for the trace, the JSON and the text plot; the run is streamed: no rank's events
       are held, each operation goes to the trace as it closes, and the summaries and the
       tensors live at each peak stay (memory grows with the tensors live at once, not with
       the events) */
    so.record_curves = 1;
    so.release_events = 1;
    so.stream = 1;
    ap_sim_tracer *tracer = NULL;
    if (trace && (st = ap_sim_tracer_open(to_stdout ? NULL : trace, stdout_sink, NULL, &tracer,
                                          &err)) != AP_OK)
        return ap_cli_fail(st, &err);
    if (tracer) ap_sim_tracer_attach(tracer, &so);
    ap_sim *s = NULL;
    if ((st = ap_sim_run(&ctx.model, &ctx.cluster, &ctx.plan, &so, &s, &err)) != AP_OK) {
        ap_sim_tracer_abort(tracer);
        return ap_cli_fail(st == AP_ERR_INFEASIBLE ? AP_ERR_INPUT : st, &err);
    }
    if (tracer && (st = ap_sim_tracer_finish(tracer, &err)) != AP_OK) {
        ap_sim_free(s);
        return ap_cli_fail(st, &err);
    }
    if (to_stdout) { /* the trace is the output */
        ap_sim_free(s);
        printf("\n");
        return 0;
    }
    static ap_estimate e;
    ap_err eerr = {{0}};
    int have_est = ap_estimate_plan(&ctx.model, &ctx.cluster, &ctx.plan, &ctx.est, &e, &eerr) ==
                   AP_OK;
    if (ap_flags_isset(&fl, "json")) {
        ap_json *j = ap_sim_to_json(s, (int)top);
        char lbl[128];
        int ok = j != NULL;
        if (ok) ok = ap_json_add_string(j, "model", ctx.model.name) == AP_OK &&
                     ap_json_add_string(j, "plan", ap_plan_label(&ctx.plan, lbl, sizeof lbl)) ==
                         AP_OK;
        if (ok && have_est)
            ok = ap_json_add_number(j, "estimate_allocated_peak_bytes", e.allocated_peak_bytes) ==
                     AP_OK &&
                 ap_json_add_number(j, "estimate_device_peak_bytes", e.device_peak_bytes) == AP_OK;
        const ap_sim_rank *o = first_over(s);
        if (ok && o) {
            ok = ap_json_add(j, "first_over_budget", over_json(s, o)) == AP_OK;
        }
        char *text = ok ? ap_json_print(j, 1) : NULL;
        ap_json_free(j);
        if (!text) {
            ap_sim_free(s);
            fprintf(stderr, "autoplan: out of memory\n");
            return 1;
        }
        printf("%s\n", text);
        free(text);
    } else {
        print_text(s, &e, have_est, (int)top);
        if (trace) printf("\ntrace written to %s (open in ui.perfetto.dev)\n", ap_cli_safe(trace));
    }
    ap_sim_free(s);
    return 0;
}
