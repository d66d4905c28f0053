"""One IGPO step, phase by phase, against its floor; and what keeping the KV cache across turns saves in the rollouts.

The policy is the warm start when it is cached (`venus_nb.warm_start`, default recipe), else the embedded SmolLM2-135M,
in float32 on CPU with a fresh LoRA adapter (r=16); the questions and corpus are the warm world's RL split. Each
repeat runs one `igpo_step` on the same fixed batch (`--questions` x G rollouts, sampled at T = 1) and reads its
phases from the metrics row: rollout (`rollout_s`), IG scoring and advantages (`score_s`), π_old/π_ref log-probs
(`ref_s`) and the update (`update_s`).

The step's floor is what the same work costs with nothing around it: one `generate` call on the same batch (each
rollout's first prompt) producing the step's generated tokens (min = max new tokens = their mean per rollout), plus
one forward and backward over the step's final sequences (the faster of one padded batch and one sequence at a
time; the loss a sum of trained-token log-probs, the LM head run only where a trained token is predicted, as the
step's own log-probs are). The ratio step/floor is printed with the excess of each phase over its share of the floor
(rollout over the generate call, update over the forward-backward; IG scoring and π_ref are all excess).

The shared-prompt figure: the update alone on the step's rollouts (their advantages, π_ref filled in; a learning rate
of 0, so the weights stay), with the prompt the G rollouts share run once (`share_prompt=True`, the default) and with
every rollout run whole; both are timed in each repeat, alternating, and their ratio printed with the tokens each ran.

The KV cache figure: the rollout phase alone, greedy (T = 0), on the same questions, with `HFEngine(cache_turns=False)`
(every turn re-prefills its whole context) and with the cache kept across turns; the token ids must be the same.
Every figure is measured in each repeat, interleaved so that other jobs' load hits all alike; the summary gives the
median and the min-max over repeats, and the load average (a shared machine moves these numbers a lot).
Run: .venv/bin/python bench/igpo_step.py [--questions 1] [--G 4] [--max-turns 4] [--max-new-tokens 32] [--repeats 3]
     [--threads N] [--model NAME]
"""
import argparse, math, os, random, statistics, tempfile, time
from dataclasses import replace
import torch

def policy_and_world(model):
    "The warm start (if cached) or `model`, and the warm world's RL questions and corpus"
    from venus_nb.warm_start import WarmConfig, warm_dir, warm_world
    from venus_nb.models import load_policy
    wc = WarmConfig()
    d = warm_dir(wc)
    cached = model is None and (d/'model').is_dir() and (d/'report.json').exists()
    name = str(d/'model') if cached else (model or 'smollm2-135m')
    world = warm_world(wc)
    return load_policy(name, 'transformers', dtype='float32'), 'warm start' if cached else name, world.rl, world.corpus

def timed(f):
    t = time.perf_counter()
    out = f()
    return time.perf_counter() - t, out

def floor_generate(model, tok, trajs, cfg):
    "One `generate` call: every rollout's first prompt, the step's generated tokens spread evenly over the rows"
    from venus_nb.rollout import _left_pad, _sampling_kw
    prompts = [t.tokens.ids[:t.tokens.assistant_spans[0][0]] if t.tokens.assistant_spans else t.tokens.ids
               for t in trajs]
    n = max(1, math.ceil(sum(t.meta['gen_tokens'] for t in trajs) / len(trajs)))
    ids, att = _left_pad(prompts, tok.pad_token_id)
    with torch.no_grad():
        model.generate(input_ids=ids, attention_mask=att, min_new_tokens=n, max_new_tokens=n,
                       pad_token_id=tok.pad_token_id, **_sampling_kw(cfg.rollout))
    return n * len(trajs)

def floor_forward_backward(model, trajs):
    "One forward+backward over the step's final sequences, the faster of one padded batch and one sequence at a time"
    return min(timed(lambda: padded_forward_backward(model, trajs)), timed(lambda: each_forward_backward(model, trajs)))

def each_forward_backward(model, trajs):
    "Forward and backward one sequence at a time (no padding), the LM head only where a trained token is predicted"
    model.train()
    for t in trajs:
        ids, mask = torch.tensor([t.tokens.ids]), torch.tensor(t.tokens.loss_mask, dtype=torch.float32)
        at = mask.nonzero()[:, 0]
        logits = model(input_ids=ids, logits_to_keep=at - 1).logits[0].float()
        (-torch.log_softmax(logits, -1).gather(-1, ids[0, at, None]).sum()).backward()
    model.zero_grad(set_to_none=True)
    return sum(len(t.tokens.ids) for t in trajs)

def padded_forward_backward(model, trajs):
    """One right-padded batch; the gradients are dropped.
    The LM head runs only at the positions that predict a trained token in some row (the least a token loss needs)."""
    L = max(len(t.tokens.ids) for t in trajs)
    ids = torch.tensor([t.tokens.ids + [0] * (L - len(t.tokens.ids)) for t in trajs])
    att = torch.tensor([[1] * len(t.tokens.ids) + [0] * (L - len(t.tokens.ids)) for t in trajs])
    mask = torch.tensor([t.tokens.loss_mask + [0] * (L - len(t.tokens.ids)) for t in trajs], dtype=torch.float32)
    at = mask.amax(0).nonzero()[:, 0]
    model.train()
    logits = model(input_ids=ids, attention_mask=att, logits_to_keep=at - 1).logits.float()
    lp = torch.log_softmax(logits, -1).gather(-1, ids[:, at, None])[..., 0]
    (-(lp * mask[:, at]).sum() / mask.sum()).backward()
    model.zero_grad(set_to_none=True)
    return int(att.sum())

def greedy_rollouts(pol, qs, corpus, cfg, cache_turns):
    "The rollout phase alone, greedy, with or without the kept cache"
    from venus_nb.rollout import HFEngine, rollout
    engine = HFEngine(pol.model, pol.tokenizer, cfg.rollout.batch_size, cache_turns=cache_turns)
    secs, trajs = timed(lambda: rollout(engine, qs, corpus, replace(cfg.rollout, temperature=0)))
    return secs, [t.tokens.ids for t in trajs], engine.tokens

def update_tokens(ps, share:bool)->int:
    "Tokens the update runs through the model: every rollout whole, or each shared prompt (but its last token) once"
    from venus_nb.scoring import prompt_groups
    whole = sum(len(p.ids) for p in ps)
    if not share: return whole
    return whole - sum((len(idx) - 1) * (len(pr) - 1) for pr, idx in prompt_groups(ps).items()
                       if len(idx) > 1 and len(pr) > 1)

def shared_vs_whole(model, scored, cfg):
    "The update on the step's rollouts with the shared prompt run once, and with every rollout whole (seconds each)"
    from venus_nb.igpo import advantages_of, pieces, fill_old_and_ref, policy_update
    ps = pieces(scored.trajs, advantages_of(scored)[0])
    fill_old_and_ref(model, ps, cfg)
    sgd = torch.optim.SGD([q for q in model.parameters() if q.requires_grad], lr=0.0)
    run = lambda share: timed(lambda: policy_update(model, sgd, ps, replace(cfg, share_prompt=share),
                                                    random.Random(0)))[0]
    whole, shared = run(False), run(True)
    return dict(upd_whole=whole, upd_shared=shared, tok_whole=update_tokens(ps, False),
                tok_shared=update_tokens(ps, True))

def one_repeat(pol, opt, qs, corpus, cfg, k):
    from venus_nb.igpo import igpo_step
    from venus_nb.rollout import HFEngine
    engine = HFEngine(pol.model, pol.tokenizer, cfg.rollout.batch_size)
    # progress on a slow machine
    say = lambda *a: print(f'   repeat {k}:', *a, f'(load average {os.getloadavg()[0]:.1f})', flush=True)
    secs, (row, scored) = timed(lambda: igpo_step(pol, opt, engine, qs, corpus, cfg, k, random.Random(k)))
    say(f'step {secs:.1f}s')
    f_gen, gen_tokens = timed(lambda: floor_generate(pol.model, pol.tokenizer, scored.trajs, cfg))
    say(f'floor generate {f_gen:.1f}s')
    f_fb, fb_tokens = floor_forward_backward(pol.model, scored.trajs)
    say(f'floor forward/backward {f_fb:.1f}s')
    upd = shared_vs_whole(pol.model, scored, cfg)
    say(f'update: prompt shared {upd["upd_shared"]:.1f}s, every rollout whole {upd["upd_whole"]:.1f}s')
    off, ids_off, _ = greedy_rollouts(pol, qs, corpus, cfg, False)
    say(f'greedy rollout, cache off {off:.1f}s')
    on, ids_on, toks = greedy_rollouts(pol, qs, corpus, cfg, True)
    say(f'greedy rollout, cache on {on:.1f}s')
    r = dict(step=secs, rollout=row['rollout_s'], score=row['score_s'], ref=row['ref_s'], update=row['update_s'],
             floor_gen=f_gen, floor_fb=f_fb, kv_off=off, kv_on=on, same_ids=ids_off == ids_on,
             gen_tokens=sum(t.meta['gen_tokens'] for t in scored.trajs), floor_gen_tokens=gen_tokens, tokens=fb_tokens,
             turns=sum(len(t.turns) for t in scored.trajs), reused=toks['reused'], prompt=toks['prompt'], **upd)
    r['floor'] = f_gen + f_fb
    r['ratio'] = r['step'] / r['floor']
    r['kv_speedup'] = off / on
    r['share_speedup'] = r['upd_whole'] / r['upd_shared']
    return r

def show(r, k):
    print(f'repeat {k}: step {r["step"]:.1f}s = rollout {r["rollout"]:.1f} + IG scoring {r["score"]:.1f} '
          f'+ ref/old log-probs {r["ref"]:.1f} + update {r["update"]:.1f} '
          f'(+ {r["step"] - r["rollout"] - r["score"] - r["ref"] - r["update"]:.1f} other) | '
          f'floor {r["floor"]:.1f}s = generate {r["floor_gen"]:.1f} ({r["floor_gen_tokens"]} tokens) '
          f'+ fwd/bwd {r["floor_fb"]:.1f} ({r["tokens"]} tokens) | step/floor {r["ratio"]:.2f}x', flush=True)
    print(f'   {r["turns"]} turns, {r["gen_tokens"]} generated tokens | '
          f'greedy rollout: cache off {r["kv_off"]:.1f}s, on {r["kv_on"]:.1f}s '
          f'({r["kv_speedup"]:.2f}x; {r["reused"]} of {r["prompt"]} prompt tokens from the cache), '
          f'same ids: {r["same_ids"]}', flush=True)
    print(f'   update alone: prompt shared {r["upd_shared"]:.1f}s ({r["tok_shared"]} tokens), every rollout whole '
          f'{r["upd_whole"]:.1f}s ({r["tok_whole"]} tokens): {r["share_speedup"]:.2f}x', flush=True)

def spread(rs, key, unit='s'):
    xs = [r[key] for r in rs]
    return f'{statistics.median(xs):.2f}{unit} (min {min(xs):.2f}, max {max(xs):.2f})'

def summary(rs):
    print(f'\nover {len(rs)} repeats, median (min, max):')
    print(f'  step {spread(rs, "step")}: rollout {spread(rs, "rollout")}, IG scoring {spread(rs, "score")}, '
          f'ref/old log-probs {spread(rs, "ref")}, update {spread(rs, "update")}')
    print(f'  floor {spread(rs, "floor")}: generate {spread(rs, "floor_gen")}, '
          f'forward+backward {spread(rs, "floor_fb")}')
    for r in rs: r['x_rollout'], r['x_update'] = r['rollout'] - r['floor_gen'], r['update'] - r['floor_fb']
    print(f'  excess over the floor: rollout - generate {spread(rs, "x_rollout")}, IG scoring {spread(rs, "score")}, '
          f'ref/old {spread(rs, "ref")}, update - forward/backward {spread(rs, "x_update")}')
    ratio = statistics.median(r['ratio'] for r in rs)
    print(f'  step/floor = {spread(rs, "ratio", "x")} (target <= 1.5x: {"met" if ratio <= 1.5 else "not met"})')
    print(f'  KV cache across turns: greedy rollout {spread(rs, "kv_speedup", "x")} faster '
          f'(off {spread(rs, "kv_off")}, '
          f'on {spread(rs, "kv_on")}); same greedy ids in every repeat: {all(r["same_ids"] for r in rs)}')
    print(f'  the update with the shared prompt run once: {spread(rs, "share_speedup", "x")} faster than every rollout '
          f'whole (shared {spread(rs, "upd_shared")}, whole {spread(rs, "upd_whole")}; '
          f'{rs[0]["tok_shared"]} against {rs[0]["tok_whole"]} tokens in the first repeat)')

def main():
    p = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    p.add_argument('--model', default=None,
                   help='embedded name or folder (default: the warm start if cached, else smollm2-135m)')
    p.add_argument('--questions', type=int, default=1)
    p.add_argument('--G', type=int, default=4)
    p.add_argument('--max-turns', type=int, default=4)
    p.add_argument('--max-new-tokens', type=int, default=32)
    p.add_argument('--repeats', type=int, default=3)
    p.add_argument('--threads', type=int, default=None)
    a = p.parse_args()
    if a.threads: torch.set_num_threads(a.threads)
    from venus_nb.igpo import IGPOConfig, rl_policy, make_optimizer
    from venus_nb.rollout import RolloutConfig
    base, name, rl_qs, corpus = policy_and_world(a.model)
    qs = rl_qs[:a.questions]
    cfg = IGPOConfig(questions_per_step=len(qs), dtype='float32', output_dir=tempfile.mkdtemp(),
                     rollout=RolloutConfig(G=a.G, max_turns=a.max_turns, turn_jitter=0, max_new_tokens=a.max_new_tokens,
                                           min_answer_tokens=min(16, a.max_new_tokens), max_context=4096,
                                           batch_size=a.G * len(qs), progress=False))
    pol = rl_policy(base, cfg)
    opt = make_optimizer(pol.model, cfg)
    print(f'{name}, float32, LoRA r={cfg.lora_r}, {len(qs)} questions x G = {a.G}, max_turns {a.max_turns}, '
          f'max_new_tokens {a.max_new_tokens}, {torch.get_num_threads()} threads, {os.cpu_count()} CPUs, '
          f'load average {os.getloadavg()[0]:.2f}', flush=True)
    rs = []
    for k in range(a.repeats):
        rs.append(one_repeat(pol, opt, qs, corpus, cfg, k))
        show(rs[-1], k)
    summary(rs)
    print(f'load average {os.getloadavg()[0]:.2f} at the end (the machine was shared: not an idle measurement)')

if __name__ == '__main__': main()
