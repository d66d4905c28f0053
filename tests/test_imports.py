"Modules import only what they need: training code never pulls in the replay widget's plotting stack."
import os, subprocess, sys
from conftest import ROOT

CHECK = """import sys
heavy = lambda: sorted({m.split('.')[0] for m in sys.modules} & {'plotly', 'ipywidgets'})
import venus_nb.igpo, venus_nb.rewards
print(heavy())
import venus_nb.replay
print(heavy())"""

def test_igpo_imports_without_plotting_stack():
    "IGPO and the rewards import no plotly or ipywidgets; the replay does (so the check can see them)"
    r = subprocess.run([sys.executable, '-c', CHECK], cwd=ROOT, env={**os.environ, 'PYTHONPATH': str(ROOT)}, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.splitlines()[-2:] == ['[]', "['ipywidgets', 'plotly']"]

def test_replay_still_exports_scored():
    "`Scored` lives in rewards; the replay module re-exports it, so old imports keep working"
    from venus_nb.replay import Scored
    from venus_nb import rewards
    assert Scored is rewards.Scored

MOVED = {'base': {'trajectory': ['LoadError', 'BadRecord', 'MAX_RECORD_BYTES', 'MAX_DEPTH', 'must_exist', 'decode_utf8', 'parse_json',
                                 'jsonl_records', 'atomic_open', 'write_atomic'],
                  'web': ['save_config', 'load_config'], 'tools': ['save_config', 'load_config', 'LoadError', 'atomic_open', 'write_atomic']},
         'corpus': {'eval': ['parse_r1_passage', 'r1_passages', 'passage_docs']},
         'rollout': {'igpo': ['UnslothEngine']}}

def test_moved_names_still_import_from_their_old_modules():
    "What moved to `base`, `corpus` or `rollout` is the same object under its old module (and in that module's `__all__` where it was)"
    import importlib
    for home, olds in MOVED.items():
        new = importlib.import_module(f'venus_nb.{home}')
        for old, names in olds.items():
            mod = importlib.import_module(f'venus_nb.{old}')
            for n in names:
                assert getattr(mod, n) is getattr(new, n), f'venus_nb.{old}.{n}'
                assert old == 'tools' and n in ('LoadError', 'atomic_open', 'write_atomic') or n in mod.__all__, f'venus_nb.{old}.__all__ lacks {n}'
    from venus_nb import eval, rewards
    assert eval.norm_text is rewards.normalize_answer
