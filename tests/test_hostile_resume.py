"""Broken checkpoints, a changed config on resume, atomic writes, and a CLI that answers bad paths and bad bytes with
one line."""
import json, os, random, warnings
from dataclasses import replace
from pathlib import Path
import pytest
from conftest import cli_result as _cli, one_error as _one_error
import pandas as pd, torch
from hypothesis import given, settings, strategies as st, HealthCheck
from venus_nb.igpo import (IGPOConfig, rl_policy, make_optimizer, save_checkpoint, last_igpo_checkpoint,
                           load_checkpoint, igpo)
from venus_nb.models import tiny_model
from venus_nb.rollout import RolloutConfig
from venus_nb.trajectory import read_jsonl, to_record

ROOT = Path(__file__).resolve().parents[1]
WORLD = ROOT/'data'/'sample'/'world'

# ---------------------------------------------------------------------------------------------------------------------
# IGPO: resume picks the newest checkpoint that loads whole

def _two_checkpoints(tmp_path, lora_r=16):
    "checkpoint-1 and checkpoint-2 of a tiny policy; returns (policy, cfg, the newer folder)"
    cfg = IGPOConfig(output_dir=str(tmp_path), lora_r=lora_r, lr=1e-4)
    pol = rl_policy(tiny_model('llama'), cfg)
    opt, rng = make_optimizer(pol.model, cfg), random.Random(0)
    save_checkpoint(pol.model, opt, cfg, 1, [dict(step=1)], rng)
    return pol, cfg, save_checkpoint(pol.model, opt, cfg, 2, [dict(step=1), dict(step=2)], rng)

def _cut(path:Path, keep:float=0.5): path.write_bytes(path.read_bytes()[:int(path.stat().st_size * keep)])

def _newest(out)->tuple:
    "(the checkpoint resume picks, the warnings it gave)"
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter('always')
        got = last_igpo_checkpoint(out)
    return got, [str(x.message) for x in w]

@pytest.mark.parametrize('part,lora_r', [('optimizer.pt', 16), ('adapter/adapter_model.safetensors', 16),
                                         ('model/model.safetensors', None)],
                         ids=['optimizer', 'adapter', 'model'])
def test_truncated_part_falls_back_to_the_previous_checkpoint(tmp_path, part, lora_r):
    pol, cfg, d = _two_checkpoints(tmp_path, lora_r)
    _cut(d/part)
    got, said = _newest(tmp_path)
    assert got == tmp_path/'checkpoint-1'
    assert len(said) == 1 and 'checkpoint-2' in said[0] and Path(part).name.split('.')[0] in said[0], said
    step, rows, _ = load_checkpoint(pol.model, make_optimizer(pol.model, cfg), got)   # and it loads
    assert step == 1 and rows == [dict(step=1)]

@pytest.mark.parametrize('key', ['rng', 'step', 'metrics'])
def test_state_missing_a_key_is_incomplete(tmp_path, key):
    _, _, d = _two_checkpoints(tmp_path)
    s = json.loads((d/'state.json').read_text())
    del s[key]
    (d/'state.json').write_text(json.dumps(s))
    got, said = _newest(tmp_path)
    assert got == tmp_path/'checkpoint-1' and len(said) == 1 and repr(key) in said[0], said

def test_hostile_optimizer_is_skipped_without_running_it(tmp_path, monkeypatch):
    from test_hostile import _Exec
    _, _, d = _two_checkpoints(tmp_path)
    flag = tmp_path/'pwned'
    monkeypatch.setenv('VENUS_PWNED', str(flag))
    torch.save({'state': {}, 'param_groups': [], 'x': _Exec()}, d/'optimizer.pt')
    got, said = _newest(tmp_path)
    assert got == tmp_path/'checkpoint-1' and 'optimizer.pt' in said[0] and not flag.exists()

def test_no_whole_checkpoint_starts_afresh(tmp_path):
    _, _, d = _two_checkpoints(tmp_path)
    for c in ('checkpoint-1', 'checkpoint-2'): (tmp_path/c/'optimizer.pt').write_bytes(b'')
    got, said = _newest(tmp_path)
    assert got is None and len(said) == 2

# A killed checkpoint write leaves its temp file (`base.atomic_open`: `.name.<12 hex>.tmp`); resume removes them
STALE = ['.optimizer.pt.0a1b2c3d4e5f.tmp', '.state.json.123456abcdef.tmp',
         'adapter/.adapter_model.safetensors.abcdef012345.tmp']
KEPT = ['notes.tmp', '.optimizer.pt.tmp', '.state.json.XYZ456abcdef.tmp', 'adapter/keep.me']

def _litter(d:Path)->list:
    "Stale temp files (and files that merely look alike) in checkpoint folder `d`"
    for name in STALE + KEPT: (d/name).write_bytes(b'x' * 1000)
    return [d/n for n in STALE]

def test_killed_checkpoint_writes_leave_no_temp_files(tmp_path, monkeypatch):
    monkeypatch.setattr('venus_nb.igpo.igpo_step', _no_rollouts)   # resume matters here, not the step
    _, cfg, d = _two_checkpoints(tmp_path)
    stale = _litter(d) + _litter(tmp_path/'checkpoint-1')
    assert last_igpo_checkpoint(tmp_path) == d and all(p.exists() for p in stale)   # looking removes nothing
    res = igpo(tiny_model('llama'), [], None, replace(cfg, steps=3, save_steps=1,
                                                      rollout=replace(cfg.rollout, progress=False)), live=False)
    assert res.resumed_from == str(d) and not any(p.exists() for p in stale)
    assert all((c/n).exists() for c in (d, tmp_path/'checkpoint-1') for n in KEPT)
    assert not [p for p in tmp_path.rglob('*.tmp') if p.name not in {Path(n).name for n in KEPT}]

# ---------------------------------------------------------------------------------------------------------------------
# IGPO: a changed config on resume is refused, or applied and recorded

def _small(out, **kw):
    return IGPOConfig(steps=1, questions_per_step=1, lr=1e-4, save_steps=1, output_dir=str(out), **kw,
                      rollout=RolloutConfig(G=2, max_turns=1, max_new_tokens=8, min_answer_tokens=4, progress=False))

def test_changed_config_is_refused(tmp_path):
    _, cfg, d = _two_checkpoints(tmp_path)
    saved = {p: p.read_text() for p in (d/'igpo_config.json',)}
    changed = replace(cfg, lr=1e-3, kl_coef=0.5, steps=5, rollout=replace(cfg.rollout, progress=False))
    with pytest.raises(ValueError) as e: igpo(tiny_model('llama'), [], None, changed, live=False)
    msg = str(e.value)
    assert ('lr' in msg and 'kl_coef' in msg and 'steps' not in msg.replace('apply_changes', '')
            and 'progress' not in msg), msg
    assert '\n' not in msg and 'apply_changes=True' in msg
    assert all(p.read_text() == t for p, t in saved.items()) and not (tmp_path/'igpo_config.json').exists()

def test_structural_change_is_refused_even_when_asked(tmp_path):
    _, cfg, _ = _two_checkpoints(tmp_path)
    with pytest.raises(ValueError, match='lora_alpha'):
        igpo(tiny_model('llama'), [], None, replace(cfg, lora_alpha=8), apply_changes=True, live=False)

def test_adapter_settings_are_moot_in_full_fine_tuning(tmp_path):
    from venus_nb.igpo import resume_changes
    _, cfg, d = _two_checkpoints(tmp_path, lora_r=None)
    assert resume_changes(d, replace(cfg, lora_alpha=8, target_modules=('q_proj',))) == []
    with pytest.raises(ValueError, match='lora_r'): resume_changes(d, replace(cfg, lora_r=16), apply=True)

def _no_rollouts(policy, opt, engine, questions, tools, cfg, step, rng, judge=None): return dict(step=step + 1), None

def test_changed_config_applied_when_asked_and_recorded(tmp_path, monkeypatch):
    monkeypatch.setattr('venus_nb.igpo.igpo_step', _no_rollouts)   # what matters here is resume and save, not the step
    first = _small(tmp_path)
    pol = rl_policy(tiny_model('llama'), first)
    save_checkpoint(pol.model, make_optimizer(pol.model, first), first, 1, [], random.Random(0))
    new = replace(first, steps=2, lr=3e-3, weight_decay=0.0)
    with pytest.warns(UserWarning, match='lr'):
        res = igpo(tiny_model('llama'), [], None, new, apply_changes=True, live=False)
    assert res.resumed_from.endswith('checkpoint-1') and list(res.metrics.step) == [2]
    opt_groups = torch.load(tmp_path/'checkpoint-2'/'optimizer.pt', weights_only=True)['param_groups']
    # the optimiser follows the new config
    assert all(g['lr'] == 3e-3 and g['weight_decay'] == 0.0 for g in opt_groups)
    assert (IGPOConfig.load(tmp_path/'checkpoint-2'/'igpo_config.json') == new
            == IGPOConfig.load(tmp_path/'igpo_config.json'))
    changes = json.loads((tmp_path/'checkpoint-2'/'state.json').read_text())['config_changes']
    assert changes == [dict(step=1, changed={'lr': [1e-4, 3e-3], 'weight_decay': [0.01, 0.0]})]
    assert res.config_changes == changes

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
        res = sft(_sft_data(), _sft_cfg(run_copy, max_steps=3), policy=tiny_model(), live=False)
    assert res.resumed_from == str(run_copy/'checkpoint-1') and list(res.log.step) == [2, 3]

def test_sft_resume_removes_killed_writes_temp_files(run_copy):
    from venus_nb.sft import sft
    stale = [run_copy/'checkpoint-2'/'.trainer_state.json.0123456789ab.tmp',
             run_copy/'checkpoint-1'/'.x.abcdefabcdef.tmp']
    for p in stale: p.write_text('{')
    res = sft(_sft_data(), _sft_cfg(run_copy, max_steps=3), policy=tiny_model(), live=False)
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
    assert 'max_steps' not in str(e.value) and (run_copy/'venus_sft_config.json').read_text() == before

# ---------------------------------------------------------------------------------------------------------------------
# Files the kit writes: a temporary file renamed over the target

@pytest.fixture
def renamed(monkeypatch):
    "The targets of every os.replace from a temporary file beside them"
    seen, real = [], os.replace
    def spy(src, dst, *a, **kw):
        if Path(src).name.startswith('.') and Path(src).name.endswith('.tmp'): seen.append(Path(dst).resolve())
        return real(src, dst, *a, **kw)
    monkeypatch.setattr(os, 'replace', spy)
    return seen

def test_configs_state_and_optimizer_are_written_atomically(tmp_path, renamed):
    from venus_nb.sft import SFTConfig
    _, cfg, d = _two_checkpoints(tmp_path)
    for name in ('igpo_config.json', 'state.json', 'optimizer.pt'): assert (d/name).resolve() in renamed, name
    for p in (cfg.save(tmp_path/'c.json'), SFTConfig().save(tmp_path/'s.json')): assert p.resolve() in renamed

def test_replay_page_and_cli_csvs_are_written_atomically(tmp_path, renamed, capsys):
    from venus_nb.rewards import Scored
    from venus_nb.replay import random_logps, write_replay
    from venus_nb.cli import main
    t = read_jsonl(WORLD/'trajectories.jsonl').trajectories[0]
    page = write_replay(tmp_path/'r.html', t, Scored.from_logps([t], [random_logps(t)]))
    assert page.resolve() in renamed
    main(['clean', str(WORLD/'trajectories.jsonl'), '--out', str(tmp_path/'c')])
    assert (tmp_path/'c'/'clean_report.csv').resolve() in renamed

# ---------------------------------------------------------------------------------------------------------------------
# The CLI: a bad path or input is one line `venus-nb: error: ...` and a non-zero exit, never a traceback


def test_replay_empty_file_and_index_out_of_range(tmp_path, capsys, tiny_dir):
    (tmp_path/'empty.jsonl').write_text('')
    _one_error(*_cli(['replay', tmp_path/'empty.jsonl', '--model', tiny_dir], capsys)[::2], 'empty.jsonl',
               'no readable trajectory')
    one = tmp_path/'one.jsonl'
    one.write_text(json.dumps(to_record(read_jsonl(WORLD/'trajectories.jsonl').trajectories[0])) + '\n')
    _one_error(*_cli(['replay', one, '--index', 3, '--model', tiny_dir], capsys)[::2], '--index 3', '1 trajectory')
    code, out, err = _cli(['replay', one, '--model', tiny_dir, '--out', tmp_path/'r.html'], capsys)
    assert code == 0 and (tmp_path/'r.html').exists() and 'error' not in err and 'wrote' in out

def test_missing_unreadable_and_unwritable_paths(tmp_path, capsys, monkeypatch):
    src = WORLD/'trajectories.jsonl'
    _one_error(*_cli(['clean', tmp_path/'nope.jsonl', '--out', tmp_path/'o'], capsys)[::2], 'nope.jsonl')
    _one_error(*_cli(['resample', tmp_path/'nope.jsonl', '--out', tmp_path/'o.jsonl'], capsys)[::2], 'nope.jsonl')
    blocker = tmp_path/'file'
    blocker.write_text('x')
    _one_error(*_cli(['clean', src, '--out', blocker/'sub'], capsys)[::2], 'sub')          # a folder under a file
    code, out, _ = _cli(['resample', src, '--out', tmp_path], capsys)   # a folder that is there: the file goes in it
    assert code == 0 and (tmp_path/'sft.jsonl').is_file() and f'wrote {tmp_path/"sft.jsonl"}' in out
    real_open = open
    def no_read(p, *a, **kw):
        if str(p).endswith('locked.jsonl'): raise PermissionError(13, 'Permission denied', str(p))
        return real_open(p, *a, **kw)
    locked = tmp_path/'locked.jsonl'
    locked.write_text(src.read_text())
    monkeypatch.setattr('builtins.open', no_read)
    _one_error(*_cli(['clean', locked, '--out', tmp_path/'o2'], capsys)[::2], 'locked.jsonl', 'Permission denied')

def test_read_only_output_is_one_error_line(tmp_path, capsys, monkeypatch):
    def read_only(*a, **kw): raise PermissionError(30, 'Read-only file system', str(tmp_path/'ro'/'.sft.jsonl.tmp'))
    monkeypatch.setattr('venus_nb.base.os.replace', read_only)
    _one_error(*_cli(['resample', WORLD/'trajectories.jsonl', '--out', tmp_path/'ro'/'sft.jsonl'], capsys)[::2],
               'Read-only file system')

def test_traceback_flag_shows_the_error(tmp_path):
    from venus_nb.cli import main
    from venus_nb.terminal import CLIError
    with pytest.raises(CLIError, match='no such file'):
        main(['--traceback', 'clean', str(tmp_path/'nope.jsonl'), '--out', str(tmp_path/'o')])

def test_demo_with_a_mistyped_data_path_is_an_error(tmp_path, capsys):
    code, out, err = _cli(['demo', '--data', tmp_path/'typo.jsonl', '--out', tmp_path/'out', '--stage1-only'], capsys)
    _one_error(code, err, 'typo.jsonl')
    assert 'generate' not in out

# ---------------------------------------------------------------------------------------------------------------------
# Fuzz: arbitrary bytes in, a report out; exit 0 or one clear error line

GOOD = (json.dumps(to_record(read_jsonl(WORLD/'trajectories.jsonl').trajectories[0])) + '\n').encode()
lines = st.lists(st.one_of(st.binary(max_size=60), st.just(GOOD), st.just(b'{"messages": [1]}\n'), st.just(b'[]\n'),
                           st.just(b'\xff\xfe\x00'), st.just(b'{"question": "q", "messages": []}\n')),
                 max_size=5).map(b''.join)

@settings(max_examples=40, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(data=lines, cmd=st.sampled_from(['clean', 'resample', 'replay']),
       fmt=st.sampled_from(['dr-venus', 'webdancer', 'react']))
def test_cli_fuzz(tmp_path_factory, capsys, tiny_dir, data, cmd, fmt):
    d = tmp_path_factory.mktemp('fuzz')
    f = d/'in.jsonl'
    f.write_bytes(data)
    args = {'clean': ['clean', f, '--out', d/'out', '--format', fmt],
            'resample': ['resample', f, '--out', d/'sft.jsonl'],
            'replay': ['replay', f, '--out', d/'r.html', '--format', fmt, '--model', tiny_dir]}[cmd]
    code, out, err = _cli(args, capsys)
    assert 'Traceback' not in out + err
    if code in (0, None): assert 'error' not in err and out.strip(), (out, err)   # stderr may hold a progress bar
    else: _one_error(code, err)

def test_clean_report_counts_unreadable_records(tmp_path, capsys):
    "Every record read is counted: 5 readable + 3 unreadable lines give input 8, 3 dropped at 'load' with their line"
    good = (WORLD/'trajectories.jsonl').read_text().splitlines()[:5]
    f = tmp_path/'mixed.jsonl'
    f.write_text('\n'.join(good[:2] + ['{"messages": [', 'not json'] + good[2:] + ['[[[[', '']) + '\n')
    code, out, err = _cli(['clean', f, '--out', tmp_path/'c'], capsys)
    assert code == 0, err
    report = pd.read_csv(tmp_path/'c'/'clean_report.csv')
    assert len(report) == 8 and (report.step == 'load').sum() == 3
    assert f'{f}:3:' in out and f'{f}:4:' in out and f'{f}:8:' in out

def test_replay_without_ground_truth_is_refused_or_given_one(tmp_path, capsys, tiny_dir):
    "No IG against a ground truth that is not there (the word 'None' was scored before): one error naming --gt"
    t = read_jsonl(WORLD/'trajectories.jsonl').trajectories[0]
    rec = to_record(t)
    rec.pop('gt', None)
    rec.pop('answer', None)
    f = tmp_path/'no_gt.jsonl'
    f.write_text(json.dumps(rec) + '\n')
    assert read_jsonl(f).trajectories[0].gt is None
    _one_error(*_cli(['replay', f, '--model', tiny_dir, '--out', tmp_path/'r.html'], capsys)[::2], 'no_gt.jsonl',
               'no ground truth', '--gt')
    assert not (tmp_path/'r.html').exists()
    code, out, err = _cli(['replay', f, '--model', tiny_dir, '--out', tmp_path/'r.html', '--gt', t.gt], capsys)
    assert code == 0 and (tmp_path/'r.html').exists() and 'wrote' in out
    from venus_nb.scoring import gt_logps
    m, tok = tiny_model('llama')
    with pytest.raises(ValueError, match='has no ground truth'): gt_logps(m, tok, read_jsonl(f).trajectories[0])

def test_replay_says_which_turns_lie_past_the_context(tmp_path, capsys):
    "Visits past the model's positions are counted in the command's output, with the fix"
    from venus_nb.cli import unscored_note
    from venus_nb.rewards import GTLogps
    m, tok = tiny_model('llama')
    note = unscored_note(GTLogps(-3.0, [None, -2.0, None, None], cut=2), None, m, 'tiny')
    assert note.startswith('2 of the 3 scored turns have no IG') and '--max-chars' in note
    assert unscored_note(GTLogps(-3.0, [None, -2.0], cut=0), None, m, 'tiny') is None
    t = next(t for t in read_jsonl(WORLD/'trajectories.jsonl').trajectories
             if sum(u.kind == 'visit' for u in t.turns) >= 2)
    m.config.max_position_embeddings = len(t.tokenize(tok).ids) // 2   # the later visits lie past it
    m.save_pretrained(tmp_path/'short')
    tok.save_pretrained(tmp_path/'short')
    f = tmp_path/'one.jsonl'
    f.write_text(json.dumps(to_record(t)) + '\n')
    code, out, err = _cli(['replay', f, '--model', tmp_path/'short', '--out', tmp_path/'r.html', '--max-chars', 10**5],
                          capsys)
    assert code == 0 and 'scored turns have no IG' in out and 'wrote' in out, (out, err)
