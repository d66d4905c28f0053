"""SFT throughput: trained (assistant) tokens per second, Unsloth vs transformers + PEFT, same data, same run.

Both backends train LoRA (r=16) on the same generated-world examples for the same number of steps, each in its own
subprocess (Unsloth patches transformers when imported, so it must not share a process with the plain run).
Default model: the embedded SmolLM2-135M; pass a model name or folder as the first argument.
Run: .venv/bin/python bench/sft_throughput.py [MODEL] [STEPS]
"""
import json, subprocess, sys, tempfile, textwrap

CHILD = textwrap.dedent('''
    import sys, json, time
    backend, model, steps, out = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
    if backend == 'unsloth': import unsloth
    from venus_nb.synth import generate, SynthConfig
    from venus_nb.data import clean, CleanConfig
    from venus_nb.sft import SFTConfig, sft
    kept, _ = clean(generate(SynthConfig(n=16, seed=11, lengths=((4, 10, 1.0),))).trajectories(),
                    CleanConfig(system_prompt='You are a deep research assistant.'))
    cfg = SFTConfig(model=model, output_dir=out, backend=backend, lr=1e-4, max_steps=steps, grad_accum=1, batch_size=2,
                    lora_r=16, save_steps=10**6, max_length=1024)
    res = sft(kept, cfg, live=False); secs = res.train_seconds
    per_step = res.data.report.trained.sum() / len(res.data.examples) * cfg.batch_size
    loss = [res.log.loss.iloc[0], res.log.loss.iloc[-1]]
    print('RESULT', json.dumps(dict(secs=secs, trained_tokens=float(per_step * steps), loss=loss)))
''')

def run(backend, model, steps):
    with tempfile.TemporaryDirectory() as d:
        out = subprocess.run([sys.executable, '-c', CHILD, backend, model, str(steps), d],
                             capture_output=True, text=True)
    line = next((l for l in out.stdout.splitlines() if l.startswith('RESULT ')), None)
    if not line: sys.exit(f'{backend} failed:\\n{out.stdout[-2000:]}{out.stderr[-2000:]}')
    return json.loads(line[7:])

def main():
    model = sys.argv[1] if len(sys.argv) > 1 else 'smollm2-135m'
    steps = int(sys.argv[2]) if len(sys.argv) > 2 else 4
    r = {b: run(b, model, steps) for b in ('transformers', 'unsloth')}
    for b, x in r.items():
        print(f'{b:12s}: {steps} steps in {x["secs"]:.1f}s (training only), '
              f'{x["trained_tokens"] / x["secs"]:,.0f} trained tokens/s, loss {x["loss"][0]:.3f} -> {x["loss"][1]:.3f}')
    ratio = ((r['unsloth']['trained_tokens'] / r['unsloth']['secs'])
             / (r['transformers']['trained_tokens'] / r['transformers']['secs']))
    print(f'unsloth / transformers+PEFT throughput = {ratio:.2f}x ({model})')

if __name__ == '__main__': main()
