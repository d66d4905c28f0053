"""What a training step's rollouts make the engine do, counted in tokens (no clock: the same on every machine).

Reads the rollouts a run saved for its steps (`<run>/rollouts/step-N.jsonl`), tokenises each with the policy's chat
template and prints, per step and as a mean over steps:
- tokens in all, generated (decoded one at a time), tool responses and the prompts: the engine must prefill the tool
  responses and each question once, whatever it caches; `bench/experiment_cost.py`'s rollout floor (one `generate`
  from every first prompt) prefills only the prompts;
- decode steps of round-synchronous rollouts (every round waits for its longest turn: the sum over rounds of the
  longest turn) against the fewest any schedule needs (the longest rollout's generated tokens): what an agent loop
  that starts a rollout's next turn as soon as its tool answers could save in sequential decoding.
Run: .venv/bin/python bench/rollout_work.py RUN_FOLDER [--model smollm2-135m]
"""
import argparse, re
from pathlib import Path
from transformers import AutoTokenizer
from venus_nb.models import resolve
from venus_nb.trajectory import read_jsonl

def step_work(trajs, tok)->dict:
    "Token counts of one step's rollouts and its decode steps, round-synchronous and at best"
    toks = [t.tokenize(tok) for t in trajs]
    turns = [[b - a for a, b in x.assistant_spans] for x in toks]
    rounds = max(map(len, turns))
    return dict(rollouts=len(trajs), tokens=sum(map(len, toks)), generated=sum(map(sum, turns)),
                tool_responses=sum(b - a for x in toks for s in x.observation_spans if s for a, b in [s]),
                prompts=sum(x.assistant_spans[0][0] for x in toks),
                decode_steps_in_rounds=sum(max(t[k] if k < len(t) else 0 for t in turns) for k in range(rounds)),
                decode_steps_at_best=max(map(sum, turns)))

def step_files(run:Path)->list:
    return sorted((run/'rollouts').glob('step-*.jsonl'), key=lambda p: int(re.findall(r'\d+', p.stem)[0]))

def main(run:Path, model:str='smollm2-135m'):
    import pandas as pd
    tok = AutoTokenizer.from_pretrained(resolve(model))
    files = step_files(run)
    if not files: raise SystemExit(f'{run}/rollouts: no step-N.jsonl files (a run folder of venus-nb igpo)')
    rows = pd.DataFrame([dict(step=int(re.findall(r'\d+', f.stem)[0]), **step_work(read_jsonl(f).trajectories, tok))
                         for f in files]).set_index('step')
    print(rows.to_string())
    m, share = rows.mean(), lambda c: f'{m[c]:,.0f} {c.replace("_", " ")} ({m[c] / m.tokens:.0%})'
    print(f'\nmean of {len(rows)} steps: {m.tokens:,.0f} tokens, {share("generated")}, {share("tool_responses")}, '
          f'{share("prompts")}; decode steps {m.decode_steps_in_rounds:.0f} in rounds against '
          f'{m.decode_steps_at_best:.0f} at best ({m.decode_steps_in_rounds / m.decode_steps_at_best:.3f}x)')

if __name__ == '__main__':
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument('run', type=Path, help='a run folder with rollouts/step-N.jsonl')
    p.add_argument('--model', default='smollm2-135m', help='the policy whose tokenizer counts the tokens')
    a = p.parse_args()
    main(a.run, a.model)
