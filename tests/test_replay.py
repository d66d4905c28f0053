"""The replay widget without a browser: its state follows the slider, buttons and chart clicks; variants recompute;
HTML export."""
import json, random, re, time
import pytest
from conftest import shared_file, ROOT
from venus_nb.rewards import RewardConfig, turn_rewards
from venus_nb.trajectory import Trajectory, Turn, ToolCall, read_jsonl, from_record
from venus_nb.rewards import Scored
from venus_nb.replay import (Replay, random_logps, pair_rollouts, credit_links, group_summary,
                             replay_figure, highlight, replay_html, write_replay, turn_html, clip)

def rollout(kinds, answer='42', bad=(), seed=0):
    "A trajectory from a kind string such as 'ssvsv' (then an answer turn); turns in `bad` are malformed"
    turns = []
    for i, k in enumerate(kinds):
        call = (ToolCall('search', {'query': [f'query-{seed}-{i}']}) if k == 's'
                else ToolCall('visit', {'url': [f'https://e.x/{seed}/{i}'], 'goal': 'g'}))
        t = Turn.make(f'thinking {i}', call, observation=f'observation {seed}-{i} ' + 'x' * 40, index=i)
        if i in bad:
            t = Turn.parse({'role': 'assistant', 'content': t.raw.replace('</think>', '')}, t.source[1:], i, False)
        turns.append(t)
    turns.append(Turn.make('done', answer=answer, index=len(kinds)))
    return Trajectory(f'question {seed}', turns, '42')

def scored(trajs, outcome=None, **cfg):
    return Scored.from_logps(trajs, [random_logps(t, seed=i) for i, t in enumerate(trajs)],
                                outcome=outcome or [1.0] * len(trajs), cfg=RewardConfig(**cfg))

@pytest.fixture
def group():
    trajs = [rollout('ssvsv', seed=0), rollout('svsssv', seed=1, bad={2}), rollout('ss', seed=2, answer='7'),
             rollout('vvvv', seed=3)]
    return trajs, scored(trajs, outcome=[1.0, 1.0, 0.0, 0.0])

def query(turn): return turn.call.arguments.get('query', turn.call.arguments.get('url'))[0]

def test_slider_moves_turn_transcript_and_bar(group):
    trajs, sc = group
    r = Replay(trajs[1], sc)
    for t in (3, 1, 5):
        r.slider.value = t
        assert r.turn == t
        assert query(trajs[1].turns[t]) in r.transcript.value and f'turn {t} · ' in r.transcript.value
        assert r.fig.data[0].selectedpoints == (t,)
        assert (r.fig.layout.shapes[0].x0, r.fig.layout.shapes[0].x1) == (t - 0.5, t + 0.5)
    others = [query(u) for u in trajs[1].turns[:-1] if u.index != 5]
    assert not any(q in r.transcript.value for q in others)

def test_buttons_clamp_and_turn_validates(group):
    trajs, sc = group
    r = Replay(trajs[0], sc)
    r.prev.click()
    assert r.turn == 0
    for _ in range(10): r.next.click()
    assert r.turn == r.slider.max == len(trajs[0].turns) - 1
    assert 'answer' in r.transcript.value
    r.turn = -3
    assert r.turn == 0 and r.slider.value == 0

def test_chart_click_jumps_to_turn(group):
    trajs, sc = group
    r = Replay(trajs[0], sc)
    # the message plotly.js sends when bar 4 of trace 0 is clicked
    r.fig._js2py_pointsCallback = dict(event_type='plotly_click',
                                       points=dict(xs=[4], ys=[0.1], point_indexes=[4], trace_indexes=[0]))
    assert (r.turn, r.slider.value, r.fig.data[0].selectedpoints) == (4, 4, (4,))

def test_long_rollout_turn_change_sends_only_the_highlight():
    rng = random.Random(0)
    big = rollout(''.join(rng.choice('ssv') for _ in range(199)), seed=9)
    r = Replay(big, scored([big]))
    sent = []
    r.fig.observe(lambda c: sent.append((c.name, c.new)) if c.new else None,
                  names=['_py2js_update', '_py2js_restyle', '_py2js_relayout', '_py2js_addTraces',
                         '_py2js_deleteTraces'])
    start = time.perf_counter()
    for t in range(1, 61): r.turn = t
    per_turn = (time.perf_counter() - start) / 60
    assert len(sent) == 60 and {n for n, _ in sent} == {'_py2js_update'}
    assert all(set(m['style_data']) == {'selectedpoints'} and set(m['layout_data']) == {'shapes.0.x0', 'shapes.0.x1'}
               for _, m in sent)
    assert per_turn < 0.1, f'{per_turn * 1000:.0f} ms per turn change'

def test_credit_and_penalty_toggles_recompute(group):
    trajs, sc = group
    r = Replay(trajs[1], sc)
    r.slider.value = 2
    copy = list(r.fig.data[0].y)
    r.credit.value, r.penalty.value = 'split', 'replace'
    want = turn_rewards(trajs, [0] * 4, sc.ig, sc.outcome, RewardConfig(credit='split', penalty='replace'), sc.logp)
    assert list(r.fig.data[0].y) == pytest.approx(want[want.rollout == 1].advantage.tolist())
    assert list(r.fig.data[0].y) != pytest.approx(copy)
    assert (r.fig.data[0].selectedpoints == (2,)
            and f'{want[want.rollout == 1].advantage.iloc[2]:+.3f}' in r.transcript.value)
    assert r.group.summary.loc[1, 'advantage'] == pytest.approx(want[want.rollout == 1].advantage.mean())

def test_table_input_replays_without_variants(group):
    trajs, sc = group
    tab = sc.table()
    r = Replay(trajs[2], tab, rollout=2)
    assert r.group is None and r.credit.disabled and len(r.fig.data[0].y) == 3
    r.credit.value = 'split'  # nothing to recompute from: the chart stays
    assert list(r.fig.data[0].y) == pytest.approx(tab[tab.rollout == 2].advantage.tolist())
    with pytest.raises(ValueError, match='one per rollout'): Replay(trajs[2], tab)
    with pytest.raises(ValueError, match='turns'): Replay(trajs[0], tab, rollout=2)

def test_group_view_sorts_and_picks(group):
    trajs, sc = group
    r = Replay(trajs[0], sc)
    g = r.group
    for by, col in [('visits', 'visits'), ('outcome', 'outcome'), ('advantage', 'advantage')]:
        g.sort.value = by
        assert list(g.summary[col]) == sorted(g.summary[col], reverse=True)
        assert [v for _, v in g.pick.options] == list(g.summary.index)
    assert r.rollout == 0 and g.pick.value == 0  # sorting is not a pick
    g.pick.value = 3
    assert (r.rollout, r.slider.max, len(r.fig.data[0].y)) == (3, 4, 5)
    assert 'class="venus-current"><th>3</th>' in g.view.value

def test_credit_links_follow_method_example():
    # method §2.1: s0 s1 v2 s3 v4 ans5 -> s0, s1 share v2; s3 shares v4; nothing after the last visit
    tab = turn_rewards([rollout('ssvsv')], [0], [[None, None, 0.3, None, 0.2, None]], [1.0])
    assert credit_links(tab) == [(2, 0, 'ig'), (2, 1, 'ig'), (4, 3, 'ig')]
    tab = turn_rewards([rollout('svss')], [0], [[None, 0.3, None, None, None]], [1.0])
    assert credit_links(tab) == [(1, 0, 'ig'), (4, 2, 'outcome'), (4, 3, 'outcome')]
    fig = replay_figure(tab, rollout('svss'))
    visit_arc, outcome_arcs = [d for d in fig.data if d.name in ('credit: visit', 'credit: outcome')]
    assert sum(x is None for x in visit_arc.x) == 1 and sum(x is None for x in outcome_arcs.x) == 2

def test_figure_parts(group):
    trajs, sc = group
    tab = sc.table()
    fig = replay_figure(tab[tab.rollout == 1], trajs[1], turn=3)
    names = [d.name for d in fig.data]
    assert names[0] == 'advantage' and {'log p(gt)', 'IG', 'format penalty', 'outcome'} <= set(names)
    assert list(fig.data[0].x) == list(range(len(trajs[1].turns)))
    bad = fig.data[names.index('format penalty')]
    assert list(bad.x) == [2] and 'think' in bad.text[0]
    ig = fig.data[names.index('IG')]
    assert list(ig.x) == [1, 5]  # after the visits; turn 2, a malformed search, is a penalty slot
    highlight(fig, 0)
    assert fig.data[0].selectedpoints == (0,)

def test_transcript_truncates_with_expand_control():
    t = Turn.make('th' * 10, ToolCall('visit', {'url': ['u']}), observation='<p>' + 'y' * 5000, index=0)
    h = turn_html(t, limit=100)
    assert 'show 4,903 more characters' in h and '&lt;p&gt;' in h and '<p>' not in h
    assert h.count('<details class="venus-sec" open>') == 3
    assert clip('a' * 10, 10) == 'a' * 10

def test_pair_rollouts_from_scored(group):
    trajs, sc = group
    pairs, first = pair_rollouts(trajs[2], sc)
    assert list(pairs) == [0, 1, 2, 3] and first == 2
    with pytest.raises(ValueError, match='not one of'): pair_rollouts(rollout('s'), sc)
    two = Scored(sc.trajs, [0, 0, 1, 1], sc.ig, sc.outcome, sc.logp)
    assert list(pair_rollouts(trajs[3], two)[0]) == [2, 3]

def test_replay_html_is_self_contained(tmp_path, group):
    trajs, sc = group
    page = replay_html(trajs[1], sc)
    markup = re.sub(r'<script[^>]*>.*?</script>', '', page, flags=re.S)  # plotly.js itself holds URL strings
    assert '<script src' not in page and not re.search(r'''(src|href)\s*=\s*["']?(https?:)?//''', markup), (
        'the page must not fetch anything')
    assert 'Plotly.newPlot' in page and len(page) > 1_000_000  # plotly.js inlined
    assert len(re.findall(r'<section class="venus-turn" data-turn=', page)) == len(trajs[1].turns)
    assert '<table class="venus-group">' in page
    p = write_replay(tmp_path/'sub'/'replay.html', trajs[0], sc.table(), rollout=0)
    assert p.exists() and '<table class="venus-group">' not in p.read_text()

def test_sample_file_replays():
    trajs = read_jsonl(ROOT/'data'/'sample'/'trajectories.jsonl').trajectories
    r = Replay(None, scored(trajs))
    assert r.rollout == 0 and len(r.group.summary) == 3 and 'format: ' in turn_html(trajs[2].turns[0])

def test_real_dr_venus_trajectories():
    d = shared_file('dr-venus/Trajectory-Example/SFT_Trajectories')
    trajs = [from_record(json.loads(p.read_text())) for p in sorted(d.glob('*.json'))[:3]]
    sc = scored(trajs)
    for i, t in enumerate(trajs):
        r = Replay(t, sc, limit=800)
        assert len(r.fig.data[0].y) == len(t.turns) >= 18
        r.turn = len(t.turns) // 2
        assert 'more characters' in r.transcript.value or len(t.turns[r.turn].observation or '') <= 800
    links = credit_links(sc.table().query('rollout == 0'))
    assert links and all(trajs[0].turns[s].kind != 'visit' or ty != 'ig' for _, s, ty in links)

def test_picks_of_a_selection_show_in_the_group_widget_and_page(group):
    trajs, sc = group
    picks = {'majority': 2, 'confidence': 0, 'evidence': 2}
    s = group_summary(sc.table(), dict(enumerate(trajs)), picks=picks)
    assert s.picked_by.to_dict() == {0: 'confidence', 1: '', 2: 'majority, evidence', 3: ''}
    assert 'picked_by' not in group_summary(sc.table(), dict(enumerate(trajs)))   # no selection, no column
    r = Replay(None, sc, picks=picks)
    labels = dict((v, k) for k, v in r.group.pick.options)
    assert labels[2].endswith('picked by majority, evidence') and 'picked by' not in labels[1]
    assert '<td>majority, evidence</td>' in r.group.view.value
    page = replay_html(trajs, sc, rollout=1, picks=picks)
    assert '<th>picked_by</th>' in page and '<td>majority, evidence</td>' in page
