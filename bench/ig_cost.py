"""IG scoring cost: the KV-cached scorer vs the naive one (re-encode at every boundary) vs one plain forward pass.

Real DR-Venus trajectory (../shared/data), first 12 turns with tool responses cut to 120 characters, IG scored after
every tool turn (>= 10 boundaries, >= 3K tokens), the embedded SmolLM2-135M in float32 on CPU.
The cached scorer prefills once without prefix logits (logits_to_keep=1) and scores all probes in one masked pass;
the naive reference and the plain forward compute all logits, as a straightforward pass does.
Targets (issue 5): naive/cached >= K/2, cached/forward <= 1.3.
Run: .venv/bin/python bench/ig_cost.py
"""
import json, sys, time
from pathlib import Path
import torch
from venus_nb.models import load_policy
from venus_nb.rewards import RewardConfig
from venus_nb.scoring import gt_logps, scored_boundaries
from venus_nb.trajectory import from_record

SRC = Path(__file__).resolve().parents[1].parent/'shared/data/dr-venus/Trajectory-Example/SFT_Trajectories/0000.json'

def timed(f):
    t = time.perf_counter()
    f()
    return time.perf_counter() - t

def main(max_chars=120, max_turns=12):
    if not SRC.exists(): sys.exit(f'skip: {SRC} not found (third-party data lives in ../shared/data)')
    traj = from_record(json.loads(SRC.read_text())).shorten(max_chars, max_turns)
    model, tok = load_policy('smollm2-135m', dtype='float32')
    cfg = RewardConfig(scored='all_tools')
    tokens = traj.tokenize(tok)
    k = len(scored_boundaries(traj, tokens, cfg))
    ids = torch.tensor([tokens.ids])
    gt_logps(model, tok, traj.shorten(max_chars, 2), cfg=cfg)  # warm-up
    with torch.no_grad(): t_fwd = timed(lambda: model(input_ids=ids))
    t_cached = timed(lambda: gt_logps(model, tok, traj, cfg=cfg))
    t_naive = timed(lambda: gt_logps(model, tok, traj, cfg=cfg, method='naive'))
    print(f'{len(tokens.ids):,} tokens, K = {k} scored boundaries (+ baseline), {torch.get_num_threads()} threads')
    print(f'plain forward {t_fwd:.2f}s | cached scorer {t_cached:.2f}s | naive scorer {t_naive:.2f}s')
    print(f'naive/cached = {t_naive / t_cached:.2f}x (target >= K/2 = {k / 2:.1f}) | '
          f'cached/forward = {t_cached / t_fwd:.2f}x (target <= 1.3)')

if __name__ == '__main__': main()
