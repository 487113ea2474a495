/*
 * emit_int.h - internals shared by the config emitters (output/emit*.c); not a public header.
 *
 * A growing text buffer (sb), the context every emitter receives, the common file header, and
 * the per-target hooks the dispatcher (emit.c) calls: `local` applies the rules a target has
 * beyond the trainer table (each marked LOCAL RULE, to move into the table), `render` writes the
 * files.
 */
#ifndef AP_EMIT_INT_H
#define AP_EMIT_INT_H

#include "autoplan/emit.h"

#include "autoplan/strbuf.h"

/* The emitters' short names for the library symbols below (exported names carry the module
 * prefix; these files keep the short ones). */
#define emit_why ap_emit_why
#define emit_header ap_emit_header
#define emit_take ap_emit_take
#define emit_chunk_layers ap_emit_chunk_layers
#define emit_uniform_split ap_emit_uniform_split
#define emit_chunk_recompute ap_emit_chunk_recompute
#define emit_has_per_stage_recompute ap_emit_has_per_stage_recompute
#define ds_hf_expressible ap_emit_ds_hf_expressible
#define ds_render_config ap_emit_ds_render_config
#define emit_deepspeed_local ap_emit_deepspeed_local
#define emit_deepspeed_render ap_emit_deepspeed_render
#define emit_megatron_local ap_emit_megatron_local
#define emit_megatron_render ap_emit_megatron_render
#define emit_colossalai_local ap_emit_colossalai_local
#define emit_colossalai_render ap_emit_colossalai_render
#define emit_torchtitan_local ap_emit_torchtitan_local
#define emit_torchtitan_render ap_emit_torchtitan_render
#define emit_accelerate_local ap_emit_accelerate_local
#define emit_accelerate_render ap_emit_accelerate_render
#define emit_megatron_model_why ap_emit_megatron_model_why
#define emit_gpu_has_flash ap_emit_gpu_has_flash

/* the emitters' text buffer is the shared one (strbuf.h) */
typedef ap_strbuf sb;
#define sb_printf ap_strbuf_printf
#define sb_free ap_strbuf_free

typedef struct emit_ctx {
    const ap_model *m;
    const ap_cluster *c;
    const ap_plan *p;
    const ap_json *est;          /* may be NULL */
    const ap_trainer_caps *caps; /* of ap_emit_trainer(target, p) */
    ap_trainer_id tid;
    const char *target;          /* "megatron" */
} emit_ctx;

/* Append a reason to a "; "-separated list. */
void emit_why(sb *why, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

/* Comment header naming the plan, the prediction and the autoplan version; each line starts
 * with `prefix` ("# ", "// "). `title` names the file's purpose. */
void emit_header(sb *b, const emit_ctx *x, const char *prefix, const char *title);

/* Move the finished buffer into out as file `name` (takes b's text). */
ap_status emit_take(ap_emit_out *out, const char *name, sb *b, ap_err *err);

/* Layers of chunk c and whether the split is the uniform one. */
int emit_chunk_layers(const emit_ctx *x, int c);
int emit_uniform_split(const emit_ctx *x);
/* Recompute count of chunk c for full recompute (0 = all its layers). */
int emit_chunk_recompute(const emit_ctx *x, int c);
/* True when any chunk has its own recompute count. */
int emit_has_per_stage_recompute(const ap_plan *p);

/* The HF/AutoTP DeepSpeed flavour (ds_config_hf.json): also used by the Accelerate DeepSpeed
 * path. Returns 0 and fills why when the plan needs what the flavour lacks. */
int ds_hf_expressible(const ap_plan *p, char *why, size_t n);
ap_status ds_render_config(const emit_ctx *x, int hf_flavour, sb *b);

/* Per-target hooks. `local` checks q against the target's rules not (yet) in the trainer
 * table: returns 1 when q passes; otherwise appends the reason to why and, when fix is set,
 * changes q to the closest plan that passes. */
typedef int (*emit_local_fn)(const emit_ctx *x, ap_plan *q, int fix, sb *why);
typedef ap_status (*emit_render_fn)(const emit_ctx *x, ap_emit_out *out, ap_err *err);

int emit_deepspeed_local(const emit_ctx *x, ap_plan *q, int fix, sb *why);
ap_status emit_deepspeed_render(const emit_ctx *x, ap_emit_out *out, ap_err *err);
/* Megatron-LM (mds = 0) or Megatron-DeepSpeed (mds = 1): 1 when every architecture field of m
 * is expressible; otherwise appends the reasons to why. */
int emit_megatron_model_why(const ap_model *m, int mds, sb *why);
/* FlashAttention needs compute capability 8.0+ (catalog GPUs with bf16 tensor cores). */
int emit_gpu_has_flash(const ap_gpu *g);
int emit_megatron_local(const emit_ctx *x, ap_plan *q, int fix, sb *why);
ap_status emit_megatron_render(const emit_ctx *x, ap_emit_out *out, ap_err *err);
int emit_colossalai_local(const emit_ctx *x, ap_plan *q, int fix, sb *why);
ap_status emit_colossalai_render(const emit_ctx *x, ap_emit_out *out, ap_err *err);
int emit_torchtitan_local(const emit_ctx *x, ap_plan *q, int fix, sb *why);
ap_status emit_torchtitan_render(const emit_ctx *x, ap_emit_out *out, ap_err *err);
int emit_accelerate_local(const emit_ctx *x, ap_plan *q, int fix, sb *why);
ap_status emit_accelerate_render(const emit_ctx *x, ap_emit_out *out, ap_err *err);

#endif
