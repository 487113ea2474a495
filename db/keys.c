/*
 * keys.c - the store's 128-bit keys: plan-cache keys (ap_db_plan_key), run uids, and the
 * final mix of the profile fingerprint. Pure functions of their bytes: the same key on every
 * machine and build (tests/test_db.c pins golden values). Not a cryptographic hash.
 */
#include "db_int.h"

#include <stdio.h>

/* splitmix64 finalizer (Steele, Lea, Flood 2014): spreads FNV's weak high bits. */
uint64_t ap_db_mix64(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

/* Two independent 64-bit FNV-1a hashes (base/common.c) with different seeds, the length mixed
 * in, each through the splitmix64 finalizer. */
void ap_db_key_of(const void *data, size_t n, char out[AP_DB_KEY_HEX + 1]) {
    uint64_t len = n;
    uint64_t a = ap_hash64(data, n, 0x6175746f706c616eULL);  /* "autoplan" */
    uint64_t b = ap_hash64(data, n, 0x706c616e2d6b6579ULL);  /* "plan-key" */
    a = ap_db_mix64(a ^ len);
    b = ap_db_mix64(b + 0x9e3779b97f4a7c15ULL * (len + 1));
    snprintf(out, AP_DB_KEY_HEX + 1, "%016llx%016llx", (unsigned long long)a,
             (unsigned long long)b);
}

void ap_db_plan_key(const char *canonical_text, char out[AP_DB_KEY_HEX + 1]) {
    ap_db_key_of(canonical_text, strlen(canonical_text), out);
}

int ap_db_valid_key(const char *key) {
    if (!key || strlen(key) != AP_DB_KEY_HEX) return 0;
    for (const char *p = key; *p; p++)
        if (!((*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'f'))) return 0;
    return 1;
}
