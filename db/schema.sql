-- schema.sql - the autoplan database (see docs/db.md).
--
-- One file per migration step would scatter the schema; instead each step is a section that
-- starts with a line "-- @version N". db/open.c applies, in one BEGIN IMMEDIATE transaction, every
-- section whose N is above the file's PRAGMA user_version, then sets user_version to the last N.
-- db/schema.c embeds this text as a C string; tests/test_db.c checks the two are identical.
-- Sections are append-only: a released section is never edited, a change is a new section.
--
-- Units are in the column names: _s seconds, _bytes bytes, _at unix seconds (UTC), _mhz, _w.

-- @version 1

-- The plan cache. key = ap_db_plan_key() of the canonical model, cluster, trainer, search
-- options and calibration fingerprint; a changed input is a different key, so rows are never
-- invalidated in place, only collected by `autoplan db gc`. The result lives in its own table:
-- SQLite rewrites a whole record on UPDATE, and counting a hit must not rewrite a 1 MB result.
CREATE TABLE plans (
    id           INTEGER PRIMARY KEY,
    key          TEXT NOT NULL UNIQUE,     -- 32 hex digits
    summary      TEXT NOT NULL,            -- one line for `autoplan db list`
    search_s     REAL NOT NULL,            -- wall time of the search that produced it
    created_at   INTEGER NOT NULL,
    used_at      INTEGER NOT NULL,         -- last hit, to the hour (or created_at); gc reads it
    result_bytes INTEGER NOT NULL          -- length of plan_results.result_json
);
CREATE INDEX plans_used_at ON plans(used_at);
CREATE TABLE plan_results (
    plan_id     INTEGER PRIMARY KEY REFERENCES plans(id) ON DELETE CASCADE,
    result_json TEXT NOT NULL              -- the ranked search result, as `autoplan plan` prints it
);

-- Operator profiles measured on a real GPU (the profiler fills this table; `db import` shares
-- it between machines). Text columns are NOT NULL DEFAULT '' so the UNIQUE constraint, which
-- makes importing the same file twice a no-op, sees equal rows as equal (NULLs are distinct).
CREATE TABLE profiles (
    id             INTEGER PRIMARY KEY,
    gpu            TEXT NOT NULL,          -- catalog SKU it calibrates: "h100-sxm"
    device_name    TEXT NOT NULL DEFAULT '', -- as the driver reports it
    pci_id         TEXT NOT NULL DEFAULT '', -- "10de:2330"
    sm_count       INTEGER NOT NULL DEFAULT 0,
    mem_bytes      REAL NOT NULL DEFAULT 0,
    sm_clock_mhz   REAL NOT NULL DEFAULT 0,
    mem_clock_mhz  REAL NOT NULL DEFAULT 0,
    power_limit_w  REAL NOT NULL DEFAULT 0,
    driver_version TEXT NOT NULL DEFAULT '',
    cuda_version   TEXT NOT NULL DEFAULT '',
    cublas_version TEXT NOT NULL DEFAULT '',
    nccl_version   TEXT NOT NULL DEFAULT '',
    mig_mode       TEXT NOT NULL DEFAULT 'off', -- "off" or the MIG profile, "1g.10gb"
    op             TEXT NOT NULL,          -- operator kind: "gemm", "flash_attn", "allreduce"
    shape          TEXT NOT NULL,          -- "m=8192,n=8192,k=8192"
    dtype          TEXT NOT NULL,          -- "bf16"
    time_s         REAL NOT NULL,          -- median time of one call
    flops_per_s    REAL NOT NULL DEFAULT 0, -- achieved FLOP/s (0: not a compute op)
    bytes_per_s    REAL NOT NULL DEFAULT 0, -- achieved bandwidth (0: not a memory/comm op)
    bytes          REAL NOT NULL DEFAULT 0, -- bytes moved by one call
    samples        INTEGER NOT NULL,       -- timed repetitions behind time_s
    spread         REAL NOT NULL DEFAULT 0, -- (max - min) / median of the samples
    source_run     TEXT NOT NULL DEFAULT '', -- id of the profiling run that measured it
    created_at     INTEGER NOT NULL,
    UNIQUE (gpu, device_name, pci_id, driver_version, cuda_version, cublas_version,
            nccl_version, mig_mode, op, shape, dtype, source_run)
);
CREATE INDEX profiles_gpu ON profiles(gpu, op, dtype);

-- Executed plans: what was predicted and what was measured. A run and its per-rank rows are
-- written in one transaction. uid (a hash of the run's identity) makes imports idempotent.
CREATE TABLE runs (
    id                   INTEGER PRIMARY KEY,
    uid                  TEXT NOT NULL UNIQUE,
    plan_key             TEXT NOT NULL DEFAULT '', -- plans.key when the plan came from the cache
    plan_json            TEXT NOT NULL,            -- the plan.json that was executed
    host                 TEXT NOT NULL,
    backend              TEXT NOT NULL,            -- "cpu", "cuda"
    started_at           INTEGER NOT NULL,
    ranks                INTEGER NOT NULL,
    predicted_step_s     REAL NOT NULL,
    measured_step_s      REAL NOT NULL,
    predicted_peak_bytes REAL NOT NULL,            -- max over ranks
    measured_peak_bytes  REAL NOT NULL             -- max over ranks
);
CREATE TABLE run_ranks (
    run_id               INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
    rank                 INTEGER NOT NULL,
    predicted_step_s     REAL NOT NULL,
    measured_step_s      REAL NOT NULL,
    predicted_peak_bytes REAL NOT NULL,
    measured_peak_bytes  REAL NOT NULL,
    PRIMARY KEY (run_id, rank)
) WITHOUT ROWID;

-- @version 2

-- A profile is a named measurement of one machine (`autoplan profile bench|attach --name`, the
-- name in source_run). Rows now keep the host they were measured on and their provenance
-- (`source`: the citation of a published row, the tool and kernel of a measured one), and a
-- row's identity includes the clocks and the host, so the same GPU measured on two hosts or at
-- two clock settings is two profiles. SQLite cannot change a UNIQUE constraint in place: the
-- table is rebuilt, rows and ids kept (https://www.sqlite.org/lang_altertable.html, "Making
-- Other Kinds Of Table Schema Changes").
CREATE TABLE profiles_v2 (
    id             INTEGER PRIMARY KEY,
    gpu            TEXT NOT NULL,
    device_name    TEXT NOT NULL DEFAULT '',
    pci_id         TEXT NOT NULL DEFAULT '',
    sm_count       INTEGER NOT NULL DEFAULT 0,
    mem_bytes      REAL NOT NULL DEFAULT 0,
    sm_clock_mhz   REAL NOT NULL DEFAULT 0,
    mem_clock_mhz  REAL NOT NULL DEFAULT 0,
    power_limit_w  REAL NOT NULL DEFAULT 0,
    driver_version TEXT NOT NULL DEFAULT '',
    cuda_version   TEXT NOT NULL DEFAULT '',
    cublas_version TEXT NOT NULL DEFAULT '',
    nccl_version   TEXT NOT NULL DEFAULT '',
    mig_mode       TEXT NOT NULL DEFAULT 'off',
    op             TEXT NOT NULL,          -- operation (docs/profiles.md): "gemm", "attn_fwd", ...
    shape          TEXT NOT NULL,
    dtype          TEXT NOT NULL,
    time_s         REAL NOT NULL,
    flops_per_s    REAL NOT NULL DEFAULT 0,
    bytes_per_s    REAL NOT NULL DEFAULT 0,
    bytes          REAL NOT NULL DEFAULT 0,
    samples        INTEGER NOT NULL,
    spread         REAL NOT NULL DEFAULT 0,
    host           TEXT NOT NULL DEFAULT '', -- host name of the measurement
    source         TEXT NOT NULL DEFAULT '', -- citation (published) or tool and kernel (measured)
    source_run     TEXT NOT NULL DEFAULT '', -- the profile's name
    created_at     INTEGER NOT NULL,
    UNIQUE (gpu, device_name, pci_id, driver_version, cuda_version, cublas_version,
            nccl_version, sm_clock_mhz, mem_clock_mhz, mig_mode, host, op, shape, dtype,
            source_run)
);
INSERT INTO profiles_v2 (id, gpu, device_name, pci_id, sm_count, mem_bytes, sm_clock_mhz,
                         mem_clock_mhz, power_limit_w, driver_version, cuda_version,
                         cublas_version, nccl_version, mig_mode, op, shape, dtype, time_s,
                         flops_per_s, bytes_per_s, bytes, samples, spread, source_run, created_at)
    SELECT id, gpu, device_name, pci_id, sm_count, mem_bytes, sm_clock_mhz, mem_clock_mhz,
           power_limit_w, driver_version, cuda_version, cublas_version, nccl_version, mig_mode,
           op, shape, dtype, time_s, flops_per_s, bytes_per_s, bytes, samples, spread,
           source_run, created_at
    FROM profiles;
DROP TABLE profiles;
ALTER TABLE profiles_v2 RENAME TO profiles;
CREATE INDEX profiles_gpu ON profiles(gpu, op, dtype);
CREATE INDEX profiles_run ON profiles(source_run, created_at);
