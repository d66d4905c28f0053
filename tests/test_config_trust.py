"""Config files run no code unless the user says so: a judge saved by its dotted name loads only with
trust_code / --trust-code"""
import json
import pytest
import yaml
from venus_nb.igpo import IGPOConfig
from venus_nb.experiment import ExperimentConfig, read_experiment
from venus_nb.judges import LLMJudge, em_judge, judge_from_spec, judge_spec
from venus_nb.cli import main

HOSTILE = ['os.execl', 'shutil.copyfile']

def strict_judge(question, answer, gt): return float(answer == gt)   # a module-level judge, saved by its name

def _write(path, d):
    "`d` as JSON or YAML, by the file's suffix"
    path.write_text(yaml.safe_dump(d) if path.suffix == '.yaml' else json.dumps(d))
    return path

@pytest.mark.parametrize('name', HOSTILE)
@pytest.mark.parametrize('suffix', ['.json', '.yaml'])
def test_a_config_file_that_names_code_is_refused(tmp_path, name, suffix):
    f = _write(tmp_path/f'c{suffix}', {'steps': 2, 'judge': {'callable': name}})
    with pytest.raises(ValueError, match=r'names code to import and call.*trust_code=True.*--trust-code'):
        IGPOConfig.load(f)
    with pytest.raises(ValueError, match='trust_code=True'): IGPOConfig(judge={'callable': name})
    with pytest.raises(ValueError, match='trust_code=True'): judge_from_spec({'callable': name})

@pytest.mark.parametrize('name', HOSTILE)
def test_an_experiment_config_that_names_code_is_refused(tmp_path, name, monkeypatch, capsys):
    f = _write(tmp_path/'e.yaml', {'seeds': [0], 'igpo': {'judge': {'callable': name}}})
    with pytest.raises(ValueError, match='trust_code=True'): ExperimentConfig.load(f)
    with pytest.raises(ValueError, match='trust_code=True'): ExperimentConfig(igpo={'judge': {'callable': name}})
    def started(*a, **kw): raise AssertionError('the experiment started: the config was not refused at load')
    monkeypatch.setattr('venus_nb.experiment.warm_signal', started)
    with pytest.raises(SystemExit) as e: main(['experiment', '--config', str(f), '--out', str(tmp_path/'out')])
    assert e.value.code == 1 and '--trust-code' in capsys.readouterr().err

@pytest.mark.parametrize('name', HOSTILE)
def test_the_cli_refuses_a_config_that_names_code(tmp_path, name, capsys):
    f = _write(tmp_path/'c.yaml', {'steps': 2, 'judge': {'callable': name}, 'questions': str(tmp_path/'q.jsonl')})
    for argv in (['igpo', '--config', str(f)], ['igpo', '--questions', 'q.jsonl', '--set', f'judge.callable={name}']):
        with pytest.raises(SystemExit) as e: main(argv + ['--out', str(tmp_path/'out')])
        err = capsys.readouterr().err
        assert e.value.code == 1 and 'names code to import and call' in err and '--trust-code' in err, err
    assert not (tmp_path/'out').exists()   # refused before anything was written

def test_with_trust_code_a_module_level_judge_loads(tmp_path):
    for f in (strict_judge, em_judge):
        saved = IGPOConfig(judge=f).save(tmp_path/'f.json')   # saving still writes the dotted name
        assert (json.loads(saved.read_text())['judge'] == judge_spec(f)
                == {'callable': f'{f.__module__}.{f.__qualname__}'})
        with pytest.raises(ValueError, match='trust_code=True'): IGPOConfig.load(saved)
        assert IGPOConfig.load(saved, trust_code=True).judge is f
    assert IGPOConfig(judge=strict_judge).judge is strict_judge   # a function passed in code is the user's own
    with pytest.raises(ValueError, match='cannot import'):
        judge_from_spec({'callable': 'test_config_trust.nowhere'}, trust_code=True)
    assert (IGPOConfig.load(_write(tmp_path/'l.json', {'judge': {'llm_judge': {'model': 'm'}}})).judge
            == LLMJudge(model='m'))

def test_with_trust_code_an_experiment_round_trips_its_judge(tmp_path):
    cfg = ExperimentConfig(seeds=(0,), igpo={'judge': strict_judge, 'lr': 1e-5}, output_dir=str(tmp_path))
    saved = cfg.save(tmp_path/'config.json')
    assert json.loads(saved.read_text())['igpo']['judge'] == {'callable': 'test_config_trust.strict_judge'}
    with pytest.raises(ValueError, match='trust_code=True'): ExperimentConfig.load(saved)
    assert (ExperimentConfig.load(saved, trust_code=True) == cfg
            and read_experiment(tmp_path, trust_code=True).cfg == cfg)

def test_the_cli_with_trust_code_gets_past_the_judge(tmp_path, capsys):
    f = _write(tmp_path/'c.yaml', {'steps': 2, 'judge': {'callable': 'test_config_trust.strict_judge'},
                                   'questions': str(tmp_path/'q.jsonl')})
    with pytest.raises(SystemExit): main(['igpo', '--config', str(f), '--trust-code', '--out', str(tmp_path/'out')])
    err = capsys.readouterr().err
    # stopped at the missing questions, not at the judge
    assert 'q.jsonl: no such file' in err and 'names code' not in err, err
    assert (yaml.safe_load((tmp_path/'out'/'config.yaml').read_text())['judge']
            == {'callable': 'test_config_trust.strict_judge'})
