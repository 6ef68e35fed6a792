# The full sweep on a machine reached by time-limited calls (a lent GPU host whose commands end
# after 10 minutes): the first call copies the repository to $SWEEP (default /tmp/sweep) and starts
# benchmarks/workflow_sweep.py there in its own session, so that it outlives the call; that call
# and every later one wait on it for up to $WAIT seconds, printing every 20 s how many recipes are
# timed, modules compiled and cells collected. When it has ended, its figures (sweep.json, out.txt)
# Snakemake's log and results.tar.gz (the summary and composed tables, the compose stage's records
# and logs) go to $OUT (default: the current directory).
#
#     WAIT=585 bash benchmarks/sweep_detached.sh [ARGS of workflow_sweep.py]   # again, until DONE
set -u
S=${SWEEP:-/tmp/sweep}
DEST=${OUT:-$PWD}
if [ ! -d "$S" ]; then
  mkdir -p "$S" && tar -c --exclude=./.venv --exclude=./results --exclude=./.snakemake . | tar -x -C "$S" \
    && cd "$S" || exit 1
  if [ -f .whl/prelude.sh ]; then source .whl/prelude.sh || exit 1; fi
  nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null; nproc
  date +%s > "$S/start"
  setsid nohup python3 benchmarks/workflow_sweep.py --cores "${CORES:-16}" --json "$S/sweep.json" \
    --log "$S/snake.log" "$@" > "$S/out.txt" 2>&1 &
  echo $! > "$S/pid"
  echo "started pid $(cat "$S/pid")"
fi
cd "$S" || exit 1
end=$(( $(date +%s) + ${WAIT:-560} ))
running() { kill -0 "$(cat "$S/pid")" 2>/dev/null; }
count() { ls $1 2>/dev/null | wc -l; }
while running && [ "$(date +%s)" -lt $end ]; do
  sleep 20
  echo "$(( $(date +%s) - $(cat "$S/start") )) s: $(count 'results/*/phase*/*.timing.json') recipes timed," \
       "$(count 'results/*/phase*/*.cubin') modules compiled, $(count 'results/*_phase*.parquet') cells collected"
done
if running; then
  echo "STILL RUNNING"
else
  echo DONE; cat "$S/out.txt"
  cp "$S/sweep.json" "$S/out.txt" "$DEST"/ 2>/dev/null; gzip -c "$S/snake.log" > "$DEST/snake.log.gz"
  # the tables and, for a composition, its records and page (not the cells' own files: thousands)
  tar -czf "$DEST/results.tar.gz" $(cd "$S" && ls -d results/summary.parquet results/composed.parquet results/compose \
    logs/compose 2>/dev/null) 2>/dev/null
fi
