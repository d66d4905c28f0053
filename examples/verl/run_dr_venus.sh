#!/usr/bin/env bash
# DR-Venus IGPO with venus_nb inside verl, on one node. Usage, from the repository root:
#   GPUS=8 VENUS_MODEL=/models/DR-Venus-4B-SFT bash examples/verl/run_dr_venus.sh QA_FILE [hydra overrides...]
#   GPUS=1 VENUS_MODEL=... bash examples/verl/run_dr_venus.sh QA_FILE [...]   one GPU: no sequence or tensor
#     parallelism, parameters and optimizer offloaded to CPU, rollouts of at most 28K response tokens
#   RAY_ADDRESS=auto NNODES=2 GPUS=8 ...   a Ray cluster of 8-GPU nodes (start Ray on every node first)
# DRY_RUN=1 writes the RL parquet, composes the config and runs verl's checks, without Ray or a GPU.
# QA_FILE: see examples/verl/prepare_data.py; the RL parquet goes to $VENUS_RL_DATA (default out/verl/rl).
set -euo pipefail
cd "$(dirname "$0")/../.."
qa=${1:?usage: run_dr_venus.sh QA_FILE [hydra overrides...]}; shift
PY=${PY:-.venv-verl/bin/python}
export VENUS_RL_DATA=${VENUS_RL_DATA:-out/verl/rl} GPUS=${GPUS:-8} NNODES=${NNODES:-1}
export VERL_USE_EXTERNAL_MODULES=venus_nb.verl_trainer
"$PY" examples/verl/prepare_data.py rl "$qa" "$VENUS_RL_DATA"
profile=()
if [ "$GPUS" = 1 ]; then
  profile=(actor_rollout_ref.actor.ulysses_sequence_parallel_size=1 actor_rollout_ref.ref.ulysses_sequence_parallel_size=1
           actor_rollout_ref.rollout.tensor_model_parallel_size=1 actor_rollout_ref.rollout.gpu_memory_utilization=0.5
           actor_rollout_ref.actor.fsdp_config.param_offload=true actor_rollout_ref.actor.fsdp_config.optimizer_offload=true
           actor_rollout_ref.ref.fsdp_config.param_offload=true data.max_response_length=28672)
fi
if [ -n "${DRY_RUN:-}" ]; then  # compose and validate the config as main_ppo would, without Ray
  exec "$PY" - ${profile[@]+"${profile[@]}"} "$@" <<'PYEOF'
import sys
from dataclasses import asdict
from venus_nb.verl_trainer import load_verl_config, reward_config, ig_setup
cfg = load_verl_config('examples/verl/dr_venus_igpo.yaml', sys.argv[1:])
rc = ', '.join(f'{k}={v}' for k, v in asdict(reward_config(cfg.algorithm)).items())
print(f'config ok: {rc}, nnodes={cfg.trainer.nnodes}, gpus={cfg.trainer.n_gpus_per_node}, prompts={cfg.data.train_batch_size}, '
      f'rollouts={cfg.actor_rollout_ref.rollout.n}, sp={cfg.actor_rollout_ref.actor.ulysses_sequence_parallel_size}, '
      f'tp={cfg.actor_rollout_ref.rollout.tensor_model_parallel_size}, response={cfg.data.max_response_length}')
print(f'IG: {ig_setup(cfg)}')
PYEOF
fi
exec "$PY" -m verl.trainer.main_ppo --config-path="$PWD/examples/verl" --config-name=dr_venus_igpo ${profile[@]+"${profile[@]}"} "$@"
