"""The cached IG scorer equals the naive reference: on a real DR-Venus prefix with the embedded model, and on random
trajectories with tiny models."""
import json
import pytest
from hypothesis import given, settings, strategies as st, HealthCheck
from conftest import shared_file
from venus_nb.models import load_policy, tiny_model
from venus_nb.rewards import RewardConfig
from venus_nb.scoring import answer_probe, gt_logps, information_gain, information_gain_naive, prefilled
from venus_nb.trajectory import Trajectory, Turn, ToolCall, from_record

ALL = RewardConfig(scored='all_tools')

def _same(a, b, tol=1e-4):
    return all((x is None) == (y is None) and (x is None or abs(x - y) < tol) for x, y in zip(a, b))

def test_real_prefix_with_embedded_model():
    rec = json.loads(shared_file('dr-venus/Trajectory-Example/SFT_Trajectories/0000.json').read_text())
    traj = from_record(rec).shorten(100, 4)
    model, tok = load_policy('smollm2-135m', dtype='float32')
    fast, slow = information_gain(model, tok, traj, cfg=ALL), information_gain_naive(model, tok, traj, cfg=ALL)
    assert sum(v is not None for v in fast) == 3 and _same(fast, slow), (fast, slow)

def _random_traj(draw_turns):
    turns = [Turn.make(f'step {i} ' + ' '.join(w),
                       ToolCall(kind, {'query': [' '.join(w)]} if kind == 'search' else {'url': ['u'], 'goal': 'g'}),
                       observation=' '.join(w * 3), index=i) for i, (kind, w) in enumerate(draw_turns)]
    turns.append(Turn.make('done', answer='the river', index=len(turns)))
    return Trajectory('who?', turns, 'the river', prompt=[{'role': 'user', 'content': 'who founded the city?'}])

words = st.lists(st.sampled_from('the of a river city search visit who born capital page'.split()),
                 min_size=1, max_size=6)

@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(st.sampled_from(['search', 'visit']), words), min_size=1, max_size=6),
       st.sampled_from(['qwen3', 'llama']), st.integers(1, 7), st.sampled_from(['visit', 'all_tools']),
       st.sampled_from([None, 1, 2]))
def test_cached_equals_naive_on_tiny_models(turns, arch, chunk, scored, probe_batch):
    model, tok = tiny_model(arch, seed=len(turns))
    traj, cfg = _random_traj(turns), RewardConfig(scored=scored)
    fast = information_gain(model, tok, traj, cfg=cfg, chunk=chunk, probe_batch=probe_batch)
    assert _same(fast, information_gain_naive(model, tok, traj, cfg=cfg))

def test_window_policy_cuts_late_boundaries():
    model, tok = tiny_model()
    traj = _random_traj([('visit', ['river'] * 5)] * 6)
    full = gt_logps(model, tok, traj)
    ends = [s[1] for s in traj.tokenize(tok).observation_spans if s]
    cut = gt_logps(model, tok, traj, max_len=ends[2] + len(answer_probe(tok, traj.gt).ids))
    assert (full.cut == 0 and cut.cut == 3 and cut.per_turn[:3] == pytest.approx(full.per_turn[:3], abs=1e-5)
            and cut.per_turn[3:] == [None] * 4)

@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.lists(st.tuples(st.sampled_from(['search', 'visit']), words), min_size=1, max_size=4),
                min_size=2, max_size=4),
       st.sampled_from(['qwen3', 'llama']), st.integers(1, 7))
def test_a_shared_prompt_prefix_scores_as_a_fresh_prefill(groups, arch, chunk):
    "Rollouts of one question continue from one prefilled prompt: same log-probs, and the cache is handed back intact"
    model, tok = tiny_model(arch, seed=len(groups))
    trajs = [_random_traj(turns) for turns in groups]
    toks = [t.tokenize(tok) for t in trajs]
    assert len({tuple(t.ids[:t.prompt_len]) for t in toks}) == 1
    shared = prefilled(model, toks[0].ids[:toks[0].prompt_len], chunk=chunk)
    for t in trajs:
        alone, cont = (gt_logps(model, tok, t, cfg=ALL),
                       gt_logps(model, tok, t, cfg=ALL, chunk=chunk, prefix=shared))
        assert cont.baseline == pytest.approx(alone.baseline, abs=1e-5) and _same(cont.per_turn, alone.per_turn, 1e-5)
        assert shared.cache.get_seq_length() == shared.n

def test_a_prefix_past_the_first_boundary_is_refused():
    model, tok = tiny_model()
    traj = _random_traj([('visit', ['river'])])
    t = traj.tokenize(tok)
    with pytest.raises(ValueError, match='runs past the first boundary'):
        gt_logps(model, tok, traj, cfg=ALL, prefix=prefilled(model, t.ids[:t.prompt_len + 2]))
