#!/usr/bin/env bash
# The confirmatory run (examples/experiment/confirm) from a worktree pinned at one commit, outside the repository, so
# that later changes cannot touch it. Resumable: on a fresh machine it starts from the stops already committed in
# examples/experiment/confirm (copied into the run folder), and after every stop it copies the folder's tables back
# there to be committed. Usage: COMMIT=<sha> examples/experiment/confirm/run.sh (WT=, OUT=, KV_GIB= to move or
# size it). The run folder's COMMIT file names the commit it runs from, copied here beside the tables. A warm start
# made on another kind of CPU differs in its last bits, and a seed's stops must all begin from one set of weights:
# each machine runs the seeds whose start it makes, and a seed begun elsewhere waits for such a machine. The run keeps
# its own cache (CACHE=, default $OUT/cache-<kernels>): a warm start made there by the pinned code, never one that later
# code made under the same cache key with other rounding, and one cache per kernel fingerprint
# (`venus_nb.models.kernel_fingerprint`), so that a disk moved to another kind of machine hands no seed weights made
# on the first. PART=seed3 runs the amendment instead (seed3/README.md): seed 3 of IGPO and the visit-bonus control, in
# its own folder, from the warm start seeds 1 and 2 began from, taken from the run's cache.
set -euo pipefail
MAIN=$(git -C "$(dirname "$0")" rev-parse --show-toplevel); WT=${WT:-/work/confirm}; RUN=${RUN:-/work/runs/confirm}
PART=${PART:-}; PUB=$MAIN/examples/experiment/confirm${PART:+/$PART}; OUT=${OUT:-$RUN${PART:+_$PART}}
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
KERNELS=$(.venv/bin/python -c "import sys; sys.path.insert(0, '$MAIN')
from venus_nb.models import kernel_fingerprint; print(kernel_fingerprint())")
export VLLM_CPU_KVCACHE_SPACE=${KV_GIB:-4} PUB OUT PART VENUS_NB_CACHE=${CACHE:-$RUN/cache-$KERNELS}
exec .venv/bin/python - <<'PY'
import os, sys, shutil, datetime
from pathlib import Path
import pandas as pd
import venus_nb.experiment as X
from venus_nb.cli import quiet_libraries
from venus_nb.checkpoints import weights_sha256
from venus_nb.experiment import experiment, ExperimentConfig, warm_start_point
out, pub = Path(os.environ['OUT']), Path(os.environ['PUB'])
FILES = ('registration.json', 'config.json', 'evals.csv', 'test.csv', 'runs.csv', 'steps.csv', 'summary.json',
         'summary.csv', 'report.html')
SEEDS_1_2 = '49a70f3a536a2d2ffb618d3ecc24fdc6af7821abd7673253f4d74dc034ad63bd'   # the warm start seeds 1 and 2 began from
def say(line):
    print(datetime.datetime.now().strftime('%H:%M:%S'), line, flush=True)
    pub.mkdir(parents=True, exist_ok=True)
    for f in FILES:
        if (out/f).exists(): shutil.copy2(out/f, pub/f)
    (pub/'COMMIT').write_text((out/'COMMIT').read_text())
if os.environ['PART'] == 'seed3':
    # the amendment (seed3/README.md): seed 3 of IGPO and the control, H3 alone, from the weights seeds 1 and 2 began from
    h3 = [dict(h, primary=True) for h in X.CONFIRM_HYPOTHESES if h['name'] == 'H3']
    cfg = ExperimentConfig.confirm(arms=(X.TREATMENT, X.VISIT_BONUS), seeds=(3,), hypotheses=h3, output_dir=str(out))
    with quiet_libraries():
        start = warm_start_point(cfg.warm, cfg.eval_questions, cfg.test_questions)
    if (sha := weights_sha256(start.folder)) != SEEDS_1_2:
        say(f'this machine makes a warm start of SHA-256 {sha[:16]}…, not the {SEEDS_1_2[:16]}… seeds 1 and 2 began '
            'from (made by a 2-core Intel Xeon with AMX units): seed 3 runs only from those weights'); sys.exit(1)
    with quiet_libraries():
        experiment(cfg, start=start, say=say, with_start=False, prune=True)
    say('the amendment has ended'); sys.exit(0)
cfg = ExperimentConfig.confirm(output_dir=str(out))
with quiet_libraries():
    start = warm_start_point(cfg.warm, cfg.eval_questions, cfg.test_questions)
# A seed's stops all begin from one set of weights, and a warm start made on another kind of CPU differs in its last
# bits. This machine runs the seeds whose start it makes (those it has begun first) and the seeds not begun; a seed
# begun from other weights waits for a machine that makes them. Only the order of the stops changes: each stop is the
# pinned library's. (`experiment` does this itself since, with `seeds_here`; the pinned library predates it.)
sha, runs = weights_sha256(start.folder), pd.read_csv(out/'runs.csv') if (out/'runs.csv').exists() else None
began = {s: d for s, d in runs.groupby('seed')} if runs is not None else {}
waiting = [s for s, d in began.items() if set(d.start_sha256.dropna()) - {sha}]
for s in waiting:
    d = began[s]
    say(f'seed {s} waits for a machine that makes the weights it began from (SHA-256 {d.start_sha256.iloc[0][:16]}…, '
        f'made on {d.machine.iloc[0]}); this one makes {sha[:16]}…')
order = sorted((s for s in cfg.seeds if s not in waiting), key=lambda s: (s not in began, s))
stops = X._runs
X._runs = lambda c: sorted((r for r in stops(c) if r[1] in order), key=lambda r: order.index(r[1]))
with quiet_libraries():
    experiment(cfg, start=start, say=say, prune=True)
say(f'the confirmatory run has ended on this machine; seeds waiting: {waiting or "none"}')
PY
