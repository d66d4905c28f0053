"""The transformers engine's KV cache across turns: the same token ids as prefilling everything (greedy and seeded
sampling), reuse where a prompt extends a kept sequence, nothing reused after the weights change, caches freed."""
from dataclasses import replace
import pytest, torch
from venus_nb.rollout import RolloutConfig, HFEngine, rollout, reusable

pytestmark = pytest.mark.usefixtures('one_thread')   # see conftest.py

@pytest.fixture(scope='module')
def tiny():
    from venus_nb.models import tiny_model
    return tiny_model('llama')

GREEDY = RolloutConfig(G=2, max_turns=4, turn_jitter=0, max_new_tokens=16, min_answer_tokens=8, temperature=0,
                       progress=False)

def ids_of(trajs): return [t.tokens.ids for t in trajs]

def both(policy, questions, world, cfg, batch_size=3):
    "The rollouts without and with the kept cache, and the cached engine"
    plain = rollout(HFEngine(*policy, batch_size=batch_size, cache_turns=False), questions, world, cfg)
    engine = HFEngine(*policy, batch_size=batch_size)
    return plain, rollout(engine, questions, world, cfg), engine

def test_greedy_ids_are_the_same_with_the_cache(tiny, world, qa):
    plain, cached, engine = both(tiny, qa[:2], world, GREEDY)   # 4 rollouts in batches of 3: rows move between batches
    assert all(len(t.turns) >= 3 for t in cached)
    assert ids_of(cached) == ids_of(plain)
    assert engine.tokens['reused'] > engine.tokens['prompt'] / 2   # most of each later turn's prompt from the cache
    assert engine.kept == []                                       # freed when the rollouts ended

def test_seeded_sampling_is_reproducible_with_the_cache(tiny, world, qa):
    c = replace(GREEDY, temperature=1.0, seed=3)
    plain, cached, _ = both(tiny, qa[:1], world, c)
    again = rollout(HFEngine(*tiny, batch_size=3), qa[:1], world, c)
    assert ids_of(again) == ids_of(cached) == ids_of(plain)
    assert len({tuple(i) for i in ids_of(cached)}) > 1   # the rollouts were sampled, not all alike

def test_a_fresh_prompt_beside_continued_ones(tiny):
    "A batch mixing a continued sequence and a new one gives what prefilling both gives"
    model, tok = tiny
    enc = lambda s: tok.encode(s, add_special_tokens=False)
    a, b = (enc('<|im_start|>user\nWhat is the capital of France?<|im_end|>\n<|im_start|>assistant\n'),
            enc('<|im_start|>user\nHi<|im_end|>\n'))
    cached, plain = HFEngine(model, tok), HFEngine(model, tok, cache_turns=False)
    gen = cached([a], [8], GREEDY)[0].ids
    assert gen == plain([a], [8], GREEDY)[0].ids
    longer = a + gen + enc('\n<|im_start|>user\nmore<|im_end|>\n<|im_start|>assistant\n')
    outs = cached([b, longer], [8, 8], GREEDY)
    assert [o.ids for o in outs] == [o.ids for o in plain([b, longer], [8, 8], GREEDY)]
    # the continued row reuses all it holds (the last generated token was never fed), at most the fresh row's padding
    assert cached.tokens['reused'] == min(len(a) + len(gen) - 1, len(longer) - len(b)) > 0

def test_nothing_is_reused_after_the_weights_change(tiny):
    model, tok = tiny
    p = tok.encode('<|im_start|>user\nHello there<|im_end|>\n<|im_start|>assistant\n', add_special_tokens=False)
    engine = HFEngine(model, tok)
    engine([p], [4], GREEDY)
    engine([p + [5]], [4], GREEDY)
    assert engine.tokens['reused'] == len(p)
    with torch.no_grad(): next(model.parameters()).add_(0.0)   # an in-place change, as an optimiser step makes
    engine([p + [5, 6]], [4], GREEDY)
    assert engine.tokens['reused'] == len(p)

def test_reusable_picks_the_longest_shared_prefix():
    import numpy as np
    kept = [(np.array([1, 2, 3]), 'a'), (np.array([1, 2, 3, 4, 5]), 'b'), (np.array([9]), 'c')]
    assert reusable([1, 2, 3, 4, 6], kept) == (4, 'b')
    assert reusable([1, 2, 3, 4, 5], kept) == (4, 'b')    # one token is always fed
    assert reusable([7, 7], kept)[0] == 0 and reusable([1], []) == (0, None)

@pytest.mark.slow   # ~1 min on 2 idle cores
def test_greedy_ids_are_the_same_with_the_cache_smollm2(world, qa):
    from venus_nb.models import load_policy
    policy = load_policy('smollm2-135m', dtype='float32')
    c = replace(GREEDY, G=1, max_turns=3, max_new_tokens=12)
    plain, cached, engine = both(policy, qa[:2], world, c)
    assert ids_of(cached) == ids_of(plain) and all(len(t.turns) >= 2 for t in cached)
    assert engine.tokens['reused'] > 0

def test_igpo_steps_are_the_same_with_the_cache(tmp_path, world, qa):
    "Two IGPO steps generate with the policy being trained: the cache never outlives the weights it was computed with"
    from venus_nb.igpo import IGPOConfig, igpo
    from venus_nb.models import tiny_model
    cfg = lambda out: IGPOConfig(steps=2, questions_per_step=1, lr=1e-3, save_steps=2, output_dir=str(out),
                                 rollout=RolloutConfig(G=2, max_turns=3, turn_jitter=0, max_new_tokens=12,
                                                       min_answer_tokens=8, progress=False))
    runs = []
    for cache_turns in (False, True):
        pol = tiny_model('llama')
        res = igpo(pol, qa[:2], world, cfg(tmp_path/str(cache_turns)),
                   engine=None if cache_turns else HFEngine(*pol, cache_turns=False), live=False)
        runs.append(res.metrics)
    cols = ['step', 'turns', 'gen_tokens', 'trained_tokens', 'loss', 'kl']
    assert runs[0][cols].equals(runs[1][cols]), (runs[0][cols], runs[1][cols])
    m = runs[1]
    assert (m[['rollout_s', 'score_s', 'ref_s', 'update_s']] >= 0).all().all() and m.ref_s.gt(0).all()
