#!/usr/bin/env python3
# make_db_v1_fixture.py - write tests/data/db-v1.db: an autoplan database at schema version 1
# (the "-- @version 1" section of db/schema.sql, exactly as a version-1 autoplan created it)
# holding three profile rows, one plan and one run, for the v1 -> v2 migration test in
# tests/test_db.c. Run from the repository root; the file is committed, so this is only needed
# if the fixture must be remade.
# SPDX-License-Identifier: GPL-3.0-or-later
import re
import sqlite3
import os

schema = open("db/schema.sql").read()
v1 = re.split(r"\n-- @version \d+\n", schema)[1]  # the text between @version 1 and @version 2
out = "tests/data/db-v1.db"
if os.path.exists(out):
    os.remove(out)
db = sqlite3.connect(out)
db.executescript(v1)
rows = [
    ("h100-sxm", "NVIDIA H100 80GB HBM3", "10de:2330", 132, 85520809984.0, 1980, 2619, 700,
     "550.54.15", "12.4", "12.4.5", "2.21.5", "off", "gemm", "m=8192,n=8192,k=8192", "bf16",
     0.0016, 0, 0, 0, 20, 0.02, "old-run", 1763700000),
    ("h100-sxm", "NVIDIA H100 80GB HBM3", "10de:2330", 132, 85520809984.0, 1980, 2619, 700,
     "550.54.15", "12.4", "12.4.5", "2.21.5", "off", "memcpy", "dir=h2d,mem=pinned,bytes=67108864",
     "none", 0.0013, 0, 0, 0, 20, 0.01, "old-run", 1763700000),
    ("a100-sxm4-80g", "", "", 0, 0, 0, 0, 0, "", "", "", "", "off", "gemm", "m=4096,n=4096,k=4096",
     "bf16", 0.00055, 0, 0, 0, 20, 0.03, "other-run", 1763600000),
]
db.executemany(
    "INSERT INTO profiles (gpu, device_name, pci_id, sm_count, mem_bytes, sm_clock_mhz,"
    " mem_clock_mhz, power_limit_w, driver_version, cuda_version, cublas_version, nccl_version,"
    " mig_mode, op, shape, dtype, time_s, flops_per_s, bytes_per_s, bytes, samples, spread,"
    " source_run, created_at) VALUES (" + ",".join("?" * 24) + ")", rows)
db.execute("INSERT INTO plans (key, summary, search_s, created_at, used_at, result_bytes)"
           " VALUES ('0123456789abcdef0123456789abcdef', 'v1 plan', 1.5, 1763700000, 1763700000, 2)")
db.execute("INSERT INTO plan_results (plan_id, result_json) VALUES (1, '{}')")
db.execute("PRAGMA application_id = 1095781454")  # "APLN"
db.execute("PRAGMA user_version = 1")
db.commit()
db.execute("VACUUM")
db.close()
print("wrote", out, os.path.getsize(out), "bytes")
