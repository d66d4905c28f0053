"""Modules import only what they need (training code never pulls in the replay widget's plotting stack); every public
name has one home, and no module answers for names it does not define."""
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
    r = subprocess.run([sys.executable, '-c', CHECK], cwd=ROOT, env={**os.environ, 'PYTHONPATH': str(ROOT)},
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.splitlines()[-2:] == ['[]', "['ipywidgets', 'plotly']"]

# --- each public name has one home ---

def test_every_public_name_has_one_home():
    "No name is in two modules' `__all__`"
    import ast, collections
    homes = collections.defaultdict(list)
    for f in sorted((ROOT/'venus_nb').glob('*.py')):
        tree = ast.parse(f.read_text())
        alls = [ast.literal_eval(n.value) for n in tree.body
                if isinstance(n, ast.Assign) and getattr(n.targets[0], 'id', '') == '__all__']
        for name in (alls[0] if alls else []): homes[name].append(f.stem)
    assert not (twice := {n: ms for n, ms in homes.items() if len(ms) > 1}), twice

def test_no_module_answers_for_names_it_does_not_define():
    "No module-level `__getattr__`: the package was never released, so no name keeps an old import path"
    import ast
    found = [f.name for f in sorted((ROOT/'venus_nb').glob('*.py')) for n in ast.parse(f.read_text()).body
             if (isinstance(n, ast.FunctionDef) and n.name == '__getattr__')
             or (isinstance(n, ast.Assign) and any(getattr(t, 'id', '') == '__getattr__' for t in n.targets))]
    assert found == [], found
