#!/usr/bin/env bash
# A user's own engines on the GPU, end to end, as a user would run rr on them (issues 34 and 37;
# figures in docs/benchmarks.md, "A user's own engines on the H200"):
#
#   source .whl/prelude.sh; bash benchmarks/own_engine/run.sh [nvcc] [triton]
#
# nvcc:   the three-kernel engine of this directory (main.cu, kernels_a.cu, kernels_b.cu: the
#         runtime API, two device modules, struct parameters, kernel names with underscores) built
#         with its PTX embedded; captured by rr capture; every captured launch replayed on cuda and
#         on the cpu backend against its after/; the workflow with only corpus.source and
#         corpus.launches set (every layer, phase and recipe, timed); then rr inject: each kernel's
#         isolate composition of all its phases and f32acc of the first, captured in the program
#         (rr capture --inject) and compared with the plain capture, and timed in the program.
# triton: triton_program.py (PyTorch + Triton 3.6, DISABLE_MMA_V3=1: mma.sync on sm_90a), the
#         same steps with Triton's cache directory as the corpus; the changed replacement is f32acc
#         of the program's f16-accumulating GEMM (gemm_f16acc), the one kernel it applies to.
# A smaller capture of each (and the engine binary) goes to $OUT, for the cpu side of issue 34.
set -u
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
W=${W:-/tmp/own_engine}
DEST=${OUT:-$W/out}
CORES=${CORES:-16}
mkdir -p "$W" "$DEST"
rr() { python3 -P -m rr "$@"; }
step() { echo; echo "== $(date +%T) $*"; }

replay_all() {  # every launch of capture $1 on cuda and on the cpu backend, compared with its after/;
  # $2, where the capture holds cubins (Triton loads SASS): the corpus whose PTX the cpu backend runs
  local cap=$1 n=0 bad=0
  for l in "$cap"/launches/*/; do
    for backend in cuda cpu; do
      rm -rf "$W/replay"
      if rr run "$l" --backend $backend ${2:+--module "$2"} -o "$W/replay" > /dev/null \
        && rr compare "$l/after" "$W/replay" > "$W/cmp.txt"; then
        n=$((n + 1))
      else
        bad=$((bad + 1)); echo "  $(basename "$l") on $backend: differs or failed"; tail -3 "$W/cmp.txt"
      fi
    done
  done
  echo "  replayed byte-identical to after/: $n, not: $bad"
}

sweep() {  # the workflow on corpus $2 with launches $3, in a fresh copy $1
  local work=$1
  rm -rf "$work"; mkdir -p "$work"
  cp -r "$ROOT/Snakefile" "$ROOT/workflow" "$ROOT/config" "$ROOT/profiles" "$work"/
  printf 'corpus:\n  source: %s\n  launches: %s\n' "$2" "$3" > "$work/own.yaml"
  local t0=$(date +%s.%N)
  (cd "$work" && python3 -m snakemake --cores "$CORES" --configfile own.yaml > snake.log 2>&1)
  local rc=$?
  echo "  snakemake exit $rc in $(python3 -c "print(round($(date +%s.%N) - $t0, 1))") s; $(grep -o '[0-9]* of [0-9]* steps (100%) done' "$work/snake.log" | tail -1)"
  [ $rc = 0 ] || tail -30 "$work/snake.log"
  python3 "$HERE/rows.py" "$work"
}

inject_checks() {  # $1 plain capture, $2 entry, $3 identical replacement, $4 changed replacement, $5 the
  # kernels captured (a regex, as the plain capture was made), then the command
  local plain=$1 entry=$2 same=$3 other=$4 kernels=$5; shift 5
  step "capture with $entry replaced by $(basename "$same") (identical expected)"
  rm -rf "$W/cap_same"; rr capture -o "$W/cap_same" --kernels "$kernels" --inject "$entry=$same" -- "$@" > /dev/null
  rr compare-captures "$plain" "$W/cap_same" | tail -4
  if [ -n "$other" ]; then
    step "capture with $entry replaced by $(basename "$other") (a difference expected)"
    rm -rf "$W/cap_other"; rr capture -o "$W/cap_other" --kernels "$kernels" --inject "$entry=$other" -- "$@" > /dev/null
    rr compare-captures "$plain" "$W/cap_other" | tail -4
  fi
}

phases_of() {  # the phases of descriptor $1, comma-separated (rr splice --phase)
  python3 -c "import json, sys; print(','.join(str(p['phase']) for p in json.load(open(sys.argv[1]))['phases']))" "$1"
}

all_in_place() {  # $1 plain capture, $2 the kernels captured (a regex), then the --module ENTRY=FILE
  # pairs of rr inject, then -- and the command: captured with every replacement at once, compared
  local plain=$1 kernels=$2 injects=()
  shift 2
  while [ "$1" != -- ]; do injects+=(--inject "$2"); shift 2; done
  shift
  step "every kernel's composition in place at once"
  rm -rf "$W/cap_all"
  rr capture -o "$W/cap_all" --kernels "$kernels" "${injects[@]}" -- "$@" > /dev/null
  rr compare-captures "$plain" "$W/cap_all" | tail -4
}

nvcc_part() {
  local E=$W/nvcc
  rm -rf "$E"; mkdir -p "$E"
  step "build the engine (nvcc $(nvcc --version | grep -o 'release [0-9.]*'))"
  nvcc -O3 -std=c++17 -gencode 'arch=compute_90,code=[compute_90,sm_90]' -o "$E/engine" \
    "$HERE/main.cu" "$HERE/kernels_a.cu" "$HERE/kernels_b.cu" || return 1
  "$E/engine" 4096 1 && "$E/engine" 256 1
  step "rr capture (4096 tiles; 256 for the cpu side)"
  rr capture -o "$E/cap" -- "$E/engine" 4096 1 | tail -4 || return 1
  rr capture -o "$E/cap256" -- "$E/engine" 256 1 | tail -2 || return 1
  tar -C "$E" -czf "$DEST/nvcc_engine.tar.gz" cap256 engine && ls -la "$DEST/nvcc_engine.tar.gz"
  step "replay every captured launch (256 tiles) on cuda and cpu"
  replay_all "$E/cap256"
  step "the workflow: corpus.source and corpus.launches alone"
  sweep "$E/wf" "$E/engine" "$E/cap"
  local R=$E/wf/results
  step "compose each kernel's phases by isolate (rr splice --compose)"
  local mods=() k
  for k in swin_qkv_proj_k32 attn_mm_2 out_proj_f16; do
    rr splice "$E/wf/resources/corpus" --entry $k --recipe isolate --phase "$(phases_of "$R/$k/descriptor.json")" \
      -o "$E/$k.isolate.ptx" | tail -1
    mods+=(--module "$k=$E/$k.isolate.ptx")
  done
  rr splice "$E/wf/resources/corpus" --entry swin_qkv_proj_k32 --recipe f32acc --phase 1 -o "$E/qkv.f32acc.ptx" | tail -1
  inject_checks "$E/cap" swin_qkv_proj_k32 "$E/swin_qkv_proj_k32.isolate.ptx" "$E/qkv.f32acc.ptx" . "$E/engine" 4096 1
  all_in_place "$E/cap" . "${mods[@]}" -- "$E/engine" 4096 1
  step "rr inject --time: the compositions in the program, 20 iterations a run, 5 runs each way"
  rr inject "${mods[@]}" --time --repeat 5 -o "$DEST/nvcc_inject_time.json" -- "$E/engine" 4096 20
}

triton_part() {
  local T=$W/triton
  rm -rf "$T"; mkdir -p "$T"
  export TRITON_CACHE_DIR=$T/cache DISABLE_MMA_V3=1
  step "the Triton program ($(python3 -c 'import torch, triton; print("torch", torch.__version__, "triton", triton.__version__)'))"
  python3 "$HERE/triton_program.py" 1 || return 1
  find "$TRITON_CACHE_DIR" -name '*.ptx' | sed 's/^/  /'
  grep -h '^\.target' $(find "$TRITON_CACHE_DIR" -name '*.ptx') | sort | uniq -c
  local prog=(python3 "$HERE/triton_program.py" 1) kernels='^(gemm|gemm_f16acc|window_attention)$'
  step "rr capture of Triton's kernels (scale 4; 1 for the cpu side)"
  rr capture -o "$T/cap" --kernels "$kernels" -- "${prog[@]}" | tail -4 || return 1
  rr capture -o "$T/cap1" --kernels "$kernels" -- "${prog[@]}" 1 | tail -2 || return 1
  mkdir -p "$T/ptx" && find "$TRITON_CACHE_DIR" -name '*.ptx' -exec cp {} "$T/ptx"/ \;
  tar -C "$T" -czf "$DEST/triton_program.tar.gz" cap1 ptx && ls -la "$DEST/triton_program.tar.gz"
  step "the workflow: Triton's cache as corpus.source, the capture as corpus.launches"
  sweep "$T/wf" "$TRITON_CACHE_DIR" "$T/cap"
  step "replay every captured launch (scale 1) on cuda and cpu (the cpu backend runs the corpus's PTX)"
  replay_all "$T/cap1" "$T/wf/resources/corpus"
  local R=$T/wf/results mods=() k
  for k in gemm gemm_f16acc window_attention; do
    [ -f "$R/$k/descriptor.json" ] || continue
    local phases
    phases=$(phases_of "$R/$k/descriptor.json")
    [ -n "$phases" ] || continue
    rr splice "$T/wf/resources/corpus" --entry $k --recipe isolate --phase "$phases" -o "$T/$k.isolate.ptx" | tail -1 \
      && mods+=(--module "$k=$T/$k.isolate.ptx")
  done
  rr splice "$T/wf/resources/corpus" --entry gemm_f16acc --recipe f32acc --phase "$(phases_of "$R/gemm_f16acc/descriptor.json")" \
    -o "$T/gemm_f16acc.f32acc.ptx" | tail -1
  inject_checks "$T/cap" gemm "$T/gemm.isolate.ptx" "" "$kernels" "${prog[@]}"
  inject_checks "$T/cap" gemm_f16acc "$T/gemm_f16acc.isolate.ptx" "$T/gemm_f16acc.f32acc.ptx" "$kernels" "${prog[@]}"
  all_in_place "$T/cap" "$kernels" "${mods[@]}" -- "${prog[@]}"
  step "rr inject --time: the compositions in the Triton program, 20 iterations a run, 5 runs each way"
  rr inject "${mods[@]}" --time --repeat 5 -o "$DEST/triton_inject_time.json" -- python3 "$HERE/triton_program.py" 20
}

nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null
for part in "${@:-nvcc triton}"; do
  for p in $part; do "${p}_part" || echo "!! the $p part stopped (above)"; done
done
