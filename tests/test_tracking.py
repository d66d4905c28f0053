"""TensorBoard tracking: IGPO and SFT runs write event files that TensorBoard's own reader reads back; resume appends
to the same run."""
import shutil
from dataclasses import replace
from pathlib import Path
import pytest
from venus_nb.igpo import IGPOConfig, igpo, run_dir, scalars
from venus_nb.models import tiny_model
from venus_nb.sft import SFTConfig, sft
from venus_nb.tracking import trackers

pytest.importorskip('tensorboard', reason='TensorBoard is not installed: pip install tensorboard')
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

def _read(folder:Path)->EventAccumulator:
    assert folder.is_dir() and list(folder.glob('events.out.tfevents.*')), f'no event file in {folder}'
    return EventAccumulator(str(folder)).Reload()

def _series(ea, tag): return [(e.step, e.value) for e in ea.Scalars(tag)]

def test_report_to_names():
    assert trackers('none') == trackers(None) == trackers([]) == trackers(['none']) == ()
    assert trackers('tensorboard') == trackers(['tensorboard', 'tensorboard']) == ('tensorboard',)
    with pytest.raises(ValueError, match="unknown tracker 'wandb'.*tensorboard"): trackers(['wandb'])
    assert (IGPOConfig(report_to='none').report_to == ()
            and SFTConfig(report_to=['tensorboard']).report_to == ('tensorboard',))
    with pytest.raises(ValueError, match='unknown tracker'): IGPOConfig(report_to='trackio')

def test_config_round_trip_keeps_report_to(tmp_path):
    cfg = IGPOConfig(report_to=['tensorboard'], run_name='a', logging_dir=str(tmp_path/'tb'))
    assert IGPOConfig.load(cfg.save(tmp_path/'c.json')) == cfg
    s = SFTConfig(report_to=['tensorboard'], run_name='b')
    assert SFTConfig.load(s.save(tmp_path/'s.json')) == s

def test_missing_tensorboard_is_a_clear_error(monkeypatch, tmp_path):
    import venus_nb.tracking as S
    monkeypatch.setattr(S, 'has_module', lambda name: name != 'tensorboard')
    with pytest.raises(ImportError, match='pip install tensorboard'): S.need_tensorboard()
    from test_igpo import _cfg, _world
    with pytest.raises(ImportError, match='pip install tensorboard'):
        igpo(tiny_model('llama'), *_world(), replace(_cfg(tmp_path/'run'), report_to=['tensorboard']), live=False)

def test_scalars_take_every_number_but_the_step():
    row = dict(step=3, accuracy=0.5, groups=2, kl=float('nan'), label='x', ok=True)
    got = scalars(row)
    assert set(got) == {'train/accuracy', 'train/groups', 'train/kl'} and got['train/groups'] == 2.0

TAGS = {f'train/{k}' for k in ('accuracy', 'mean_ig', 'format_error_rate', 'kl', 'loss', 'grad_norm', 'pg', 'ratio',
                               'clip_frac', 'trained_tokens', 'turns', 'gen_tokens', 'ig_scale', 'rollout_s', 'score_s',
                               'update_s')}

def test_igpo_writes_tensorboard_and_resume_appends(tmp_path):
    from test_igpo import _cfg, _world
    cfg = replace(_cfg(tmp_path/'run'), steps=2, report_to=['tensorboard'])
    res = igpo(tiny_model('llama'), *_world(), cfg, live=False)
    folder = tmp_path/'run'/'runs'/'igpo-seed0'
    assert run_dir(cfg) == folder
    ea = _read(folder)
    assert TAGS <= set(ea.Tags()['scalars']), TAGS - set(ea.Tags()['scalars'])
    for tag in TAGS: assert [s for s, _ in _series(ea, tag)] == [1, 2], tag
    assert [v for _, v in _series(ea, 'train/trained_tokens')] == [float(x) for x in res.metrics.trained_tokens]
    assert [v for _, v in _series(ea, 'train/gen_tokens')] == pytest.approx(list(res.metrics.gen_tokens))
    # killed after logging step 2 but before its checkpoint: resume from checkpoint-1 appends to the same run,
    # and the killed run's step 2 gives way to the resumed one's
    shutil.rmtree(tmp_path/'run'/'checkpoint-2')
    more = igpo(tiny_model('llama'), *_world(), replace(cfg, steps=3), live=False)
    assert more.resumed_from.endswith('checkpoint-1')
    assert [p.name for p in (tmp_path/'run'/'runs').iterdir()] == ['igpo-seed0']
    ea = _read(folder)
    got = _series(ea, 'train/gen_tokens')
    assert [s for s, _ in got] == [1, 2, 3]
    assert [v for _, v in got] == pytest.approx(list(more.metrics.gen_tokens))

def test_sft_writes_tensorboard(tmp_path):
    from test_sft import _sft_data, _sft_cfg
    # a constant schedule: a resumed run may train on past its first total (a cosine one is refused: test_sft.py)
    cfg = _sft_cfg(tmp_path/'sft', max_steps=3, report_to=['tensorboard'], scheduler='constant')
    res = sft(_sft_data(), cfg, policy=tiny_model(), live=False)
    ea = _read(tmp_path/'sft'/'runs'/'sft')
    assert {'train/loss', 'train/learning_rate', 'train/grad_norm'} <= set(ea.Tags()['scalars'])
    got = _series(ea, 'train/loss')
    assert [s for s, _ in got] == [1, 2, 3] and [v for _, v in got] == pytest.approx(list(res.log.loss))
    # resume appends to the same run
    res2 = sft(_sft_data(), replace(cfg, max_steps=4), policy=tiny_model(), live=False)
    assert res2.resumed_from.endswith('checkpoint-3')
    assert [p.name for p in (tmp_path/'sft'/'runs').iterdir()] == ['sft']
    assert [s for s, _ in _series(_read(tmp_path/'sft'/'runs'/'sft'), 'train/loss')] == [1, 2, 3, 4]

def test_experiment_runs_share_one_tensorboard_folder(tmp_path):
    from venus_nb.experiment import ExperimentConfig, arm_config, Start
    from venus_nb.rollout import RolloutConfig
    start = Start(lambda: None, [], [], None, RolloutConfig(progress=False))
    cfg = ExperimentConfig(output_dir=str(tmp_path/'exp'))
    runs = {(a, s): arm_config(cfg, start, a, s) for a in cfg.arms for s in (0, 1)}
    assert {str(run_dir(c).relative_to(tmp_path)) for c in runs.values()} == {
        'exp/tb/igpo-dr-venus-seed0', 'exp/tb/igpo-dr-venus-seed1', 'exp/tb/grpo-seed0', 'exp/tb/grpo-seed1'}
    assert all(c.report_to == ('tensorboard',) and c.base_dir == str(tmp_path/'exp'/'base') for c in runs.values())
    quiet = replace(cfg, igpo=dict(dtype='bfloat16', report_to='none'))
    assert arm_config(quiet, start, 'GRPO', 0).report_to == ()
