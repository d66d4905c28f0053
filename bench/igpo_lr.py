"""Calibrate the LoRA learning rate of stage 2 against full fine-tuning at the official lr.

DR-Venus fine-tunes every weight at a constant lr of 1e-6 (AdamW). A LoRA adapter at the same lr moves the policy far
less per step, so its lr has to be larger; this script measures by how much. On the embedded model in float32 and one
fixed batch (two expert trajectories of a generated world, with fixed synthetic per-turn advantages), it runs ONE
`policy_update` step

* with every weight trained at the official lr (`--full-lr`, default 1e-6), the baseline, and
* with a fresh LoRA adapter (r=16, alpha=32, all linear layers) at each lr of a grid,

each from the same starting weights, and measures how far the policy moved over the trained tokens:
`mean |Δ log π|` of the rollout's own tokens and the mean KL(π_before ‖ π_after) over the whole vocabulary. The LoRA
lr whose `mean |Δ log π|` equals full fine-tuning's is read off the grid (log-log interpolation between neighbours)
and printed per seed, with the ratio LoRA lr / full lr; each seed draws its own batch, advantages and adapter init.

The KL coefficient is 0 here: on a first step the reference equals the policy, so the k3 KL term has no gradient and
the update is the same with or without it (and full fine-tuning needs no reference copy).

    .venv/bin/python bench/igpo_lr.py                 # 3 seeds
    .venv/bin/python bench/igpo_lr.py --seeds 0 1 2 3 4 --grid 1e-6 1e-5 1e-4 1e-3
"""
import argparse, copy, json, math, random, statistics, time
from dataclasses import replace
from pathlib import Path
import torch
from venus_nb.igpo import IGPOConfig, rl_policy, make_optimizer, pieces, policy_update
from venus_nb.scoring import token_logps
from venus_nb.models import Policy, load_policy
from venus_nb.synth import SynthConfig, generate
from venus_nb.trajectory import from_record

def batch(tok, seed:int, n:int=2, turns:tuple=(3, 4), shorten:int=300):
    "n expert trajectories of a generated world (observations cut to `shorten` chars) with N(0, 1) per-turn advantages"
    data = generate(SynthConfig(n=n, seed=seed, lengths=((*turns, 1.0),)))
    trajs = [from_record(r).shorten(shorten) for r in data.records]
    for t in trajs: t.tokens = t.tokenize(tok)
    rng = random.Random(seed)
    return pieces(trajs, [[rng.gauss(0, 1) for _ in t.turns] for t in trajs])

@torch.no_grad()
def logits_of(model, ps):
    "log-softmax over the vocabulary at every trained position, and the log-prob of the rollout's own token there"
    model.eval()
    out = []
    for p in ps:
        x = torch.tensor([p.ids])
        lsm = torch.log_softmax(model(input_ids=x).logits[0, :-1].float(), -1)
        m = p.mask[1:].bool()
        out.append((lsm[m], lsm.gather(-1, x[0, 1:, None])[:, 0][m]))
    return out

def change(before, after):
    "mean |Δ log π| over the trained tokens, and the mean full-vocabulary KL(before ‖ after) per trained token"
    dlp = torch.cat([(a[1] - b[1]).abs() for b, a in zip(before, after)])
    kl = torch.cat([(b[0].exp() * (b[0] - a[0])).sum(-1) for b, a in zip(before, after)])
    return float(dlp.mean()), float(kl.mean())

def one_step(base, tok, ps, cfg, before):
    "A fresh RL policy from a copy of `base`, one update, and how far it moved"
    pol = rl_policy(Policy(copy.deepcopy(base), tok, 'bench', 'transformers'), cfg)
    policy_update(pol.model, make_optimizer(pol.model, cfg), ps, cfg, random.Random(0))
    return change(before, logits_of(pol.model, ps))

def match(grid, dlps, target):
    "The lr at which `dlps` (rising with lr) reaches `target`, by log-log interpolation between grid neighbours"
    for (l0, d0), (l1, d1) in zip(zip(grid, dlps), zip(grid[1:], dlps[1:])):
        if d0 <= target <= d1:
            w = (math.log(target) - math.log(d0)) / (math.log(d1) - math.log(d0))
            return math.exp(math.log(l0) + w * (math.log(l1) - math.log(l0)))
    return float('nan')

def spread(xs): return f'{statistics.mean(xs):.3g} ± {statistics.stdev(xs):.2g} (min {min(xs):.3g}, max {max(xs):.3g})'

def main(seeds, grid, full_lr, model, out):
    base, tok = load_policy(model, 'transformers', dtype='float32')
    base.requires_grad_(False)
    cfg = IGPOConfig(kl_coef=0.0, dtype='float32', seed=0)
    rows, t0 = [], time.time()
    for seed in seeds:
        ps = batch(tok, seed)
        torch.manual_seed(seed)
        before = logits_of(base, ps)
        full = one_step(base, tok, ps, replace(cfg, lora_r=None, lr=full_lr), before)
        lora = [one_step(base, tok, ps, replace(cfg, lr=lr, seed=seed), before) for lr in grid]
        lr_dlp, lr_kl = match(grid, [d for d, _ in lora], full[0]), match(grid, [k for _, k in lora], full[1])
        rows.append(dict(seed=seed, tokens=int(sum(p.mask.sum() for p in ps)), full=full, lora=lora,
                         lr_dlp=lr_dlp, lr_kl=lr_kl))
        print(f'seed {seed}: {rows[-1]["tokens"]} trained tokens; '
              f'full FT lr {full_lr:g}: mean|Δlogπ| {full[0]:.3g}, KL {full[1]:.3g}  '
              f'({time.time() - t0:.0f}s)', flush=True)
        for lr, (d, k) in zip(grid, lora): print(f'   LoRA lr {lr:<8g} mean|Δlogπ| {d:.3g} ({d / full[0]:.3g}x full)   '
                                                 f'KL {k:.3g} ({k / full[1]:.3g}x full)')
        print(f'   LoRA lr matching full FT: {lr_dlp:.3g} by mean|Δlogπ| (ratio {lr_dlp / full_lr:.3g}), '
              f'{lr_kl:.3g} by KL (ratio {lr_kl / full_lr:.3g})')
    print(f'\nover {len(seeds)} seeds (mean ± std):')
    print(f'  full FT at lr {full_lr:g}: mean|Δlogπ| {spread([r["full"][0] for r in rows])}, '
          f'KL {spread([r["full"][1] for r in rows])}')
    for i, lr in enumerate(grid):
        print(f'  LoRA lr {lr:<8g}: mean|Δlogπ| ratio to full '
              f'{spread([r["lora"][i][0] / r["full"][0] for r in rows])}, '
              f'KL ratio {spread([r["lora"][i][1] / r["full"][1] for r in rows])}')
    print(f'  matching LoRA lr by mean|Δlogπ|: {spread([r["lr_dlp"] for r in rows])}, '
          f'ratio to full lr {spread([r["lr_dlp"] / full_lr for r in rows])}')
    print(f'  matching LoRA lr by KL:          {spread([r["lr_kl"] for r in rows])}, '
          f'ratio to full lr {spread([r["lr_kl"] / full_lr for r in rows])}')
    if out: Path(out).write_text(json.dumps(dict(model=model, full_lr=full_lr, grid=grid, rows=rows), indent=1))

if __name__ == '__main__':
    ap = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    ap.add_argument('--seeds', type=int, nargs='+', default=[0, 1, 2])
    ap.add_argument('--grid', type=float, nargs='+', default=[1e-5, 3e-5, 1e-4, 3e-4, 1e-3])
    ap.add_argument('--full-lr', type=float, default=1e-6)
    ap.add_argument('--model', default='smollm2-135m')
    ap.add_argument('--out', default=None, help='also write the numbers as JSON here')
    a = ap.parse_args()
    main(a.seeds, sorted(a.grid), a.full_lr, a.model, a.out)
