/*
 * emit.h - trainer configuration files for a plan (output/emit*.c, cli/cmd_emit.c).
 *
 * One plan, ready to launch in the trainer the user runs:
 *   deepspeed   ds_config.json (Megatron-DeepSpeed: train_batch_size = micro x accum x dp),
 *               ds_config_hf.json (HF Trainer / AutoTP: no train_batch_size), deepspeed_launch.sh
 *   megatron    megatron.sh (torchrun pretrain_gpt.py; single node, multi-node rendezvous, and
 *               sbatch: the script carries #SBATCH lines)
 *   colossalai  colossalai_booster.py (plugin construction to paste)
 *   torchtitan  torchtitan.toml (v0.2.2, the last release that reads TOML)
 *   accelerate  accelerate.yaml (+ accelerate_ds_config.json on the DeepSpeed path)
 *
 * What each trainer can express comes from the trainer table (ap_trainer_get). A plan a trainer
 * cannot express is refused for that trainer with the reason and the closest plan it can
 * express; the other targets are still written. The files of one call are one output set
 * (files.h): all written, then moved in together, replacing every config an earlier run left in
 * the directory.
 */
#ifndef AP_EMIT_H
#define AP_EMIT_H

#include "autoplan/json.h"
#include "autoplan/plan.h"

typedef enum {
    AP_EMIT_DEEPSPEED = 0,
    AP_EMIT_MEGATRON,
    AP_EMIT_COLOSSALAI,
    AP_EMIT_TORCHTITAN,
    AP_EMIT_ACCELERATE,
    AP_EMIT_COUNT
} ap_emit_target;

/* "deepspeed", "megatron", ... (static strings). */
const char *ap_emit_target_name(ap_emit_target t);

/* Parse "deepspeed,megatron" or "all" into a bit mask (bit t = target t). Unknown names are
 * refused naming the known ones. */
ap_status ap_emit_parse_list(const char *which, unsigned *mask, ap_err *err);

#define AP_EMIT_MAX_FILES 4

typedef struct ap_emit_file {
    char name[64]; /* file name inside the output directory */
    char *text;    /* NUL-terminated content, owned by the ap_emit_out */
    size_t len;
} ap_emit_file;

typedef struct ap_emit_out {
    ap_emit_file files[AP_EMIT_MAX_FILES];
    int nfiles;
    char note[256]; /* why a file of the target was left out (e.g. the HF flavour), or "" */
} ap_emit_out;

/* Free the texts of an ap_emit_out (the struct itself is the caller's). */
void ap_emit_out_free(ap_emit_out *o);

/* The trainer whose capabilities target t uses for this plan (accelerate: FSDP for plans made
 * for fsdp or torchtitan, DeepSpeed otherwise). */
ap_trainer_id ap_emit_trainer(ap_emit_target t, const ap_plan *p);

/* Can target t express plan p? AP_OK when it can. Otherwise AP_ERR_INFEASIBLE, err gives
 * "<target>: cannot express this plan: <reasons>; closest expressible plan: <label>" and, when
 * closest is not NULL, *closest receives that plan (closest->tp == 0 when none was found). */
ap_status ap_emit_check(ap_emit_target t, const ap_model *m, const ap_cluster *c,
                        const ap_plan *p, ap_plan *closest, ap_err *err);

/* Render target t's files in memory (no files written). `estimate` (may be NULL, borrowed) is
 * the object from ap_estimate_to_json, used for the predicted step time and memory in headers.
 * On success the caller frees out with ap_emit_out_free; on failure out holds nothing. */
ap_status ap_emit_render(ap_emit_target t, const ap_model *m, const ap_cluster *c,
                         const ap_plan *p, const ap_json *estimate, ap_emit_out *out,
                         ap_err *err);

/* Per-target outcome of ap_emit_files_ex. */
typedef struct ap_emit_report {
    int requested[AP_EMIT_COUNT];
    ap_status status[AP_EMIT_COUNT];
    char msg[AP_EMIT_COUNT][512];   /* refusal or failure reason, "" when written */
    char files[AP_EMIT_COUNT][256]; /* names written, comma-separated */
} ap_emit_report;

/* The names of every file the targets write (NULL-terminated, static). */
const char *const *ap_emit_file_family(void);

typedef struct ap_outset ap_outset; /* files.h */

/* Render the targets named by `which` into an output set (files.h), filling *report (required).
 * AP_OK when every target was added, AP_ERR_INFEASIBLE when some refused the plan (err: the
 * first refusal; the others were added), or the error that stopped adding a file (the set
 * should then be aborted). */
ap_status ap_emit_into(ap_outset *set, const char *which, const ap_model *m, const ap_cluster *c,
                       const ap_plan *p, const ap_json *estimate, ap_emit_report *report,
                       ap_err *err);

/* Write the configs named by `which` ("deepspeed,megatron,...|all") into directory `dir`
 * (created when missing). Targets that cannot express the plan are skipped with their reason;
 * the others are still written. Returns AP_OK when every requested target was written,
 * AP_ERR_INFEASIBLE when at least one was refused (err: the first refusal; the rest are logged
 * at warning level), or the first I/O error. */
ap_status ap_emit_files(const char *dir, const char *which, const ap_model *m,
                        const ap_cluster *c, const ap_plan *p, const ap_json *estimate,
                        ap_err *err);

/* Same, and fills *report (may be NULL) with every target's outcome instead of logging. */
ap_status ap_emit_files_ex(const char *dir, const char *which, const ap_model *m,
                           const ap_cluster *c, const ap_plan *p, const ap_json *estimate,
                           ap_emit_report *report, ap_err *err);


#endif
