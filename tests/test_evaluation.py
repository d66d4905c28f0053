"""Evaluation: Pass@K by hand and by property, the score table, browse ratio, K > samples, and the R1-Searcher loader
on real data."""
import math
from fractions import Fraction
import httpx, pytest
from hypothesis import given, settings, strategies as st
from conftest import shared_file
from venus_nb.trajectory import Trajectory, Turn, ToolCall
from venus_nb.synth import generate, SynthConfig, SAMPLE, write_world
from venus_nb.judges import LLMJudge
from venus_nb.corpus import r1_passages
from venus_nb.evaluation import (pass_at_k, final_answer, score_trajectories, pass_at_k_table, browse_summary,
                                 per_question, evaluate, pass_at_k_figure, browse_figure,
                                 synthetic_rollouts, world_questions, r1_searcher_questions, r1_searcher_trajectories,
                                 corpus_coverage, COLUMNS)
from venus_nb.data import shared_data, r1_searcher_messages

def r1_turns(text): return Trajectory.from_messages(r1_searcher_messages('q', text)).turns

# --- Pass@K -------------------------------------------------------------------------------------------------------

def exact(n, c, k): return 1 - Fraction(math.comb(n - c, k), math.comb(n, k))

def test_pass_at_k_hand_values():
    assert pass_at_k(4, 1, 2) == 0.5                                   # 1 - C(3,2)/C(4,2) = 1 - 3/6
    assert pass_at_k(8, 2, 4) == pytest.approx(1 - 15 / 70)            # 1 - C(6,4)/C(8,4)
    assert pass_at_k(16, 1, 1) == pytest.approx(1 / 16)
    assert pass_at_k(16, 1, 16) == 1.0 and pass_at_k(5, 0, 3) == 0.0 and pass_at_k(5, 5, 1) == 1.0
    assert pass_at_k(3, 2, 2) == 1.0                                   # n - c < k: every draw of 2 holds a correct one

def test_pass_at_k_matches_binomials_exhaustively():
    for n in range(1, 13):
        for c in range(n + 1):
            for k in range(1, n + 1): assert pass_at_k(n, c, k) == pytest.approx(float(exact(n, c, k)), abs=1e-12)

def test_pass_at_k_is_stable_for_large_n():
    assert pass_at_k(1000, 1, 500) == pytest.approx(0.5)               # C(1000, 500) overflows a float
    assert pass_at_k(2000, 3, 1) == pytest.approx(3 / 2000)

@pytest.mark.parametrize('n,c,k,msg', [(4, 1, 8, 'at least 8 samples'), (4, 5, 1, '0 <= c <= n'),
                                       (4, -1, 1, '0 <= c <= n'), (4, 1, 0, 'k >= 1')])
def test_pass_at_k_errors(n, c, k, msg):
    with pytest.raises(ValueError, match=msg): pass_at_k(n, c, k)

@st.composite
def nck(draw):
    n = draw(st.integers(1, 64))
    c = draw(st.integers(0, n))
    k = draw(st.integers(1, n))
    return n, c, k

@settings(max_examples=300, deadline=None)
@given(nck())
def test_pass_at_k_properties(x):
    n, c, k = x
    p = pass_at_k(n, c, k)
    assert 0.0 <= p <= 1.0 and p == pytest.approx(float(exact(n, c, k)), abs=1e-9)
    if k < n: assert pass_at_k(n, c, k + 1) >= p - 1e-12           # monotone in k
    if c < n: assert pass_at_k(n, c + 1, k) >= p - 1e-12           # monotone in c
    assert pass_at_k(n, 0, k) == 0.0 and pass_at_k(n, n, k) == 1.0
    assert pass_at_k(n, c, 1) == pytest.approx(c / n)               # Pass@1 is the accuracy

# --- trajectories by hand ------------------------------------------------------------------------------------------

def _turns(answer='1889', visit=True):
    calls = [ToolCall('search', {'query': ['Eiffel Tower opening']}), ToolCall('search', {'query': ['Eiffel 1889']})]
    calls += [ToolCall('visit', {'url': ['corpus://eiffel'], 'goal': 'opening year'})] if visit else []
    calls += [ToolCall('python', {'code': 'print(1)'})]
    turns = [Turn.make(f'step {i}', c, observation='obs', index=i) for i, c in enumerate(calls)]
    return turns + [Turn.make('done', answer=answer, index=len(turns))]

def _traj(answer='1889', visit=True, gt='1889', **meta):
    return Trajectory('When did the Eiffel Tower open?', _turns(answer, visit), gt, meta)

def test_browse_ratio_and_counts_on_a_hand_made_trajectory():
    bad = Turn.parse({'role': 'assistant',
                      'content': '<think>x</think>\n<tool_call>\n{"name": "visit", "arguments": {{}\n</tool_call>'},
                     [], 2)
    t = _traj()
    weird = Trajectory(t.question, t.turns[:2] + [bad] + t.turns[2:], '1889')
    df = score_trajectories([t, _traj(visit=False), Trajectory('q', [Turn.make('guess', answer='1889')], '1889'),
                             weird])
    assert df.browse_ratio.iloc[0] == 0.25 and df.browse_ratio.iloc[1] == 0.0 and math.isnan(df.browse_ratio.iloc[2])
    assert (df[['search', 'visit', 'tool_calls', 'turns']].values.tolist()[:3]
            == [[2, 1, 4, 5], [2, 0, 3, 4], [0, 0, 0, 1]])
    # the malformed call is not a tool call, it is a format error
    assert df.tool_calls.iloc[3] == 4 and df.format_errors.iloc[3] == 1
    assert df.format_errors.iloc[0] == 0 and list(df.columns) == COLUMNS

def test_final_answer_is_the_last_answer_or_none():
    t = _traj('1890')
    assert final_answer(t) == '1890'
    assert final_answer(Trajectory('q', t.turns[:-1], '1889')) is None
    df = score_trajectories([Trajectory('q', t.turns[:-1], '1889')])
    assert df.answer.iloc[0] is None and df.score.iloc[0] == 0.0 and df.stop.iloc[0] == 'no_answer'
    # an answer followed by a search is not final: training scores the last turn only, and so does the evaluation
    went_on = Trajectory('q', [t.turns[-1], *t.turns[:-1]], '1890')
    assert final_answer(went_on) is None and score_trajectories([went_on]).score.iloc[0] == 0.0

def test_judges_em_f1_callables_and_llm_judge():
    ts = [_traj('1889'), _traj('in 1889'), _traj('1890')]
    assert score_trajectories(ts, 'em').correct.tolist() == [True, False, False]
    f1 = score_trajectories(ts, 'f1')
    # precision 1/2, recall 1
    assert f1.correct.tolist() == [True, True, False] and f1.score.iloc[1] == pytest.approx(2 / 3)
    assert score_trajectories(ts, 'f1', threshold=1.0).correct.tolist() == [True, False, False]
    assert score_trajectories(ts, lambda pred, gt: float('1889' in pred)).correct.tolist() == [True, True, False]
    seen = []
    assert (score_trajectories(ts, lambda q, pred, gt: seen.append(q) or 1.0).correct.all()
            and seen == [ts[0].question] * 3)
    reply = {'choices': [{'message': {'content': 'extracted_final_answer: 1889\ncorrect: yes'}}]}
    judge = LLMJudge(base_url='http://judge.test/v1',
                     transport=httpx.MockTransport(lambda r: httpx.Response(200, json=reply)))
    assert score_trajectories(ts[1:2], judge).correct.tolist() == [True]
    with pytest.raises(ValueError, match="'em', 'f1' or a callable"): score_trajectories(ts, 'bleu')

def test_llm_judge_is_not_asked_without_an_answer():
    def boom(q, p, g): raise AssertionError('judge called')
    t = _traj()
    t = Trajectory(t.question, t.turns[:-1], '1889')
    assert score_trajectories([t], boom).score.tolist() == [0.0]

# --- tables --------------------------------------------------------------------------------------------------------

@pytest.fixture(scope='module')
def experts(): return generate(SynthConfig(n=6, seed=3, lengths=((2, 20, 1.0),))).trajectories()

def test_score_table_has_one_row_per_trajectory(experts):
    samples = synthetic_rollouts(experts, G=3, seed=1)
    df = score_trajectories(samples)
    assert len(samples) == len(df) == 18
    assert df.groupby('group').size().tolist() == [3] * 6 and sorted(df['sample'].unique()) == [0, 1, 2]
    assert df.qid.tolist() == [t.meta['qid'] for t in samples]
    q = per_question(df)
    assert len(q) == 6 and q.samples.sum() == 18 and (q.correct <= q.samples).all()

def test_k_larger_than_the_samples_is_left_out_with_a_note(experts):
    df = score_trajectories(synthetic_rollouts(experts, G=2, seed=0))
    t = pass_at_k_table(df)
    assert t.k.tolist() == [1, 2] and len(t.attrs['notes']) == 3 and 'Pass@16 left out' in t.attrs['notes'][-1]
    uneven = score_trajectories(synthetic_rollouts(experts, G=4, seed=0)[:-1])   # the last question has 3 samples
    assert (pass_at_k_table(uneven).k.tolist() == [1, 2]
            and 'fewest any question has is 3' in pass_at_k_table(uneven).attrs['notes'][0])
    report = evaluate(synthetic_rollouts(experts, G=2, seed=0))
    assert len(report.notes) == 3 and 'Pass@4 left out' in report._repr_markdown_()

def test_pass_at_k_table_by_hand():
    ts = [_traj('1889', sample=0, group=0, qid='a'), _traj('x', sample=1, group=0, qid='a'),
          _traj('x', sample=0, group=1, qid='b'), _traj('x', sample=1, group=1, qid='b')]
    t = pass_at_k_table(score_trajectories(ts), ks=(1, 2))
    assert t.pass_at_k.tolist() == pytest.approx([(0.5 + 0) / 2, (1 + 0) / 2]) and t.questions.tolist() == [2, 2]

def test_browse_summary_and_report(experts):
    report = evaluate(synthetic_rollouts(experts, G=8, seed=2), label='synthetic')
    b = report.browse
    assert list(b.index) == ['correct', 'incorrect'] and b.trajectories.sum() == len(report.rows)
    assert b.loc['correct', 'browse_ratio'] > b.loc['incorrect', 'browse_ratio']   # built in by synthetic_rollouts
    s = report.summary
    assert s['questions'] == 6 and s['trajectories'] == 48 and s['samples_per_question'] == 8
    assert s['accuracy'] == pytest.approx(report.pass_at_k.pass_at_k.iloc[0])
    assert report.pass_at_k.pass_at_k.is_monotonic_increasing
    md = report._repr_markdown_()
    assert '**synthetic**' in md and 'Pass@8' in md and '| correct |' in md
    only_right = browse_summary(report.rows[report.rows.correct])
    assert only_right.loc['incorrect', 'trajectories'] == 0

def test_figures(experts):
    a = evaluate(synthetic_rollouts(experts, G=4, seed=0), label='a')
    b = evaluate(synthetic_rollouts(experts, G=4, seed=1), label='b')
    fig = pass_at_k_figure([a, b], paper='BrowseComp-ZH')
    assert [t.name for t in fig.data][:2] == ['a', 'b'] and len(fig.data) == 4 and len(fig.layout.shapes) == 3
    assert list(fig.data[0].x) == [1, 2, 4] and fig.data[2].y == (35.7, 52.9, 65.7, 74.0, 78.5)
    assert len(pass_at_k_figure({'x': a}).data) == 1
    with pytest.raises(ValueError, match='paper must be'): pass_at_k_figure(a, paper='GAIA')
    h = browse_figure(a)
    assert len(h.data) == 2 and sum(len(d.x) for d in h.data) == a.rows.browse_ratio.notna().sum()

# --- QA sets -------------------------------------------------------------------------------------------------------

def test_world_eval_default_folder_and_generated(tmp_path):
    qs, corpus = world_questions()
    asked = [q['question'] for q in generate(SAMPLE).qa]   # each question once, as first asked
    assert [q['question'] for q in qs] == list(dict.fromkeys(asked)) and all(q['answer'] and q['id'] for q in qs)
    assert len(corpus) > 0
    data = generate(SynthConfig(n=5, seed=7))
    q2, c2 = world_questions(write_world(data, tmp_path)['qa'].parent)
    q3, c3 = world_questions(data)
    assert ([q['question'] for q in q2] == [q['question'] for q in q3] == [q['question'] for q in data.questions]
            and len(c2) == len(c3))
    assert len(world_questions(SynthConfig(n=3, seed=1))[0]) == 3

def test_missing_shared_data_says_where(tmp_path):
    with pytest.raises(FileNotFoundError, match='SOURCES.md'): shared_data(tmp_path/'nowhere')
    with pytest.raises(FileNotFoundError, match='SOURCES.md'): r1_searcher_questions(root=tmp_path/'nowhere')

def test_r1_passages_and_turns():
    text = ('I should search. <|begin_of_query|> Citibank founded year<|end_of_query|>\n\n<|begin_of_documents|>\n'
            '(1)Title: Citibank Text:  Citibank was founded in 1812 (as City Bank).\n'
            '(2)"Title: X Text:  a ""quoted"" word"\n'
            '<|end_of_documents|>\n\nNow the president. <|begin_of_query|> US president 1812<|end_of_query|>\n\n'
            '<|begin_of_documents|>\n'
            '(1)James Madison   James Madison was president from 1809 to 1817.\n<|end_of_documents|>\n\n'
            'So Madison. </think>\n\n <answer> james madison </answer>')
    assert r1_passages(text) == [('Citibank', 'Citibank was founded in 1812 (as City Bank).'), ('X', 'a "quoted" word'),
                                 ('James Madison', 'James Madison was president from 1809 to 1817.')]
    turns = r1_turns(text)
    assert ([t.kind for t in turns] == ['search', 'search', 'answer']
            and turns[0].call.arguments == {'query': ['Citibank founded year']})
    assert ('founded in 1812' in turns[0].observation and turns[-1].answer == 'james madison'
            and turns[-1].think == 'So Madison.')
    assert [t.kind for t in r1_turns('no answer here')] == ['invalid']

def test_r1_searcher_loader_on_real_data():
    root = shared_file('r1-searcher/eval_results/hotpotqa_qwen.jsonl').parents[2]
    qs, corpus = r1_searcher_questions(root=root)
    assert len(qs) == 625 and len({q['id'] for q in qs}) == 625
    assert all(q['answer'].strip() and q['question'].strip() for q in qs)          # every question has its gold answer
    cov = corpus_coverage(qs, corpus)
    frac = (cov.docs > 0).mean()
    print(f'\nR1-Searcher: {len(qs)} questions, {len(corpus)} pages; retrieved pages for {frac:.1%}, '
          f'gold answer in them for {cov.answer_in_docs.mean():.1%}, '
          f'in BM25 top 10 for {cov.answer_in_top_k.mean():.1%}')
    assert frac > 0.95 and cov.answer_in_docs.mean() > 0.6 and cov.answer_in_top_k.mean() > 0.5
    # the corpus is exactly what was retrieved
    assert {d for q in qs for d in q['docs']} == {d.id for d in corpus.docs}
    small, c_small = r1_searcher_questions('bamboogle', root=root, limit=10)
    assert len(small) == 10 and all(q['source'] == 'bamboogle' for q in small) and len(c_small) < len(corpus)

def test_r1_searcher_rollouts_against_gpt4o_labels():
    root = shared_file('r1-searcher/eval_results/bamboogle_qwen.jsonl').parents[2]
    trajs = r1_searcher_trajectories(root=root)
    by_set = {s: [t for t in trajs if t.meta['source'] == f'r1-searcher/{s}'] for s in ('bamboogle', 'hotpotqa')}
    assert [len(v) for v in by_set.values()] == [125, 500]
    # SOURCES.md: judged correct 68 / 375
    assert [sum(t.meta['judge'] for t in v) for v in by_set.values()] == [68, 375]
    df = evaluate(trajs, ks=(1,)).rows
    gpt = [t.meta['judge'] for t in trajs]
    assert df.answer.notna().all() and (df.stop == 'answer').all()
    agree = sum(g for c, g in zip(df.correct, gpt) if c) / df.correct.sum()
    assert df.correct.mean() < sum(gpt) / len(gpt) and agree > 0.95   # EM is stricter than GPT-4o, rarely looser

@pytest.mark.parametrize('missing', [None, '', ' <|answer_split|> ', []])
def test_a_trajectory_without_a_ground_truth_has_no_score_and_a_note(missing):
    "None, an empty string or list, only separators: no score (NaN) rather than a made-up 0, and the report says so"
    from venus_nb.evaluation import evaluate
    rep = evaluate([_traj(gt=missing, qid='q0', sample=0), _traj(qid='q1', sample=0)], ks=(1,))
    assert math.isnan(rep.rows.score.iloc[0]) and rep.rows.score.iloc[1] == 1.0
    assert '1 trajectories have no ground truth (score NaN, counted incorrect)' in rep.notes

def test_synthetic_rollouts_refuse_a_question_with_two_trajectories():
    "Sampled as two groups, a question asked twice would count twice in Pass@k and in every paired test"
    data = generate(SynthConfig(n=60, seed=0, lengths=((2, 20, 1.0),)))
    assert len(data.trajectories()) == 60 > len(once := data.trajectories(once=True)) == len(data.questions)
    assert [t.question for t in once] == [q['question'] for q in data.questions]
    with pytest.raises(ValueError, match='questions have several trajectories'): synthetic_rollouts(data.trajectories())
    assert len({s.meta['qid'] for s in synthetic_rollouts(once, G=2)}) == len(once)
