#!/usr/bin/env bash
# Every GPU measurement recorded in benchmarks/RESULTS.md, in one script, so a session with a
# lent GPU machine repeats them exactly (issue 16). Run from the project root on the GPU
# machine after ../shared/gpu/README.md's steps (DALI unpacked in /tmp/site):
#   LOGS=<dir> PHOTOS=<photos dir> CORNER=<corner dir> bash benchmarks/gpu-session.sh [stage...]
# Stages: setup selfcheck tests bench sweep doctor doctor-variants bench-shards bench-augment;
# without names: setup selfcheck tests bench sweep doctor. Logs and JSON go to $LOGS (default
# outputs/gpu).
#
# The device machine gets the working tree only (not ../shared) and returns at most 8 files
# from its $OUT, so a session (30 minutes of device time) goes, from the project root here:
#   bash ../shared/gpu/pack-dali.sh                  # .gpu/part-00..04, install.sh (cached)
#   mkdir -p .gpu/data && cp -r ../shared/data/{photos,corner,corner.csv} .gpu/data/
# then device calls back to back (the machine keeps ignored files only while warm):
#   carry [.gpu/part-0N], command `ls .gpu`                     one call per part
#   carry [.gpu/install.sh, .gpu/SHA256SUMS, .gpu/data], command
#     bash .gpu/install.sh && export COMMIT=<git rev-parse --short HEAD here> LOGS=/tmp/gpu &&
#     bash benchmarks/gpu-session.sh setup selfcheck tests; tar -czf $OUT/a.tgz -C /tmp/gpu .
#     (~7 min)
#   the same exports, then `bash benchmarks/gpu-session.sh bench sweep` and `... doctor`
#     (~6 and ~5 min), each ending with tar into $OUT
# and commit what came back under benchmarks/gpu-h100/ (or gpu-h200/) with that commit.
# (The device gets no .git: COMMIT says which commit its copy of the tree is.)
set -uo pipefail
LOGS=${LOGS:-outputs/gpu}
PHOTOS=$(realpath "${PHOTOS:-.gpu/data/photos}")
CORNER=$(realpath "${CORNER:-.gpu/data/corner}")
COMMIT=${COMMIT:-$(git rev-parse --short HEAD 2>/dev/null || echo unknown)}
COPIES=${COPIES:-48}  # 213 photos x 48 = 10,224 training images per epoch
DATA=${DATA:-/tmp/imagenet-like}
BATCH=${BATCH:-256}
export PYTHONPATH=$PWD:/tmp/site${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1
mkdir -p "$LOGS"
stages=${*:-setup selfcheck tests bench sweep doctor}
# ImageNet's layout and batch size (conf/data/imagenet.yaml), 5 repeats of >= 8192 images
# (TIMING="bench.min_images=64 bench.warmup_images=16 bench.repeats=1" for a dry run)
data=(data=imagenet "data.root=$DATA" "data.batch_size=$BATCH")
read -r -a timing <<<"${TIMING:-bench.min_images=8192 bench.warmup_images=1024}"

for stage in $stages; do
  echo "=== $stage $(date -u +%FT%TZ) at commit $COMMIT" | tee -a "$LOGS/stages.txt"
  case $stage in
    setup)
      # hypothesis (and its needs) travel as wheels in .whl/ when the device lacks them
      if ls .whl/*.whl >/dev/null 2>&1; then
        python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl
      fi
      nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv | tee "$LOGS/gpu.txt"
      python3 -c "import platform, torch, torchvision, PIL, nvidia.dali as d; print('python', platform.python_version(), 'torch', torch.__version__, 'torchvision', torchvision.__version__, 'dali', d.__version__, 'cuda', torch.version.cuda, 'pillow', PIL.__version__)" | tee -a "$LOGS/gpu.txt"
      nproc | sed 's/^/cores /' | tee -a "$LOGS/gpu.txt"
      rm -rf "$DATA"
      python3 benchmarks/imagenet_like.py "$PHOTOS" "$DATA" --copies "$COPIES" \
        --stats "$LOGS/imagenet-like-stats.json" | tee -a "$LOGS/gpu.txt"
      ;;
    selfcheck)
      # what a user runs first on their GPU: its report (Markdown + JSON) is the record
      python3 -m dali_pipes.selfcheck --out "$LOGS/selfcheck" 2>&1 | tee "$LOGS/selfcheck.log" \
        | grep -E "^(FAIL|selfcheck)" ;;
    tests)
      # every gpu-marked test: contract (torch-gpu goes through the side-stream prefetcher),
      # parity, recipe via torchrun, caches,
      # shards, placement, the mixed decoder over corner/ files, GPU memory over 30 epochs
      DALI_PIPES_PHOTOS=$PHOTOS DALI_PIPES_CORNER=$CORNER python3 -m pytest -q -s -rs -m gpu \
        -p no:cacheprovider --durations=10 tests 2>&1 | tee "$LOGS/gpu-tests.log" \
        | grep -E "^parity|^corner|on the GPU:|passed|failed|error|SKIP|FAIL" ;;
    bench)
      # issue 16 point 3: baseline with one DataLoader worker per core, torch backend, DALI on
      # the CPU and on the GPU, and DALI's own example pipeline on both
      python3 -m dali_pipes.bench "${data[@]}" "${timing[@]}" \
        "bench.candidates=[baseline,torch,dali-cpu,dali-gpu,dali-raw,dali-raw-gpu,synthetic,decode]" \
        "bench.out=$LOGS/bench-imagenet-like.json" 2>&1 | tee "$LOGS/bench.log" | grep -v "^\s*$" | tail -14 ;;
    sweep)
      # share of baseline JPEGs sent to the hardware decoder, ours and the example's alike
      for load in 0.0 0.25 0.5 0.65 0.8 1.0; do
        python3 -m dali_pipes.bench "${data[@]}" "${timing[@]}" "backend.hw_decoder_load=$load" \
          "bench.candidates=[dali-gpu,dali-raw-gpu]" "bench.out=$LOGS/bench-hw$load.json" 2>&1 \
          | grep "^| dali" | sed "s/^/hw_decoder_load=$load /"
      done | tee "$LOGS/sweep.log" ;;
    doctor)
      # issue 16 point 4: ResNet-50, bf16, channels_last (trainer=imagenet's auto on a GPU)
      python3 -m dali_pipes.doctor "${data[@]}" model=resnet50 trainer=imagenet \
        "doctor.out_dir=$LOGS/doctor" 2>&1 | tee "$LOGS/doctor.log" | tail -30 ;;
    doctor-variants)
      # the same training step fed by the torch backend, for comparison
      python3 -m dali_pipes.doctor "${data[@]}" model=resnet50 trainer=imagenet doctor.tune=false \
        doctor.placements=false backend=torch "doctor.out_dir=$LOGS/doctor-torch" 2>&1 | tail -6 ;;
    bench-shards)
      # folder vs shards vs decode-once caches on the GPU
      python3 -m dali_pipes.pack "${data[@]}" "out=/tmp/shards-imagenet-like" pack.shard_size_mb=64
      python3 -m dali_pipes.bench "${data[@]}" "${timing[@]}" "bench.shards=/tmp/shards-imagenet-like" \
        "bench.candidates=[baseline,dali-cpu,dali-cpu-shards,dali-gpu,dali-gpu-shards,cache-ram,cache-gpu]" \
        "bench.out=$LOGS/bench-shards-cache.json" 2>&1 | tee "$LOGS/bench-shards.log" | grep "^|" ;;
    bench-augment)
      # each augmentation preset's cost on the GPU (issue 11: randaugment >= 80 % of imagenet)
      for preset in imagenet randaugment trivialaugment autoaugment; do
        python3 -m dali_pipes.bench "${data[@]}" "${timing[@]}" "augment=$preset" \
          "bench.candidates=[baseline,torch,dali-cpu,dali-gpu]" \
          "bench.out=$LOGS/bench-augment-$preset.json" 2>&1 | grep "^| [bdt]" | sed "s/^/$preset /"
      done ;;
    *) echo "unknown stage $stage (setup selfcheck tests bench sweep doctor doctor-variants bench-shards bench-augment)"; exit 2 ;;
  esac
done
