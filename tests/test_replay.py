"""The replay widget without a browser: its state follows the slider, buttons and chart clicks; variants recompute;
HTML export; never a number without its basis (no ground truth, unscored turns, the chart's baseline and sums); a
notebook keeps a static view; and in a real browser: the exported page in Chromium, the widget in JupyterLab."""
import json, random, re, time, html, os, secrets, signal, subprocess, sys, urllib.request
import pytest
from conftest import shared_file, ROOT, WORLD
from venus_nb.rewards import RewardConfig, turn_rewards, Scored, GTLogps
from venus_nb.trajectory import Trajectory, Turn, ToolCall, read_jsonl, from_record
from venus_nb.replay import (Replay, random_logps, pair_rollouts, credit_links, group_summary, replay_figure,
                             highlight, replay_html, write_replay, turn_html, clip, rollout_rows)
from venus_nb.models import tiny_model
from venus_nb.scoring import gt_logps
from venus_nb.base import free_port

def rollout(kinds, answer='42', bad=(), seed=0, gt='42'):
    "A trajectory from a kind string such as 'ssvsv', then an answer turn; turns in `bad` (answer too) are malformed"
    turns = []
    for i, k in enumerate(kinds):
        call = (ToolCall('search', {'query': [f'query-{seed}-{i}']}) if k == 's'
                else ToolCall('visit', {'url': [f'https://e.x/{seed}/{i}'], 'goal': 'g'}))
        t = Turn.make(f'thinking {i}', call, observation=f'observation {seed}-{i} ' + 'x' * 40, index=i)
        if i in bad:
            t = Turn.parse({'role': 'assistant', 'content': t.raw.replace('</think>', '')}, t.source[1:], i, False)
        turns.append(t)
    last = Turn.make('done', answer=answer, index=len(kinds))
    if len(kinds) in bad:
        last = Turn.parse({'role': 'assistant', 'content': last.raw.replace('</think>', '')}, [], len(kinds), True)
    return Trajectory(f'question {seed}', turns + [last], gt)

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

def test_replay_of_a_group_starts_at_the_rollout_asked_for(group):
    trajs, sc = group
    assert replay_html(trajs, sc, rollout=2) == replay_html(trajs[2], sc) != replay_html(trajs, sc)
    with pytest.raises(ValueError, match='rollout 0 of this'): replay_html(trajs[0], sc, rollout=2)
    with pytest.raises(ValueError, match='not among'): replay_html(trajs, sc, rollout=7)

# ---------------------------------------------------------------------------------------------------------------------
# The replay never shows a number without its basis: a trajectory without a ground truth is refused or replayed
# unscored; unscored turns are marked with their reason; the chart draws the question-only baseline and the sum behind
# every advantage; a saved notebook keeps a static view

# --- no ground truth: refused, or replayed without a number ----------------------------------------------------------

def test_library_refuses_or_replays_a_trajectory_without_gt():
    t = rollout('svsv', gt=None)
    m, tok = tiny_model('llama')
    with pytest.raises(ValueError, match='no-scores'): gt_logps(m, tok, t)   # never scored against "None"
    page = replay_html(t)   # no rewards: the turns alone
    assert 'not scored</b>: turns only' in page and 'GT:</b> none given' in page
    assert 'IG-Scale' not in page and 'class="venus-basis"' not in page and 'GT:</b> None' not in page
    assert len(re.findall(r'<section class="venus-turn" data-turn=', page)) == len(t.turns)
    r = Replay(t)
    assert r.fig.data[0].name == 'tool response' and r.credit.disabled and 'not scored' in r.head.value

def test_unscored_reasons_reach_the_chart_and_survive_save_and_load(tmp_path):
    from venus_nb.replay import explained
    t = rollout('svsvsv')
    lp = GTLogps(-5.0, [None, -4.0, None, None, None, -2.0, None], cut=1, unscored={3: 'past the window'})
    sc = Scored.from_logps([t], [lp])
    back = Scored.load(sc.save(tmp_path/'s.jsonl'))
    assert (back.baseline, back.unscored) == ([-5.0], [{3: 'past the window'}])
    rows = explained(rollout_rows(back.table(), 0), t, back.cfg, back.baseline[0], back.unscored[0])
    fig = replay_figure(rows, t)
    lost = next(d for d in fig.data if d.name == 'not scored')
    assert list(lost.x) == [3] and 'past the window' in lost.customdata[0]
    plain = explained(rollout_rows(back.table(), 0), t)   # reasons not kept: said so, not left blank
    assert plain.unscored[3].startswith('no log p(gt) was recorded')

# --- the chart explains itself ----------------------------------------------------------------------------------------

def test_chart_draws_the_baseline_and_the_sum_behind_every_advantage():
    from venus_nb.replay import explained, advantage_basis, chart_key
    good, poor = rollout('sv', seed=0), rollout('sv', seed=1, answer='7')
    lps = [GTLogps(-6.0, [None, -2.0, None]), GTLogps(-6.0, [None, -4.0, None])]   # IG +4 and +2
    sc = Scored.from_logps([good, poor], lps, outcome=[1.0, 0.0])
    rows = explained(rollout_rows(sc.table(), 1), poor, sc.cfg, sc.baseline[1])
    assert rows.ig[1] == pytest.approx(2.0) and rows.advantage[1] < 0   # IG +2 with a negative advantage...
    assert rows.adv_basis[1].startswith('IG +2.000, normalised in the group: -')   # ...and why
    assert rows.adv_basis[1].endswith(f'= {rows.advantage[1]:+.3f}') and 'γ 0.95' in rows.adv_basis[1]
    assert rows.ig_basis[1] == 'IG = log p(gt) after it -4.000 − before it (the question alone) -6.000 = +2.000'
    fig = replay_figure(rows, poor)
    logp = next(d for d in fig.data if d.name == 'log p(gt)')
    assert logp.x[0] == -1 and logp.y[0] == -6.0   # the question-only baseline, where the first IG starts
    assert [d.y for d in fig.data if d.name == 'log p(gt), question only'] == [(-6.0, -6.0)]
    assert 'IG +2.000' in fig.data[0].customdata[1][2]   # the bar's hover holds the sum
    assert fig.layout.title.xanchor == 'left' and fig.layout.margin.t >= 90   # clear of plotly's toolbar
    key = chart_key(sc.cfg)
    assert 'slot' in key and 'γ = 0.95' in key and 'negative advantage' in key
    assert advantage_basis(rows, RewardConfig(gamma=0.5))[1].startswith('its sum is not shown')

def test_split_credit_explains_a_format_penalty_whole():
    """Under split credit a visit's IG is shared by its segment and a format penalty is not: the replay's sums add up
    to the advantages on every turn, the malformed search's among them"""
    from venus_nb.replay import advantage_basis, UNKNOWN_BASIS
    t, t2 = rollout('ssv', bad={1}), rollout('sv', seed=1, answer='7')
    sc = Scored.from_logps([t, t2], [random_logps(t), random_logps(t2)], outcome=[1.0, 0.0])
    cfg = RewardConfig(credit='split')
    basis = advantage_basis(rollout_rows(sc.table(credit='split'), 0), cfg)
    assert UNKNOWN_BASIS not in basis
    assert basis[1].startswith('format penalty') and '÷' not in basis[1] and '÷ 1' in basis[2]

def test_every_marker_is_visible_and_answers_are_text():
    from venus_nb.replay import plain_answer
    t, t2 = rollout('sv', bad={2}), rollout('sv', seed=1, answer='**2019**')   # t: its final answer is malformed
    sc = Scored.from_logps([t, t2], [random_logps(t), random_logps(t2)], outcome=[0.0, 1.0])
    fig = replay_figure(rollout_rows(sc.table(), 0), t)   # × and ★ belong to the same bar
    star, cross = (next(d for d in fig.data if d.name == n) for n in ('outcome', 'format penalty'))
    assert list(cross.x) == [2] and cross.y[0] == fig.data[0].y[2]   # the × at the bar's end
    assert star.y[0] > max(cross.y[0], 0)   # the star above it, not on top of it
    assert plain_answer('**2019**') == '2019' and plain_answer('`x` and *y*') == 'x and y'
    page = replay_html(t2, sc)
    assert '<b>answer:</b> 2019 ·' in page and '<td>2019</td>' in page and '**2019**</td>' not in page
    assert '@media (max-width:1100px)' in page   # narrow pages put the chart above the transcript

# --- a saved notebook keeps a static view of the widget ---------------------------------------------------------------

def test_the_widget_static_view_is_saved_in_a_notebooks_outputs(tmp_path):
    from execnb.nbio import write_nb, new_nb, mk_cell
    from execnb.shell import CaptureShell
    world = str(WORLD/'trajectories.jsonl')
    code = ('from venus_nb.replay import Replay, random_logps\nfrom venus_nb.rewards import Scored\n'
            f'from venus_nb.trajectory import read_jsonl\nts = read_jsonl({world!r}).trajectories[:2]\n'
            'Replay(ts[0], Scored.from_logps(ts, [random_logps(t) for t in ts], outcome=[1.0, 0.0]))')
    nb = new_nb([mk_cell(code)])
    CaptureShell(tmp_path).run_all(nb)
    write_nb(nb, tmp_path/'saved.ipynb')
    outs = json.loads((tmp_path/'saved.ipynb').read_text())['cells'][0]['outputs']
    data = next(o['data'] for o in outs if 'application/vnd.jupyter.widget-view+json' in o.get('data', {}))
    static = ''.join(data['text/html'])
    assert 'venus-static' in static and 'venus-static-turn' in static and 'Plotly.newPlot' in static
    assert read_jsonl(WORLD/'trajectories.jsonl').trajectories[0].question[:30] in html.unescape(static)

def test_the_replay_notebook_saves_its_widgets_static_view():
    cells = json.loads((ROOT/'nbs'/'30_replay.ipynb').read_text())['cells']
    widgets = [o['data'] for c in cells if c['cell_type'] == 'code' for o in c.get('outputs', [])
               if 'application/vnd.jupyter.widget-view+json' in o.get('data', {})
               and ''.join(o['data'].get('text/plain', '')).startswith('Replay(')]
    assert widgets and all('venus-static' in ''.join(d.get('text/html', '')) for d in widgets)

# ---------------------------------------------------------------------------------------------------------------------
# The replay in a real browser (headless Debian Chromium through selenium + chromedriver; the `browser` fixture is in
# conftest.py): the static HTML export, and the `Replay` widget rendered inside a running JupyterLab

SAMPLE = ROOT/'data'/'sample'/'trajectories.jsonl'

def sample_scored():
    trajs = read_jsonl(SAMPLE).trajectories
    return trajs, Scored.from_logps(trajs, [random_logps(t, seed=i) for i, t in enumerate(trajs)],
                                       outcome=[1.0, 0.0, 1.0])

def visible_turn(d):
    from selenium.webdriver.common.by import By
    shown = d.find_elements(By.CSS_SELECTOR, 'section.venus-turn:not([hidden])')
    assert len(shown) == 1
    return int(shown[0].get_attribute('data-turn')), shown[0].text

def test_exported_html_in_chromium(browser, tmp_path):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select, WebDriverWait
    trajs, sc = sample_scored()
    traj = trajs[1]
    page = write_replay(tmp_path/'replay.html', traj, sc)
    browser.get(page.as_uri())
    js = ("return Array.from(document.querySelectorAll('#venus-chart .barlayer .trace.bars'), "
          "t => t.querySelectorAll('.point').length)")
    WebDriverWait(browser, 30).until(lambda d: d.execute_script(js))
    assert browser.execute_script(js) == [len(traj.turns)]  # one bar trace, one bar per turn
    assert visible_turn(browser)[0] == 0
    for t in (t for t in traj.turns if t.call):
        Select(browser.find_element(By.ID, 'venus-turn')).select_by_value(str(t.index))
        shown, text = visible_turn(browser)
        assert shown == t.index and f'tool call: {t.call.name}' in text
        assert json.dumps(t.call.arguments, ensure_ascii=False, indent=1).splitlines()[2].strip() in text
        gd = ("const g = document.getElementById('venus-chart'); "
              "return [g.layout.shapes[0].x0, g.data[0].selectedpoints]")
        assert browser.execute_script(gd) == [t.index - 0.5, [t.index]]
    browser.find_element(By.ID, 'venus-next').click()
    assert visible_turn(browser)[0] == len(traj.turns) - 1
    browser.save_screenshot(str(tmp_path/'replay.png'))
    assert (tmp_path/'replay.png').stat().st_size > 20_000
    fetched = browser.execute_script("return performance.getEntriesByType('resource').map(e => e.name)")
    assert all(u.startswith(('file:', 'data:', 'blob:')) for u in fetched), fetched
    browser.get(page.as_uri() + '#turn=2')
    WebDriverWait(browser, 30).until(lambda d: visible_turn(d)[0] == 2)

# --- the widget inside JupyterLab ---------------------------------------------------------------------------------

NOTEBOOK = """from venus_nb.rewards import Scored
from venus_nb.replay import Replay, random_logps
from venus_nb.trajectory import read_jsonl
trajs = read_jsonl({sample!r}).trajectories
sc = Scored.from_logps(trajs, [random_logps(t, seed=i) for i, t in enumerate(trajs)], outcome=[1.0, 0.0, 1.0])
Replay(trajs[1], sc)"""

def _get(url, timeout=5):
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    with opener.open(url, timeout=timeout) as r: return r.status

def _wait_up(url, proc, secs=90):
    end = time.time() + secs
    while time.time() < end:
        if proc.poll() is not None: return False
        try:
            if _get(url) == 200: return True
        except OSError: time.sleep(0.5)
    return False

@pytest.fixture
def lab(tmp_path):
    "A JupyterLab server on a free loopback port, serving a notebook that renders `Replay`"
    pytest.importorskip('jupyterlab', reason='jupyterlab is not installed')
    import nbformat
    root, port, token = tmp_path/'nb', free_port(), secrets.token_hex(16)
    root.mkdir()
    cell = nbformat.v4.new_code_cell(NOTEBOOK.format(sample=str(SAMPLE)))
    nb = nbformat.v4.new_notebook(cells=[cell], metadata=dict(kernelspec=dict(name='python3', display_name='Python 3',
                                                                              language='python')))
    nbformat.write(nb, root/'replay.ipynb')
    dirs = ('JUPYTER_CONFIG_DIR', 'JUPYTER_RUNTIME_DIR', 'JUPYTERLAB_WORKSPACES_DIR', 'JUPYTERLAB_SETTINGS_DIR')
    env = {**os.environ, **{k: str(tmp_path/k.lower()) for k in dirs}}
    news = tmp_path/'jupyterlab_settings_dir'/'@jupyterlab'/'apputils-extension'/'notification.jupyterlab-settings'
    news.parent.mkdir(parents=True)
    news.write_text(json.dumps({'fetchNews': 'false'}))  # no "get notified about Jupyter news?" toast over the output
    cmd = [sys.executable, '-m', 'jupyterlab', '--no-browser', '--allow-root', '--ServerApp.ip=127.0.0.1',
           f'--ServerApp.port={port}', '--ServerApp.port_retries=0', f'--IdentityProvider.token={token}',
           f'--ServerApp.root_dir={root}', '--LabApp.news_url=None',
           '--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate', '--LabApp.extension_manager=readonly']
    log = open(tmp_path/'lab.log', 'w')
    proc = subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        base = f'http://127.0.0.1:{port}'
        if not _wait_up(f'{base}/api/status?token={token}', proc):
            pytest.fail(f'JupyterLab did not start on {base}; its log:\n' + (tmp_path/'lab.log').read_text()[-2000:])
        yield f'{base}/lab/tree/replay.ipynb?token={token}'
    finally:
        os.killpg(proc.pid, signal.SIGTERM)  # the server shuts its kernels down on SIGTERM
        try: proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        log.close()

@pytest.mark.slow
def test_widget_renders_in_jupyterlab(browser, lab, tmp_path):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.actions.action_builder import ActionBuilder
    from selenium.webdriver.support.ui import WebDriverWait
    from selenium.webdriver.support import expected_conditions as EC
    trajs, _ = sample_scored()
    browser.get(lab)
    wait = WebDriverWait(browser, 120)
    # kernel ready
    wait.until(lambda d: d.find_elements(By.XPATH,
                                         "//*[contains(@class,'jp-StatusBar')]//*[contains(text(),'| Idle')]"))
    wait.until(EC.element_to_be_clickable((By.CSS_SELECTOR, '.jp-Notebook .jp-Cell .cm-content'))).click()
    ActionChains(browser).key_down(Keys.SHIFT).send_keys(Keys.ENTER).key_up(Keys.SHIFT).perform()  # run the cell
    out = '.jp-OutputArea-output '
    try: wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, out + '.js-plotly-plot .barlayer .trace.bars .point'))
    finally: browser.save_screenshot(str(tmp_path/'lab.png'))
    assert (len(browser.find_elements(By.CSS_SELECTOR, out + '.js-plotly-plot .barlayer .trace.bars .point'))
            == len(trajs[1].turns))
    assert (browser.find_elements(By.CSS_SELECTOR, out + '.widget-slider')
            and browser.find_elements(By.CSS_SELECTOR, out + 'table.venus-group'))
    head = lambda d: d.execute_script(f"return document.querySelector('{out}.venus-turn .venus-head')"
                                      "?.textContent || ''")
    assert head(browser).startswith('turn 0 · search')
    browser.find_element(By.XPATH,
                         "//div[contains(@class,'jp-OutputArea-output')]//button[normalize-space()='▶']").click()
    wait.until(lambda d: head(d).startswith('turn 1 · '))  # the kernel answered: the widget is live
    bar = browser.find_elements(By.CSS_SELECTOR, out + '.js-plotly-plot .barlayer .trace.bars .point')[3]
    x, y = browser.execute_script('const b = arguments[0]; b.scrollIntoView({block: "center"}); '
                                  'const r = b.getBoundingClientRect();'
                                  'return [Math.round(r.x + r.width / 2), Math.round(r.y + r.height / 2)]', bar)
    click = ActionBuilder(browser)
    click.pointer_action.move_to_location(x, y).pause(0.3).click()  # viewport coordinates: no scrolling by the driver
    click.perform()
    wait.until(lambda d: head(d).startswith('turn 3 · '))  # a click on bar 3 reached FigureWidget.on_click
    browser.save_screenshot(str(tmp_path/'lab.png'))

# ---------------------------------------------------------------------------------------------------------------------
# Files the replay writes: a temporary file renamed over the target

def test_replay_page_and_cli_csvs_are_written_atomically(tmp_path, renamed, capsys):
    from venus_nb.rewards import Scored
    from venus_nb.replay import random_logps, write_replay
    from venus_nb.cli import main
    t = read_jsonl(WORLD/'trajectories.jsonl').trajectories[0]
    page = write_replay(tmp_path/'r.html', t, Scored.from_logps([t], [random_logps(t)]))
    assert page.resolve() in renamed
    main(['clean', str(WORLD/'trajectories.jsonl'), '--out', str(tmp_path/'c')])
    assert (tmp_path/'c'/'clean_report.csv').resolve() in renamed

# --- what the replay shows is what the rewards computed, on awkward input ---

def test_a_log_p_that_is_not_finite_shows_the_sum_it_made():
    "A NaN log p(gt) gives an IG of 0 there and at the next scored turn (as DR-Venus counts it): the basis says so"
    from venus_nb.replay import explained
    tr = rollout('svvv')
    sc = Scored.from_logps([tr], [GTLogps(-6, [None, -5, float('nan'), -3, None])], outcome=[1.0])
    assert sc.ig == [[None, 1.0, 0.0, 0.0, None]]
    basis = explained(rollout_rows(sc.table(), 0), tr, sc.cfg, -6)['ig_basis'].tolist()
    assert basis[1].endswith('-6.000 = +1.000')
    zero = ' = +0.000 (not finite: counted as 0)'
    assert basis[2] == 'IG = log p(gt) after it not finite − before it (after turn 1) -5.000' + zero
    assert basis[3] == 'IG = log p(gt) after it -3.000 − before it (after turn 2) not finite' + zero

def test_a_turn_with_a_slot_is_never_called_unscored():
    "A NaN IG handed to `Scored` is an IG of 0 in a slot of its own, not a turn that shares the next slot's credit"
    from venus_nb.replay import explained
    tr = rollout('svvv')
    rows = explained(rollout_rows(Scored([tr], [0], [[None, 1.0, float('nan'), 0.5, None]], [1.0]).table(), 0), tr)
    assert rows['slot'].tolist()[2] == 'ig' and rows['unscored'].tolist() == [''] * 5

def test_a_group_with_a_rollout_of_no_turns_replays(group):
    "A rollout ended before its first turn (its prompt filled the context) is a row of the group, not a crash"
    trajs, _ = group
    empty = Trajectory('question 9', [], '42')
    sc = scored(trajs[:2] + [empty], outcome=[1.0, 0.0, 0.0])
    assert 'rollout' in replay_html(trajs[0], sc) and Replay(trajs[0], sc).group.summary.loc[2, 'turns'] == 0
    assert '0 turns' in replay_html(empty, None)

def test_a_page_with_half_a_character_is_written(tmp_path):
    "A lone surrogate (an emoji cut in half by a tool) reads as the replacement mark; the page is written"
    tr = rollout('sv')
    tr.turns[0] = Turn.make('thinking', tr.turns[0].call, observation='cut \ud83d here', index=0)
    assert 'cut ? here' in write_replay(tmp_path/'r.html', tr, scored([tr])).read_text(encoding='utf-8')

def test_recompute_changes_stay_when_the_view_changes(group):
    "`recompute(gamma=...)` holds for the next rollout, the toggles, the key and the static view"
    trajs, sc = group
    r = Replay(trajs[0], sc)
    r.recompute(gamma=0.5)
    r.group.rollout = 1
    want = sc.table(gamma=0.5)
    assert r.rows['advantage'].tolist() == rollout_rows(want, 1)['advantage'].tolist()
    assert 'γ = 0.5' in r.key.value and 'γ = 0.5' in r.static_html()
    assert not any('another RewardConfig' in b for b in r.rows['adv_basis'])
    r.credit.value = 'split'
    assert r.rows['advantage'].tolist() == rollout_rows(sc.table(gamma=0.5, credit='split'), 1)['advantage'].tolist()
    r.recompute(penalty='replace')
    assert r.penalty.value == 'replace' and r.cfg.gamma == 0.5

def test_the_key_says_how_the_config_normalises():
    from venus_nb.replay import chart_key
    assert 'IG slots and format penalties and the outcome z-scored together, no IG-Scale' in chart_key(
        RewardConfig(norm='joint'))
    assert '× the IG-Scale s' in chart_key(RewardConfig())
    assert 'IG-Scale' not in chart_key(RewardConfig(norm='separate'))
    assert 'a format penalty stays −λ' in chart_key(RewardConfig(penalty='replace'))

def test_the_outcome_shown_is_the_judges_score_not_the_visit_bonus(group):
    "With a visit bonus the outcome slot's reward holds β per visit; the header and the group show the judge's score"
    trajs, _ = group
    sc = scored(trajs[:3], outcome=[1.0, 1.0, 0.0], visit_bonus=0.25)
    page = replay_html(trajs[0], sc)
    assert 'outcome</b> 1 (its reward 1.5: + 0.5 visit bonus)' in page
    assert Replay(trajs[0], sc).group.summary['outcome'].tolist() == [1.0, 1.0, 0.0]

def test_turns_are_shown_by_position_whatever_their_index():
    "A trajectory cut from a longer one keeps its turns' indices; the page and the widget go by position"
    full = rollout('ssvsv')
    cut = Trajectory(full.question, full.turns[2:], full.gt)
    page = replay_html(cut, scored([cut]))
    assert 'data-turn="0"' in page and 'data-turn="3"' in page and 'data-turn="4"' not in page
    assert Replay(cut, scored([cut])).slider.max == 3
