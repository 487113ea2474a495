#!/bin/sh
# bench_compare.sh - the README's performance table: the same commands on two revisions, side by
# side in one run.
#
# usage: tools/bench_compare.sh OLD_REV [NEW_REV] [REPS]
#   OLD_REV, NEW_REV: git revisions (NEW_REV default: the working tree as built in ./build)
#   REPS: repetitions per command and revision (default 5)
#
# Each revision is built from a clean checkout (git worktree, Release-like RelWithDebInfo) in a
# temporary directory. The commands run alternately old, new, old, new, ... so both see the same
# machine load; each figure is the least CPU time (user + system, /usr/bin/time) of the REPS runs
# and the largest resident memory. CPU time, not wall time: on a shared machine wall time
# measures the neighbours. Commands that take --threads run with --threads 1 (one core) where the
# revision has the flag (plan, compare, fit). Prints a Markdown table.
#
# BENCH_INSTRUCTIONS=1 counts instructions instead (valgrind's callgrind, one run per command
# and revision: the count does not depend on the machine's load; about 50x slower). valgrind
# computes long double at double precision, so plans.csv's %.17g digits come out wrong under it:
# the count is of the same code path, the output is not the real one.
set -eu
instr=${BENCH_INSTRUCTIONS:-0}
old=$1
new=${2:-}
reps=${3:-5}
[ "$instr" = 1 ] && reps=1 # a count does not vary
root=$(git rev-parse --show-toplevel)
tmp=$(mktemp -d "${TMPDIR:-/tmp}/autoplan-bench.XXXXXX")
trap 'git -C "$root" worktree remove --force "$tmp/old" >/dev/null 2>&1 || true;
      git -C "$root" worktree remove --force "$tmp/new" >/dev/null 2>&1 || true; rm -rf "$tmp"' EXIT

build() { # rev dir
    git -C "$root" worktree add --detach "$2" "$1" >/dev/null 2>&1
    cmake -S "$2" -B "$2/build" -DAP_WITH_CUDA=OFF >/dev/null
    cmake --build "$2/build" -j2 --target autoplan >/dev/null
}
build "$old" "$tmp/old"
if [ -n "$new" ]; then
    build "$new" "$tmp/new"
    newbin=$tmp/new/build/autoplan
else
    newbin=$root/build/autoplan
fi
oldbin=$tmp/old/build/autoplan
M=$root/examples/models

# one run: "cpu_seconds max_rss_kb"
measure() { # binary args...
    b=$1
    shift
    t=""
    case $1 in plan | compare | fit) "$b" "$1" --help 2>&1 | grep -q -- '--threads' && t="--threads 1" ;; esac
    # the previous run's output (plans.csv, traces: tens of MB) is written back first, so its
    # writeback is not charged to this run's system time
    sync
    if [ "$instr" = 1 ]; then
        # shellcheck disable=SC2086
        valgrind --tool=callgrind --callgrind-out-file=/dev/null "$b" "$@" $t >/dev/null \
            2>"$tmp/err" || true
        sed -n 's/.*Collected : \([0-9]*\).*/\1/p' "$tmp/err" | awk '{printf "%.3f 0\n", $1 / 1e9}'
        return
    fi
    # shellcheck disable=SC2086
    /usr/bin/time -f "%U %S %M" "$b" "$@" $t >/dev/null 2>"$tmp/err" || true
    tail -1 "$tmp/err" | awk '{printf "%.3f %d\n", $1 + $2, $3}'
}

row() { # label args...
    label=$1
    shift
    bo=999; bn=999; mo=0; mn=0
    i=0
    while [ $i -lt "$reps" ]; do
        r=$(measure "$oldbin" "$@"); c=${r% *}; k=${r#* }
        bo=$(echo "$c $bo" | awk '{print ($1 < $2) ? $1 : $2}'); [ "$k" -gt "$mo" ] && mo=$k
        r=$(measure "$newbin" "$@"); c=${r% *}; k=${r#* }
        bn=$(echo "$c $bn" | awk '{print ($1 < $2) ? $1 : $2}'); [ "$k" -gt "$mn" ] && mn=$k
        i=$((i + 1))
    done
    if [ "$instr" = 1 ]; then
        printf '| %s | %s G | %s G (%s) |\n' "$label" "$bo" "$bn" \
            "$(echo "$bo $bn" | awk '{printf "%+.0f%%", ($2 / $1 - 1) * 100}')"
        return
    fi
    printf '| %s | %s s, %d MB | %s s, %d MB |\n' "$label" "$bo" $((mo / 1024)) "$bn" $((mn / 1024))
}

rm -rf "$tmp/out"
mkdir -p "$tmp/out"
what='CPU time, one core; peak memory'
[ "$instr" = 1 ] && what='instructions, callgrind'
printf '| command (%s) | %s | %s |\n|---|---|---|\n' "$what" \
    "$(git -C "$root" rev-parse --short "$old")" "${new:-working tree}"
row "plan megatron-1t --gpus 3072" plan "$M/megatron-1t.json" --gpus 3072 --no-cache
row "plan llama-3.1-405b --gpus 16384" plan "$M/llama-3.1-405b.json" --gpus 16384 --no-cache
row "plan megatron-1t --gpus 64 (nothing fits)" plan "$M/megatron-1t.json" --gpus 64 --no-cache
row "plan llama-3.1-405b --gpus 8 (nothing fits)" plan "$M/llama-3.1-405b.json" --gpus 8 --no-cache
row "plan megatron-1t --gpus 64..16384" plan "$M/megatron-1t.json" --gpus 64..16384 --no-cache
row "plan llama-3.1-405b --gpus 4096..65536" plan "$M/llama-3.1-405b.json" --gpus 4096..65536 --no-cache
row "plan deepseek-v3 --gpus 128 --gpu h100-sxm" plan "$M/deepseek-v3.json" --gpus 128 \
    --gpu h100-sxm --no-cache
row "plan deepseek-v3 --gpus 64..16384 --gpu h100-sxm" plan "$M/deepseek-v3.json" \
    --gpus 64..16384 --gpu h100-sxm --no-cache
row "plan gpt-oss-20b --gpus 1..512" plan "$M/gpt-oss-20b.json" --gpus 1..512 --no-cache
row "plan mixtral-8x7b --gpus 8..1024" plan "$M/mixtral-8x7b.json" --gpus 8..1024 --no-cache
row "plan gpt3-175b --gpus 8 --trainer colossalai (nothing fits)" plan "$M/gpt3-175b.json" \
    --gpus 8 --trainer colossalai --no-cache
row "plan deepseek-v3 --gpus 8..16384" plan "$M/deepseek-v3.json" --gpus 8..16384 --no-cache
row "plan gpt3-175b --gpus 8..1024 --trainer deepspeed" plan "$M/gpt3-175b.json" \
    --gpus 8..1024 --trainer deepspeed --no-cache
row "plan megatron-22b --gpus 8..1024 --trainer deepspeed" plan "$M/megatron-22b.json" \
    --gpus 8..1024 --trainer deepspeed --no-cache
row "plan gpt3-175b --gpus 8..1024 --trainer colossalai" plan "$M/gpt3-175b.json" \
    --gpus 8..1024 --trainer colossalai --no-cache
row "fit --gpu a100-sxm4-80g" fit --gpu a100-sxm4-80g
row "fit --gpu a100-sxm4-80g --gpus 8" fit --gpu a100-sxm4-80g --gpus 8
row "fit --gpu a100-sxm4-80g --gpus 64" fit --gpu a100-sxm4-80g --gpus 64
row "fit --gpu a100-sxm4-80g --gpus 8 --family llama" fit --gpu a100-sxm4-80g --gpus 8 \
    --family llama
row "partition llama-3.1-405b pp 8, joint, --solver ilp" partition "$M/llama-3.1-405b.json" \
    --gpus 64 --gpu h100 --tp 8 --pp 8 --sp --zero 1 --gbs 128 --seq 8192 --recompute full \
    --choose-recompute --choose-offload --solver ilp
row "compare llama-2-7b --gpus 8" compare "$M/llama-2-7b.json" --gpus 8 --out "$tmp/out/c"
row "compare mixtral-8x7b --gpus 64 (54 MB plans.csv)" compare "$M/mixtral-8x7b.json" --gpus 64 \
    --out "$tmp/out/m"
row "simulate llama-2-70b pp 8 --trace (71 MB)" simulate "$M/llama-2-70b.json" --gpus 64 --tp 8 \
    --pp 8 --gbs 512 --trace "$tmp/out/t.json"
row "simulate llama-2-7b pp 1, 4096 micro-batches --trace (217 MB)" simulate \
    "$M/llama-2-7b.json" --gpus 1 --gbs 4096 --mbs 1 --zero 1 --trace "$tmp/out/t2.json"
