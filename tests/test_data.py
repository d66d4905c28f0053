"""Real trajectory and QA formats in, and the cleaning: loaders count every line (file and line number for each bad
one) on real data in ../shared/data, hostile and fuzzed lines and tables, in linear time; the cleaner's reasons,
funnel and correctness filter; search results, ReAct and R1-Searcher text parsed as before; `datasets.Dataset` in."""
import json, warnings
from pathlib import Path
import pytest, pandas as pd
from hypothesis import given, settings, example, strategies as st, HealthCheck
from datasets import Dataset
from conftest import shared_file, WORLD
from test_trajectory import assert_linear, _turn, _with_bad_rows
import test_trajectory
from venus_nb.data import (CleanConfig, clean, step_correct, load_dr_venus, load_webdancer, load_react, load_qa_jsonl,
                           load_verl_parquet, load_xbench, load_browsecomp_zh, parse_search_results, as_questions)
from venus_nb.synth import generate, SynthConfig
from venus_nb.trajectory import (Trajectory, read_jsonl, check_format, parse_call_body, parse_chat_text, Loaded,
                                 to_dataset, as_trajectories, is_dataset)
from venus_nb.base import LoadError

world = test_trajectory.world   # a fixture of test_trajectory.py

# ---------------------------------------------------------------------------------------------------------------------
# The correctness filter of the cleaning: one clear error for a judge it cannot use, one spelling for no filter

@pytest.fixture(scope='module')
def trajs():
    return generate(SynthConfig(n=6, seed=1)).trajectories()

def test_a_judge_it_cannot_use_is_one_error_before_any_trajectory(trajs, monkeypatch):
    monkeypatch.delenv('VENUS_NB_JUDGE_URL', raising=False)
    for bad, says in [('bleu', "expected 'none'"), ('llm', 'VENUS_NB_JUDGE_URL'), (lambda a: 1.0, r'judge\(question')]:
        with pytest.raises((ValueError, TypeError), match=says): CleanConfig(judge=bad)
    cfg = CleanConfig(judge='em')
    cfg.judge = 'bleu'   # set after the config was made: refused once, not written into every row
    with pytest.raises(ValueError, match='bleu'): clean(trajs, cfg)

def test_none_and_the_string_none_both_mean_no_filter(trajs):
    for judge in (None, 'none'):
        cfg = CleanConfig(judge=judge)
        assert cfg.judge is None and step_correct(trajs[0], cfg) == (trajs[0], [])
        assert not clean(trajs, cfg)[1].step.eq('correct').any()

# ---------------------------------------------------------------------------------------------------------------------
# Truncations, byte garbage, missing keys and wrong types never crash the loaders or the cleaner

FUZZ_RECORDS = generate(SynthConfig(n=6, seed=3, lengths=((2, 8, 1.0),))).records
LINES = [json.dumps(r) for r in FUZZ_RECORDS]

mutated = st.one_of(
    st.tuples(st.sampled_from(LINES), st.integers(0, 3000)).map(lambda p: p[0][:p[1]]),               # truncation
    st.binary(max_size=80).map(lambda b: b.decode('latin-1').replace('\n', ' ').replace('\r', ' ')),  # byte garbage
    st.tuples(st.sampled_from(FUZZ_RECORDS), st.sampled_from(['messages', 'question', 'gt']))
        .map(lambda p: json.dumps({k: v for k, v in p[0].items() if k != p[1]})),
    st.tuples(st.sampled_from(FUZZ_RECORDS), st.sampled_from([None, 3, 'x', [], {}, [None], [{'role': 1}]]))
        .map(lambda p: json.dumps({**p[0], 'messages': p[1]})),
    st.sampled_from(LINES))

@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(st.lists(mutated, min_size=1, max_size=6))
def test_loaders_never_crash(tmp_path_factory, lines):
    p = tmp_path_factory.mktemp('f')/'x.jsonl'
    p.write_text('\n'.join(lines), encoding='utf-8')
    n = sum(1 for l in lines if l.strip())
    for load in (load_dr_venus, load_webdancer, load_react, load_qa_jsonl):
        got = load(p)
        assert len(got.trajectories) + len(got.errors) == n

msg = st.fixed_dictionaries({'role': st.sampled_from(['system', 'user', 'assistant', 'tool'])},
                            optional={'content': st.one_of(st.none(), st.integers(), st.text(max_size=30),
                                                           st.sampled_from([m['content'] for r in FUZZ_RECORDS
                                                                            for m in r['messages']][:40]))})

@settings(max_examples=150, deadline=None)
@given(st.lists(st.lists(msg, max_size=8), min_size=1, max_size=5), st.sampled_from([None, 'em', 'f1']))
def test_cleaner_never_crashes_and_accounts(convs, judge):
    from venus_nb.data import CleanConfig
    trajs = [Trajectory.from_messages(m, gt='x') for m in convs]
    kept, report = clean(trajs, CleanConfig(judge=judge))
    assert len(kept) + int((~report.kept).sum()) == len(trajs) == len(report)
    assert report[~report.kept].reason.map(bool).all()

# ---------------------------------------------------------------------------------------------------------------------
# Loaders and cleaning on real data in ../shared/data: nothing crashes, every drop and edit has a reason, counts add
# up

REAL_LOADERS = {'dr-venus/Trajectory-Example/SFT_Trajectories': load_dr_venus,
                'webdancer/sample_traj.jsonl': load_webdancer, 'fireact/hotpotqa.jsonl': load_react}

def _accounted(trajs, kept, report):
    assert len(report) == len(trajs) == len(kept) + int((~report.kept).sum())
    assert report[~report.kept].reason.map(bool).all() and report[~report.kept].step.notna().all()
    assert all(':' in e for es in report.edits for e in es)  # every edit names its turn and what changed
    f = report.funnel()
    assert list(f.values) == sorted(f.values, reverse=True) and f.iloc[-1] == len(kept)

@pytest.mark.parametrize('rel', REAL_LOADERS)
def test_real_trajectories_clean_with_reasons(rel):
    loaded = REAL_LOADERS[rel](shared_file(rel))
    assert not loaded.errors
    kept, report = clean(loaded.trajectories)
    _accounted(loaded.trajectories, kept, report)

def test_expected_outcomes_on_real_sets():
    dv = clean(load_dr_venus(shared_file('dr-venus/Trajectory-Example/SFT_Trajectories')).trajectories)[1]
    wd = clean(load_webdancer(shared_file('webdancer/sample_traj.jsonl')).trajectories)[1]
    fa = clean(load_react(shared_file('fireact/hotpotqa.jsonl')).trajectories)[1]
    assert dv.kept.all() and dv.edits.map(len).sum() == 2          # two final turns had leaked <answer> tags
    assert wd.kept.all() and wd.edits.map(lambda e: any('search results parsed' in x for x in e)).sum() > 150
    assert not fa.kept.any() and (fa.step == 'validate').all()      # ReAct text is not the DR-Venus format

def test_correctness_filter_on_webdancer_with_a_callable_judge():
    from venus_nb.judges import normalize_answer, aliases
    # answers are sentences
    contains = lambda q, a, gt: float(any(normalize_answer(g) in normalize_answer(a) for g in aliases(gt)))
    trajs = load_webdancer(shared_file('webdancer/sample_traj.jsonl')).trajectories
    kept, report = clean(trajs, CleanConfig(judge=contains))
    _accounted(trajs, kept, report)
    assert 0 < len(kept) < len(trajs) and report.reason.str.startswith('judged incorrect').any()

@pytest.mark.parametrize('rel,loader,n', [('dr-venus/RL/data/test.parquet', load_verl_parquet, 3197),
                                          ('deepresearcher/dev.parquet', load_verl_parquet, 875),
                                          ('xbench/DeepSearch-2505.csv', load_xbench, 100),
                                          ('xbench/DeepSearch-2510.csv', load_xbench, 100),
                                          ('browsecomp-zh/browsecomp-zh-encrypted.xlsx', load_browsecomp_zh, 289),
                                          ('r1-searcher/eval_set/bamboogle.jsonl', load_qa_jsonl, 125)])
def test_qa_loaders(rel, loader, n):
    got = loader(shared_file(rel))
    assert len(got.trajectories) == n and not got.errors
    assert all(r['question'].strip() and r['answer'].strip() for r in got.trajectories)

def test_decryption_gives_readable_text():
    x = load_xbench(shared_file('xbench/DeepSearch-2505.csv')).trajectories
    b = load_browsecomp_zh(shared_file('browsecomp-zh/browsecomp-zh-encrypted.xlsx')).trajectories
    assert all(any('\u4e00' <= c <= '\u9fff' for c in r['question']) for r in x[:20] + b[:20])  # Chinese questions

# --- markdown final answers and R1-Searcher rollouts ------------------------------------------------------------------

OFFICIAL = 'dr-venus/Trajectory-Example/SFT_Trajectories'

def test_the_official_markdown_answers_are_scored_by_their_span():
    "The official final answers are markdown paragraphs: EM and F1 of their span keep 5 and 8 of 10, of all the text 2"
    from venus_nb.judges import final_answer_span
    dv = load_dr_venus(shared_file(OFFICIAL))
    spans = {t.meta['id']: final_answer_span(t.turns[-1].answer) for t in dv.trajectories}
    assert (spans['0001'], spans['0002'], spans['0003'], spans['0007']) == (
        'Daniel Mortimer', 'Abdal Latif Sultan', '1805', 'tetraethylammonium chloride')
    kept = lambda **kw: int(clean(dv, CleanConfig(**kw))[1].kept.sum())
    assert (kept(judge='em'), kept(judge='f1')) == (5, 8)
    assert (kept(judge='em', span=False), kept(judge='f1', span=False, min_score=0.5)) == (2, 2)

@pytest.mark.parametrize('name,n,correct', [('bamboogle', 125, 68), ('hotpotqa', 500, 375)])
def test_r1_searcher_rollouts_load_as_search_turns_and_clean(name, n, correct):
    import json
    from venus_nb.data import load_r1_searcher
    from venus_nb.trajectory import between
    path = shared_file(f'r1-searcher/eval_results/{name}_qwen.jsonl')
    loaded = load_r1_searcher(path)
    assert (len(loaded.trajectories), loaded.errors) == (n, [])
    assert sum(t.meta['gpt4o_correct'] for t in loaded.trajectories) == correct
    for line, t in zip(path.read_text().splitlines(), loaded.trajectories):
        text = json.loads(line)['gen_text_store']   # a search turn per query, the last <answer> as the final turn
        assert [x.kind for x in t.turns] == ['search'] * text.count('<|begin_of_query|>') + ['answer']
        assert t.turns[-1].answer == between(text, '<answer>', '</answer>')[-1].strip()
    kept, report = clean(loaded.trajectories)
    _accounted(loaded.trajectories, kept, report)

# ---------------------------------------------------------------------------------------------------------------------
# Hostile data: parsers and loaders run in linear time, loaders count every line (file and line number for each bad
# one)

RECORDS = generate(SynthConfig(n=4, seed=5, lengths=((2, 5, 1.0),))).records
GOOD = json.dumps(RECORDS[0])
SMALL = json.dumps({'question': 'q', 'gt': 'a', 'messages': [
    {'role': 'user', 'content': 'q'}, {'role': 'assistant', 'content': '<think>\nso\n</think>\n<answer>a</answer>'}]})

def test_search_results_parse_in_linear_time():
    head = 'Web Results\nA Google search for x found 1 results:\n'
    assert_linear(parse_search_results, lambda n: head + '\n' * (20 * n), 500)
    assert_linear(parse_search_results, lambda n: head + '1. [' + '](' * n, 2000)
    assert_linear(parse_search_results, lambda n: head + '1. [t](u) s\n' * n, 500)

def test_search_results_parse_as_before():
    md = ("A Google search for 'Calder Ferry' found 2 results:\n\n## Web Results\n"
          "1. [Calder Bridge](https://x.org/calder)\nDate published: 2001\n"
          "The bridge replaced the ferry.\n\n2. [Ferries](https://x.org/f) List\nof ferries.\n   3. [a](b) [c](d)\n")
    assert json.loads(parse_search_results(md)) == [{'query': 'Calder Ferry', 'web_page_info_list': [
        {'title': 'Calder Bridge', 'url': 'https://x.org/calder', 'snippet': 'The bridge replaced the ferry.'},
        {'title': 'Ferries', 'url': 'https://x.org/f', 'snippet': 'List of ferries.'},
        {'title': 'a', 'url': 'b', 'snippet': '[c](d)'}]}]

def _old_search_results(text):
    "The regular expressions the cleaner used before (quadratic on hostile pages), to compare results on small ones"
    import re
    head, entry = (re.compile(r"^\s*A Google search for (.+?) found \d+ results:\s*$", re.M),
                   re.compile(r'^\s*\d+\.\s+\[(.+?)\]\((\S+?)\)(.*)$', re.M))
    def entries(block):
        hits = list(entry.finditer(block))
        ends = [h.start() for h in hits[1:]] + [len(block)]
        body = lambda h, e: ' '.join(l.strip() for l in (h.group(3) + block[h.end():e]).splitlines()
                                     if l.strip() and not re.match(r'\s*Date (published|updated)\s*:', l))
        return [dict(title=h.group(1).strip(), url=h.group(2).strip(), snippet=body(h, e))
                for h, e in zip(hits, ends)]
    if 'Web Results' not in text or not (heads := list(head.finditer(text))): return None
    ends = [h.start() for h in heads[1:]] + [len(text)]
    return json.dumps([{'query': h.group(1).strip().strip('\'"'), 'web_page_info_list': entries(text[h.end():e])}
                       for h, e in zip(heads, ends)], ensure_ascii=False)

LISTING = ['\r', '\x0b', '\n', '\n\n', ' ', '\t', 'Web Results', 'A Google search for ', 'q', ' found 3 results:', '1.',
           '2. ', '[', ']', '(', ')', '](', 'u', 'x y', 'Date published: 1', '"', 'http://a.b/c']

@settings(max_examples=3000, deadline=None)
@given(st.lists(st.sampled_from(LISTING), max_size=30).map(''.join))
def test_search_results_parse_as_the_old_patterns(text):
    assert parse_search_results(text) == _old_search_results(text)

def test_clean_is_linear_in_a_huge_line():
    def traj(n):
        msgs = [{'role': 'user', 'content': 'q'}, {'role': 'assistant', 'content': '<think>' * n + '<tool_call>' * n},
                {'role': 'user', 'content': '<tool_response>\nWeb Results\n' + '\n' * n + '</tool_response>'},
                {'role': 'assistant', 'content': '<think>x</think><answer>a</answer>' + '<summary>' * n}]
        return Trajectory.from_messages(msgs, gt='a')
    assert_linear(lambda n: clean([traj(n)], CleanConfig(judge='em')), lambda n: n, 2000)

def r1_turns(text):
    "An R1-Searcher rollout text as turns (`data.r1_searcher_messages`), or None where the parser refuses it"
    from venus_nb.data import r1_searcher_messages
    try: return Trajectory.from_messages(r1_searcher_messages('q', text)).turns
    except ValueError: return None

def test_r1_parsers_are_linear():
    from venus_nb.corpus import parse_r1_passage, r1_passages
    assert_linear(parse_r1_passage, lambda n: 'Title: a' + ' ' * (10 * n), 2000)
    assert_linear(r1_passages, lambda n: '<|begin_of_documents|>' * n, 2000)
    assert_linear(r1_turns, lambda n: '<|begin_of_query|>' * n, 2000)
    assert_linear(r1_turns, lambda n: '<|begin_of_query|>q<|end_of_query|><|begin_of_documents|>' * n, 1000)
    search = '<|begin_of_query|>q<|end_of_query|><|begin_of_documents|>(1)T   d<|end_of_documents|>'
    assert_linear(r1_turns, lambda n: search * n + '<answer>a</answer>', 200)
    assert_linear(r1_turns, lambda n: '<answer>' * n, 2000)

def test_r1_parsers_read_as_before():
    from venus_nb.corpus import parse_r1_passage, r1_passages
    assert parse_r1_passage('"Title: Foo  Bar Text: some ""text"""') == ('Foo  Bar', 'some "text"')
    assert parse_r1_passage('Title:  Text: x') == ('', 'x')
    text = ('<think>a</think><|begin_of_query|> q1 <|end_of_query|>\n'
            '<|begin_of_documents|>(1)Title: T Text: x\n(2)U   y<|end_of_documents|>'
            'more<|begin_of_query|>q2<|end_of_query|> then <answer>ok</answer>')
    assert r1_passages(text) == [('T', 'x'), ('U', 'y')]
    assert r1_turns(text) is None   # the second query has no passages after it: the rollout is refused
    docs = '<|begin_of_documents|>(1)V   z<|end_of_documents|>'
    ts = r1_turns(text.replace('<|end_of_query|> then', f'<|end_of_query|>{docs} then'))
    assert [t.kind for t in ts] == ['search', 'search', 'answer'] and ts[0].call.arguments == {'query': ['q1']}
    assert ts[1].observation == '(1)V   z' and ts[2].answer == 'ok' and ts[0].observation.startswith('(1)Title')

# ---------------------------------------------------------------------------------------------------------------
# 4. deep nesting, empty input

LOADERS = {'read_jsonl': read_jsonl, 'dr_venus': load_dr_venus, 'webdancer': load_webdancer, 'react': load_react,
           'qa': lambda p: load_qa_jsonl(p, answer='gt')}

@pytest.mark.parametrize('name', LOADERS)
def test_deeply_nested_lines_are_bad_records(tmp_path, name):
    p = tmp_path/'deep.jsonl'
    p.write_text('[' * 100_000 + '\n' + '{"messages": ' + '[' * 5000 + ']' * 5000 + '}\n' + GOOD + '\n',
                 encoding='utf-8')
    got = LOADERS[name](p)
    assert [e.index for e in got.errors][:2] == [1, 2] and 'nested' in got.errors[0].reason
    assert len(got.trajectories) + len(got.errors) == 3

def test_clean_and_resample_of_nothing():
    from venus_nb.resample import resample, resample_table
    kept, report = clean([])
    assert kept == [] and len(report) == 0 and report.funnel()['input'] == 0 and len(report.reasons()) == 0
    report._repr_markdown_()
    table = resample_table([], resample([]))
    assert table.values.sum() == 0 and len(table) == 3

def test_clean_of_only_unreadable_records(tmp_path):
    p = tmp_path/'bad.jsonl'
    p.write_text('not json\n[1, 2]\n', encoding='utf-8')
    kept, report = clean(read_jsonl(p))
    assert kept == [] and len(report) == 2 and (report.step == 'load').all() and report.funnel()['input'] == 2
    assert report.reasons().sum() == 2 and report.funnel().iloc[-1] == 0

# ---------------------------------------------------------------------------------------------------------------
# 5. honest counts: every line counted, errors name file and line

def _eight_records(p):
    lines = [GOOD, '', 'not json', GOOD, '{"messages": 3}', '   ', GOOD, '{"question": "q"}', GOOD, '[', GOOD]
    p.write_text('\n'.join(lines) + '\n', encoding='utf-8')
    return {3, 5, 8, 10}   # the line numbers of the bad records

@pytest.mark.parametrize('name', ['read_jsonl', 'dr_venus'])
def test_counts_and_line_numbers(tmp_path, name):
    bad = _eight_records(tmp_path/'t.jsonl')
    got = LOADERS[name](tmp_path/'t.jsonl')
    assert {e.index for e in got.errors} == bad and all(e.source == str(tmp_path/'t.jsonl') for e in got.errors)
    kept, report = clean(got)
    assert len(report) == 9 == report.funnel()['input'] and int((report.step == 'load').sum()) == 4
    assert len(kept) + int((~report.kept).sum()) == 9
    assert set(report[report.step == 'load'].id) == {f'{tmp_path/"t.jsonl"}:{i}' for i in bad}

def test_a_folder_of_json_files(tmp_path):
    (tmp_path/'a.json').write_text(GOOD)
    (tmp_path/'d.JSON').write_text(json.dumps(RECORDS[1]))
    (tmp_path/'b.json').write_text('{\n "messages": [\n oops\n]}')
    (tmp_path/'c.json').write_bytes(b'{"messages": "\xff"}')
    got = load_dr_venus(tmp_path)
    # d.JSON is read too
    assert sorted(t.question for t in got.trajectories) == sorted(r['question'] for r in RECORDS[:2])
    errs = {Path(e.source).name: e for e in got.errors}
    assert set(errs) == {'b.json', 'c.json'} and errs['b.json'].index == 3 and 'not UTF-8' in errs['c.json'].reason
    assert str(tmp_path/'b.json') in str(errs['b.json'])

def test_bytes_that_are_not_utf8_are_a_bad_record(tmp_path):
    p = tmp_path/'t.jsonl'
    p.write_bytes(GOOD.encode() + b'\n' + GOOD.replace('"question": "', '"question": "\xff\xfe').encode('latin-1')
                  + b'\n')
    for name, load in LOADERS.items():
        got = load(p)
        assert len(got.trajectories) == 1 and [e.index for e in got.errors] == [2], name
        assert 'not UTF-8' in got.errors[0].reason and '\ufffd' not in json.dumps([str(t) for t in got.trajectories])

def test_a_utf8_bom_and_crlf_lines_read_fine(tmp_path):
    p = tmp_path/'t.jsonl'
    p.write_bytes(b'\xef\xbb\xbf' + SMALL.encode() + b'\r\n' + SMALL.encode() + b'\r\n\r\n')
    for name, load in LOADERS.items():
        if name != 'qa': assert (len(load(p).trajectories), load(p).errors) == (2, []), name

@pytest.mark.parametrize('name', LOADERS)
def test_a_missing_path_is_one_clear_error(tmp_path, name):
    with pytest.raises(FileNotFoundError, match='no such file or folder'): LOADERS[name](tmp_path/'missing.jsonl')

def test_an_over_long_line_is_reported_not_read(tmp_path):
    cap = len(GOOD) + 10
    p = tmp_path/'t.jsonl'
    p.write_text(GOOD + '\n' + json.dumps({'messages': [], 'x': 'y' * 3 * cap}) + '\n' + GOOD + '\n')
    got = read_jsonl(p, max_line_bytes=cap)
    assert (len(got.trajectories) == 2 and [e.index for e in got.errors] == [2]
            and f'{cap:,} bytes' in got.errors[0].reason)

# ---------------------------------------------------------------------------------------------------------------
# fuzz: every loader and parser on hostile lines; no crash, in = kept + dropped, linear growth

HOSTILE = ['{', '}', '[', ']', '"', ':', ',', '\\', '<think>', '</think>', '<tool_call>', '</tool_call>', '<answer>',
           '</answer>', '<summary>', '<tool_response>', '</tool_response>', '<|im_start|>', '<|im_end|>', 'Action: a[',
           'Thought:', '\n', ' ', '"messages"', '"role"', '"assistant"', '"content"', 'Web Results',
           'A Google search for ', ' found 1 results:', '1. [', '](', ')', 'Title:', ' Text:', '<|begin_of_query|>',
           '<|end_of_query|>', '<|begin_of_documents|>', '<|end_of_documents|>']
unit = st.lists(st.one_of(st.sampled_from(HOSTILE), st.text(max_size=3)), min_size=1, max_size=6).map(''.join)
line = st.one_of(unit, st.binary(max_size=40), st.sampled_from([GOOD, '', ' ', '[' * 3000, '{"messages": [' * 200]),
                 st.tuples(st.sampled_from([GOOD]), st.integers(0, 2000)).map(lambda p: p[0][:p[1]]))

def _nonblank(lines):
    "Lines a loader must account for: all but those that decode to whitespace"
    def blank(b):
        try: return not b.decode('utf-8').strip()
        except UnicodeDecodeError: return False
    return sum(not blank(b) for b in lines)

def _as_bytes(x): return (x if isinstance(x, bytes) else x.encode('utf-8')).replace(b'\n', b' ').replace(b'\r', b' ')

@settings(max_examples=40, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(st.lists(line, max_size=8))
def test_fuzz_loaders_account_for_every_line(tmp_path_factory, lines):
    lines = [_as_bytes(l) for l in lines]
    p = tmp_path_factory.mktemp('f')/'x.jsonl'
    p.write_bytes(b'\n'.join(lines))
    for name, load in LOADERS.items():
        got = load(p)
        assert len(got.trajectories) + len(got.errors) == _nonblank(lines), name
        assert all(isinstance(e.index, int) and 1 <= e.index <= len(lines) and e.reason for e in got.errors), name
    kept, report = clean(read_jsonl(p))
    assert len(report) == _nonblank(lines) == len(kept) + int((~report.kept).sum())

@settings(max_examples=3, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(unit)
def test_fuzz_loaders_are_linear(tmp_path_factory, u):
    d = tmp_path_factory.mktemp('lin')
    def write(n):
        p = d/f'{n}.jsonl'
        rec = json.dumps({'messages': [{'role': 'user', 'content': u * 50}]})
        p.write_bytes(b'\n'.join([_as_bytes(u * 50), SMALL.encode(), b'[' * 2000, rec.encode()] * n))
        return p
    for name, load in LOADERS.items(): assert_linear(load, write, 10, bound=8)

PARSERS = {'turn': _turn, 'check_format': lambda s: check_format(s, False), 'call': parse_call_body,
           'chat': parse_chat_text, 'search_results': lambda s: parse_search_results('Web Results\n' + s),
           'trajectory': lambda s: Trajectory.from_messages([
               {'role': 'user', 'content': s}, {'role': 'assistant', 'content': s},
               {'role': 'user', 'content': f'<tool_response>\n{s}\n</tool_response>'}]).shorten(50)}

def _r1(s):
    from venus_nb.corpus import parse_r1_passage, r1_passages
    parse_r1_passage(s)
    r1_passages(s)
    r1_turns(s)

@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(unit)
def test_fuzz_parsers_never_crash_and_are_linear(u):
    for name, parse in {**PARSERS, 'r1': _r1}.items():
        parse(u)
        parse(u * 7)
        assert_linear(parse, lambda n: u * n, 400, bound=8)

# the table loaders: every row a QA row or an error with its row number; a file that is no table is one clear error

def _xbench_row(text, i):
    import base64
    from venus_nb.data import _xor
    enc = lambda s: base64.b64encode(_xor(s.encode(), b'canary')).decode()
    return [dict(id=i, prompt=enc(f'q {text}'), answer=enc(text or 'a'), canary='canary'),
            dict(id=i, prompt=text, answer='%%', canary='c'), dict(id=i, prompt=None, answer=enc(text), canary=None)]

def _cell_text(u:str)->str: return ''.join(ch for ch in u if ch.isprintable())   # what an xlsx cell can hold

def _tables(d, u, n):
    "An xbench CSV, a BrowseComp-ZH xlsx and a verl parquet of about 3n rows, each row built around the text `u`"
    import pandas as pd
    from venus_nb.data import _xor
    import base64, hashlib
    key = hashlib.sha256(b'c').digest()
    u = _cell_text(u)
    xb = pd.DataFrame([r for i in range(n) for r in _xbench_row(u, i)])
    bc = pd.DataFrame([dict(Question=base64.b64encode(_xor(f'q{u}'.encode(), key)).decode(),
                            Answer=base64.b64encode(_xor(u.encode() or b'a', key)).decode(), canary='c'),
                       dict(Question=u, Answer=u, canary='c')] * n)
    vp = pd.DataFrame([dict(prompt=[{'role': 'user', 'content': f'q {u}'}], reward_model={'ground_truth': u},
                            extra_info={'index': i}, data_source='x')
                       for i in range(n)]
                      + [dict(prompt=[{'role': 'system', 'content': u}], reward_model={'x': u},
                              extra_info={'index': -1}, data_source='x')] * n)
    paths = (d/f'x{n}.csv', d/f'b{n}.xlsx', d/f'v{n}.parquet')
    xb.to_csv(paths[0], index=False)
    bc.to_excel(paths[1], index=False)
    vp.to_parquet(paths[2])
    return dict(zip(('xbench', 'browsecomp', 'verl'), paths)), dict(xbench=len(xb), browsecomp=len(bc), verl=len(vp))

@settings(max_examples=3, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(unit, st.binary(min_size=1, max_size=200))
@example(u='\x1b', junk=b'\x00')   # a text the tables cannot hold: its rows are built around ''
def test_fuzz_table_loaders(tmp_path_factory, u, junk):
    from venus_nb.data import load_xbench, load_browsecomp_zh, load_verl_parquet
    loaders = dict(xbench=load_xbench, browsecomp=load_browsecomp_zh, verl=load_verl_parquet)
    d = tmp_path_factory.mktemp('tables')
    paths, rows = _tables(d, u, 5)
    from venus_nb.judges import aliases
    for name, load in loaders.items():
        got = load(paths[name])
        # where `u` is only white space, a row whose answer is `u` has none: refused, never scored against ''
        answerless = not aliases(_cell_text(u))   # the text the tables were built around
        assert len(got.trajectories) + len(got.errors) == rows[name], name
        assert len(got.trajectories) >= 1 or answerless, name
        if answerless and name == 'verl': assert got.trajectories == [] and 'has no answer' in got.errors[0].reason
        assert {e.index for e in got.errors} <= set(range(1, rows[name] + 1)), name
        assert_linear(load, lambda k: _tables(d, u, k)[0][name], 10)
        bad = d/f'junk{paths[name].suffix}'
        bad.write_bytes(junk)
        try: got = load(bad)
        except ValueError as e: assert str(bad) in str(e) and '\n' not in str(e), name   # one clear line
        else: assert all(e.index >= 1 for e in got.errors)

# ---------------------------------------------------------------------------------------------------------------------
# `datasets.Dataset` in: the same cleaning as a list, bad rows reported with a reason

def test_clean_dataset_equals_clean_list(noisy):
    kept, report = clean(noisy, CleanConfig(judge='em'))
    kept_ds, report_ds = clean(to_dataset(noisy), CleanConfig(judge='em'))
    assert is_dataset(kept_ds) and len(kept_ds) == len(kept) < len(noisy)
    assert as_trajectories(kept_ds) == kept
    pd.testing.assert_frame_equal(report_ds, report)
    assert list(report_ds.id[report_ds.kept]) == [t.meta['id'] for t in kept]

def test_clean_reports_bad_dataset_rows(world):
    ds = _with_bad_rows(world)
    kept, report = clean(ds)
    assert len(report) == len(ds) == len(kept) + int((~report.kept).sum())
    load = report[report.step == 'load']
    assert list(load.id) == ['Dataset:2', 'Dataset:3', 'Dataset:4', 'Dataset:5'] and load.reason.map(bool).all()
    assert report.funnel()['input'] == 7 and report.funnel()['load'] == 3

def test_qa_loaders_make_datasets_in_one_call():
    loaded = load_qa_jsonl(WORLD/'qa.jsonl')
    ds = loaded.to_dataset()
    rows = len((WORLD/'qa.jsonl').read_text().splitlines())
    assert len(ds) == rows and set(ds.column_names) == {'id', 'question', 'answer', 'source'}
    assert as_questions(ds) == loaded.trajectories == as_questions(loaded)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter('always')
        assert len(Loaded(loaded.trajectories, [LoadError('f.jsonl', 1, 'bad')]).to_dataset()) == rows
    assert 'not in the dataset' in str(w[0].message)
    with pytest.raises(ValueError, match='question 1'):
        as_questions(Dataset.from_list([{'id': 1, 'question': 'a'}, {'id': 2, 'question': None}]))

def test_dedupe_compares_whole_calls_as_the_official_cleaner():
    """A turn is a duplicate when an earlier one asked the same tool for the same set of queries or urls (stripped, any
    order): single values seen in other calls do not make one, nor does a call that asks more or less"""
    from venus_nb.data import step_dedupe, CleanConfig
    from venus_nb.trajectory import Trajectory, Turn, render_turn_text, ToolCall, observation_message
    def traj(*queries):
        turns = [Turn.parse({'role': 'assistant', 'content': render_turn_text('t', ToolCall('search', {'query': q}))},
                            [observation_message('r')], i, False) for i, q in enumerate(queries)]
        final = Turn.parse({'role': 'assistant', 'content': render_turn_text('t', answer='x')}, [], len(queries), True)
        return Trajectory('q', turns + [final])
    dropped = lambda *qs: step_dedupe(traj(*qs), CleanConfig())[1]
    assert dropped(['a'], ['b'], ['a', 'b']) == []                    # each value seen, never this set
    assert dropped(['a', 'b'], ['a']) == []                           # a call asking less is another call
    assert dropped(['a', 'b'], ['b', 'a']) == ['turn 1 dropped: duplicate search']
    assert dropped(['a'], [' a ']) == ['turn 1 dropped: duplicate search']

def test_a_call_without_thinking_goes_and_an_answer_without_a_think_block_drops_the_row():
    """As the official cleaner: a tool call whose thinking is empty is dropped with its response; a final answer
    with no <think> at all drops the trajectory, one with an empty <think> block stays"""
    from venus_nb.data import step_normalise, CleanConfig
    from venus_nb.trajectory import Trajectory
    call = '<tool_call>\n{"name": "search", "arguments": {"query": ["q"]}}\n</tool_call>'
    def traj(first, final):
        return Trajectory.from_messages([{'role': 'user', 'content': 'Q?'}, {'role': 'assistant', 'content': first},
                                         {'role': 'user', 'content': '<tool_response>\nr\n</tool_response>'},
                                         {'role': 'assistant', 'content': final}], 'Q?', 'x')
    out, edits = step_normalise(traj(f'<think>\n\n</think>\n{call}', '<think>a</think>\n<answer>x</answer>'),
                                CleanConfig())
    assert [t.kind for t in out.turns] == ['answer'] and edits == ['turn 0 dropped: no thinking']
    assert step_normalise(traj(f'<think>s</think>\n{call}', '<answer>x</answer>'), CleanConfig()) == (
        None, 'final turn has no thinking')
    kept, _ = step_normalise(traj(f'<think>s</think>\n{call}', '<think></think>\n<answer>x</answer>'), CleanConfig())
    assert [t.kind for t in kept.turns] == ['search', 'answer']

def test_a_rewritten_final_answer_keeps_the_official_layout():
    "The cleaner writes the answer on lines of its own, as the official cleaner and the DR-Venus SFT files have it"
    from venus_nb.data import step_normalise, CleanConfig
    from venus_nb.trajectory import Trajectory
    leaked = '<think>a <answer>leak</answer></think>\n<answer>x</answer>'   # tags in the thinking: rewritten
    msgs = [{'role': 'user', 'content': 'Q?'}, {'role': 'assistant', 'content': leaked}]
    t = Trajectory.from_messages(msgs, 'Q?', 'x')
    out, edits = step_normalise(t, CleanConfig())
    assert out.turns[-1].raw.endswith('</think>\n<answer>\nx\n</answer>') and out.turns[-1].answer == 'x' and edits

def test_a_final_turn_that_calls_a_tool_and_answers_keeps_its_answer():
    "As the official cleaner: the last <answer> of a final turn that also calls a tool is kept, the call dropped"
    from venus_nb.data import step_normalise, CleanConfig
    from venus_nb.trajectory import Trajectory
    both = ('<think>done</think>\n<tool_call>\n{"name": "search", "arguments": {"query": ["q"]}}\n</tool_call>\n'
            '<answer>Paris</answer>')
    t = Trajectory.from_messages([{'role': 'user', 'content': 'Q?'}, {'role': 'assistant', 'content': both}], 'Q?', 'x')
    out, edits = step_normalise(t, CleanConfig())
    assert out.turns[-1].kind == 'answer' and out.turns[-1].answer == 'Paris' and out.turns[-1].ok and edits

def test_a_question_without_an_answer_is_refused_not_scored_against_none(tmp_path):
    """A null or empty answer is a LoadError naming the record (it became the ground truth 'None'); a list answer is
    one string of aliases; verl's frame refuses the same and joins a list the same way"""
    import json
    from venus_nb.data import load_qa_jsonl
    from venus_nb.verl_export import verl_rl_frame
    f = tmp_path/'qa.jsonl'
    f.write_text('\n'.join(json.dumps(r) for r in [{'id': 'a', 'question': 'Q1?', 'answer': None},
                                                   {'id': 'b', 'question': 'Q2?', 'answer': ['Paris', 'Paris, France']},
                                                   {'id': 'c', 'question': 'Q3?', 'answer': ' '}]))
    loaded = load_qa_jsonl(f)
    assert [r['answer'] for r in loaded.trajectories] == ['Paris<|answer_split|>Paris, France']
    assert len(loaded.errors) == 2 and all('has no answer' in str(e) for e in loaded.errors)
    frame = verl_rl_frame([{'question': 'Q2?', 'answer': ['Paris', 'Paris, France']}])
    assert frame.reward_model[0]['ground_truth'] == 'Paris<|answer_split|>Paris, France'
    with pytest.raises(ValueError, match='question 1 has no answer'):
        verl_rl_frame([{'question': 'Q?', 'answer': 'x'}, {'question': 'Q1?', 'answer': None}])

def test_an_answer_that_copies_a_parenthetical_ground_truth_is_kept():
    "The EM span drops a closing parenthetical from the answer; a ground truth that holds one matches the answer whole"
    from venus_nb.trajectory import Trajectory
    from venus_nb.data import clean, CleanConfig
    ask = {'role': 'user', 'content': 'Which state?'}
    said = lambda a: Trajectory.from_messages(
        [ask, {'role': 'assistant', 'content': f'<think>\nx\n</think>\n<answer>{a}</answer>'}], gt='Washington (state)')
    kept = [len(clean([said(a)], CleanConfig(judge='em'))[0]) for a in ('Washington (state)', 'Oregon (state)')]
    assert kept == [1, 0]

def test_a_question_asked_again_is_not_read_and_says_which_line_asked_it(tmp_path):
    "Counted twice, a question would weigh double in every mean and paired test over questions"
    from venus_nb.data import load_qa_jsonl
    p = tmp_path/'qa.jsonl'
    rows = [dict(id='a', question='Who?', answer='Ann'), dict(id='b', question='When?', answer='1900'),
            dict(id='c', question='Who?', answer='Bob')]
    p.write_text(''.join(json.dumps(r) + '\n' for r in rows))
    qa = load_qa_jsonl(p)
    assert [q['id'] for q in qa.trajectories] == ['a', 'b']
    assert [(e.index, e.reason) for e in qa.errors] == [(3, 'ValueError: the question of line 1 again')]
