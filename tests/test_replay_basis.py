"""The replay never shows a number without its basis: a trajectory without a ground truth is refused or replayed
unscored; turns IG could not score are marked with their reason, on the page and in `venus-nb replay`'s output; the
chart draws the question-only baseline and the sum behind every advantage; the demo's rollout replay is one
question's group; a saved notebook keeps a static view of the `Replay` widget."""
import html, json, re
from types import SimpleNamespace
import pytest
from conftest import ROOT, WORLD, cli_result as _cli, one_error as _one_error
from venus_nb.models import tiny_model
from venus_nb.rewards import RewardConfig, Scored, GTLogps
from venus_nb.scoring import gt_logps
from venus_nb.trajectory import Trajectory, Turn, ToolCall, read_jsonl, to_record
from venus_nb.replay import Replay, random_logps, replay_html, replay_figure, rollout_rows

def rollout(kinds, answer='42', seed=0, gt='42', bad=()):
    "A trajectory from a kind string such as 'svsv', then an answer turn; turns in `bad` are malformed"
    turns = []
    for i, k in enumerate(kinds):
        call = (ToolCall('search', {'query': [f'q-{seed}-{i}']}) if k == 's'
                else ToolCall('visit', {'url': [f'https://e.x/{seed}/{i}'], 'goal': 'g'}))
        t = Turn.make(f'thinking {i}', call, observation=f'observation {seed}-{i}', index=i)
        if i in bad:
            t = Turn.parse({'role': 'assistant', 'content': t.raw.replace('</think>', '')}, t.source[1:], i, False)
        turns.append(t)
    last = Turn.make('done', answer=answer, index=len(kinds))
    if len(kinds) in bad:
        last = Turn.parse({'role': 'assistant', 'content': last.raw.replace('</think>', '')}, [], len(kinds), True)
    return Trajectory(f'question {seed}', turns + [last], gt)


def _without_gt(tmp_path):
    rec = to_record(read_jsonl(WORLD/'trajectories.jsonl').trajectories[0])
    rec.pop('gt', None)
    rec.pop('answer', None)
    f = tmp_path/'no_gt.jsonl'
    f.write_text(json.dumps(rec) + '\n')
    return f

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

def test_cli_without_gt_names_both_options_and_no_scores_writes_the_turns(tmp_path, capsys, tiny_dir):
    f, page = _without_gt(tmp_path), tmp_path/'r.html'
    _one_error(*_cli(['replay', f, '--model', tiny_dir, '--out', page], capsys)[::2], 'trajectory 0 of',
               'no_gt.jsonl', 'no ground truth', '--gt TEXT', '--no-scores')
    assert not page.exists()
    code, out, err = _cli(['replay', f, '--no-scores', '--model', tmp_path/'no-such-model', '--out', page], capsys)
    assert code == 0 and 'not scored' in out and page.exists(), (out, err)   # no model loaded
    text = page.read_text()
    assert 'not scored</b>: turns only' in text and 'IG-Scale' not in text
    _one_error(*_cli(['replay', f, '--no-scores', '--gt', 'x', '--out', page], capsys)[::2], 'not both')

# --- turns IG could not score ---------------------------------------------------------------------------------------

def test_an_overlong_trajectory_reports_its_unscored_visits_on_the_page_and_in_the_output(tmp_path, capsys,
                                                                                         monkeypatch):
    m, tok = tiny_model('llama')
    t = next(t for t in read_jsonl(WORLD/'trajectories.jsonl').trajectories
             if sum(u.kind == 'visit' for u in t.turns) >= 2)
    m.config.max_position_embeddings = len(t.tokenize(tok).ids) // 2   # the later visits lie past it
    m.save_pretrained(tmp_path/'short')
    tok.save_pretrained(tmp_path/'short')
    f, page = tmp_path/'one.jsonl', tmp_path/'r.html'
    f.write_text(json.dumps(to_record(t)) + '\n')
    args = ['replay', f, '--model', tmp_path/'short', '--out', page, '--max-chars', 10**5]
    code, out, err = _cli(args, capsys)
    assert code == 0 and 'scoring' not in err, (out, err)   # not a terminal: no progress line
    window = f"past the model's context window ({m.config.max_position_embeddings:,} positions)"
    assert 'scored turns have no IG (marked “not scored” on the page)' in out and window in out
    assert '(--max-chars, now 100,000) scores them' in out
    n = int(re.search(r'(\d+) of the \d+ scored turns have no IG', out).group(1))
    text = page.read_text()
    assert f'{n} turn{"s" if n > 1 else ""} IG would score' in text
    assert text.count(f'not scored: {html.escape(window)}') == n   # in each such turn's header
    assert text.count(' · not scored</option>') == n   # and in the selector
    monkeypatch.setattr('venus_nb.cli.in_terminal', lambda: True)
    code, out, err = _cli(args, capsys)
    assert code == 0 and 'scoring trajectory 0 of' in err and 'visits' in err   # in a terminal: progress

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
