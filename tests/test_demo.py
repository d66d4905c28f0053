"""`make demo`'s whole path (stage 1, the warm start, then rollouts, IGPO, evaluation and the rollout replay) in a fresh
output folder, and what stage 2 must show: IGPO steps that carry a learning signal."""
import csv, os, subprocess, sys
from pathlib import Path
import pytest

ROOT = Path(__file__).resolve().parents[1]

@pytest.mark.slow
def test_demo_end_to_end(tmp_path):
    out = tmp_path/'out'
    run = subprocess.run([str(Path(sys.executable).parent/'venus-nb'), 'demo', '--out', str(out)], cwd=ROOT, capture_output=True, text=True,
                         timeout=1800, env={**os.environ, 'OMP_NUM_THREADS': os.environ.get('OMP_NUM_THREADS', '1')})
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    for f in ('cleaned.jsonl', 'sft.jsonl', 'replay.html', 'rollouts_warm.jsonl', 'igpo_metrics.csv', 'eval_pass_at_k.csv', 'replay_rollouts.html'):
        assert (out/f).exists() and (out/f).stat().st_size > 0, f
    steps = list(csv.DictReader(open(out/'igpo_metrics.csv')))
    assert [r['step'] for r in steps] == ['1', '2']
    for r in steps:   # every step learns something, from turns that are mostly well formed
        assert float(r['loss']) != 0 and float(r['grad_norm']) > 0, r
        assert float(r['format_error_rate']) <= 0.3, r
        assert int(float(r['ig_slots'])) > 0, r
    assert any(int(float(r['groups_differing'])) > 0 for r in steps), steps
    assert run.stdout.count('raised the turns with positive advantage') == 2   # one plain line per step
    page = (out/'replay_rollouts.html').read_text()
    assert 'credit: visit' in page   # IG slots drawn, with the arcs of the searches that share their credit
    assert {r['model'] for r in csv.DictReader(open(out/'eval_pass_at_k.csv'))} == {'warm start', 'IGPO'}
