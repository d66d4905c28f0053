#!/usr/bin/env bash
# DR-Venus IGPO with venus_nb inside verl. Usage (from the repository root, on the Ray head node):
#   RAY_ADDRESS=auto NNODES=2 VENUS_MODEL=/models/DR-Venus-4B-SFT bash examples/verl/run_dr_venus.sh QA.jsonl [hydra overrides...]
# DRY_RUN=1 only composes and validates the config (no Ray, no GPU).
# QA.jsonl holds {question, answer[, id]} records; the RL parquet goes to $VENUS_RL_DATA (default out/verl/rl).
set -euo pipefail
cd "$(dirname "$0")/../.."
qa=${1:?usage: run_dr_venus.sh QA.jsonl [hydra overrides...]}; shift
PY=${PY:-.venv-verl/bin/python}
export VENUS_RL_DATA=${VENUS_RL_DATA:-out/verl/rl}
export VERL_USE_EXTERNAL_MODULES=venus_nb.verl
"$PY" - "$qa" "$VENUS_RL_DATA" <<'PYEOF'
import json, sys
from pathlib import Path
from venus_nb.verl import verl_rl_frame
qa = [json.loads(l) for l in Path(sys.argv[1]).read_text().splitlines() if l.strip()]
out = Path(sys.argv[2]); out.mkdir(parents=True, exist_ok=True)
verl_rl_frame(qa).to_parquet(out/'train.parquet')
print(f'{len(qa)} prompts -> {out}/train.parquet')
PYEOF
if [ -n "${DRY_RUN:-}" ]; then  # compose and validate the config as main_ppo would, without Ray
  exec "$PY" - "$@" <<'PYEOF'
import sys
from dataclasses import asdict
from venus_nb.verl import load_verl_config, reward_config
cfg = load_verl_config('examples/verl/dr_venus_igpo.yaml', sys.argv[1:])
rc = ', '.join(f'{k}={v}' for k, v in asdict(reward_config(cfg.algorithm)).items())
print(f'config ok: {rc}, nnodes={cfg.trainer.nnodes}, prompts={cfg.data.train_batch_size}, rollouts={cfg.actor_rollout_ref.rollout.n}')
PYEOF
fi
exec "$PY" -m verl.trainer.main_ppo --config-path="$PWD/examples/verl" --config-name=dr_venus_igpo "$@"
