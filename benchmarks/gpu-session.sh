#!/usr/bin/env bash
# One lent GPU call that records everything (issue 37): selfcheck, the whole gpu test suite
# (-v under pytest-xdist, results printed as they come; the GPU memory tests alone after
# it), bench and doctor (ResNet-50) on ImageNet-like data, and the default training job.
# Each stage is time-boxed (`timeout`) within one budget for the whole call, and after each
# stage the logs and JSON are tarred into $OUT, so a call cut short still brings back what ran.
#
# On the GPU machine (H100/H200, 16 cores), after ../shared/gpu/README.md's parts procedure,
# as the command of the last call (timeout_s=480), carrying .gpu/install.sh, .gpu/SHA256SUMS
# and .gpu/data (mkdir -p .gpu/data && cp -r ../shared/data/{photos,corner} .gpu/data/):
#   mv /tmp/parts/part-* .gpu/ && bash .gpu/install.sh && export PYTHONPATH=$PWD:/tmp/site \
#     DALI_PIPES_COMMIT=<git rev-parse --short HEAD here> && bash benchmarks/gpu-session.sh
# (the copy there has no .git: DALI_PIPES_COMMIT names its commit in every record). Unpack
# what comes back and commit its JSON under benchmarks/gpu-<kind>/ (kind: gpu-tests.json).
#
# Dry run on a machine without a GPU (the GPU stages skip or run tiny; what it checks is
# the stages, the time boxes, the tarball and the JSON):
#   DRY_RUN=1 LOGS=/tmp/gpu-dry OUT=/tmp/gpu-dry-out bash benchmarks/gpu-session.sh
# tests/e2e/test_gpu_session.py runs the tests stage so, and cut short.
#
# Usage: bash benchmarks/gpu-session.sh [stage ...]   (default: setup selfcheck tests memory
#   bench doctor train; optional: extra sweep detect). Variables (defaults): LOGS (/tmp/gpu-session),
#   OUT (the device's $OUT, else $LOGS.out), BUDGET (440 s: the call's 480 less DALI's
#   install), PHOTOS/CORNER (.gpu/data/...), DATA (/tmp/imagenet-like), COPIES (24), BATCH
#   (256), WORKERS (6 xdist workers), TEST_TIMEOUT (200 s a test), GPU_TESTS (where the
#   gpu tests are looked for: tests), BENCH_CANDIDATES, EXTRA_BENCH_AUGMENTS, BOX_<STAGE>
#   (a stage's time box; a dry run's are 3x, for a slower CPU).
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2
DRY_RUN=${DRY_RUN:-0}
LOGS=$(realpath -m "${LOGS:-/tmp/gpu-session}")
OUT=$(realpath -m "${OUT:-$LOGS.out}")
BUDGET=${BUDGET:-440}
photos=.gpu/data/photos
# a dry run without the shared photos carried: the 13 shipped with the package
[ "$DRY_RUN" = 1 ] && [ ! -d "$photos" ] && photos=dali_pipes/selfcheck/photos
PHOTOS=$(realpath -m "${PHOTOS:-$photos}")
CORNER=$(realpath -m "${CORNER:-.gpu/data/corner}")
DATA=${DATA:-/tmp/imagenet-like}
if [ "$DRY_RUN" = 1 ]; then
  COPIES=${COPIES:-1} BATCH=${BATCH:-16} WORKERS=${WORKERS:-2} SCALE=3
else
  COPIES=${COPIES:-24} BATCH=${BATCH:-256} WORKERS=${WORKERS:-6} SCALE=1
fi
TEST_TIMEOUT=${TEST_TIMEOUT:-200}
# bench's candidates (issue 36 adds feed and reader; names this tree's bench does not know
# are left out, and the log says which)
BENCH_CANDIDATES=${BENCH_CANDIDATES:-baseline,dali-cpu,dali-gpu,dali-raw-gpu,feed,reader,synthetic,decode}
# augment presets benched on their own after the main bench (issue 39: dino simclr)
EXTRA_BENCH_AUGMENTS=${EXTRA_BENCH_AUGMENTS:-}
# The commit given, else this tree's own where it is a checkout of its own (never that of
# a repository the copy sits in: dali_pipes/tools/provenance.py), else unknown.
own_commit() {
  if [ "$(git rev-parse --show-toplevel 2>/dev/null)" = "$(pwd -P)" ]; then
    git rev-parse --short HEAD
  else
    echo unknown
  fi
}
export DALI_PIPES_COMMIT=${DALI_PIPES_COMMIT:-${COMMIT:-$(own_commit)}}
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}:/tmp/site PYTHONUNBUFFERED=1
export DALI_PIPES_PHOTOS=$PHOTOS DALI_PIPES_CORNER=$CORNER
PY=${PY:-python3}
# Each stage's time box in seconds (BOX_TESTS=... overrides), within the call's BUDGET.
declare -A BOX=([setup]=45 [selfcheck]=80 [tests]=240 [memory]=60 [bench]=75 [doctor]=45
  [train]=60 [extra]=90 [sweep]=120 [detect]=60)
data=(data=imagenet "data.root=$DATA" "data.batch_size=$BATCH")
if [ "$DRY_RUN" = 1 ]; then
  timing=(bench.min_images=32 bench.warmup_images=8 bench.repeats=1)
else
  timing=(bench.min_images=4096 bench.warmup_images=512 bench.repeats=3)
fi

# --------------------------------------------------------------------------- the stages

logged() {
  # logged FILE PATTERN CMD...: CMD's output into FILE, the lines matching PATTERN printed;
  # CMD's exit status. tee outlives the time box's SIGINT (-i) and a printer gone (-p), so
  # FILE gets pytest's summary of an interrupted run.
  local file=$1 pattern=$2
  shift 2
  "$@" 2>&1 | tee -i -p "$file" | { grep -E --line-buffered "$pattern" || true; }
  return "${PIPESTATUS[0]}"
}

stage_setup() {
  { nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv 2>&1 || echo "no GPU"
    "$PY" -c "import platform, torch, torchvision, PIL; print('python', platform.python_version(), 'torch', torch.__version__, 'torchvision', torchvision.__version__, 'cuda', torch.version.cuda, 'pillow', PIL.__version__)"
    "$PY" -c "import nvidia.dali as d; print('dali', d.__version__)"
    echo "cores $(nproc)"
    echo "C compiler: $(command -v cc || command -v gcc || echo none)"
  } | tee "$LOGS/machine.txt"
  rm -rf "$DATA"
  "$PY" benchmarks/imagenet_like.py "$PHOTOS" "$DATA" --copies "$COPIES" \
    --stats "$LOGS/imagenet-like-stats.json" | tail -3
}

stage_selfcheck() {
  # what a user runs first on a GPU (--quick: the presets' GPU graphs against their twins
  # and the rest); it also fills numba's cache the tests' CPU halves use
  [ "$DRY_RUN" = 1 ] && { echo "dry run: selfcheck needs a GPU here (make test runs its CPU half)"; return 0; }
  logged "$LOGS/selfcheck.log" "^(FAIL|selfcheck|dali_pipes|GPU )" \
    "$PY" -m dali_pipes.selfcheck --quick --out "$LOGS/selfcheck"
}

pytest_timeout() {
  # one hung test fails alone (its stacks printed) instead of holding the suite
  if "$PY" -c "import pytest_timeout" 2>/dev/null; then
    echo "--timeout=$TEST_TIMEOUT --timeout-method=thread"
  else
    echo "-o faulthandler_timeout=$TEST_TIMEOUT"
  fi
}

stage_tests() {
  # The files holding gpu tests, as pytest sees them: a module that cannot be imported here
  # (a package the GPU machine lacks) is listed in the file, not a reason to run nothing.
  # shellcheck disable=SC2086
  "$PY" -m pytest --collect-only -q -m gpu -k "not memory_stays_flat" -p no:cacheprovider \
    -p no:benchmark --continue-on-collection-errors ${GPU_TESTS:-tests} \
    >"$LOGS/gpu-tests-collected.txt" 2>&1
  local files
  files=$(grep -oE "^tests/[^:]+[.]py" "$LOGS/gpu-tests-collected.txt" | sort -u | tr '\n' ' ')
  [ -n "$files" ] || { tail -5 "$LOGS/gpu-tests-collected.txt"; return 1; }
  # One test at a time to each worker, the slow-marked ones first (conftest sorts them),
  # so no test waits behind a long one; -v prints each result as it comes.
  # shellcheck disable=SC2046,SC2086
  logged "$LOGS/gpu-tests.log" "(PASSED|FAILED|ERROR|SKIPPED) tests/|^(FAILED|ERROR) |items\]| in [0-9.]+s" \
    "$PY" -m pytest -m gpu -k "not memory_stays_flat" -n "$WORKERS" --maxschedchunk=1 -v \
    -p no:cacheprovider -p no:benchmark -rfEs --durations=30 $(pytest_timeout) \
    --junitxml="$LOGS/gpu-tests.xml" $files
}

stage_memory() {
  # alone: GPU memory in use over 30 epochs, torch and DALI
  # shellcheck disable=SC2046
  logged "$LOGS/gpu-memory.log" "PASSED|FAILED|SKIPPED|on the GPU:| in [0-9.]+s" \
    "$PY" -m pytest -m gpu -k memory_stays_flat -v -s -p no:xdist -p no:cacheprovider \
    -p no:benchmark -rfEs $(pytest_timeout) --junitxml="$LOGS/gpu-memory.xml" \
    tests/e2e/test_reliability.py
}

known_candidates() {
  # the names of BENCH_CANDIDATES this tree's bench has, as bench.candidates=[...]
  "$PY" - "$BENCH_CANDIDATES" <<'EOF'
import sys
from dali_pipes.tools.bench_candidates import CANDIDATES
asked = [n for n in sys.argv[1].replace(" ", "").split(",") if n]
left = [n for n in asked if n not in CANDIDATES]
if left:
    print(f"left out (not in this tree's bench): {', '.join(left)}", file=sys.stderr)
print("bench.candidates=[" + ",".join(n for n in asked if n in CANDIDATES) + "]")
EOF
}

stage_bench() {
  local candidates
  candidates=$(known_candidates 2> >(tee -a "$LOGS/bench-candidates.txt" >&2)) || return 1
  logged "$LOGS/bench.log" "^\|" "$PY" -m dali_pipes.bench "${data[@]}" "${timing[@]}" \
    "$candidates" "bench.out=$LOGS/bench-imagenet-like.json"
}

stage_doctor() {
  # ResNet-50, bf16, channels_last (trainer=imagenet's auto on a GPU), fed by the default loader
  local model=(model=resnet50 trainer=imagenet)
  [ "$DRY_RUN" = 1 ] && model=(model=small_cnn trainer=quick doctor.steps=3 doctor.warmup_steps=1)
  logged "$LOGS/doctor.log" "^(model|  )" "$PY" -m dali_pipes.doctor "${data[@]}" "${model[@]}" \
    doctor.tune=false doctor.placements=false "doctor.out_dir=$LOGS/doctor"
}

stage_train() {
  # `make train`'s job as it runs here (the GPU's recipe: bf16 autocast, channels_last)
  local short=()
  [ "$DRY_RUN" = 1 ] && short=(trainer.epochs=1 trainer.max_steps_per_epoch=2)
  rm -rf "$LOGS/train"
  logged "$LOGS/train.log" "training |epoch (0|[0-9]*9) " \
    "$PY" -m dali_pipes.train "output_dir=$LOGS/train" "${short[@]}" || return $?
  "$PY" benchmarks/gpu_record.py train --run "$LOGS/train" --out "$LOGS/train.json"
}

# ---- extra bench runs: one bench per augment preset in EXTRA_BENCH_AUGMENTS (issue 39 puts
# ---- dino and simclr here); add other measurements as stages of their own below
stage_extra() {
  local preset
  for preset in $EXTRA_BENCH_AUGMENTS; do
    logged "$LOGS/bench-augment-$preset.log" "^\| dali" "$PY" -m dali_pipes.bench "${data[@]}" \
      "${timing[@]}" "augment=$preset" "bench.candidates=[dali-cpu,dali-gpu]" \
      "bench.out=$LOGS/bench-augment-$preset.json" || return $?
  done
}

stage_sweep() {
  # share of baseline JPEGs sent to the hardware decoder, ours and DALI's example alike
  local load
  for load in 0.0 0.5 0.65 1.0; do
    "$PY" -m dali_pipes.bench "${data[@]}" "${timing[@]}" "backend.hw_decoder_load=$load" \
      "bench.candidates=[dali-gpu,dali-raw-gpu]" "bench.out=$LOGS/bench-hw$load.json" 2>&1 \
      | grep "^| dali" | sed "s/^/hw_decoder_load=$load /"
  done | tee "$LOGS/sweep.log"
}

stage_detect() {
  # issue 49: a detector's steps per second fed by the loader against on a replayed batch
  # (doctor's "fed vs synthetic"): Faster R-CNN (ResNet-50 FPN, no weights) on the sample
  # objects, task=detection's data and recipe
  local model=(model=fasterrcnn_resnet50_fpn)
  [ "$DRY_RUN" = 1 ] && model=(data.train_images=16 doctor.steps=3 doctor.warmup_steps=1)
  logged "$LOGS/doctor-detection.log" "^(model|  )" "$PY" -m dali_pipes.doctor task=detection \
    "${model[@]}" doctor.tune=false doctor.placements=false "doctor.out_dir=$LOGS/doctor-detection"
}

# --------------------------------------------------------------------------- the driver

if [ "${1:-}" = _stage ]; then  # one stage, in a process of its own under `timeout`
  "stage_$2"
  exit $?
fi

mkdir -p "$LOGS" "$OUT"
stages=${*:-setup selfcheck tests memory bench doctor train}
start=$(date +%s)
record_suite() {  # gpu-tests.json: the suite and the memory tests, whatever has run so far
  local args=(--part "$LOGS/gpu-tests.log" "$LOGS/gpu-tests.xml")
  [ -f "$LOGS/gpu-memory.log" ] && args+=(--part "$LOGS/gpu-memory.log" "$LOGS/gpu-memory.xml")
  "$PY" benchmarks/gpu_record.py suite "${args[@]}" --collected "$LOGS/gpu-tests-collected.txt" \
    --out "$LOGS/gpu-tests.json"
}
pack() {  # everything but the default job's checkpoints, replaced whole
  tar -czf "$OUT/gpu-session.tgz.tmp" --exclude=./train/checkpoints -C "$LOGS" . \
    && mv "$OUT/gpu-session.tgz.tmp" "$OUT/gpu-session.tgz"
}
mode=$([ "$DRY_RUN" = 1 ] && echo ", dry run")
echo "=== session $(date -u +%FT%TZ) at commit $DALI_PIPES_COMMIT, budget $BUDGET s$mode" \
  | tee -a "$LOGS/stages.txt"
for stage in $stages; do  # every name checked before anything runs
  if ! declare -F "stage_$stage" >/dev/null; then
    echo "unknown stage $stage (setup selfcheck tests memory bench doctor train extra sweep detect)"
    exit 2
  fi
done
failed=()
for stage in $stages; do
  box_var="BOX_${stage^^}"
  box=${!box_var:-$((BOX[$stage] * SCALE))}
  left=$((BUDGET - ($(date +%s) - start) - 10))  # 10 s kept for the last records and tar
  if [ "$left" -lt 15 ]; then
    echo "=== $stage skipped: $left s left of the $BUDGET s budget" | tee -a "$LOGS/stages.txt"
    continue
  fi
  [ "$box" -gt "$left" ] && box=$left
  echo "=== $stage at +$(($(date +%s) - start)) s (box $box s)" | tee -a "$LOGS/stages.txt"
  t0=$(date +%s)
  timeout -s INT -k 15 "$box" bash "$0" _stage "$stage"
  rc=$?
  [ "$rc" -eq 0 ] || failed+=("$stage")
  # 124: the stage stopped at the box's SIGINT; 137 past the box: killed 15 s after it.
  took=$(($(date +%s) - t0))
  cut=$({ [ "$rc" -eq 124 ] || { [ "$rc" -eq 137 ] && [ "$took" -ge "$box" ]; }; } \
    && echo " (time box reached)")
  echo "$stage rc=$rc in $took s$cut" | tee -a "$LOGS/stages.txt"
  case $stage in tests | memory) record_suite ;; esac
  pack
done
echo "=== end at +$(($(date +%s) - start)) s${failed[*]:+; failed: ${failed[*]}}" \
  | tee -a "$LOGS/stages.txt"
pack
echo "records in $OUT/gpu-session.tgz (commit them under benchmarks/gpu-<kind>/: see gpu-tests.json)"
[ ${#failed[@]} -eq 0 ]
