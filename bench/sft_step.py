"""What each measure saves in a warm-start SFT step: logits only where a trained token is predicted; fused AdamW.

`sft`'s transformers path names the positions whose logits predict a trained (assistant) token and computes the
vocabulary projection and the cross-entropy there alone (`sft.trained_token_loss`), and steps AdamW fused into one
kernel. Three ways train the warm start's SFT (the embedded SmolLM2-135M, full fine-tune, the warm world's expert
trajectories, one per step) for `--steps` steps from the same weights: `before` (the trainer as transformers builds
it: its own loss over every position's logits, PyTorch's per-tensor AdamW), `trained tokens` (the loss, per-tensor
AdamW) and `sft` as it is (both). Each runs in bf16 autocast over float32 weights where the CPU has bf16 units (the
demo's warm start) and in float32 (the experiment's). The repeats alternate the ways; figures are the trainer's own
seconds (no loading), median and min-max over repeats, each way's speed-up over `before` in the same repeat, the
trained share of the tokens and the CPU model. The losses of the ways agree to float rounding (printed: the largest
relative gap to `before`).
Run: .venv/bin/python bench/sft_step.py [--steps 8] [--repeats 3] [--dtypes bf16,float32]
"""
import argparse, statistics, sys, tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
import venus_nb.sft as S   # noqa: E402
from venus_nb.models import cpu_name, fast_bf16   # noqa: E402
from venus_nb.warm_start import WarmConfig, warm_world, _sft_config   # noqa: E402

def trainer(every_logit:bool, optim:str):
    "A maker of the trainer `sft` builds, with every position's logits and transformers' loss, and/or another AdamW"
    def make(policy, examples, cfg, log):
        from transformers import Trainer, TrainingArguments
        from datasets import Dataset
        loss = {} if every_logit else dict(compute_loss_func=S.trained_token_loss)
        args = TrainingArguments(**S._args_dict(cfg) | dict(optim=optim))
        return Trainer(model=S.with_lora(policy.model, cfg), args=args,
                       train_dataset=Dataset.from_list(examples), callbacks=[log], **loss,
                       data_collator=S._pad_collate(policy.tokenizer.pad_token_id, keep_logits=not every_logit))
    return make

WAYS = {'before': trainer(True, 'adamw_torch'), 'trained tokens': trainer(False, 'adamw_torch'),
        'sft (+ fused AdamW)': S._transformers_trainer}

def train_once(way:str, warm:WarmConfig, train:list, steps:int)->tuple[float, list, float]:
    "The trainer's seconds, its losses and the trained share of the tokens, for one way"
    S._transformers_trainer = WAYS[way]
    with tempfile.TemporaryDirectory() as d:
        cfg = _sft_config(warm, Path(d))
        cfg.max_steps = steps
        res = S.sft(train, cfg, live=False)
    rep = res.data.report
    return res.train_seconds, list(res.log.loss), float(rep.trained.sum() / rep.kept_tokens.sum())

def spread(xs:list, f:str='.1f')->str: return f'{statistics.median(xs):{f}} ({min(xs):{f}}-{max(xs):{f}})'

def main():
    p = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    p.add_argument('--steps', type=int, default=8)
    p.add_argument('--repeats', type=int, default=3)
    p.add_argument('--dtypes', default='bf16,float32' if fast_bf16() else 'float32')
    a = p.parse_args()
    print(f'CPU: {cpu_name()}; {a.steps} warm-start SFT steps a run, {a.repeats} repeats')
    for dtype in a.dtypes.split(','):
        warm = WarmConfig(bf16=dtype == 'bf16')
        train = warm_world(warm).train
        secs, losses = {w: [] for w in WAYS}, {}
        for _ in range(a.repeats):
            for w in WAYS:
                s, losses[w], share = train_once(w, warm, train, a.steps)
                secs[w].append(s)
        print(f'\n{dtype}: trained tokens {share:.0%} of all; seconds, median (min-max), and speed-up over before')
        for w, v in secs.items():
            gap = max(abs(x - y) / abs(y) for x, y in zip(losses[w], losses['before']))
            up = [b / s for b, s in zip(secs['before'], v)]
            print(f'   {w:<22} {spread(v)} s   {spread(up, ".2f")}x   losses {gap:.1e} apart')

if __name__ == '__main__': main()
