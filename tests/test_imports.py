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
