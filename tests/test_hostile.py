"""Hostile and broken inputs: a checkpoint runs no code on resume, and a failed write leaves the old file whole."""
import pickle, random
from pathlib import Path
import pytest
from venus_nb.trajectory import read_jsonl, write_jsonl

class _Exec:
    "A pickle that runs code when it is loaded"
    def __reduce__(self): return (exec, ("open(__import__('os').environ['VENUS_PWNED'], 'w').write('ran')",))

def test_resume_runs_no_code_from_a_checkpoint(tmp_path, monkeypatch):
    from venus_nb.igpo import IGPOConfig, rl_policy, make_optimizer, save_checkpoint, load_checkpoint
    from venus_nb.models import tiny_model
    pol = rl_policy(tiny_model('llama'), IGPOConfig())
    cfg = IGPOConfig(output_dir=str(tmp_path))
    d = save_checkpoint(pol.model, make_optimizer(pol.model, cfg), cfg, 1, [], random.Random(0))
    flag = tmp_path/'pwned'
    monkeypatch.setenv('VENUS_PWNED', str(flag))
    import torch
    torch.save({'state': {}, 'param_groups': [], 'x': _Exec()}, d/'optimizer.pt')
    with pytest.raises(pickle.UnpicklingError): load_checkpoint(pol.model, make_optimizer(pol.model, cfg), d)
    assert not flag.exists()

def test_failed_write_keeps_the_old_file(tmp_path):
    src = read_jsonl(Path(__file__).resolve().parents[1]/'data/sample/world/trajectories.jsonl').trajectories[:3]
    path = write_jsonl(src, tmp_path/'t.jsonl')
    before = path.read_text()
    class Boom:
        def __iter__(self):
            yield src[0]
            raise RuntimeError('disk full')
    with pytest.raises(RuntimeError): write_jsonl(Boom(), path)
    assert path.read_text() == before and len(before.splitlines()) == 3
    assert [p.name for p in tmp_path.iterdir()] == ['t.jsonl']   # no temporary file left behind
