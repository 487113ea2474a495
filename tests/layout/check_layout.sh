#!/bin/sh
# check_layout.sh - the folder rules of ../shared/STYLE.md as a test (run by CTest as
# `check_layout.sh SOURCE_DIR LIBRARY`): the library (everything but cli/) neither prints
# results nor exits, and contains no command-line code (no ap_cmd_*, flag parser or CLI
# helpers: checked on the built archive with nm); each third-party library is included by its
# one wrapper file.
set -u
src=$1
lib=$2
fail=0
libdirs="base costmodel sim planner output db profiler runtime"
cd "$src" || exit 1

# 1. no stdout or exit in library code
dirs=""
for d in $libdirs; do [ -d "$d" ] && dirs="$dirs $d"; done
hits=$(grep -rnE '\b(printf|puts|putchar|vprintf)[[:space:]]*\(|fprintf[[:space:]]*\([[:space:]]*stdout|\bexit[[:space:]]*\(|fputs[[:space:]]*\([^;]*stdout|fwrite[[:space:]]*\([^;]*stdout' \
       --include='*.c' $dirs | grep -v '^profiler/inject')
if [ -n "$hits" ]; then
    echo "library code prints to stdout or exits (only cli/ may):"
    echo "$hits"
    fail=1
fi

# 2. no command-line symbols in the library archive
if command -v nm >/dev/null 2>&1; then
    syms=$(nm -A "$lib" 2>/dev/null | grep -E ' [TDBR] (ap_cmd_|ap_flags?_|ap_cli_)')
    if [ -n "$syms" ]; then
        echo "command-line symbols in the library $lib:"
        echo "$syms"
        fail=1
    fi
fi

# 2b. every symbol the library exports carries the ap_ prefix (public: ap_<module>_<verb>;
#     shared internals too, so they cannot collide with a caller's names; "__" names are the
#     compiler's, e.g. AddressSanitizer's __odr_asan.*)
if command -v nm >/dev/null 2>&1; then
    bare=$(nm -A "$lib" 2>/dev/null | awk '$2 ~ /^[TDBRC]$/ && $3 !~ /^(ap_|__)/ {print}')
    if [ -n "$bare" ]; then
        echo "library symbols without the ap_ prefix (make them static or prefix them):"
        echo "$bare"
        fail=1
    fi
fi

# 2c. every allocation of the library goes through the hook in base/heap.c (ap_malloc & co.);
#     profiler/'s CUDA-only files (cupti.c, inject.c, gpubench*.c) are not in the library; of
#     runtime/, the files the library holds (the ranks' own program counts its own allocations)
raw=$(grep -rnE '(^|[^_a-zA-Z0-9.>])(malloc|calloc|realloc|strdup|free)[[:space:]]*\(' --include='*.c' \
      base costmodel sim planner output db profiler runtime/job.c runtime/report.c \
      runtime/predict.c runtime/launch.c runtime/trace.c 2>/dev/null |
      grep -vE '^(base/heap|profiler/cupti|profiler/inject|profiler/gpubench[a-z_]*)\.c:' |
      grep -vE ':[[:space:]]*(\*|/\*|//)')
if [ -n "$raw" ]; then
    echo "library code allocates around the hook (use ap_malloc, ap_calloc, ap_realloc, ap_strdup, ap_free):"
    echo "$raw"
    fail=1
fi

# 3. one wrapper file per third-party library
check_one() { # header allowed-path-regex
    users=$(grep -rlE "#include[[:space:]]*[<\"]$1" --include='*.c' --include='*.h' --include='*.cu' \
            base costmodel sim planner output db cli profiler runtime 2>/dev/null | grep -vE "$2")
    if [ -n "$users" ]; then
        echo "$1 included outside its wrapper ($2):"
        echo "$users"
        fail=1
    fi
}
check_one 'glpk\.h' '^planner/ilp\.c$'
check_one 'sqlite3\.h' '^db/sqlite\.c$'
check_one 'cjson/cJSON\.h' '^base/json\.c$'
check_one 'cupti' '^profiler/cupti\.c$'
check_one 'mpi\.h' '^runtime/comm_mpi\.c$'
# NCCL: the profiler's benchmark module and the runtime's communicator (two separately linked
# programs: the dlopen'ed libautoplan_gpu and autoplan-rank)
check_one 'nccl\.h' '^(profiler/gpubench_nccl|runtime/comm_nccl)\.c$'

[ $fail -eq 0 ] && echo "layout: ok"
exit $fail
