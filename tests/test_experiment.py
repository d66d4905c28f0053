"""Experiment: signal density on a hand-made batch, bootstrap intervals, equal budgets, a resumable run on a tiny model;
absurd settings and a config that names code are refused; the report's title survives an XSS payload in Chromium."""
import json, re, time
from dataclasses import replace
import numpy as np, pandas as pd, pytest
from datasets import Dataset
from test_igpo import _write, HOSTILE, strict_judge
from test_base import refused
from venus_nb.experiment import (signal_density, advantages_under, summary_table, score_matrix, ExperimentConfig,
                                 Start, arm_config, experiment, kind_table, eval_steps, heldout_curve, check_resume,
                                 final_evals, read_experiment)
from venus_nb.stats import bootstrap_mean
from venus_nb.rewards import Scored
from venus_nb.trajectory import Trajectory
from venus_nb.cli import main

def _traj(answer, gt='y'):
    call = lambda name, args: (f'<think>t</think>\n<tool_call>\n{json.dumps(dict(name=name, arguments=args))}\n'
                               '</tool_call>')
    msgs = [dict(role='user', content='Q?'), dict(role='assistant', content=call('search', {'query': ['q']})),
            dict(role='user', content='<tool_response>\nr\n</tool_response>'),
            dict(role='assistant', content=call('visit', {'url': ['u'], 'goal': 'g'})),
            dict(role='user', content='<tool_response>\np\n</tool_response>'),
            dict(role='assistant', content=f'<think>a</think>\n<answer>{answer}</answer>')]
    return Trajectory.from_messages(msgs, gt=gt)

def _batch(outcome, ig):
    return Scored([_traj('y' if o else 'n') for o in outcome], [0, 0, 1, 1], [[None, v, None] for v in ig],
                  list(outcome))

def test_grpo_is_silent_where_every_outcome_agrees_and_igpo_is_not():
    d = signal_density(_batch([0.0, 0.0, 1.0, 0.0], [0.4, -0.3, 0.5, 0.1]))
    assert d['groups'] == 2 and d['grpo_silent_groups'] == 0.5 and d['igpo_silent_groups'] == 0.0
    assert d['grpo_nonzero_turns'] == pytest.approx(0.5)      # the 6 turns of the differing group, out of 12
    assert d['igpo_nonzero_turns'] > d['grpo_nonzero_turns']
    assert (d['visit_ig_correct'] == pytest.approx(0.5)
            and d['visit_ig_incorrect'] == pytest.approx((0.4 - 0.3 + 0.1) / 3))
    assert d['browse_correct'] == d['browse_incorrect'] == 0.5

def test_all_failed_batch_gives_grpo_nothing():
    s = _batch([0.0] * 4, [0.2, -0.1, 0.3, 0.0])
    assert all(a == 0 for row in advantages_under(s, estimator='grpo') for a in row)
    assert signal_density(s)['grpo_silent_groups'] == 1.0 and np.isnan(signal_density(s)['visit_ig_correct'])

def _evals(p_a, p_b, seeds=3, questions=20, n=4, seed=0):
    rng = np.random.default_rng(seed)
    return pd.DataFrame([dict(arm=a, seed=s, question=q, n=n, c=int(rng.binomial(n, p)))
                         for a, p in (('IGPO (DR-Venus)', p_a), ('GRPO', p_b))
                         for s in range(seeds) for q in range(questions)])

def test_summary_has_every_arm_and_a_paired_difference():
    t = summary_table(_evals(0.8, 0.2), ks=(1, 4))
    assert list(t.arm) == ['IGPO (DR-Venus)', 'GRPO', 'IGPO (DR-Venus) − GRPO'] * 2 and list(t.k) == [1] * 3 + [4] * 3
    d = t[(t.arm.str.contains('−')) & (t.k == 1)].iloc[0]
    assert d.lo > 0 and d['mean'] == pytest.approx(t.iloc[0]['mean'] - t.iloc[1]['mean'])
    same = summary_table(_evals(0.5, 0.5, seed=3), ks=(1,))
    assert same.iloc[2].lo < 0 < same.iloc[2].hi                # no difference: the interval straddles zero

def test_a_question_one_arm_lacks_is_refused_whichever_arm():
    "No pair for it, and no silent dropping: the same error whichever arm lacks it"
    from venus_nb.experiment import paired_difference
    e = pd.DataFrame([dict(arm=a, seed=s, question=q, n=4, c=c) for a in ('A', 'B') for s in (0, 1)
                      for q, c in zip('xyz', (4, 1, 0))])
    for lacks, said in (('B', "A only: ['z']; B only: []"), ('A', "A only: []; B only: ['z']")):
        with pytest.raises(ValueError, match=re.escape(f'other questions ({said})')):
            paired_difference(e[~((e.arm == lacks) & (e.question == 'z'))], 'A', 'B', 1)
    assert paired_difference(e, 'A', 'B', 1).shape == (2, 3)

def test_pass_at_k_matrix_is_unbiased_per_question():
    e = pd.DataFrame([dict(arm='GRPO', seed=0, question=0, n=4, c=1), dict(arm='GRPO', seed=0, question=1, n=4, c=0)])
    m = score_matrix(e, 'GRPO', 2)
    assert m.loc[0, 0] == pytest.approx(0.5) and m.loc[0, 1] == 0.0   # 1 - C(3,2)/C(4,2)

def test_every_arm_gets_the_same_budget():
    start = Start(lambda: None, [], [], None,
                  __import__('venus_nb.rollout', fromlist=['RolloutConfig']).RolloutConfig(G=8))
    cfg = ExperimentConfig(arms=('IGPO (DR-Venus)', 'GRPO', 'split credit', 'γ=0.9'), G=4, igpo=dict(lr=1e-5))
    runs = [arm_config(cfg, start, a, 1) for a in cfg.arms]
    assert {(r.steps, r.questions_per_step, r.rollout.G, r.lr, r.seed) for r in runs} == {(4, 2, 4, 1e-5, 1)}
    assert (len({r.output_dir for r in runs}) == 4 and runs[1].rewards.estimator == 'grpo'
            and runs[3].rewards.gamma == 0.9)
    with pytest.raises(ValueError, match='unknown arm'): arm_config(cfg, start, 'PPO', 0)

def test_config_reads_yaml(tmp_path):
    (tmp_path/'c.yaml').write_text('arms: [GRPO]\nseeds: [5]\nsteps: 2\nigpo: {lr: 0.001}\n')
    c = ExperimentConfig.load(tmp_path/'c.yaml')
    assert c.arms == ('GRPO',) and c.seeds == (5,) and c.igpo == {'lr': 0.001} and c.rollouts_per_run == 2 * 2 * 4

def test_tiny_experiment_writes_everything_and_resumes(tmp_path):
    from venus_nb.models import tiny_model
    from venus_nb.evaluation import world_questions
    from venus_nb.rollout import RolloutConfig
    qa, corpus = world_questions()
    start = Start(lambda: tiny_model('llama'), qa[:4], qa[4:6], corpus,
                  RolloutConfig(max_turns=2, max_new_tokens=8, min_answer_tokens=4, turn_jitter=0, progress=False))
    cfg = ExperimentConfig(seeds=(0, 1), steps=2, questions_per_step=1, G=2, eval_questions=2, ks=(1, 2),
                           igpo=dict(lr=1e-3), output_dir=str(tmp_path))
    said = []
    res = experiment(cfg, start, say=said.append)
    assert len(said) == 6 and set(res.evals.arm) == {'start', 'IGPO (DR-Venus)', 'GRPO'}
    assert len(res.steps) == 2 * 2 * 2 and set(res.steps.step) == {1, 2}
    assert (res.evals.n == 2).all() and len(res.evals) == 3 * 2 * 2
    assert (len(res.summary) == 5 * 2
            and {'summary.csv', 'summary.json', 'report.html', 'steps.csv', 'evals.csv', 'config.json'}
            <= {p.name for p in tmp_path.iterdir()})
    page = (tmp_path/'report.html').read_text()
    assert 'IGPO against GRPO' in page and 'https://cdn' not in page.split('<body>')[0]
    assert json.loads((tmp_path/'summary.json').read_text())['rollouts_per_run'] == 4
    from venus_nb.experiment import eval_rollouts_path
    from venus_nb.trajectory import read_jsonl
    # what each run did on the held-out questions, not only its score
    saved = read_jsonl(eval_rollouts_path(cfg, 'GRPO', 1, 2)).trajectories
    assert (len(saved) == 2 * 2
            and sorted(p.name for p in (tmp_path/'rollouts').iterdir())[0] == 'grpo-seed0-step2.jsonl')
    said.clear()
    again = experiment(cfg, start, say=said.append)   # every run is on disk: nothing runs again
    assert said == [] and again.evals.equals(pd.read_csv(tmp_path/'evals.csv'))
    assert again.seconds == res.seconds > 0 and len(again.runs) == 6   # a resumed experiment keeps its runs' time
    assert json.loads((tmp_path/'summary.json').read_text())['seconds'] == round(res.seconds, 1)

def test_cli_experiment_reads_its_config_and_out(tmp_path, monkeypatch, capsys):
    import venus_nb.experiment as ex
    from venus_nb.cli import main
    seen = {}
    monkeypatch.setattr(ex, 'warm_signal',
                        lambda warm=None: (dict(grpo_silent_groups=0.4, igpo_silent_groups=0.0), None))
    def fake(cfg, say=print, with_start=True):
        seen['cfg'], seen['with_start'] = cfg, with_start
        ev = pd.DataFrame([dict(arm=a, seed=0, question=0, n=4, c=1) for a in cfg.arms])
        return ex.ExperimentResult(cfg, pd.DataFrame(), ev, summary_table(ev, cfg.ks), tmp_path/'x',
                                   pd.DataFrame([dict(arm='GRPO', seed=0, seconds=1.0)]))
    monkeypatch.setattr(ex, 'experiment', fake)
    (tmp_path/'c.yaml').write_text('arms: [GRPO]\nseeds: [3]\nks: [1]\n')
    main(['experiment', '--config', str(tmp_path/'c.yaml'), '--out', str(tmp_path/'x')])
    out = capsys.readouterr().out
    assert seen['cfg'].arms == ('GRPO',) and seen['cfg'].output_dir == str(tmp_path/'x') and seen['with_start']
    # the signal density (IG over every check rollout) only when asked
    assert 'report:' in out and 'silent_groups' not in out
    main(['experiment', '--config', str(tmp_path/'c.yaml'), '--out', str(tmp_path/'x'), '--signal'])
    assert 'grpo_silent_groups: 0.400' in capsys.readouterr().out
    seen.clear()
    main(['experiment', '--signal-only'])
    assert 'cfg' not in seen

def test_fewer_than_three_seeds_are_not_resampled():
    m = np.random.default_rng(0).random((2, 30))
    assert bootstrap_mean(m)[1:] == bootstrap_mean(m.mean(0, keepdims=True))[1:]     # only questions resampled
    m3 = np.random.default_rng(0).random((3, 30))
    assert bootstrap_mean(m3)[1:] != bootstrap_mean(m3.mean(0, keepdims=True))[1:]   # from 3 seeds on, seeds too
    t = summary_table(_evals(0.6, 0.4, seeds=2), ks=(1,))
    assert set(t.resampled) == {'questions'} and t.discordant.notna().sum() == 1
    assert set(summary_table(_evals(0.6, 0.4), ks=(1,)).resampled) == {'seeds and questions'}

def test_summary_pairs_against_the_start_and_both_grpo_arms():
    e = pd.concat([_evals(0.8, 0.3),
                   _evals(0.3, 0.3, seed=1).replace({'IGPO (DR-Venus)': 'start', 'GRPO': 'GRPO + format penalty'})])
    t = summary_table(e, ks=(1,))
    diffs = t[t.arm.str.contains('−')]
    assert list(diffs.arm) == ['IGPO (DR-Venus) − start', 'IGPO (DR-Venus) − GRPO',
                               'IGPO (DR-Venus) − GRPO + format penalty']
    assert (diffs.verdict == 'higher').all() and (diffs.discordant == diffs.better + diffs.worse).all()

def test_kinds_and_curves_from_evaluations_along_the_run():
    e = _evals(0.7, 0.3).assign(kind=lambda d: np.where(d.question % 2, '2-hop', '1-hop'), step=4, rollouts=64,
                                turns=3.0, visits=1.0)
    early = e.assign(step=2, rollouts=32, c=0)
    both = pd.concat([early, e], ignore_index=True)
    # the summary reads each run's last evaluation
    assert final_evals(both).reset_index(drop=True).equals(e) and summary_table(both).equals(summary_table(e))
    k = kind_table(e, ks=(1,))
    assert set(k.kind) == {'1-hop', '2-hop'} and (k.questions[~k.arm.str.contains('−')] == 10).all()
    c = heldout_curve(both)
    assert (set(c.kind) == {'all', '1-hop', '2-hop'}
            and list(c[(c.kind == 'all') & (c.arm == 'GRPO')].rollouts) == [32, 64])
    assert c[(c.kind == 'all') & (c.step == 2)]['mean'].eq(0).all()

def test_a_stop_cut_off_after_its_training_counts_that_training(tmp_path):
    """A run that trained and was lost during its evaluation resumes at its last checkpoint: its stop's time holds the
    training that stretch did (`earlier_s`, from the step phases), and the experiment's seconds count it"""
    from venus_nb.models import tiny_model
    from venus_nb.evaluation import world_questions
    from venus_nb.rollout import RolloutConfig
    from venus_nb.experiment import PHASES
    qa, corpus = world_questions()
    start = Start(lambda: tiny_model('llama'), qa[:4], qa[4:6], corpus,
                  RolloutConfig(max_turns=2, max_new_tokens=8, min_answer_tokens=4, turn_jitter=0, progress=False))
    cfg = ExperimentConfig(seeds=(0,), steps=2, questions_per_step=1, G=2, eval_questions=2, ks=(1,),
                           igpo=dict(lr=1e-3), output_dir=str(tmp_path))
    res = experiment(cfg, start, say=lambda *a: None)
    assert len(res.runs) == 3 and (res.runs.earlier_s == 0).all()         # nothing was cut off
    for name in ('runs', 'evals'):                    # GRPO's stop lost after its training: no row, its checkpoint kept
        d = pd.read_csv(tmp_path/f'{name}.csv')
        d[d.arm != 'GRPO'].to_csv(tmp_path/f'{name}.csv', index=False)
    again = experiment(cfg, start, say=lambda *a: None)
    trained = float(again.steps[again.steps.arm == 'GRPO'][PHASES].to_numpy().sum())
    row = again.runs[again.runs.arm == 'GRPO'].iloc[0]
    assert trained > 0 and row.earlier_s == pytest.approx(trained, abs=0.1)
    assert again.seconds == pytest.approx(again.runs.seconds.sum() + row.earlier_s)

def test_eval_steps_and_the_resume_refusal(tmp_path):
    assert (eval_steps(ExperimentConfig(steps=10, eval_every=4)) == [4, 8, 10]
            and eval_steps(ExperimentConfig(steps=3)) == [3])
    cfg = ExperimentConfig(output_dir=str(tmp_path))
    cfg.save(tmp_path/'config.json')
    check_resume(tmp_path, cfg)   # the same configuration: allowed
    with pytest.raises(ValueError, match=r"another configuration \(G: 4 there, 8 now; steps: 4 there, 2 now\)"):
        check_resume(tmp_path, replace(cfg, steps=2, G=8))
    with pytest.raises(ValueError, match='eval_every'): ExperimentConfig(eval_every=0)

def test_a_folder_grows_but_keeps_what_it_ran(tmp_path):
    no_kl = {'GRPO, no KL': dict(arm='GRPO', kl_coef=0.0)}
    cfg = ExperimentConfig(output_dir=str(tmp_path), arms=('IGPO (DR-Venus)', 'GRPO, no KL'), variants=no_kl)
    cfg.save(tmp_path/'config.json')
    # more steps, seeds, arms and variants only add runs
    check_resume(tmp_path, replace(cfg, steps=8, seeds=cfg.seeds + (7,), arms=cfg.arms + ('GRPO', 'IGPO, no KL'),
                                   variants=no_kl | {'IGPO, no KL': dict(arm='IGPO (DR-Venus)', kl_coef=0.0)}))
    with pytest.raises(ValueError, match='variants: '):   # a saved variant redefined
        check_resume(tmp_path, replace(cfg, variants={'GRPO, no KL': dict(arm='GRPO', kl_coef=0.01)}))
    with pytest.raises(ValueError, match='arms: '):       # a saved arm left out
        check_resume(tmp_path, replace(cfg, arms=('IGPO (DR-Venus)',), variants={}))

def test_the_cpu_learn_yaml_is_the_named_configuration():
    from pathlib import Path
    yaml = Path(__file__).resolve().parents[1]/'examples'/'experiment'/'cpu_learn.yaml'
    assert ExperimentConfig.load(yaml) == ExperimentConfig.cpu_learn()
    cfg = ExperimentConfig.cpu_learn()
    assert (cfg.eval_questions >= 64 and cfg.G >= 4
            and set(cfg.arms) == {'IGPO (DR-Venus)', 'GRPO', 'GRPO + format penalty'})

def test_cpu_learn_trains_each_arm_as_the_variants_its_run_was_made_with():
    """examples/experiment/cpu_learn/ ran each arm as a 3:1 variant of it (evaluated at step 12 = the last); each arm's
    `IGPOConfig` is the same as under cpu_learn(), only its folder and run name differ"""
    from venus_nb.rollout import RolloutConfig
    learn = ExperimentConfig.cpu_learn()
    labels = {'IGPO (DR-Venus)': 'IGPO, 3:1 two-hop batches', 'GRPO + format penalty':
              'GRPO + format penalty, 3:1 two-hop batches', 'GRPO': 'GRPO, 3:1 two-hop batches'}
    shares = learn.igpo['kind_shares']
    ran = replace(learn, arms=tuple(labels.values()), eval_every=learn.steps,
                  igpo={k: v for k, v in learn.igpo.items() if k != 'kind_shares'},
                  variants={label: dict(arm=arm, kind_shares=shares) for arm, label in labels.items()})
    start, where = Start(lambda: None, [], [], None, RolloutConfig()), dict.fromkeys(
        ('output_dir', 'logging_dir', 'run_name'), '')
    same = lambda cfg, arm: replace(arm_config(cfg, start, arm, 0), **where)
    for arm, label in labels.items(): assert same(learn, arm) == same(ran, label), arm
    assert eval_steps(learn) == eval_steps(ran) == [12]
    assert same(learn, 'GRPO') != same(replace(learn, igpo=ran.igpo), 'GRPO')   # the batches' shares do count

def test_the_start_reuses_its_check_rollouts_when_they_are_the_held_out_questions():
    from venus_nb.experiment import checked_rollouts, reference_rows
    from venus_nb.rollout import RolloutConfig
    qs = [dict(id=i, question=f'Q{i}?', answer='y', kind='1-hop') for i in range(2)]
    def rollout_of(g, answer):
        t = _traj(answer)
        t.question = f'Q{g}?'
        t.meta.update(group=g)
        return t
    trajs = [rollout_of(g, a) for g in range(2) for a in ('y', 'n')]
    start = Start(lambda: None, [], qs, None, RolloutConfig(G=2), checked=trajs)
    assert checked_rollouts(start, 2) == trajs and checked_rollouts(start, 4) is None   # G must match
    assert checked_rollouts(replace(start, checked=trajs[:3]), 2) is None                 # every question, G times
    rows = reference_rows(start, ExperimentConfig(G=2, seeds=(0,), ks=(1, 2)), 0)         # no engine, no policy needed
    assert list(rows.n) == [2, 2] and list(rows.c) == [1, 1] and list(rows.kind) == ['1-hop'] * 2

def test_a_folder_from_before_evaluations_along_the_run_still_reads(tmp_path):
    from venus_nb.experiment import read_experiment, write_results
    ExperimentConfig(arms=('IGPO (DR-Venus)', 'GRPO'), seeds=(0,), ks=(1,),
                     output_dir=str(tmp_path)).save(tmp_path/'config.json')
    # arm, seed, question, n, c: no step, kind, turns
    _evals(0.6, 0.4, seeds=1).to_csv(tmp_path/'evals.csv', index=False)
    res = read_experiment(tmp_path)
    assert len(res.curve) == 0 and len(res.by_kind) == 0 and len(res.summary) == 3
    write_results(res)
    assert (tmp_path/'report.html').exists()
    # strict JSON
    json.loads((tmp_path/'summary.json').read_text(), parse_constant=lambda c: pytest.fail(f'{c} in summary.json'))

def test_strict_json_makes_missing_values_null():
    from venus_nb.experiment import strict_json
    assert (strict_json(dict(a=[1.0, float('nan'), (np.float32('inf'), 'x')], b=np.float64(2.5)))
            == dict(a=[1.0, None, [None, 'x']], b=2.5))

def test_a_variant_is_an_arm_of_its_own(tmp_path):
    from venus_nb.experiment import arm_config, experiment_pairs, Start
    from venus_nb.rollout import RolloutConfig
    mix = {'IGPO, 3:1 two-hop': dict(arm='GRPO', kind_shares={'2-hop': 3, '1-hop': 1}, rewards=dict(gamma=0.9))}
    cfg = ExperimentConfig(arms=('GRPO', 'IGPO, 3:1 two-hop'), variants=mix, igpo=dict(lr=3e-6))
    a = arm_config(cfg, Start(lambda: None, [], [], None, RolloutConfig()), 'IGPO, 3:1 two-hop', 0)
    assert a.kind_shares == {'2-hop': 3, '1-hop': 1} and a.lr == 3e-6
    assert (a.rewards.gamma, a.rewards.estimator) == (0.9, 'grpo')   # a nested dict changes only the keys it names
    assert experiment_pairs(cfg)[-2:] == (('IGPO, 3:1 two-hop', 'start'), ('IGPO, 3:1 two-hop', 'GRPO'))
    assert ExperimentConfig.load(cfg.save(tmp_path/'c.json')) == cfg
    for bad, said in [(dict(arm='nope'), "needs 'arm'"), (dict(arm='GRPO', lr='x'), 'variants.v.lr'),
                      (dict(arm='GRPO', bogus=1), 'variants.v.bogus')]:
        with pytest.raises(ValueError, match=re.escape(said)): ExperimentConfig(arms=('v',), variants={'v': bad})
    with pytest.raises(ValueError, match='name of an arm'): ExperimentConfig(variants={'GRPO': dict(arm='GRPO')})
    with pytest.raises(ValueError, match=re.escape("unknown arms ['v']")): ExperimentConfig(arms=('GRPO', 'v'))

def _visits_then_answer(question, visits, answer, gt, group):
    from venus_nb.trajectory import Trajectory, Turn, ToolCall
    turns = [Turn.make(f'Visit {i}.', ToolCall('visit', {'url': [f'p{i}.html'], 'goal': 'g'}), observation='...',
                       index=i) for i in range(visits)]
    return Trajectory(question, turns + [Turn.make('Done.', answer=answer, index=visits)], gt, dict(group=group))

def test_stopping_table_counts_visits_ig_and_each_estimators_push(tmp_path):
    "By kind × visits: rollouts, correct, IG per visit, summed advantage (GRPO: ±1 per turn in a 1-right-1-wrong group)"
    import json
    from venus_nb.experiment import stopping_table, step_batches
    from venus_nb.rewards import Scored, RewardConfig
    one, two = 'one hop?', 'two hops?'
    s = Scored([_visits_then_answer(one, 1, 'a', 'a', 0), _visits_then_answer(one, 2, 'b', 'a', 0),
                _visits_then_answer(two, 1, 'a', 'b', 1), _visits_then_answer(two, 2, 'b', 'b', 1)],
               [0, 0, 1, 1], [[2.4, None], [2.4, -2.7, None], [-1.8, None], [-1.8, 4.7, None]], [1.0, 0.0, 0.0, 1.0])
    t = stopping_table([s, s], {one: '1-hop', two: '2-hop'})
    assert t[['kind', 'visits', 'rollouts', 'correct']].values.tolist() == [['1-hop', 1, 2, 2.0], ['1-hop', 2, 2, 0.0],
                                                                            ['2-hop', 1, 2, 0.0], ['2-hop', 2, 2, 2.0]]
    assert t.ig_visit2.tolist()[1::2] == pytest.approx([-2.7, 4.7]) and t.ig_visit2.isna().tolist()[::2] == [True, True]
    # ±1 on each of 2 or 3 turns, in two batches
    assert t.push_grpo.tolist() == pytest.approx([4.0, -6.0, -4.0, 6.0], abs=1e-4)
    assert [p > 0 for p in t.push_igpo] == [True, False, False, True]
    assert stopping_table([s], {}).kind.unique().tolist() == ['all']
    run = tmp_path/'run'
    (run/'rollouts').mkdir(parents=True)
    (run/'igpo_config.json').write_text(json.dumps({'rewards': {'credit': 'split'}}))
    for n in (10, 2): s.save(run/'rollouts'/f'step-{n}.jsonl')
    got = step_batches(run)
    assert (len(got) == 2 and got[0].cfg == RewardConfig(credit='split') and got[0].ig == s.ig
            and got[1].outcome == s.outcome)

def test_committed_runs_reopen_and_agree_with_their_summaries():
    "Every run folder under examples/experiment reopens, and its summary (inside, or NAME.summary.json beside) agrees"
    from pathlib import Path
    from venus_nb.experiment import read_experiment
    root = Path(__file__).resolve().parents[1]/'examples'/'experiment'
    # a folder with a configuration and evaluations is a run; the confirmatory run's folder holds its registration first
    folders = sorted(p.parent for p in root.glob('*/config.json') if (p.parent/'evals.csv').exists())
    assert folders
    for folder in folders:
        inside = folder/'summary.json'
        summary = inside if inside.exists() else folder.with_name(f'{folder.name}.summary.json')
        res, saved = read_experiment(folder), json.loads(summary.read_text())['summary']
        got = {(r.arm, r.k): (r['mean'], r.lo, r.hi) for _, r in res.summary.iterrows()}
        assert {(r['arm'], r['k']) for r in saved} == set(got), folder.name
        for r in saved: assert got[r['arm'], r['k']] == pytest.approx((r['mean'], r['lo'], r['hi'])), (folder.name, r)

# --- the protocol: splits, registration, evaluation seeds, the start through the arms' path

def _qs(n, offset=0):
    return [dict(id=f'q{offset + i}', question=f'Q{offset + i}?', answer='a', kind='2-hop' if i % 2 else '1-hop')
            for i in range(n)]

H = ({'name': 'H1', 'a': 'IGPO (DR-Venus)', 'b': 'start', 'primary': True},
     {'name': 'H2', 'a': 'IGPO (DR-Venus)', 'b': 'GRPO', 'subset': '2-hop'})

def _faked(monkeypatch):
    "experiment() without a model: a fake trainer, and `_evaluate` recording every call (a better IGPO, a flat start)"
    import venus_nb.experiment as ex, venus_nb.igpo as ig
    from types import SimpleNamespace
    calls = []
    def fake_igpo(policy, questions, tools, cfg, engine=None, live=None):
        return SimpleNamespace(policy=f'trained {cfg.run_name}', resumed_step=0,
                               metrics=pd.DataFrame([dict(step=s + 1, accuracy=0.5, kl=0.0, turns=3.0)
                                                     for s in range(cfg.steps)]))
    def fake_evaluate(generator, start, label, seed, G, save=None, split='validation'):
        qs, _ = ex.split_questions(start, split)
        calls.append(dict(generator=generator, label=label, seed=seed, G=G, split=split,
                          eval_seed=ex.eval_seed(label, seed, split)))
        rows = [dict(arm=label, seed=seed, step=0, rollouts=0, question=i, kind=q['kind'], n=G,
                     c=G if label == 'IGPO (DR-Venus)' and i % 3 else G // 2, turns=3.0, visits=1.0)
                for i, q in enumerate(qs)]
        return pd.DataFrame(rows)[ex.EVAL_COLUMNS]
    monkeypatch.setattr(ig, 'igpo', fake_igpo)
    monkeypatch.setattr(ex, '_evaluate', fake_evaluate)
    return calls

def _protocol_start():
    from venus_nb.rollout import RolloutConfig
    return Start(lambda: 'the start', _qs(4, 100), _qs(6), None, RolloutConfig(progress=False), test=_qs(24, 200),
                 test_corpus='test pages')

def test_the_start_is_evaluated_on_test_through_the_arms_path(tmp_path, monkeypatch):
    calls = _faked(monkeypatch)
    cfg = ExperimentConfig(arms=('IGPO (DR-Venus)', 'GRPO'), seeds=(0, 1, 2), steps=2, G=4, test_questions=24,
                           start_samples=8, hypotheses=H, igpo=dict(lr=1e-5), output_dir=str(tmp_path))
    said = []
    res = experiment(cfg, _protocol_start(), say=said.append)
    test_calls = [c for c in calls if c['split'] == 'test']
    # once per (arm, seed) and for the start once per seed, all through the same `_evaluate`
    assert sorted((c['label'], c['seed']) for c in test_calls) == sorted(
        (a, s) for a in ('start', 'IGPO (DR-Venus)', 'GRPO') for s in (0, 1, 2))
    start_calls = [c for c in test_calls if c['label'] == 'start']
    assert {c['G'] for c in start_calls} == {8} and {c['generator'] for c in start_calls} == {'the start'}
    assert {c['G'] for c in test_calls if c['label'] != 'start'} == {4}
    # every evaluation its own draw
    assert len({c['eval_seed'] for c in calls}) == len(calls)
    assert (tmp_path/'registration.json').exists() and (tmp_path/'test.csv').exists()
    assert len(res.test) == 9 * 24 and set(res.evals.seed) == {0, 1, 2}
    h = res.hypotheses
    assert list(h.hypothesis) == ['H1', 'H2'] and list(h.verdict) == ['higher', 'higher']
    assert (h.p_holm >= h.p_value).all() and h.resampled.eq('seeds and questions').all()
    saved = json.loads((tmp_path/'summary.json').read_text())
    assert [r['hypothesis'] for r in saved['hypotheses']] == ['H1', 'H2'] and len(saved['per_seed']) == 2 * 3
    assert 'exploratory' in saved['claims'] and saved['seed_note'] is None
    assert any('test questions' in s for s in said)
    # a finished folder reads back with its test rows; nothing runs again
    calls.clear()
    again = experiment(cfg, _protocol_start(), say=said.append)
    assert calls == [] and again.hypotheses.equals(res.hypotheses)
    from venus_nb.experiment import read_experiment
    assert read_experiment(tmp_path).hypotheses.equals(res.hypotheses)

def test_evaluating_test_with_another_configuration_is_refused_naming_the_fields(tmp_path, monkeypatch):
    from venus_nb.experiment import register, check_registration, run_arm
    calls = _faked(monkeypatch)
    cfg = ExperimentConfig(arms=('IGPO (DR-Venus)', 'GRPO'), seeds=(0, 1), steps=2, test_questions=12, hypotheses=H,
                           output_dir=str(tmp_path))
    reg = register(cfg)
    assert reg.config_hash and json.loads((tmp_path/'registration.json').read_text())['hypotheses'][0]['name'] == 'H1'
    changed = replace(cfg, seeds=(0, 1, 2), igpo={**cfg.igpo, 'lr': 3e-6})
    with pytest.raises(ValueError, match=r'changed fields: igpo, seeds') as e:
        check_registration(tmp_path, changed)
    assert '(0, 1) registered' in str(e.value) or '[0, 1] registered' in str(e.value)
    with pytest.raises(ValueError, match='changed fields: igpo, seeds'):
        experiment(changed, _protocol_start(), say=lambda *a: None)
    assert calls == []                                        # refused before anything ran
    with pytest.raises(ValueError, match='no registration.json'): check_registration(tmp_path/'none', cfg)
    with pytest.raises(ValueError, match='after the last step'):
        run_arm(_protocol_start(), cfg, 'GRPO', 0, until=1, splits=('test',))

def test_hypotheses_are_checked_when_the_config_is_made():
    for bad, said in [(dict(hypotheses=H), 'set test_questions'),
                      (dict(test_questions=8, hypotheses=[dict(H[0], primary=False)]), 'exactly one hypothesis'),
                      (dict(test_questions=8, hypotheses=[dict(H[0], b='PPO')]), "names ['PPO']"),
                      (dict(test_questions=8, hypotheses=[dict(H[0], direction='!=')]), 'direction'),
                      (dict(test_questions=8, hypotheses=[dict(H[0], metric='Pass@8')]), 'Pass@8 needs'),
                      (dict(test_questions=-1), 'test_questions')]:
        with pytest.raises(ValueError, match=re.escape(said)): ExperimentConfig(**bad)

def test_evaluation_seeds_differ_across_arm_and_seed(monkeypatch):
    "Each (arm, training seed) and split samples with its own seed, stable (not Python's salted `hash`)"
    import venus_nb.experiment as ex, venus_nb.rollout as ro
    from venus_nb.experiment import eval_seed, EVAL_SEED
    seeds = {(a, s, sp): eval_seed(a, s, sp) for a in ('start', 'IGPO (DR-Venus)', 'GRPO', 'GRPO + format penalty')
             for s in range(5) for sp in ('validation', 'test')}
    assert len(set(seeds.values())) == len(seeds) and all(EVAL_SEED <= v < 2 * EVAL_SEED for v in seeds.values())
    assert eval_seed('GRPO', 0) == 1966427385                 # the same in every process and on every machine
    seen = []
    monkeypatch.setattr(ro, 'rollout', lambda gen, qs, corpus, cfg: seen.append(cfg.seed) or [])
    monkeypatch.setattr(ex, '_question_rows', lambda trajs, label, seed, kinds: pd.DataFrame())
    start = _protocol_start()
    for arm in ('IGPO (DR-Venus)', 'GRPO'):
        for s in (0, 1): ex._evaluate(None, start, arm, s, 4)
    assert seen == [eval_seed(a, s) for a in ('IGPO (DR-Venus)', 'GRPO') for s in (0, 1)]

def test_the_confirmatory_configuration_freezes_cpu_learn():
    from types import SimpleNamespace
    from venus_nb.experiment import VISIT_BONUS
    from venus_nb.rollout import RolloutConfig
    c, learn = ExperimentConfig.confirm(), ExperimentConfig.cpu_learn()
    for f in ('steps', 'questions_per_step', 'G', 'igpo', 'warm', 'eval_questions'):
        assert getattr(c, f) == getattr(learn, f)
    assert (c.igpo['lr'], c.igpo['dtype'], c.igpo['kl_coef'], c.igpo['kind_shares']) == (
        6e-6, 'float32', 0.001, {'2-hop': 3, '1-hop': 1})
    assert c.seeds == (0, 1, 2) and c.test_questions >= 128 and c.G >= 4 and c.start_samples >= 8
    h = {x['name']: x for x in c.hypotheses}
    assert h['H1'] == dict(name='H1', a='IGPO (DR-Venus)', b='start', metric='Pass@1', subset='all', direction='>',
                           primary=True)
    assert (h['H2']['b'], h['H2']['subset'], h['H2']['primary']) == ('GRPO + format penalty', '2-hop', False)
    assert (h['H3']['b'], h['H3']['subset']) == (VISIT_BONUS, '2-hop') and VISIT_BONUS in c.arms
    # the control is GRPO + format penalty with the calibrated visit bonus, nothing else changed
    from venus_nb.experiment import arm_config, CONFIRM_VISIT_BONUS
    start = SimpleNamespace(rollout=RolloutConfig())
    ctrl, fmt = (arm_config(c, start, a, 0) for a in (VISIT_BONUS, 'GRPO + format penalty'))
    assert CONFIRM_VISIT_BONUS > 0 and ctrl.rewards == replace(fmt.rewards, visit_bonus=CONFIRM_VISIT_BONUS)
    assert replace(ctrl, rewards=fmt.rewards, output_dir='', run_name='') == replace(fmt, output_dir='', run_name='')

def test_cli_experiment_prints_the_registered_hypotheses(tmp_path, monkeypatch, capsys):
    import venus_nb.experiment as ex
    from venus_nb.cli import main
    def fake(cfg, say=print, with_start=True):
        test = pd.DataFrame([dict(arm=a, seed=s, question=q, kind='1-hop', n=4, c=4 if a != 'start' and q % 2 else 2)
                             for a in ('start', 'IGPO (DR-Venus)') for s in (0, 1, 2) for q in range(16)])
        return ex.ExperimentResult(cfg, pd.DataFrame(), test.iloc[:0], summary_table(test.iloc[:0], cfg.ks),
                                   tmp_path/'x', test=test)
    monkeypatch.setattr(ex, 'experiment', fake)
    (tmp_path/'c.yaml').write_text("arms: ['IGPO (DR-Venus)']\ntest_questions: 16\n"
                                   "hypotheses: [{name: H1, a: 'IGPO (DR-Venus)', b: start, primary: true}]\n")
    main(['experiment', '--config', str(tmp_path/'c.yaml'), '--out', str(tmp_path/'x')])
    out = capsys.readouterr().out
    assert 'Registered hypotheses' in out and 'H1' in out and 'higher' in out and 'exploratory' in out

def test_cli_experiment_amends_a_registered_run(tmp_path, monkeypatch, capsys):
    "--amends: checked first, the start left out where no amended hypothesis names it, the amended verdicts printed"
    from pathlib import Path
    import venus_nb.experiment as ex
    from venus_nb.cli import main
    hs = [dict(name='H1', a='IGPO (DR-Venus)', b='start', primary=True), dict(name='H2', a='IGPO (DR-Venus)', b='GRPO')]
    rows = lambda arms, seeds: pd.DataFrame([dict(arm=a, seed=s, step=4, rollouts=32, question=q, kind='2-hop', n=4,
                                                  c=4 if a == 'IGPO (DR-Venus)' and q % 2 else 2, turns=2.0, visits=1.0)
                                             for a in arms for s in seeds for q in range(16)])
    ran = ex.ExperimentConfig(arms=('IGPO (DR-Venus)', 'GRPO'), seeds=(0, 1), test_questions=16, hypotheses=hs,
                              output_dir=str(tmp_path/'ran'))
    (tmp_path/'ran').mkdir()
    ran.save(tmp_path/'ran'/'config.json')
    ex.register(ran)
    reg = json.loads((tmp_path/'ran'/'registration.json').read_text())
    (tmp_path/'ran'/'registration.json').write_text(json.dumps(reg | dict(registered_at='2026-01-01T00:00:00+00:00')))
    test = pd.concat([rows(('start', 'IGPO (DR-Venus)'), (0, 1)), rows(('GRPO',), (1,))])   # GRPO's seed 0 lost
    ex._save_rows(tmp_path/'ran', *(pd.DataFrame(columns=ex.TABLES[k]) for k in ('steps', 'evals', 'runs')), test)
    seen = {}
    def fake(cfg, say=print, with_start=True):
        seen['with_start'] = with_start
        ex.register(cfg)
        return ex.ExperimentResult(cfg, pd.DataFrame(), test.iloc[:0], summary_table(test.iloc[:0], cfg.ks),
                                   Path(cfg.output_dir), test=rows(('IGPO (DR-Venus)', 'GRPO'), (2,)))
    monkeypatch.setattr(ex, 'experiment', fake)
    (tmp_path/'a.json').write_text(json.dumps(replace(ran, seeds=(2,), hypotheses=[dict(hs[1], primary=True)],
                                                      output_dir=str(tmp_path/'amendment')).to_json()))
    main(['experiment', '--config', str(tmp_path/'a.json'), '--amends', str(tmp_path/'ran')])
    out = capsys.readouterr().out
    assert seen == dict(with_start=False) and 'Amended' in out and 'H2′' in out and 'higher' in out, out
    changed = replace(ran, seeds=(2,), steps=8, output_dir=str(tmp_path/'b'))
    (tmp_path/'b.json').write_text(json.dumps(changed.to_json()))
    with pytest.raises(SystemExit):
        main(['experiment', '--config', str(tmp_path/'b.json'), '--amends', str(tmp_path/'ran')])
    assert 'changes steps' in capsys.readouterr().err and not (tmp_path/'b').exists()

# --- the report escapes what it quotes --------------------------------------------------------------------------------

XSS = '</pre><img src=x onerror=document.title=/PWN/.source>'

def xss_report()->str:
    "The committed cpu_learn experiment's report, its config carrying a script in `igpo.run_name`"
    from pathlib import Path
    from venus_nb.experiment import read_experiment, report_html
    res = read_experiment(Path(__file__).resolve().parents[1]/'examples'/'experiment'/'cpu_learn')
    return report_html(replace(res, cfg=replace(res.cfg, igpo={**res.cfg.igpo, 'run_name': XSS})))

def test_report_xss_payload_is_escaped():
    "The config's text reaches the page as text: no tag of it survives, its escaped form is there"
    import html
    page = xss_report()
    assert XSS not in page and '<img' not in page and html.escape(XSS) in page

# the report in a real browser (the `browser` fixture is in conftest.py)
def test_report_xss_keeps_the_page_title(browser, tmp_path):
    "An experiment's report.html whose config holds `</pre><img onerror=...>` runs none of it in Chromium"
    from test_experiment import XSS, xss_report
    page = tmp_path/'report.html'
    page.write_text(xss_report(), encoding='utf-8')
    browser.get(page.as_uri())
    time.sleep(1)   # time for an image's onerror to fire
    assert browser.title == 'venus_nb experiment'
    assert XSS in browser.find_element('tag name', 'pre').text

# run-folder readers: a table the run did not write as it is is an error naming the file, never a quietly wrong summary
def _folder_with(tmp_path, evals:pd.DataFrame):
    from venus_nb.experiment import _save_rows, TABLES, EVAL_COLUMNS
    _save_rows(tmp_path, pd.DataFrame(columns=TABLES['steps']), evals, pd.DataFrame(columns=TABLES['runs']),
               pd.DataFrame(columns=EVAL_COLUMNS))
    return tmp_path

def _eval_rows():
    return pd.DataFrame([dict(arm=a, seed=0, step=4, rollouts=64, question=f'q{q}', kind='1-hop', n=4, c=q % 5,
                              turns=3.0, visits=1.0) for a in ('start', 'GRPO') for q in range(5)])

def test_run_folder_readers_refuse_counts_outside_0_n(tmp_path):
    from venus_nb.experiment import _done
    for c, n in ((2.5, 4), (5, 4), (-1, 4), (0, 0), ('x', 4)):
        e = _eval_rows().astype({'c': object, 'n': object})
        e.loc[3, ['c', 'n']] = [c, n]
        _folder_with(tmp_path, e)
        with pytest.raises(ValueError, match=r'evals\.csv: row 5 has n=.*counts are whole numbers'): _done(tmp_path)

def test_run_folder_readers_refuse_an_incomplete_question_set(tmp_path):
    from venus_nb.experiment import _done, _done_at
    e = _eval_rows()
    _folder_with(tmp_path, e.drop(index=7))   # GRPO lacks one question: resume must not take the run as done
    with pytest.raises(ValueError, match=r'evals\.csv: arm GRPO, seed 0, step 4 has 4 of the 5 questions'):
        _done(tmp_path)
    _folder_with(tmp_path, pd.concat([e, e[:1]]))
    with pytest.raises(ValueError, match="arm start, seed 0, step 4 has question 'q0' twice"): _done(tmp_path)
    _folder_with(tmp_path, e)
    assert _done_at(_done(tmp_path)[1], 'GRPO', 0, 4)   # the whole table reads back as written

def test_a_stop_cut_off_while_its_tables_are_written_has_no_row_in_runs_csv(tmp_path, monkeypatch):
    "runs.csv is written last: a stop whose test rows did not reach the disk runs again on resume, recorded once"
    import venus_nb.experiment as X
    _folder_with(tmp_path, _eval_rows())
    e, written = _eval_rows(), []
    run = pd.DataFrame([dict(arm='GRPO', seed=0, step=4, seconds=9.0, split='validation+test')])
    def cut_at_test(path, text):
        if path.name == 'test.csv': raise KeyboardInterrupt('the machine went away')
        written.append(path.name)
        return path.write_text(text)
    monkeypatch.setattr(X, 'write_atomic', cut_at_test)
    with pytest.raises(KeyboardInterrupt): X._save_rows(tmp_path, pd.DataFrame(columns=X.TABLES['steps']), e, run, e)
    tables = X._done(tmp_path)
    assert written == ['steps.csv', 'evals.csv'] and not len(tables[2])
    assert X._todo(tables, 'GRPO', 0, 4, ('validation', 'test')) == ('test',)   # resume evaluates the test split again

def test_run_folder_readers_name_the_file(tmp_path):
    from venus_nb.experiment import _done, read_experiment
    _folder_with(tmp_path, _eval_rows())
    for text, why in ((b'', 'not a readable CSV table'), (b'arm\nGRPO\n', "no column"),
                      (b'arm,seed\n\xff\xfe,0\n', 'UnicodeDecodeError')):
        (tmp_path/'runs.csv').write_bytes(text)
        with pytest.raises(ValueError, match=rf'runs\.csv: .*{why}'): _done(tmp_path)
    with pytest.raises(FileNotFoundError, match='not an experiment folder'): read_experiment(tmp_path)

def test_run_folder_readers_follow_no_link_out_of_the_folder(tmp_path):
    from venus_nb.experiment import _done
    folder = tmp_path/'run'
    folder.mkdir()
    _folder_with(folder, _eval_rows())
    (folder/'evals.csv').unlink()
    (tmp_path/'elsewhere.csv').write_text(_eval_rows().to_csv(index=False))
    (folder/'evals.csv').symlink_to(tmp_path/'elsewhere.csv')
    with pytest.raises(ValueError, match='outside'): _done(folder)

def test_run_folder_readers_read_every_committed_folder_back():
    from pathlib import Path
    from venus_nb.experiment import read_experiment
    folders = sorted(p.parent for p in Path(__file__).parents[1].glob('examples/experiment/*/evals.csv'))
    assert folders
    for f in folders: assert len(read_experiment(f).summary), f

def test_step_batches_reads_a_bounded_config(tmp_path):
    from venus_nb.experiment import step_batches
    (tmp_path/'igpo_config.json').write_text('[' * 10**5 + ']' * 10**5)
    with pytest.raises(ValueError, match='igpo_config.json: not valid JSON'): step_batches(tmp_path)
    (tmp_path/'igpo_config.json').write_text('{}')
    with pytest.raises(ValueError, match=r"lacks \['rewards'\]"): step_batches(tmp_path)

def _writing_trainer(monkeypatch):
    "The fake trainer, writing what `igpo` leaves in a run folder: checkpoints and final/ (weights that name the run)"
    import venus_nb.igpo as ig
    import torch
    from pathlib import Path
    from safetensors.torch import save_file
    faked = ig.igpo
    def fake_igpo(policy, questions, tools, cfg, engine=None, live=None):
        out = Path(cfg.output_dir)
        for d in [out/f'checkpoint-{s}'/'model' for s in range(1, cfg.steps + 1)] + [out/'final']:
            d.mkdir(parents=True, exist_ok=True)
            save_file({'w': torch.full((4,), float(cfg.seed) + len(cfg.run_name))}, str(d/'model.safetensors'))
        return faked(policy, questions, tools, cfg, engine, live)
    monkeypatch.setattr(ig, 'igpo', fake_igpo)

def _start_with_weights(folder, value=1.0):
    import torch
    from safetensors.torch import save_file
    folder.mkdir(parents=True, exist_ok=True)
    save_file({'w': torch.full((4,), value)}, str(folder/'model.safetensors'))
    return replace(_protocol_start(), folder=str(folder))

def test_a_registered_run_goes_a_seed_at_a_time_and_tests_each_run_as_it_ends(tmp_path, monkeypatch):
    "The stops in order: per seed the start then each arm, each on validation then test; every stop saved as it ends"
    from venus_nb.checkpoints import weights_sha256
    calls = _faked(monkeypatch)
    _writing_trainer(monkeypatch)
    out = tmp_path/'run'
    cfg = ExperimentConfig(arms=('IGPO (DR-Venus)', 'GRPO'), seeds=(0, 1), steps=2, G=4, test_questions=24,
                           hypotheses=H, output_dir=str(out))
    start = _start_with_weights(tmp_path/'start')
    seen = []
    def say(line):   # what is on disk when each stop is told
        seen.append((line, len(pd.read_csv(out/'runs.csv')), json.loads((out/'summary.json').read_text())))
    res = experiment(cfg, start, say=say, prune=True)
    assert [(c['label'], c['seed'], c['split']) for c in calls] == [
        (a, s, sp) for s in (0, 1) for a in ('start', 'IGPO (DR-Venus)', 'GRPO') for sp in ('validation', 'test')]
    # one runs.csv row per stop, written before it is told; the summary of the run so far beside it
    assert [n for _, n, _ in seen] == [1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6]
    # after seed 0's IGPO run, H2's other side has not run: its verdict waits, H1's counts whole seeds
    after_igpo0 = seen[3][2]['hypotheses']
    assert [h['verdict'].split(':')[0] for h in after_igpo0] == ['interim, 1 of 2 seeds', 'not measured yet']
    after_seed0 = seen[5][2]['hypotheses']
    assert [h['verdict'].split(':')[0] for h in after_seed0] == ['interim, 1 of 2 seeds'] * 2
    # after seed 1's IGPO run H1 has both seeds; its Holm p reads H2's, which has one, but stays below α whatever H2's
    # becomes: H1 is decided, H2 interim
    after_igpo1 = seen[9][2]['hypotheses']
    assert [h['verdict'].split(':')[0] for h in after_igpo1] == ['higher, whatever H2 shows', 'interim, 1 of 2 seeds']
    assert after_igpo1[0]['p_holm_most'] < 0.05 and after_igpo1[1]['p_holm_most'] is None
    assert [h['verdict'] for h in res.hypotheses.to_dict('records')] == ['higher', 'higher']
    runs = res.runs
    assert set(runs.start_sha256) == {weights_sha256(tmp_path/'start')} and runs.machine.notna().all()
    assert list(runs.split) == ['validation+test'] * 6
    # each run ended with its own weights, their hash kept; its checkpoints deleted, final/ kept
    ended = runs[runs.arm != 'start']
    assert ended.weights_sha256.notna().all() and ended.weights_sha256.nunique() == 4
    for arm, seed in (('igpo--dr-venus', 0), ('grpo', 1)):
        d = out/'runs'/arm/f'seed{seed}'
        assert (d/'final'/'model.safetensors').exists() and not list(d.glob('checkpoint-*'))

def _cut_off_before_grpo(monkeypatch, cfg, start):
    "Run `cfg` from `start` until its first GRPO stop begins, as a machine lost there would leave the folder"
    import venus_nb.experiment as ex
    real = ex._evaluated
    def stop_before_grpo(start, cfg, label, seed, *a):
        if label == 'GRPO': raise KeyboardInterrupt
        return real(start, cfg, label, seed, *a)
    monkeypatch.setattr(ex, '_evaluated', stop_before_grpo)
    with pytest.raises(KeyboardInterrupt): experiment(cfg, start, say=lambda *a: None)
    monkeypatch.setattr(ex, '_evaluated', real)

def test_a_seed_begun_from_other_weights_waits_and_the_others_run(tmp_path, monkeypatch):
    """A stop, then a machine whose start holds other weights: seed 0 waits (said, with both hashes), seed 1 runs whole
    there; back on weights like the first, seed 0 goes on and seed 1 is left alone"""
    calls = _faked(monkeypatch)
    out = tmp_path/'run'
    cfg = ExperimentConfig(arms=('IGPO (DR-Venus)', 'GRPO'), seeds=(0, 1), steps=2, G=4, test_questions=24,
                           hypotheses=H, output_dir=str(out))
    _cut_off_before_grpo(monkeypatch, cfg, _start_with_weights(tmp_path/'a', 1.0))
    assert len(pd.read_csv(out/'test.csv').groupby(['arm', 'seed'])) == 2     # the start and IGPO of seed 0 kept
    calls.clear()
    said = []
    other = _start_with_weights(tmp_path/'b', 2.0)
    res = experiment(cfg, other, say=said.append)
    assert said[0].startswith('seed 0 waits for a machine that makes the weights it began from (SHA-256 ')
    assert {(c['label'], c['seed']) for c in calls} == {('start', 1), ('IGPO (DR-Venus)', 1), ('GRPO', 1)}
    by_seed = res.runs.groupby('seed').start_sha256.unique()
    assert len(by_seed[0]) == len(by_seed[1]) == 1 and by_seed[0][0] != by_seed[1][0]   # one start per seed
    calls.clear()
    res = experiment(cfg, _start_with_weights(tmp_path/'c', 1.0), say=said.append)   # the first weights again
    assert said[-3].startswith('seed 1 waits') and {(c['label'], c['seed']) for c in calls} == {('GRPO', 0)}
    assert len(res.runs) == 6 and res.runs.groupby(['arm', 'seed']).ngroups == 6

def test_a_machine_whose_kernels_round_otherwise_stops_before_making_a_warm_start(tmp_path, monkeypatch):
    """Seed 0 begun here, cut off; on a machine whose kernels round otherwise nothing is made (said, with both
    fingerprints), and where they round alike the warm start is made and the seed goes on"""
    import venus_nb.experiment as ex
    from venus_nb.models import kernel_fingerprint
    calls = _faked(monkeypatch)
    out = tmp_path/'run'
    cfg = ExperimentConfig(arms=('IGPO (DR-Venus)', 'GRPO'), seeds=(0,), steps=2, G=4, test_questions=24,
                           hypotheses=H, output_dir=str(out))
    _cut_off_before_grpo(monkeypatch, cfg, _start_with_weights(tmp_path/'a'))
    here = kernel_fingerprint()
    assert set(pd.read_csv(out/'runs.csv').kernels) == {here}
    def made(*a, **kw): raise AssertionError('a warm start was made on a machine no seed left can use')
    monkeypatch.setattr(ex, 'warm_start_point', made)
    monkeypatch.setattr(ex, 'kernel_fingerprint', lambda: 'another')
    calls.clear()
    said = []
    res = experiment(cfg, say=said.append)
    assert said == [f'seed 0 waits for a machine that computes as the one it began on ({ex.cpu_name()}, kernels '
                    f'{here}); kernels here: another, so a warm start made here would hold other weights']
    assert calls == [] and len(res.runs) == 2
    monkeypatch.setattr(ex, 'kernel_fingerprint', lambda: here)
    monkeypatch.setattr(ex, 'warm_start_point', lambda *a: _start_with_weights(tmp_path/'a'))
    res = experiment(cfg, say=said.append)
    assert {(c['label'], c['seed']) for c in calls} == {('GRPO', 0)} and len(res.runs) == 3

def test_world_questions_as_dataset_feed_an_experiment_start():
    from venus_nb.evaluation import world_questions
    from venus_nb.experiment import Start
    qs, _ = world_questions()
    start = Start(lambda: None, Dataset.from_list(qs[:4]), Dataset.from_list(qs[4:6]), None, None)
    assert start.train == qs[:4] and start.validation == qs[4:6]

# ---------------------------------------------------------------------------------------------------------------------
# A config that names code runs none of it without trust_code / --trust-code

@pytest.mark.parametrize('name', HOSTILE)
def test_an_experiment_config_that_names_code_is_refused(tmp_path, name, monkeypatch, capsys):
    f = _write(tmp_path/'e.yaml', {'seeds': [0], 'igpo': {'judge': {'callable': name}}})
    with pytest.raises(ValueError, match='trust_code=True'): ExperimentConfig.load(f)
    with pytest.raises(ValueError, match='trust_code=True'): ExperimentConfig(igpo={'judge': {'callable': name}})
    def started(*a, **kw): raise AssertionError('the experiment started: the config was not refused at load')
    monkeypatch.setattr('venus_nb.experiment.warm_signal', started)
    with pytest.raises(SystemExit) as e: main(['experiment', '--config', str(f), '--out', str(tmp_path/'out')])
    assert e.value.code == 1 and '--trust-code' in capsys.readouterr().err

def test_with_trust_code_an_experiment_round_trips_its_judge(tmp_path):
    cfg = ExperimentConfig(seeds=(0,), igpo={'judge': strict_judge, 'lr': 1e-5}, output_dir=str(tmp_path))
    saved = cfg.save(tmp_path/'config.json')
    assert json.loads(saved.read_text())['igpo']['judge'] == {'callable': 'test_igpo.strict_judge'}
    with pytest.raises(ValueError, match='trust_code=True'): ExperimentConfig.load(saved)
    assert (ExperimentConfig.load(saved, trust_code=True) == cfg
            and read_experiment(tmp_path, trust_code=True).cfg == cfg)

# ---------------------------------------------------------------------------------------------------------------------
# Absurd settings are refused when the config is built

EXPERIMENT_BAD = [('G', 0), ('G', -2), ('steps', 0), ('steps', -3), ('eval_questions', 0), ('eval_questions', -1),
                  ('questions_per_step', 0), ('ks', (0,)), ('ks', ()), ('ks', (1, 8))]

@pytest.mark.parametrize('field,value', EXPERIMENT_BAD, ids=[f'{f}={v}' for f, v in EXPERIMENT_BAD])
def test_absurd_experiment_settings_fail_at_construction(field, value):
    refused(ExperimentConfig, field, value, igpo={})

def test_an_arm_cannot_set_its_own_budget():
    "steps, questions per step and rollout settings are the experiment's: an igpo override or a variant is refused"
    for kw, said in [(dict(igpo=dict(questions_per_step=8)), 'igpo sets questions_per_step'),
                     (dict(igpo=dict(rollout=dict(max_turns=3))), 'igpo sets rollout'),
                     (dict(arms=('GRPO', 'long'), variants={'long': dict(arm='GRPO', steps=30)}),
                      "variant 'long' sets steps")]:
        with pytest.raises(ValueError, match=said): ExperimentConfig(**kw)

def test_a_hypothesis_on_a_kind_no_test_question_has_is_refused(tmp_path, monkeypatch):
    "A misspelled subset ('2hop') would never be measured and enter Holm at p = 1: refused before anything runs"
    calls = _faked(monkeypatch)
    typo = ({**H[0]}, {**H[1], 'subset': '2hop'})
    cfg = ExperimentConfig(arms=('IGPO (DR-Venus)', 'GRPO'), seeds=(0,), steps=2, test_questions=24, hypotheses=typo,
                           output_dir=str(tmp_path))
    with pytest.raises(ValueError, match=r"hypotheses \['H2'\] compare a subset no test question has"):
        experiment(cfg, _protocol_start(), say=lambda *a: None)
    assert calls == []

def test_test_rows_are_pinned_to_the_start_they_were_made_from(tmp_path, monkeypatch):
    """The first test evaluation writes what the test split and the rollout settings were; a later call with other
    test questions (of the registered number) or other rollout settings is refused, naming which"""
    _faked(monkeypatch)
    cfg = ExperimentConfig(arms=('IGPO (DR-Venus)', 'GRPO'), seeds=(0,), steps=2, test_questions=24, hypotheses=H,
                           output_dir=str(tmp_path))
    experiment(cfg, _protocol_start(), say=lambda *a: None)
    assert set(json.loads((tmp_path/'test_split.json').read_text())) == {'test_questions', 'rollout'}
    other = replace(_protocol_start(), test=_qs(24, 900))
    with pytest.raises(ValueError, match="the start's test_questions differ"): experiment(cfg, other, say=print)
    slower = _protocol_start()
    slower = replace(slower, rollout=replace(slower.rollout, max_new_tokens=7))
    with pytest.raises(ValueError, match="the start's rollout differ"): experiment(cfg, slower, say=print)
    experiment(cfg, replace(_protocol_start(), rollout=replace(_protocol_start().rollout, progress=True)),
               say=lambda *a: None)   # a progress bar is not a setting that makes rows
