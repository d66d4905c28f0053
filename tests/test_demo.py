"""`make demo`'s whole path (stage 1, the warm start, then rollouts, IGPO, evaluation and the rollout replay) in a fresh
output folder, and what stage 2 must show: IGPO steps that carry a learning signal; the demo's cheap steps on their
own, its rollout replay one question's group."""
import csv, os, subprocess, sys, types, re
from pathlib import Path
from types import SimpleNamespace
import pytest, pandas as pd
from conftest import WORLD
from test_replay import rollout
from venus_nb.demo import error_rule, rule_counts, change_line
from venus_nb.trajectory import read_jsonl
from venus_nb.rewards import Scored
from venus_nb.replay import random_logps

ROOT = Path(__file__).resolve().parents[1]

@pytest.mark.slow
def test_demo_end_to_end(tmp_path):
    out = tmp_path/'out'
    run = subprocess.run([str(Path(sys.executable).parent/'venus-nb'), 'demo', '--out', str(out)], cwd=ROOT,
                         capture_output=True, text=True, timeout=1800,
                         env={**os.environ, 'OMP_NUM_THREADS': os.environ.get('OMP_NUM_THREADS', '1')})
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    for f in ('cleaned.jsonl', 'sft.jsonl', 'replay.html', 'rollouts_warm.jsonl', 'igpo_metrics.csv',
              'eval_pass_at_k.csv', 'replay_rollouts.html'):
        assert (out/f).exists() and (out/f).stat().st_size > 0, f
    steps = list(csv.DictReader(open(out/'igpo_metrics.csv')))
    assert [r['step'] for r in steps] == ['1', '2']
    for r in steps:   # every step learns something, from turns that are mostly well formed
        assert float(r['loss']) != 0 and float(r['grad_norm']) > 0, r
        assert float(r['format_error_rate']) <= 0.3, r
        assert int(float(r['ig_slots'])) > 0, r
    assert any(int(float(r['groups_differing'])) > 0 for r in steps), steps
    assert run.stdout.count('raised the turns with positive advantage') == 2   # one plain line per step
    assert 'rounds away' not in run.stderr   # a bf16 engine serves the adapter instead of merging it
    assert 'logp_mismatch_mean' in run.stdout   # the engine-trainer gap, printed with each step
    page = (out/'replay_rollouts.html').read_text()
    assert 'credit: visit' in page   # IG slots drawn, with the arcs of the searches that share their credit
    assert {r['model'] for r in csv.DictReader(open(out/'eval_pass_at_k.csv'))} == {'warm start', 'IGPO'}

def test_format_errors_are_grouped_by_rule():
    assert (error_rule('tool call is not valid JSON: <string>:1 Unexpected """ at column 35')
            == 'tool call is not valid JSON')
    assert error_rule('expected one <answer>, found 2') == error_rule('expected one <answer>, found 3')
    sample = read_jsonl(ROOT/'data/sample/world/trajectories.jsonl').trajectories
    raw = {r for t in sample for _, r in t.format_errors() if 'JSON' in r}
    assert len(raw) == 2   # two positions in the sample...
    assert rule_counts(sample)['tool call is not valid JSON'] == 2 and len(rule_counts(sample)) == 2   # ...one rule

def test_demo_change_line_says_what_four_questions_can_show():
    report = lambda label, acc: types.SimpleNamespace(label=label, summary=dict(samples_per_question=4),
        per_question=lambda: pd.DataFrame(dict(question=['a', 'b', 'c', 'd'], accuracy=acc)))
    line = change_line(report('warm start', [0.5, 0.25, 0.0, 0.5]), report('IGPO', [0.0, 0.25, 0.0, 0.25]))
    assert ('IGPO − warm start, Pass@1: -0.19' in line and 'on 4 questions × 4 samples' in line
            and '2 questions differ' in line)
    assert 'sign test p = 0.50' in line and 'no difference measured' in line and 'noise, not a result' in line

def test_demo_trains_at_the_step_size_measured_for_the_embedded_model(tmp_path):
    """The demo's LoRA lr is the one that moves the embedded model as far as the full step the experiment measured
    (6e-6), not DR-Venus' 4B one"""
    from types import SimpleNamespace
    from venus_nb.demo import demo_igpo_config
    from venus_nb.experiment import ExperimentConfig
    from venus_nb.igpo import CPU_FULL_LR, CPU_LORA_LR, LORA_LR, learning_rate
    from venus_nb.warm_start import WarmConfig
    cfg = demo_igpo_config(SimpleNamespace(config=WarmConfig()), tmp_path)
    assert cfg.lora_r is not None and learning_rate(cfg) == CPU_LORA_LR == pytest.approx(6 * LORA_LR)
    assert ExperimentConfig.cpu_learn().igpo['lr'] == CPU_FULL_LR

def test_each_warm_start_trains_into_a_folder_of_its_own(tmp_path):
    "A demo of another model into the same --out must not resume the first one's IGPO checkpoint"
    from venus_nb.demo import demo_igpo_config
    from venus_nb.warm_start import WarmConfig
    one, other = (demo_igpo_config(SimpleNamespace(config=WarmConfig(model=m)), tmp_path) for m in ('a', 'b'))
    assert one.output_dir != other.output_dir and one.output_dir.startswith(str(tmp_path/'igpo'))

def test_a_demo_whose_cleaning_keeps_nothing_says_so(tmp_path, capsys):
    "Every answer wrong: cleaning keeps none, and the demo says that in one line instead of failing on max()"
    from venus_nb.cli import main
    from venus_nb.synth import generate, SynthConfig
    from venus_nb.trajectory import write_jsonl
    write_jsonl(generate(SynthConfig(n=4, wrong_answer=1.0)).trajectories(), tmp_path/'wrong.jsonl')
    with pytest.raises(SystemExit) as e:
        main(['demo', '--data', str(tmp_path/'wrong.jsonl'), '--out', str(tmp_path/'o')])
    err = capsys.readouterr().err
    assert e.value.code == 1 and 'cleaning kept no trajectory' in err and 'traceback' not in err

# --- the demo's rollout replay: one question's group ------------------------------------------------------------------

def test_the_demo_replays_one_questions_group(tmp_path, capsys, tiny_dir):
    from venus_nb.demo import rollouts_page, turn_rewards_page
    a, b = [rollout('svsv', seed=0), rollout('sv', seed=0, answer='7'), rollout('svv', seed=0)], \
           [rollout('vv', seed=1), rollout('sv', seed=1)]
    last = Scored.from_logps(a + b, [random_logps(t, seed=i) for i, t in enumerate(a + b)],
                                outcome=[1.0, 0.0, 1.0, 1.0, 1.0], groups=[5, 5, 5, 9, 9])
    page = rollouts_page(last, tmp_path)[0].read_text()
    table = re.search(r'<table class="venus-group">.*?</table>', page, re.S).group(0)
    assert table.count('<tr') == 1 + len(a)   # a header row, then the G rollouts of one question
    assert 'question 0' in page and 'question 1' not in page
    # the expert trajectories of stage 1: each its own question, so each its own group, never one group of three
    kept = read_jsonl(WORLD/'trajectories.jsonl').trajectories
    files = turn_rewards_page(kept, SimpleNamespace(path=tiny_dir), tmp_path)
    assert '(3 questions, each its own group)' in capsys.readouterr().out
    assert '<table class="venus-group">' not in files[1].read_text()
    import pandas as pd
    assert sorted(pd.read_csv(files[0]).group.unique()) == [0, 1, 2]
