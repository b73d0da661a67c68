#!/usr/bin/env bash
# `make test` as a new user meets it, timed: a fresh clone, `make train`, then `make test`
# (cold) and `make test` again (warm), each timed on the wall clock.
#
#   bash benchmarks/cold_make_test.sh [--keep] [--bare] [--no-warm] [COMMIT]  (or: make test-cold)
#
# Cold means what the clone has after `git clone` and `make train`, nothing else: the
# .venv that `make train` made (its packages and their bytecode, installed by pip), the
# numba cache of the kernels `make train` ran, the sample data in $DALI_PIPES_CACHE (the
# tests make their own); no mypy cache, no pytest cache, no bytecode of the clone's own
# files, no numba cache of any other kernel. Outside the clone the machine is as it is: the
# Debian packages and chromium `make test` installs when missing, pip's cache for the
# install, ~/.cache/matplotlib. Warm is the same clone's second `make test` (--no-warm: not
# run, for a second cold figure in two thirds of the time).
#
# The shared photos and corner files (../shared/data next to this checkout) are handed to
# the clone through DALI_PIPES_PHOTOS and DALI_PIPES_CORNER, so it runs the tests this
# checkout runs; --bare leaves them out (their tests skip, as in a clone with nothing
# beside it). --keep keeps the clone (it holds a .venv of a few GB). Run it on a quiet
# machine: it prints the figures to record in docs/development.md and the load it saw.
set -euo pipefail

keep=0
bare=0
warm_run=1
commit=HEAD
for arg in "$@"; do
    case "$arg" in
        --keep) keep=1 ;;
        --bare) bare=1 ;;
        --no-warm) warm_run=0 ;;
        -h | --help) sed -n '2,20p' "$0"; exit 0 ;;
        -*) echo "cold_make_test.sh: unknown option $arg (--keep, --bare, --no-warm, COMMIT)" >&2; exit 2 ;;
        *) commit=$arg ;;
    esac
done

repo=$(git -C "$(dirname "$0")/.." rev-parse --show-toplevel)
commit=$(git -C "$repo" rev-parse --verify "$commit^{commit}")
work=$(mktemp -d "${TMPDIR:-/tmp}/dali-pipes-cold.XXXXXX")
clone=$work/dali_pipes
logs=$work/logs
mkdir -p "$logs"
if [ "$keep" -eq 0 ]; then
    trap 'rm -rf "$clone"' EXIT
fi

if [ "$bare" -eq 0 ]; then
    shared=$(cd "$repo/.." && pwd)/shared/data
    if [ -d "$shared/photos" ]; then export DALI_PIPES_PHOTOS=$shared/photos; fi
    if [ -d "$shared/corner" ]; then export DALI_PIPES_CORNER=$shared/corner; fi
fi
unset NUMBA_CACHE_DIR MYPY_CACHE_DIR PYTHONPYCACHEPREFIX VIRTUAL_ENV

git clone --quiet --no-local --no-hardlinks "$repo" "$clone"
git -C "$clone" checkout --quiet --detach "$commit"

seconds() { date +%s.%N; }
clock() { awk -v s="$1" 'BEGIN { printf "%d:%05.2f", s / 60, s - 60 * int(s / 60) }'; }

# One make target in the clone, its output in $logs/NAME.log; prints the wall seconds.
timed() {
    local name=$1
    shift
    local start end
    start=$(seconds)
    # as a new user runs it: not with the variables of a make that called this script
    # (`make test-cold ARGS=--bare` would hand --bare to the clone's `make train`)
    if ! env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL -u ARGS make -C "$clone" "$@" \
        >"$logs/$name.log" 2>&1; then
        echo "cold_make_test.sh: make $* failed; the end of $logs/$name.log:" >&2
        tail -n 30 "$logs/$name.log" >&2
        exit 1
    fi
    end=$(seconds)
    awk -v a="$start" -v b="$end" 'BEGIN { printf "%.1f", b - a }'
}

summary() { grep -E '^=+ .*(passed|failed).* in ' "$logs/$1.log" | tail -n 1 | tr -d '='; }

load_before=$(cut -d' ' -f1-3 /proc/loadavg)
train=$(timed train train)
cold=$(timed test-cold-run test)
warm=0
if [ "$warm_run" -eq 1 ]; then warm=$(timed test-warm-run test); fi
load_after=$(cut -d' ' -f1-3 /proc/loadavg)

short=$(git -C "$clone" rev-parse --short HEAD)
cat <<EOF
commit $short ($(date -u +%Y-%m-%d)), $(nproc) cores, $(python3 --version 2>&1),
load average before $load_before, after $load_after
photos: ${DALI_PIPES_PHOTOS:-none (their tests skip)}; corner: ${DALI_PIPES_CORNER:-none}
make train (fresh .venv):  $(clock "$train") wall
make test, cold:           $(clock "$cold") wall ($(summary test-cold-run))
$([ "$warm_run" -eq 1 ] && echo "make test, warm:           $(clock "$warm") wall ($(summary test-warm-run))" || echo "make test, warm:           not run (--no-warm)")
logs: $logs$([ "$keep" -eq 1 ] && echo "; clone kept: $clone")
EOF
