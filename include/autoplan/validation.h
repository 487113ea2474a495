/*
 * validation.h - published training runs as validation rows, the cost model's predictions of
 * them, error statistics per source, and the fit of the physical calibration on them
 * (costmodel/validation.c). `autoplan validate` (cli/cmd_validate.c) prints what this computes.
 *
 * A row is one measured quantity of one run: a step time ("step_s"), one layer's forward +
 * backward time ("layer_s"), a stage's transformer-layer activations ("activations_bytes"), its
 * model states ("states_bytes"), the peak memory PyTorch's caching allocator reserved on the
 * busiest GPU ("reserved_bytes"), or a record that the run ran out of memory ("oom", measured
 * 1), with the model, cluster and plan of the run. Time metrics
 * form the time MAPE, memory metrics the memory MAPE; "overall" is the mean over sources of each
 * source's MAPE, so a source with many rows does not outweigh the others.
 *
 * Ownership: ap_vset_new returns a set the caller frees with ap_vset_free.
 */
#ifndef AP_VALIDATION_H
#define AP_VALIDATION_H

#include "autoplan/estimate.h"
#include "autoplan/json.h"

/* Rows per array of a file (grown as read: a sanity bound, not a size) and sources per array:
 * a user's own runs appended to the bundled out-of-sample set (537 rows, 22 sources) fit. */
#define AP_VALIDATION_MAX_ROWS 100000
#define AP_VALIDATION_MAX_SOURCES 256
#define AP_VALIDATION_MAX_SHOWN 64

typedef struct ap_vrow {
    char source[64];
    char metric[32];         /* step_s | layer_s | activations_bytes | states_bytes */
    char model_name[64];
    char plan_label[160];
    ap_model model;
    ap_cluster cluster;
    ap_plan plan;
    double measured;         /* seconds or bytes */
    double predicted;        /* after ap_validation_predict */
    int fits;                /* the prediction fits with the planning headroom (step_s rows) */
    int fits_device;         /* the predicted device peak (and host bytes) within the GPU's
                                memory, no headroom: whether the run can start */
    int is_time;
    int is_oom;              /* metric "oom": a run recorded as out of memory; predicted is 1
                                when its device peak exceeds the GPU's memory (!fits_device;
                                scored as a count, no MAPE) */
    int nccl_eager;          /* "nccl": the run's NCCL is older than 2.22
                                (ap_estimate_opts.nccl_eager) */
    char refused[512];       /* an out-of-sample run autoplan's rules refuse (the estimate's
                                AP_ERR_INFEASIBLE message): listed, not scored; "" otherwise */
} ap_vrow;

/* A largest-model row: shown beside the model-state bound, not scored. */
typedef struct ap_vshown {
    char source[64];
    char gpu[32];
    char framework[64];
    char mode[24];           /* states | optimizer-offload | unbounded */
    int gpus, tp, dp, zero;
    double measured_params;
    double bound_params;     /* usable memory x tp / model-state bytes per parameter; 0 = none */
} ap_vshown;

typedef struct ap_vset {
    ap_vrow *rows;           /* n rows (capacity cap, grown by ap_validation_load) */
    int n, cap;
    ap_vshown shown[AP_VALIDATION_MAX_SHOWN];
    int nshown;
    char sources[AP_VALIDATION_MAX_SOURCES][64];
    int nsources;
} ap_vset;

typedef struct ap_verr {
    double time_mape, time_max, mem_mape, mem_max; /* fractions */
    int rows, time_rows, mem_rows;
    int oom_rows, oom_hit;   /* recorded out-of-memory runs, and those predicted not to fit */
    int refused;             /* rows refused (ap_vrow.refused): in rows, not in any error */
    double time_bias;        /* mean signed time error (negative: predicted too fast) */
} ap_verr;

/* An empty set (allocate, never on the stack: its sources and shown rows take about 30 KB).
 * NULL on allocation failure. */
ap_vset *ap_vset_new(void);
/* dst becomes a copy of src's rows, sources and shown rows; AP_ERR_NOMEM when the rows
 * cannot be allocated (dst is then left with no rows). */
ap_status ap_vset_copy(ap_vset *dst, const ap_vset *src, ap_err *err);
void ap_vset_free(ap_vset *vs);

/* Load the array `key` of a validation file ("rows": scored, with the optional "shown"
 * capacity rows; "crosscheck", "outofsample": shown with errors, not scored; a missing array
 * other than "rows" is empty). Every field is validated; err names the file, row and field. */
ap_status ap_validation_load(const char *path, const char *key, ap_vset *vs, ap_err *err);
/* The same from a parsed document (`path` names it in messages). */
ap_status ap_validation_load_json(const ap_json *root, const char *path, const char *key,
                                  ap_vset *vs, ap_err *err);

/* Predict one row's metric with calibration `cal` (NULL: the built-in one of its GPU). */
ap_status ap_validation_predict(ap_vrow *v, const ap_calib *cal, ap_err *err);
/* The same with a measured kernel profile overlaid on the published tables (NULL: none; rows
 * of another GPU are ignored), for `validate`'s side-by-side section. */
struct ap_profile;
ap_status ap_validation_predict_profile(ap_vrow *v, const ap_calib *cal,
                                        const struct ap_profile *profile, ap_err *err);
/* The estimate of the row's whole run that its prediction reads (every metric but the layer
 * ones), with the same options: its step time's parts, its memory by stage. */
ap_status ap_validation_estimate(const ap_vrow *v, const ap_calib *cal,
                                 const struct ap_profile *profile, ap_estimate *out,
                                 ap_err *err);

/* Errors of the rows whose source is `only` (or, with exclude, is not; NULL = all) into *out,
 * and of every source into per[0..vs->nsources). Rows must have been predicted. */
void ap_validation_summarize(const ap_vset *vs, const char *only, int exclude, ap_verr *out,
                             ap_verr per[AP_VALIDATION_MAX_SOURCES]);

/* Fit the eight calibration parameters on the time rows (all, or all but source `leave_out`):
 * coordinate search in log space within physical bounds, minimising the mean time MAPE over
 * sources plus a quarter of the worst row. Predicts the rows as it goes. */
void ap_calib_fit(ap_vset *vs, ap_calib *cal, const char *leave_out);

/* Fit gemm_eff_max alone (golden-section search in [0.40, 1.00]) on the time rows of vs. */
void ap_calib_fit_gemm_eff(ap_vset *vs, ap_calib *cal);

/* Leave one source out: for each source with time rows, fit `base` on the other sources and
 * predict it. loso_src[s]: that source's time MAPE; *out: their mean and worst row. */
ap_status ap_validation_leave_one_out(const ap_vset *vs, const ap_calib *base, ap_verr *out,
                                      double loso_src[AP_VALIDATION_MAX_SOURCES], ap_err *err);

#endif
