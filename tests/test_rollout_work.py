"bench/rollout_work.py: a step's rollout work in tokens, and the decode steps rounds cost against the best schedule."
import importlib.util
from conftest import ROOT
from venus_nb.trajectory import Trajectory, Turn, ToolCall
from venus_nb.rollout import agent_prompt

def rollout_work():
    spec = importlib.util.spec_from_file_location('rollout_work', ROOT/'bench'/'rollout_work.py')
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod

def rollout(thoughts:list, q='question'):
    "Searches with these thoughts, then an answer"
    turns = [Turn.make(th, ToolCall('search', {'query': [f'q{i}']}), observation=f'found {i}', index=i)
             for i, th in enumerate(thoughts)]
    return Trajectory(q, turns + [Turn.make('done', answer='42', index=len(thoughts))], '42', prompt=agent_prompt(q))

def test_counts_tokens_by_kind_and_decode_steps_in_rounds_and_at_best(smol_tok):
    long, short = 'word ' * 60, 'w'
    a, b = rollout([long, short]), rollout([short, long, long])
    w = rollout_work().step_work([a, b], smol_tok)
    spans = {k: [e - s for s, e in t.tokenize(smol_tok).assistant_spans] for k, t in dict(a=a, b=b).items()}
    la, lb = spans['a'], spans['b']   # a: long, short, answer; b: short, long, long, answer
    assert w['decode_steps_in_rounds'] == max(la[0], lb[0]) + max(la[1], lb[1]) + max(la[2], lb[2]) + lb[3]
    assert w['decode_steps_at_best'] == max(sum(la), sum(lb)) < w['decode_steps_in_rounds']
    assert w['generated'] == sum(la) + sum(lb) and w['rollouts'] == 2
    toks = [t.tokenize(smol_tok) for t in (a, b)]
    assert w['tokens'] == sum(map(len, toks)) > w['generated'] + w['tool_responses'] + w['prompts']
    assert w['prompts'] == sum(x.assistant_spans[0][0] for x in toks) > 0 and w['tool_responses'] > 0
