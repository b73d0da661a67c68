#!/usr/bin/env bash
# The GPU measurements recorded in benchmarks/RESULTS.md, in one script, so a session with a
# lent GPU machine repeats them exactly. Run from the project root on the GPU machine after
# ../shared/gpu/README.md's steps (DALI unpacked in /tmp/site):
#   OUT=<dir> PHOTOS=<photos dir> bash benchmarks/gpu-session.sh [setup] [tests] [bench] [doctor]
#     [doctor-variants] [bench-shards] [bench-augment]
# Without stage names it runs them all. Logs and JSON go to $OUT.
set -uo pipefail
OUT=${OUT:-outputs/gpu}
PHOTOS=${PHOTOS:-../shared/data/photos}
COPIES=${COPIES:-10}  # the photos repeated COPIES times, so epochs are not all start-up
BIG=${BIG:-/tmp/photos-x$COPIES}
BATCH=${BATCH:-128}
export PYTHONPATH=$PWD:/tmp/site${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1
mkdir -p "$OUT"
stages=${*:-setup tests bench doctor}

for stage in $stages; do
  echo "=== $stage $(date -u +%FT%TZ)"
  case $stage in
    setup)
      # hypothesis (and its needs) travel as wheels in .whl/ when the device lacks them
      if ls .whl/*.whl >/dev/null 2>&1; then
        python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl
      fi
      nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv | tee "$OUT/gpu.txt"
      python3 -c "import platform, torch, torchvision, nvidia.dali as d; print('python', platform.python_version(), 'torch', torch.__version__, 'torchvision', torchvision.__version__, 'dali', d.__version__, 'cuda', torch.version.cuda)" | tee -a "$OUT/gpu.txt"
      nproc | sed 's/^/cores /' | tee -a "$OUT/gpu.txt"
      rm -rf "$BIG"
      for c in $(seq 1 "$COPIES"); do
        (cd "$PHOTOS" && find . -name '*.jp*g' -o -name '*.JPEG' | while read -r f; do
          mkdir -p "$BIG/$(dirname "$f")" && cp "$f" "$BIG/$(dirname "$f")/c${c}_$(basename "$f")"; done)
      done
      echo "$(find "$BIG" -type f | wc -l) images in $BIG"
      ;;
    tests)
      DALI_PIPES_PHOTOS=$PHOTOS python3 -m pytest -q -s -rs -m gpu -p no:cacheprovider tests \
        2>&1 | tee "$OUT/gpu-tests.log" | grep -E "^parity|passed|failed|error|SKIP" ;;
    bench)
      common=(data=folder "data.root=$BIG" "data.batch_size=$BATCH" bench.min_images=4096 bench.warmup_images=512)
      python3 -m dali_pipes.bench "${common[@]}" "bench.out=$OUT/bench-gpu-photos.json" 2>&1 | tee "$OUT/bench.log" | grep -v "^\s*$" | tail -12
      # DALI GPU variants: hardware-decoder share, chroma upsampling, region decoding
      for variant in hw_decoder_load=0.0 hw_decoder_load=1.0 fancy_upsampling=false \
          roi_decode=true,fancy_upsampling=false roi_decode=true; do
        python3 -m dali_pipes.bench "${common[@]}" "bench.candidates=[dali-gpu]" \
          $(echo "$variant" | tr ',' '\n' | sed 's/^/backend./') \
          "bench.out=$OUT/bench-gpu-${variant//[=,]/-}.json" 2>&1 | grep "^| dali" | sed "s/^/$variant /"
      done ;;
    doctor)
      python3 -m dali_pipes.doctor data=folder "data.root=$BIG" "data.batch_size=$BATCH" model=resnet50 \
        trainer=imagenet "doctor.out_dir=$OUT/doctor" 2>&1 | tee "$OUT/doctor.log" | tail -25 ;;
    bench-shards)
      # issue 6 on the GPU: folder vs shards vs decode-once caches (not yet run on a GPU)
      python3 -m dali_pipes.pack data=folder "data.root=$BIG" "out=/tmp/shards-x$COPIES" pack.shard_size_mb=64
      python3 -m dali_pipes.bench data=folder "data.root=$BIG" "data.batch_size=$BATCH" bench.min_images=4096 \
        bench.warmup_images=512 "bench.shards=/tmp/shards-x$COPIES" \
        "bench.candidates=[baseline,dali-cpu,dali-cpu-shards,dali-gpu,dali-gpu-shards,cache-ram,cache-gpu]" \
        "bench.out=$OUT/bench-gpu-shards-cache.json" 2>&1 | tee "$OUT/bench-shards.log" | grep "^|" ;;
    bench-augment)
      # issue 11 on the GPU (not yet run on one): each preset's cost against imagenet, DALI GPU
      # with randaugment against its imagenet rate (target >= 80 %), and the v2 baseline
      for preset in imagenet randaugment trivialaugment autoaugment; do
        python3 -m dali_pipes.bench data=folder "data.root=$BIG" "data.batch_size=$BATCH" \
          bench.min_images=4096 bench.warmup_images=512 "augment=$preset" \
          "bench.candidates=[baseline,torch,dali-cpu,dali-gpu]" \
          "bench.out=$OUT/bench-gpu-augment-$preset.json" 2>&1 | grep "^| [bdt]" | sed "s/^/$preset /"
      done ;;
    doctor-variants)
      # the same training step fed by the fastest DALI variant of the bench, and by the torch backend
      for variant in backend.roi_decode=true,backend.fancy_upsampling=false backend=torch; do
        python3 -m dali_pipes.doctor data=folder "data.root=$BIG" "data.batch_size=$BATCH" model=resnet50 \
          trainer=imagenet doctor.tune=false $(echo "$variant" | tr ',' '\n') \
          "doctor.out_dir=$OUT/doctor-${variant//[=,.]/-}" 2>&1 | tail -4 | sed "s/^/$variant /"
      done ;;
    *) echo "unknown stage $stage (setup, tests, bench, doctor, doctor-variants, bench-shards, bench-augment)"; exit 2 ;;
  esac
done
