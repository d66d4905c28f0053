"""Saved policies load with plain transformers/PEFT to exactly the weights that produced them: SFT adapters,
the RL adapter on a merged SFT adapter, finals, cards; JSON read on resume goes through the capped reader."""
import json, random, shutil
from dataclasses import replace
from pathlib import Path
import pytest, torch
from transformers import AutoModelForCausalLM, AutoTokenizer
from peft import AutoPeftModelForCausalLM, PeftModel
from venus_nb.igpo import IGPOConfig, rl_policy, make_optimizer, save_checkpoint, save_final, igpo
from venus_nb.models import tiny_model, load_policy, weights_source
from venus_nb.sft import sft

IDS = torch.tensor([[5, 9, 17, 33, 65, 129, 200, 7, 11]])

@torch.no_grad()
def _logits(model): return model.eval()(IDS).logits

def _peft(folder): return AutoPeftModelForCausalLM.from_pretrained(str(folder), dtype=torch.float32)

def _perturb(model, seed=1):
    "Give the fresh RL adapter weights of its own (a fresh adapter is the identity)"
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for n, p in model.named_parameters():
            if 'lora_B' in n: p.copy_(0.05 * torch.randn(p.shape, generator=g))

def _adapter_base(folder):
    return json.loads((Path(folder)/'adapter_config.json').read_text())['base_model_name_or_path']

@pytest.fixture(scope='module')
def sft_run(tmp_path_factory):
    "A LoRA SFT of a tiny random model, two steps with a checkpoint each; its logits before anything else touches it"
    from test_sft import _sft_data, _sft_cfg
    out = tmp_path_factory.mktemp('sft')/'run'
    res = sft(_sft_data(), _sft_cfg(out, lr=3e-2), policy=tiny_model('llama'), live=False)
    return res, _logits(res.policy.model)

def test_sft_adapter_and_checkpoints_load_to_the_trained_weights(sft_run):
    res, want = sft_run
    out = res.output_dir
    # a random model has no folder of its own: its weights saved once
    base = out/'base'
    assert (base/'config.json').exists() and _adapter_base(out) == str(base.resolve())
    assert torch.equal(_logits(_peft(out)), want)
    assert _adapter_base(out/'checkpoint-1') == str(base.resolve())
    assert torch.equal(_logits(_peft(out/'checkpoint-2')), want)        # the last checkpoint is the result
    assert not torch.equal(_logits(_peft(out/'checkpoint-1')), want)    # and an earlier one differs
    assert not torch.equal(_logits(AutoModelForCausalLM.from_pretrained(str(base))), want)   # SFT moved the weights
    card = (out/'README.md').read_text()
    assert '# SFT policy' in card and str(base.resolve()) in card and '6 trajectories' in card and '"lr": 0.03' in card
    assert '# SFT policy' in (out/'checkpoint-2'/'README.md').read_text()

def test_rl_adapter_on_a_merged_sft_adapter_names_the_merged_base(sft_run, tmp_path):
    res, _ = sft_run
    cfg = IGPOConfig(output_dir=str(tmp_path/'rl'), seed=0)
    pol = rl_policy(Policy_copy(res.policy), cfg)
    _perturb(pol.model)
    want = _logits(pol.model)
    d = save_checkpoint(pol.model, make_optimizer(pol.model, cfg), cfg, 1, [dict(step=1)], random.Random(0),
                        data='4 questions')
    final = save_final(pol, cfg, '4 questions', 1)
    base = tmp_path/'rl'/'base'
    for folder in (d/'adapter', final):
        assert _adapter_base(folder) == str(base.resolve())
        assert torch.equal(_logits(_peft(folder)), want), folder
        # transformers' PEFT path
        assert torch.equal(_logits(AutoModelForCausalLM.from_pretrained(str(folder), dtype=torch.float32)), want)
    # the raw base (no SFT) under the same RL adapter is another model: what naming it would silently give
    raw = PeftModel.from_pretrained(AutoModelForCausalLM.from_pretrained(str(res.output_dir/'base')), str(final))
    assert not torch.allclose(_logits(raw), want, atol=1e-3)
    # final: weights, tokenizer with its chat template, a card naming method, base and data
    tok = AutoTokenizer.from_pretrained(str(final))
    assert (tok.chat_template == pol.tokenizer.chat_template
            and tok.encode('the river') == pol.tokenizer.encode('the river'))
    card = (final/'README.md').read_text()
    assert '# IGPO policy' in card and str(base.resolve()) in card and '4 questions' in card and 'after step 1' in card
    # moved elsewhere: the run folder's own base/ still loads it
    moved = Path(shutil.copytree(tmp_path/'rl', tmp_path/'moved'))
    shutil.rmtree(tmp_path/'rl')
    again = PeftModel.from_pretrained(AutoModelForCausalLM.from_pretrained(str(moved/'base')), str(moved/'final'))
    assert torch.equal(_logits(again), want)

def Policy_copy(policy):
    "A deep copy of a policy (rl_policy merges an SFT adapter in place)"
    import copy
    return replace(policy, model=copy.deepcopy(policy.model))

def test_a_folder_of_its_own_is_named_not_copied(tmp_path):
    tiny = tiny_model('llama')
    tiny.model.save_pretrained(tmp_path/'start')
    tiny.tokenizer.save_pretrained(tmp_path/'start')
    pol = rl_policy(load_policy(str(tmp_path/'start'), 'transformers', dtype='float32'), IGPOConfig(seed=0))
    assert weights_source(pol.model) == str((tmp_path/'start').resolve())
    cfg = IGPOConfig(output_dir=str(tmp_path/'rl'), seed=0)
    _perturb(pol.model)
    want = _logits(pol.model)
    final = save_final(pol, cfg)
    assert _adapter_base(final) == str((tmp_path/'start').resolve()) and not (tmp_path/'rl'/'base').exists()
    assert torch.equal(_logits(_peft(final)), want)

@pytest.mark.parametrize('lora_r', [16, None], ids=['lora', 'full'])
def test_igpo_run_final_and_checkpoints_reload(tmp_path, lora_r):
    from test_igpo import _cfg, _world
    cfg = replace(_cfg(tmp_path/'run', lora_r), steps=1)
    res = igpo(tiny_model('llama'), *_world(), cfg, live=False)
    want, out = _logits(res.policy.model), tmp_path/'run'
    load = _peft if lora_r else (lambda f: AutoModelForCausalLM.from_pretrained(str(f), dtype=torch.float32))
    for folder in (out/'final', out/'checkpoint-1'/('adapter' if lora_r else 'model')):
        assert torch.equal(_logits(load(folder)), want), folder
    if lora_r: assert _adapter_base(out/'checkpoint-1'/'adapter') == str((out/'base').resolve())
    else: assert not (out/'base').exists()
    assert not (out/'runs').exists()                     # report_to=() by default: no TensorBoard events
    assert AutoTokenizer.from_pretrained(str(out/'final')).chat_template == res.policy.tokenizer.chat_template
    card = (out/'final'/'README.md').read_text()
    assert ('lora' in card.split('---')[1]) == bool(lora_r) and 'after step 1' in card
    assert f'{len(_world()[0])} questions' in card

def test_load_policy_takes_an_adapter_folder_as_a_peft_model_even_moved(sft_run, tmp_path):
    res, want = sft_run
    pol = load_policy(str(res.output_dir), 'transformers', dtype='float32')
    assert isinstance(pol.model, PeftModel) and torch.equal(_logits(pol.model), want)
    moved = Path(shutil.copytree(res.output_dir, tmp_path/'moved'))
    for f in (moved, moved/'checkpoint-2'):                            # as if the original folder were gone
        cfg = json.loads((f/'adapter_config.json').read_text())
        cfg['base_model_name_or_path'] = str(tmp_path/'gone'/'base')
        (f/'adapter_config.json').write_text(json.dumps(cfg))
        assert torch.equal(_logits(load_policy(str(f), 'transformers', dtype='float32').model), want), f
    # and stage 2 merges it: the RL adapter's base holds the SFT weights
    cfg = IGPOConfig(output_dir=str(tmp_path/'rl'), seed=0)
    rl = rl_policy(pol, cfg)
    assert torch.allclose(_logits(rl.model), want, atol=1e-5)          # a fresh adapter on the merged weights
    final = save_final(rl, cfg)
    assert _adapter_base(final) == str((tmp_path/'rl'/'base').resolve())
    assert torch.equal(_logits(_peft(final)), _logits(rl.model))

def test_an_adapter_loaded_by_transformers_is_refused_by_stage_two(sft_run):
    res, _ = sft_run
    # transformers' own PEFT loading
    m = AutoModelForCausalLM.from_pretrained(str(res.output_dir), dtype=torch.float32)
    with pytest.raises(ValueError, match='load_policy'): rl_policy(replace(res.policy, model=m), IGPOConfig())

# ---------------------------------------------------------------------------------------------------------------------
# JSON read on resume goes through the capped reader: a clear ValueError naming the file, never a crash or a huge read

DEEP = '[' * 100_000 + ']' * 100_000

def _big(path:Path)->Path:
    "A valid JSON object padded past the 64 MB cap"
    from venus_nb.base import MAX_RECORD_BYTES
    with open(path, 'w') as f:
        f.write('{}')
        f.write(' ' * (MAX_RECORD_BYTES + 1))
    return path

@pytest.mark.parametrize('text', ['[1]', '"x"', DEEP, None], ids=['list', 'string', 'deep', 'over-the-cap'])
def test_resume_json_is_bounded(tmp_path, text):
    from venus_nb.checkpoints import check_json
    from venus_nb.experiment import ExperimentConfig, saved_config_changes, check_resume
    for name in ('state.json', 'config.json'):
        p = tmp_path/name
        _big(p) if text is None else p.write_text(text)
        with pytest.raises(ValueError, match=name + ('' if text else '.* over ')): check_json(p, 'step')
    cfg = ExperimentConfig(igpo={}, output_dir=str(tmp_path))
    for check in (saved_config_changes, check_resume):
        with pytest.raises(ValueError, match='config.json'): check(tmp_path, cfg)
