"""Stage-1 SFT: the assistant-only mask on real data, turn-boundary cuts, loss falls with both backends, kill and
resume; broken checkpoints are skipped and a changed config refused; a `datasets.Dataset` in; absurd settings
refused."""
import json, signal, subprocess, sys, time
from pathlib import Path
import pytest, pandas as pd
from test_igpo import _cut
from test_base import refused
import test_trajectory
from venus_nb.models import tiny_model, has_module
from venus_nb.sft import SFTConfig, sft, sft_example, turn_cut, last_checkpoint
from venus_nb.trajectory import from_record, to_dataset
from venus_nb.data import clean

world = test_trajectory.world   # a fixture of test_trajectory.py

ROOT = Path(__file__).resolve().parents[1]

@pytest.mark.parametrize('tok_name', ['qwen3_tok', 'smol_tok'])
def test_mask_on_real_trajectory(tok_name, request, dr_venus_records):
    tok = request.getfixturevalue(tok_name)
    t = from_record(dr_venus_records[0])
    ex, row = sft_example(t, tok, max_length=10**6)
    tk = t.tokenize(tok)
    trained = [i for i, l in enumerate(ex['labels']) if l != -100]
    assert len(trained) == row['trained'] == sum(b - a for a, b in tk.assistant_spans)
    observed = {j for span in tk.observation_spans if span for j in range(*span)}
    assert not observed & set(trained) and min(trained) >= tk.prompt_len

def test_cut_is_at_a_turn_boundary(dr_venus_records, smol_tok):
    t = from_record(dr_venus_records[1])
    tk = t.tokenize(smol_tok)
    bounds = {b for (_, b) in tk.assistant_spans} | {s[1] for s in tk.observation_spans if s}
    for n in (1500, 4000, 9000, len(tk.ids) - 1):
        k = turn_cut(tk, n)
        assert k in bounds and k <= n
    assert turn_cut(tk, tk.assistant_spans[0][1] - 1) is None and sft_example(t, smol_tok, 700)[1]['reason']

def _tiny_data():
    from venus_nb.synth import generate, SynthConfig
    from venus_nb.data import clean, CleanConfig
    return clean(generate(SynthConfig(n=12, seed=5, lengths=((2, 6, 1.0),))).trajectories(),
                 CleanConfig(system_prompt='You are a deep research assistant.'))[0]

def test_loss_falls_with_transformers_peft(tmp_path):
    cfg = SFTConfig(output_dir=str(tmp_path), backend='transformers', lr=3e-3, max_steps=30, grad_accum=1, batch_size=4,
                    lora_r=16, save_steps=100, max_length=1024)
    res = sft(_tiny_data(), cfg, policy=tiny_model(), live=False)
    # LoRA, 30 steps: >= 10% lower
    assert res.policy.backend == 'transformers' and res.log.loss.iloc[-5:].mean() < 0.9 * res.log.loss.iloc[:5].mean()
    assert (tmp_path/'adapter_config.json').exists() and (tmp_path/'venus_sft_config.json').exists()

def test_the_trained_token_loss_trains_as_transformers_own_loss(tmp_path, monkeypatch):
    "Logits only where a trained token is predicted: the same losses and weights, over padding and accumulation"
    import numpy as np, torch
    import venus_nb.sft as S
    from transformers import Trainer, TrainingArguments
    from datasets import Dataset
    def run(name):
        cfg = SFTConfig(output_dir=str(tmp_path/name), backend='transformers', lr=1e-3, max_steps=3, grad_accum=2,
                        batch_size=2, lora_r=None, bf16=False, save_steps=100, max_length=512)
        res = sft(_tiny_data()[:12], cfg, policy=tiny_model(), live=False)
        return res.log.loss.to_numpy(), torch.cat([p.detach().flatten() for p in res.policy.model.parameters()])
    kept = run('kept')
    def every_logit(policy, examples, cfg, log):   # the trainer as transformers builds it: its own loss, every logit
        return Trainer(model=S.with_lora(policy.model, cfg), args=TrainingArguments(**S._args_dict(cfg)),
                       train_dataset=Dataset.from_list(examples), callbacks=[log],
                       data_collator=S._pad_collate(policy.tokenizer.pad_token_id, keep_logits=False))
    monkeypatch.setattr(S, '_transformers_trainer', every_logit)
    full = run('full')
    assert len(kept[0]) == 3
    np.testing.assert_allclose(kept[0], full[0], rtol=1e-5)
    start = torch.cat([p.detach().flatten() for p in tiny_model().model.parameters()])
    assert (kept[1] - full[1]).abs().max() < 1e-5 < (kept[1] - start).abs().max()   # the same weights, and they moved

SCRIPT = '''
import sys, json, tempfile
backend, out, steps, save = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
if backend == 'unsloth': import unsloth  # before trl/transformers, as Unsloth asks
from pathlib import Path
sys.path.insert(0, {tests!r}); from test_sft import _tiny_data
from venus_nb.models import tiny_model
from venus_nb.sft import SFTConfig, sft
m, tok = tiny_model()
model_dir = Path(out)/'tiny'
if not model_dir.exists(): m.save_pretrained(model_dir); tok.save_pretrained(model_dir)
cfg = SFTConfig(model=str(model_dir), output_dir=str(Path(out)/'run'), backend=backend, lr=3e-3, max_steps=steps,
                grad_accum=1, batch_size=4, lora_r=16, save_steps=save, max_length=1024)
res = sft(_tiny_data(), cfg, live=False)
print('RESULT', json.dumps(dict(backend=res.policy.backend, losses=res.log.loss.tolist(), steps=res.log.step.tolist(),
                                resumed=res.resumed_from)))
'''

def _run(tmp_path, *args, **kw):
    script = tmp_path/'run_sft.py'
    script.write_text(SCRIPT.format(tests=str(ROOT/'tests')))
    return subprocess.Popen([sys.executable, str(script), *map(str, args)], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, cwd=tmp_path, **kw)

def _result(proc, timeout=600):
    out, _ = proc.communicate(timeout=timeout)
    line = next((l for l in out.splitlines() if l.startswith('RESULT ')), None)
    assert line, out[-3000:]
    return json.loads(line[7:])

def unsloth_problem()->str|None:
    """None when a fresh Python imports Unsloth, else why not (never imported here: into a worker that imported vLLM it
    aborts it)"""
    if not has_module('unsloth'):
        return 'Unsloth is not installed (make test installs it; pip install "venus_nb[cpu-engines]")'
    r = subprocess.run([sys.executable, '-c', 'import unsloth'], capture_output=True, text=True, timeout=600)
    if r.returncode in (-signal.SIGILL, 128 + signal.SIGILL):
        return 'importing Unsloth dies on an instruction this CPU lacks (SIGILL; seen on an AVX2-only CPU)'
    return (None if r.returncode == 0
            else f'importing Unsloth fails here (exit {r.returncode}): {r.stderr.strip()[-300:]}')

def test_loss_falls_with_unsloth_cpu_fallback(tmp_path):
    if why := unsloth_problem(): pytest.skip(why)
    r = _result(_run(tmp_path, 'unsloth', tmp_path, 30, 100))
    assert r['backend'] == 'unsloth' and sum(r['losses'][-5:]) < 0.9 * sum(r['losses'][:5])

def test_sft_kill_and_resume(tmp_path):
    proc = _run(tmp_path, 'transformers', tmp_path, 40, 4)
    deadline = time.time() + 300
    while not (tmp_path/'run'/'checkpoint-8').exists():
        assert proc.poll() is None and time.time() < deadline, 'the run ended before it could be killed'
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    killed_at = last_checkpoint(tmp_path/'run')
    assert killed_at and not (tmp_path/'run'/'checkpoint-40').exists()
    r = _result(_run(tmp_path, 'transformers', tmp_path, 40, 4))
    assert r['resumed'] == killed_at and r['steps'][0] == int(killed_at.split('-')[-1]) + 1 and r['steps'][-1] == 40
    assert (tmp_path/'run'/'checkpoint-40'/'venus_sft_config.json').exists()

def test_one_backend_rule(tmp_path, monkeypatch):
    "SFTConfig.backend is checked when made; sft picks 'auto' by models.pick_backend, the rule load_policy follows"
    import torch
    from venus_nb.models import pick_backend
    for bad in ('vllm', 'Unsloth', ''):
        with pytest.raises(ValueError, match="SFTConfig.backend must be one of 'auto', 'unsloth', 'transformers'"):
            SFTConfig(backend=bad)
        with pytest.raises(ValueError, match="unknown backend .*one of 'auto', 'unsloth', 'transformers'"):
            pick_backend(bad)
    monkeypatch.setattr(torch.cuda, 'is_available', lambda: False)
    # auto: Unsloth only on CUDA
    assert pick_backend('auto') == 'transformers' and pick_backend('unsloth') == 'unsloth'
    class Picked(Exception): pass
    def pick(backend): raise Picked(backend)
    monkeypatch.setattr('venus_nb.sft.pick_backend', pick)
    for b in ('auto', 'unsloth', 'transformers'):
        with pytest.raises(Picked, match=f'^{b}$'): sft([], SFTConfig(output_dir=str(tmp_path), backend=b), live=False)

# ---------------------------------------------------------------------------------------------------------------------
# SFT: a checkpoint whose trainer_state.json is cut short is skipped; a changed config is refused

def _sft_data():
    from venus_nb.synth import generate, SynthConfig
    from venus_nb.data import clean, CleanConfig
    made = generate(SynthConfig(n=6, seed=5, lengths=((2, 3, 1.0),))).trajectories()
    return clean(made, CleanConfig(system_prompt='You are a deep research assistant.'))[0]

def _sft_cfg(out, **kw):
    from venus_nb.sft import SFTConfig
    return SFTConfig(output_dir=str(out), backend='transformers', grad_accum=1, batch_size=2, save_steps=1,
                     max_length=1024, **{'max_steps': 2, 'lr': 1e-3, **kw})

@pytest.fixture(scope='module')
def sft_run(tmp_path_factory):
    "An SFT run of two steps on a tiny model with a checkpoint after each; tests work on copies"
    from venus_nb.sft import sft
    d = tmp_path_factory.mktemp('sft')/'run'
    sft(_sft_data(), _sft_cfg(d), policy=tiny_model(), live=False)
    return d

@pytest.fixture
def run_copy(sft_run, tmp_path):
    import shutil
    return Path(shutil.copytree(sft_run, tmp_path/'run'))

def test_sft_truncated_trainer_state_is_skipped(run_copy):
    from venus_nb.sft import sft, last_checkpoint
    _cut(run_copy/'checkpoint-2'/'trainer_state.json')
    with pytest.warns(UserWarning, match='checkpoint-2.*trainer_state.json'): got = last_checkpoint(run_copy)
    assert got == str(run_copy/'checkpoint-1')
    with pytest.warns(UserWarning, match='checkpoint-2'):
        res = sft(_sft_data(), _sft_cfg(run_copy), policy=tiny_model(), live=False)
    assert res.resumed_from == str(run_copy/'checkpoint-1') and list(res.log.step) == [2]

def test_a_checkpoint_without_its_optimiser_or_schedule_is_skipped(run_copy):
    "Resumed without optimizer.pt or scheduler.pt, the trainer would restart Adam and the warmup, saying nothing"
    from venus_nb.sft import last_checkpoint
    for name in ('optimizer.pt', 'scheduler.pt'):
        part = run_copy/'checkpoint-2'/name
        kept = part.read_bytes()
        part.unlink()
        with pytest.warns(UserWarning, match=f'checkpoint-2: {name}: .*missing'): got = last_checkpoint(run_copy)
        assert got == str(run_copy/'checkpoint-1')
        part.write_bytes(kept)

def test_a_run_whose_warmup_takes_its_only_step_is_refused(tmp_path):
    "Ten trajectories at batch 1 × grad_accum 32 make one step, at a learning rate of 0: refused before a model loads"
    from venus_nb.sft import sft, SFTConfig
    with pytest.raises(ValueError, match='10 examples make one optimizer step .*learning rate is 0'):
        sft(_sft_data()[:1] * 10, SFTConfig(model=str(tmp_path/'no-such-model'), output_dir=str(tmp_path/'out')))
    assert not (tmp_path/'out').exists()

def test_sft_resume_removes_killed_writes_temp_files(run_copy):
    from venus_nb.sft import sft
    stale = [run_copy/'checkpoint-2'/'.trainer_state.json.0123456789ab.tmp',
             run_copy/'checkpoint-1'/'.x.abcdefabcdef.tmp']
    for p in stale: p.write_text('{')
    res = sft(_sft_data(), _sft_cfg(run_copy), policy=tiny_model(), live=False)
    assert res.resumed_from == str(run_copy/'checkpoint-2') and not any(p.exists() for p in stale)

def test_sft_truncated_weights_are_skipped(run_copy):
    from venus_nb.sft import last_checkpoint
    _cut(run_copy/'checkpoint-2'/'adapter_model.safetensors')
    with pytest.warns(UserWarning, match='adapter_model'):
        assert last_checkpoint(run_copy) == str(run_copy/'checkpoint-1')
    _cut(run_copy/'checkpoint-1'/'optimizer.pt')
    with pytest.warns(UserWarning) as skipped: assert last_checkpoint(run_copy) is None
    # both said, with why
    assert sorted(str(w.message).split(': ')[0][-12:] for w in skipped) == ['checkpoint-1', 'checkpoint-2']
    assert any('optimizer.pt' in str(w.message) for w in skipped)

def test_sft_changed_config_is_refused(run_copy):
    from venus_nb.sft import sft
    before = (run_copy/'venus_sft_config.json').read_text()
    with pytest.raises(ValueError, match=r'lr.*0\.001.*0\.01') as e:
        sft(_sft_data(), _sft_cfg(run_copy, max_steps=3, lr=1e-2), policy=tiny_model(), live=False)
    # under a schedule laid over the total number of steps, a new total is a changed setting too
    assert 'max_steps' in str(e.value) and (run_copy/'venus_sft_config.json').read_text() == before

# ---------------------------------------------------------------------------------------------------------------------
# A `datasets.Dataset` in

def test_sft_data_reads_a_dataset(world, smol_tok):
    from venus_nb.sft import sft_data
    kept, _ = clean(sorted(world, key=lambda t: len(t.turns))[:3])
    a, b = sft_data(to_dataset(kept), smol_tok, 1024), sft_data(kept, smol_tok, 1024)
    assert a.examples == b.examples and len(a.examples) == len(kept) > 0
    pd.testing.assert_frame_equal(a.report, b.report)

def test_sft_refuses_bad_rows_before_loading_a_model(world, tmp_path):
    from venus_nb.sft import sft, SFTConfig
    bad = to_dataset(world[:2]).add_item({'question': 'q', 'messages': None, 'gt': None, 'meta': None})
    with pytest.raises(ValueError, match='1 of 3 rows cannot be read.*Dataset:2'):
        sft(bad, SFTConfig(model=str(tmp_path/'no-such-model'), output_dir=str(tmp_path/'out')))
    assert not (tmp_path/'out').exists()

# ---------------------------------------------------------------------------------------------------------------------
# Absurd settings are refused when the config is built

SFT_BAD = [('batch_size', 0), ('lora_r', 0), ('epochs', -1.0), ('epochs', 0.0), ('lr', 0.0), ('grad_accum', 0),
           ('warmup', 1.5), ('lora_dropout', 1.0), ('lora_alpha', 0), ('save_steps', 0), ('seed', -1)]

@pytest.mark.parametrize('field,value', SFT_BAD, ids=[f'{f}={v}' for f, v in SFT_BAD])
def test_absurd_sft_settings_fail_at_construction(field, value):
    refused(SFTConfig, field, value)

def test_a_warmup_of_the_whole_run_is_refused():
    "warmup is a share of the steps; transformers reads 1 or more as a count of steps, so 1.0 would mean one step"
    with pytest.raises(ValueError, match=r'warmup must be in \[0, 1\), got 1.0'): SFTConfig(warmup=1.0)
