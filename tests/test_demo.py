"`make demo`'s whole path (stage 1, then rollouts, IGPO, evaluation and the rollout replay) in a fresh output folder."
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
    for f in ('cleaned.jsonl', 'sft.jsonl', 'replay.html', 'rollouts_sft.jsonl', 'igpo_metrics.csv', 'eval_pass_at_k.csv', 'replay_rollouts.html'):
        assert (out/f).exists() and (out/f).stat().st_size > 0, f
    steps = list(csv.DictReader(open(out/'igpo_metrics.csv')))
    assert [r['step'] for r in steps] == ['1', '2']
    assert {r['model'] for r in csv.DictReader(open(out/'eval_pass_at_k.csv'))} == {'SFT', 'IGPO'}
