"""Absurd settings are refused when their config is built (a ValueError naming the field), before any model loads or
step runs: each config class, every range it checks."""
import math
import pytest
from venus_nb.igpo import IGPOConfig
from venus_nb.rollout import RolloutConfig
from venus_nb.rewards import RewardConfig
from venus_nb.experiment import ExperimentConfig
from venus_nb.sft import SFTConfig

def refused(cls, field, value, **kw):
    "Building `cls` with `field=value` raises a ValueError that names `cls.field`"
    with pytest.raises(ValueError, match=rf'^{cls.__name__}\.{field} must be'): cls(**{field: value}, **kw)

IGPO_BAD = [('save_steps', 0), ('questions_per_step', 0), ('seed', 10**25), ('seed', -1), ('steps', -3),
            ('steps', 0), ('steps', 10**30), ('grad_clip', -1.0), ('grad_clip', 0.0), ('grad_clip', math.nan),
            ('kl_coef', -0.1), ('clip_low', -0.2), ('clip_low', 0.0), ('clip_high', 0.0), ('tis_cap', 0.0),
            ('tis_cap', -2.0), ('dual_clip', 0.5), ('lora_alpha', 0), ('lora_alpha', -32), ('max_len', 0),
            ('max_len', -5), ('lora_r', 0), ('ppo_epochs', 0), ('lr', -1e-6), ('weight_decay', -0.01)]

@pytest.mark.parametrize('field,value', IGPO_BAD, ids=[f'{f}={v}' for f, v in IGPO_BAD])
def test_absurd_igpo_settings_fail_at_construction(field, value):
    refused(IGPOConfig, field, value)

ROLLOUT_BAD = [('temperature', -0.5), ('top_p', 0.0), ('top_p', 1.5), ('top_p', -1), ('G', 0), ('max_turns', 0),
               ('max_new_tokens', 0), ('max_context', -1), ('batch_size', 0), ('tool_concurrency', 0),
               ('turn_jitter', -1), ('min_answer_tokens', -1), ('top_k', -2), ('seed', 2**32)]

@pytest.mark.parametrize('field,value', ROLLOUT_BAD, ids=[f'{f}={v}' for f, v in ROLLOUT_BAD])
def test_absurd_rollout_settings_fail_at_construction(field, value):
    refused(RolloutConfig, field, value)
    with pytest.raises(ValueError, match=rf'RolloutConfig\.{field} must be'): IGPOConfig(rollout={field: value})

REWARD_BAD = [('gamma', -0.1), ('gamma', 1.5), ('gamma', math.nan), ('lambda_fmt', -1.0), ('eta', -0.3),
              ('s_max', 0.0), ('eps', 0.0), ('temperature', 0.0)]

@pytest.mark.parametrize('field,value', REWARD_BAD, ids=[f'{f}={v}' for f, v in REWARD_BAD])
def test_absurd_reward_settings_fail_at_construction(field, value):
    refused(RewardConfig, field, value)

EXPERIMENT_BAD = [('G', 0), ('G', -2), ('steps', 0), ('steps', -3), ('eval_questions', 0), ('eval_questions', -1),
                  ('questions_per_step', 0), ('ks', (0,)), ('ks', ()), ('ks', (1, 8))]

@pytest.mark.parametrize('field,value', EXPERIMENT_BAD, ids=[f'{f}={v}' for f, v in EXPERIMENT_BAD])
def test_absurd_experiment_settings_fail_at_construction(field, value):
    refused(ExperimentConfig, field, value, igpo={})

SFT_BAD = [('batch_size', 0), ('lora_r', 0), ('epochs', -1.0), ('epochs', 0.0), ('lr', 0.0), ('grad_accum', 0),
           ('warmup', 1.5), ('lora_dropout', 1.0), ('lora_alpha', 0), ('save_steps', 0), ('seed', -1)]

@pytest.mark.parametrize('field,value', SFT_BAD, ids=[f'{f}={v}' for f, v in SFT_BAD])
def test_absurd_sft_settings_fail_at_construction(field, value):
    refused(SFTConfig, field, value)

def test_sensible_edges_still_build():
    "Greedy sampling, no KL, no clip options, discount 0 and 1, full fine-tuning, k = G: all accepted"
    IGPOConfig(kl_coef=0.0, tis_cap=None, dual_clip=None, lora_r=None, max_len=None, seed=2**32 - 1, steps=1,
               rollout=dict(temperature=0.0, top_p=1.0, seed=2**32 - 1), rewards=dict(gamma=0.0))
    RewardConfig(gamma=1.0)
    ExperimentConfig(G=2, ks=(1, 2), igpo={})
    SFTConfig(lora_r=None, epochs=0.5, warmup=0.0)

def test_absurd_settings_in_a_file_are_refused_naming_the_file(tmp_path):
    (p := tmp_path/'igpo.yaml').write_text('grad_clip: -1\n')
    with pytest.raises(ValueError, match=r'igpo\.yaml: IGPOConfig\.grad_clip must be in \(0, inf\), got -1'):
        IGPOConfig.load(p)
