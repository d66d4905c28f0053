"Modules import only what they need: training code never pulls in the replay widget's plotting stack."
import os, subprocess, sys
import pytest
from conftest import ROOT

CHECK = """import sys
heavy = lambda: sorted({m.split('.')[0] for m in sys.modules} & {'plotly', 'ipywidgets'})
import venus_nb.igpo, venus_nb.rewards
print(heavy())
import venus_nb.replay
print(heavy())"""

def test_igpo_imports_without_plotting_stack():
    "IGPO and the rewards import no plotly or ipywidgets; the replay does (so the check can see them)"
    r = subprocess.run([sys.executable, '-c', CHECK], cwd=ROOT, env={**os.environ, 'PYTHONPATH': str(ROOT)},
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.splitlines()[-2:] == ['[]', "['ipywidgets', 'plotly']"]

def test_replay_still_exports_scored():
    "`Scored` lives in rewards; the replay module re-exports it, so old imports keep working"
    from venus_nb.replay import Scored
    from venus_nb import rewards
    assert Scored is rewards.Scored

MOVED = {'base': {'trajectory': ['LoadError', 'BadRecord', 'MAX_RECORD_BYTES', 'MAX_DEPTH', 'must_exist', 'decode_utf8',
                                 'parse_json', 'jsonl_records', 'atomic_open', 'write_atomic'],
                  'web': ['save_config', 'load_config'],
                  'tools': ['save_config', 'load_config', 'LoadError', 'atomic_open', 'write_atomic']},
         'corpus': {'eval': ['parse_r1_passage', 'r1_passages', 'passage_docs']},
         'rollout': {'igpo': ['UnslothEngine']}}

def test_moved_names_still_import_from_their_old_modules():
    """What moved to `base`, `corpus` or `rollout` is the same object under its old module (and in that module's
    `__all__` where it was)"""
    import importlib
    for home, olds in MOVED.items():
        new = importlib.import_module(f'venus_nb.{home}')
        for old, names in olds.items():
            mod = importlib.import_module(f'venus_nb.{old}')
            for n in names:
                assert getattr(mod, n) is getattr(new, n), f'venus_nb.{old}.{n}'
                assert (old == 'tools' and n in ('LoadError', 'atomic_open', 'write_atomic')
                        or n in mod.__all__), f'venus_nb.{old}.__all__ lacks {n}'
    from venus_nb import eval, judges
    assert eval.norm_text is judges.normalize_answer

# --- each public name has one home; names that moved keep their old import path for a while, with a warning ---

DEPRECATED = {'rewards': ('judges', ['LLMJudge', 'exact_match', 'f1_score', 'judge_fn', 'outcomes', 'JUDGE_PROMPT',
                                     'normalize_answer']),
              'igpo': ('judges', ['imported', 'untrusted']),
              'sft': ('checkpoints', ['newest_whole', 'first_problem', 'TRACKERS', 'one_line']),
              'experiment': ('data', ['question_kind']),
              'cli': ('demo', ['step_load', 'turn_rewards_page', 'demo_igpo_config'])}

def test_moved_names_warn_and_give_the_object_from_their_new_home():
    import importlib, warnings
    for old, (home, names) in DEPRECATED.items():
        mod, new = importlib.import_module(f'venus_nb.{old}'), importlib.import_module(f'venus_nb.{home}')
        for n in names:
            assert n not in getattr(mod, '__all__', []), f'venus_nb.{old}.__all__ still lists {n}'
            with warnings.catch_warnings(record=True) as seen:
                warnings.simplefilter('always')
                got = getattr(mod, n) if n not in vars(mod) else None
            if got is None: continue   # imported there for the module's own use: no alias needed
            assert (got is getattr(new, n)
                    and any(issubclass(w.category, DeprecationWarning) and f'venus_nb.{home}' in str(w.message)
                            for w in seen)), f'{old}.{n}'
    import venus_nb.rewards as r
    with pytest.raises(AttributeError, match='no_such_name'): r.no_such_name

# names two modules list in `__all__`, kept so that imports written against either keep working;
# nothing may join this list
REEXPORTED = {'MAX_RECORD_BYTES', 'MAX_DEPTH', 'BadRecord', 'must_exist', 'decode_utf8', 'parse_json', 'jsonl_records',
              'LoadError', 'atomic_open', 'write_atomic', 'save_config', 'load_config', 'parse_r1_passage',
              'r1_passages', 'passage_docs', 'TOOL_KINDS', 'adapter_base', 'UnslothEngine', 'resolve', 'free_port',
              'Scored', 'search_observation', 'visit_observation', 'JSON5_MAX_CHARS'}

def test_every_public_name_has_one_home():
    "No name is in two modules' `__all__` beyond the known re-exports (tools' star re-exports of its backends aside)"
    import ast, collections
    homes = collections.defaultdict(list)
    for f in sorted((ROOT/'venus_nb').glob('*.py')):
        tree = ast.parse(f.read_text())
        alls = [ast.literal_eval(n.value) for n in tree.body
                if isinstance(n, ast.Assign) and getattr(n.targets[0], 'id', '') == '__all__']
        for name in (alls[0] if alls else []): homes[name].append(f.stem)
    twice = {n: ms for n, ms in homes.items() if len(ms) > 1}
    assert set(twice) <= REEXPORTED, {n: twice[n] for n in set(twice) - REEXPORTED}
