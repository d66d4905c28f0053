#!/usr/bin/env bash
# The confirmatory run (examples/experiment/confirm) from a worktree pinned at one commit, outside the repository, so
# that later changes cannot touch it. Resumable: on a fresh machine it starts from the stops already committed in
# examples/experiment/confirm (copied into the run folder), and after every stop it copies the folder's tables back
# there to be committed. Usage: COMMIT=<sha> examples/experiment/confirm/run.sh (WT=, OUT=, KV_GIB= to move or
# size it). The run folder's COMMIT file names the commit it runs from, copied here beside the tables.
set -euo pipefail
MAIN=$(git -C "$(dirname "$0")" rev-parse --show-toplevel); WT=${WT:-/work/confirm}; OUT=${OUT:-/work/runs/confirm}
PUB=$MAIN/examples/experiment/confirm
COMMIT=$(git -C $MAIN rev-parse "${COMMIT:?name the commit to run from}")
[ -d $WT ] || git -C $MAIN worktree add --detach $WT $COMMIT
[ "$(git -C $WT rev-parse HEAD)" = "$COMMIT" ] || { echo "$WT is not at $COMMIT"; exit 1; }
mkdir -p $OUT
if [ -f $OUT/COMMIT ] && [ "$(cat $OUT/COMMIT)" != "$COMMIT" ]; then
  echo "$OUT ran from $(cat $OUT/COMMIT), not $COMMIT: refusing to mix two versions of the code in one run"; exit 1
fi
echo $COMMIT > $OUT/COMMIT
# a fresh machine: the registration and the stops committed so far
for f in registration.json config.json evals.csv test.csv runs.csv steps.csv; do
  [ -f $OUT/$f ] || [ ! -f $PUB/$f ] || cp $PUB/$f $OUT/$f
done
cd $WT && make env > $OUT/make_env.log 2>&1
export VLLM_CPU_KVCACHE_SPACE=${KV_GIB:-4} PUB OUT
exec .venv/bin/python - <<'PY'
import os, shutil, datetime
from pathlib import Path
from venus_nb.cli import quiet_libraries
from venus_nb.experiment import experiment, ExperimentConfig
out, pub = Path(os.environ['OUT']), Path(os.environ['PUB'])
FILES = ('registration.json', 'config.json', 'evals.csv', 'test.csv', 'runs.csv', 'steps.csv', 'summary.json',
         'summary.csv', 'report.html')
def say(line):
    print(datetime.datetime.now().strftime('%H:%M:%S'), line, flush=True)
    pub.mkdir(parents=True, exist_ok=True)
    for f in FILES:
        if (out/f).exists(): shutil.copy2(out/f, pub/f)
    (pub/'COMMIT').write_text((out/'COMMIT').read_text())
with quiet_libraries():
    experiment(ExperimentConfig.confirm(output_dir=str(out)), say=say, prune=True)
say('the confirmatory run has ended')
PY
