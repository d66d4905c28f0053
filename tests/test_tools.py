"""The tools' pure parts and the offline backend: schemas and observations against the official data, arguments,
config, retry timing, address rules, page text, extractive summaries, corpus loaders, BM25, the toolbox on a corpus."""
import asyncio, email.utils, json, math, random, re
from collections import Counter
import httpx, numpy as np, pytest
from hypothesis import given, settings, strategies as st, HealthCheck
from conftest import shared_file
from venus_nb import web as W, corpus as C, schema as S
from venus_nb.corpus import (Doc, LocalCorpus, extractive_summary, load_corpus, passages, read_docs, snippet, url_key,
                             write_docs)
from venus_nb.web import Fetched, ToolConfig, ToolError, address_error, backoff_delay, page_of, retry_after, url_error
from venus_nb.tools import Toolbox, run_tool, search_args, visit_args
from venus_nb.schema import parse_visit_observation, search_observation, system_prompt, visit_observation
from venus_nb.trajectory import ToolCall, parse_call_body

def run(coro): return asyncio.run(coro)

WORLD = [Doc('oskelby', 'Oskelby',
             'Oskelby is a town on the northern shore of Lake Varnholm.\n\nIt was founded in 1612 by Henrik Dalgaard.',
             'https://wiki.example/Oskelby'),
         Doc('dalgaard', 'Henrik Dalgaard', 'Henrik Dalgaard (1581–1650) was a merchant born in Tarsvik.'),
         Doc('tarsvik', 'Tarsvik', 'Tarsvik is the capital of Estmark, a port on the Gray Sea.', 'https://wiki.example/Tarsvik'),
         Doc('brennstad', 'Brennstad', 'Brennstad is a village on the southern shore of Lake Varnholm.')]

@pytest.fixture(scope='module')
def world(): return LocalCorpus(WORLD, 'world')

# --- schemas and observations, against the official trajectories ---

def test_system_prompt_is_the_official_one(dr_venus_records):
    assert {r['messages'][0]['content'] for r in dr_venus_records} == {system_prompt()}

def test_observations_round_trip_the_official_tool_responses(dr_venus_records):
    kinds = Counter()
    for rec in dr_venus_records:
        for m in rec['messages']:
            if m['role'] != 'user' or not m['content'].startswith('<tool_response>\n'): continue
            body = m['content'][len('<tool_response>\n'):-len('\n</tool_response>')]
            if body.startswith('['):
                res = json.loads(body)
                kinds['search'] += 1
                assert search_observation([(r['query'], r['web_page_info_list']) for r in res]) == body
            else:
                v = parse_visit_observation(body)
                kinds['visit'] += 1
                assert v and v['evidence'] is None and visit_observation(**v).strip() == body
    assert kinds == {'search': 234, 'visit': 76}

def test_visit_observation_with_evidence_parses_back():
    obs = visit_observation('https://a.org/x', 'the year', 'It opened in 1889.', 'line one\n\nline two')
    assert obs.endswith('Summary: \nIt opened in 1889.\n\n')
    assert parse_visit_observation(obs) == dict(url='https://a.org/x', goal='the year', evidence='line one\n\nline two',
                                                summary='It opened in 1889.')
    assert parse_visit_observation('[visit error] nope') is None

def test_schemas_are_what_the_model_reads():
    assert [s['function']['name'] for s in S.TOOL_SCHEMAS] == ['search', 'visit']
    assert (S.VISIT_SCHEMA['parameters']['required'] == ['url', 'goal']
            and S.SEARCH_SCHEMA['parameters']['properties']['query']['type'] == 'array')

# --- arguments ---

@pytest.mark.parametrize('args,out', [({'query': 'a'}, (['a'], None)), ({'query': ['a', 'b']}, (['a', 'b'], None)),
    ({}, (None, 'search needs "query": a list of strings')),
    ({'query': []}, (None, '"query" must be a string or a non-empty list of strings')),
    ({'query': ['a', '']}, (None, 'every "query" must be a non-empty string')),
    ({'query': [1]}, (None, 'every "query" must be a non-empty string')),
    ({'query': ['q'] * 21}, (None, 'too many queries (21; at most 20)')),
    ('query', (None, 'search needs "query": a list of strings'))])
def test_search_args(args, out): assert search_args(args) == out

@pytest.mark.parametrize('args,err', [({'url': 'u', 'goal': 'g'}, None), ({'url': ['u', 'v'], 'goal': 'g'}, None),
    ({'goal': 'g'}, 'visit needs "url"'), ({'url': 'u'}, 'visit needs "goal"'),
    ({'url': 'u', 'goal': 3}, 'visit needs "goal"'), ({'url': None, 'goal': 'g'}, '"url" must be'),
    ({'url': ['u'] * 21, 'goal': 'g'}, 'too many URLs')])
def test_visit_args(args, err):
    got, why = visit_args(args)
    assert (why is None) if err is None else why.startswith(err)

# --- config ---

def test_config_defaults_and_validation(tmp_path):
    c = ToolConfig()
    assert (c.top_k, c.timeout, c.allow_hosts) == (10, 150.0, ())
    assert (ToolConfig.load(ToolConfig(allow_hosts=['[::1]', 'Example.ORG']).save(tmp_path/'c.json')).allow_hosts
            == ('::1', 'example.org'))
    (tmp_path/'x.json').write_text('{"top_k": 3, "colour": "red"}')
    with pytest.raises(ValueError, match='unknown setting colour; valid: top_k'): ToolConfig.load(tmp_path/'x.json')
    for bad in [dict(top_k=0), dict(retries=-1), dict(search_api='bing'), dict(request_timeout=0)]:
        with pytest.raises(ValueError): ToolConfig(**bad)

# --- retry timing ---

def test_retry_after_forms():
    now = email.utils.parsedate_to_datetime('Wed, 21 Oct 2015 07:28:00 GMT').timestamp()
    assert retry_after('120') == 120.0 and retry_after('Wed, 21 Oct 2015 07:28:30 GMT', now) == 30.0
    assert retry_after('Wed, 21 Oct 2015 07:27:00 GMT', now) == 0.0
    assert [retry_after(v) for v in (None, '', 'later', '1.5', '-1')] == [None] * 5

@settings(max_examples=200, deadline=None)
@given(st.text(max_size=40))
def test_retry_after_never_raises(v):
    r = retry_after(v)
    assert r is None or r >= 0

def test_backoff_grows_with_jitter_and_is_capped():
    c, rng = ToolConfig(backoff=1, backoff_max=10), random.Random(1)
    for a in range(8):
        d = min(10, 2 ** a)
        assert all(d / 2 <= backoff_delay(a, c, rng=rng) <= d for _ in range(50))
    assert backoff_delay(0, c, 3.0) == 3.0 and backoff_delay(0, c, 99.0) == 10

# --- addresses ---

@settings(max_examples=300, deadline=None)
@given(st.one_of(st.ip_addresses(v=4), st.ip_addresses(v=6)))
def test_address_error_refuses_exactly_the_non_global(ip):
    "Non-global addresses are refused, as are IPv6 addresses carrying a non-global IPv4 one (6to4, Teredo, NAT64, ...)"
    a = ip.ipv4_mapped if getattr(ip, 'ipv4_mapped', None) else ip
    special = any(getattr(a, f'is_{k}')
                  for k in ('loopback', 'link_local', 'unspecified', 'multicast', 'private', 'reserved'))
    carried = W.embedded_ipv4(a)
    assert (address_error(str(ip)) is None) == (a.is_global and not special
                                                and all(address_error(str(v4)) is None for v4 in carried))
    if carried and address_error(str(ip)) and a.is_global and not special:
        assert 'embeds' in address_error(str(ip))

@pytest.mark.parametrize('url,err', [('https://example.org/a', None), ('http://example.org', None),
    ('HTTP://Example.org/', None), ('ftp://example.org', "scheme 'ftp' is not allowed"),
    ('example.org/a', "scheme '(none)' is not allowed"), ('', 'the URL is empty'), (None, 'the URL is empty'),
    ('http://[bad', 'invalid host'), ('http://exa mple.org', 'invalid host'), ('http://[::1', 'malformed URL'),
    ('https://' + 'a' * 5000, 'the URL is too long')])
def test_url_error(url, err):
    got = url_error(url)
    assert got is None if err is None else got.startswith(err)

# --- page text ---

def fetched(body, ctype=None, status=200):
    return Fetched('https://x.org/p', status, httpx.Headers({'content-type': ctype} if ctype else {}), body)

def test_page_of_html_keeps_the_article():
    html = ('<html><head><title>T &amp; co</title></head><body><nav>Home About Contact</nav>'
            '<article><h1>Main heading</h1>'
            + ''.join(f'<p>Paragraph {i} says the tower opened in 1889 and is in Paris, France.</p>' for i in range(6))
            + '</article><footer>Copyright 2024</footer></body></html>').encode()
    p = page_of(fetched(html, 'text/html'), ToolConfig())
    assert p.title == 'T & co' and '# Main heading' in p.text and 'Paragraph 5' in p.text and 'Copyright' not in p.text

def test_page_of_rejects_and_caps():
    with pytest.raises(ToolError, match='HTTP 500'): page_of(fetched(b'x', 'text/plain', 500), ToolConfig())
    with pytest.raises(ToolError, match='no readable text'): page_of(fetched(b'   ', 'text/plain'), ToolConfig())
    with pytest.raises(ToolError, match='video/mp4 is not text'): page_of(fetched(b'x', 'video/mp4'), ToolConfig())
    p = page_of(fetched(b'abcdefghij' * 10, 'text/plain'), ToolConfig(max_chars=25))
    assert p.text == ('abcdefghij' * 3)[:25] and p.truncated
    assert page_of(fetched('é'.encode('utf-8'), 'text/plain; charset=bogus-charset'), ToolConfig()).text == 'é'

# --- extractive summary ---

def test_extractive_summary_picks_the_matching_passages_in_order():
    text = '\n\n'.join(['Intro about the town.', 'The harbour burned in 1744.',
                        'The observatory opened in 1894 under Mira Solheim.', 'Unrelated trivia.'])
    ev, summ = extractive_summary(text, 'When did the observatory open?', max_chars=80)
    assert ev == 'The observatory opened in 1894 under Mira Solheim.' and summ == ev
    ev, _ = extractive_summary(text, 'harbour observatory', max_chars=500)
    assert ev.index('harbour') < ev.index('observatory')
    assert (extractive_summary('', 'g') == ('', '')
            and extractive_summary('one line', 'nothing matches')[0] == 'one line')
    assert extractive_summary(text, 'zebra', max_chars=50) == ('Intro about the town.\n\nThe harbour burned in 1744.',
                                                               'Intro about the town.')

@settings(max_examples=150, deadline=None)
@given(st.lists(st.one_of(st.text(alphabet='abc .!?\n', max_size=60), st.just('x' * 1000), st.just('\n\n')),
                max_size=12).map(''.join))
def test_passages_keep_all_text_and_respect_the_size(text):
    ps = passages(text, size=200)
    assert re.sub(r'\s+', '', ''.join(ps)) == re.sub(r'\s+', '', text)
    assert all(0 < len(p) <= 200 for p in ps)

# --- snippets and URLs ---

def test_snippet_and_url_key():
    text = 'First sentence about nothing. Tarsvik is the capital of Estmark. Another one.'
    assert snippet(text, 'capital of Estmark') == 'Tarsvik is the capital of Estmark.'
    assert snippet('word ' * 100, 'word', n=20) == 'word word word word ...'
    assert len({url_key(u) for u in ['https://en.wikipedia.org/wiki/Ada_Lovelace',
                                     'http://en.wikipedia.org/wiki/Ada Lovelace/',
                                     'https://en.wikipedia.org/wiki/Ada_Lovelace#Life',
                                     'https://en.wikipedia.org/wiki/Ada%20Lovelace']}) == 1

# --- corpus loaders on the shared data ---

def test_hipporag_corpus():
    c = load_corpus(shared_file('hipporag/2wikimultihopqa_corpus.json'))
    assert len(c) == 6119 and c.errors == [] and c.docs[0].link == 'https://en.wikipedia.org/wiki/Teutberga'
    (hit,) = c.hits('Teutberga queen of Lotharingia', 1)
    assert hit['title'] == 'Teutberga' and 'Lotharingia' in hit['snippet']
    assert c.page('corpus://0').text == c.page('http://en.wikipedia.org/wiki/Teutberga').text

def test_kilt_pages():
    c = load_corpus(shared_file('r1-searcher/kilt_samples/filtered_kilt_sample_100.jsonl'))
    assert len(c) == 99 and c.errors == []
    page = c.page('https://en.wikipedia.org/wiki/Achilles#Death')
    assert page.title == 'Achilles' and '\n## ' in page.text and '::::' not in page.text
    assert not any('::::' in d.text for d in c.docs)
    ev, summ = extractive_summary(page.text, 'How did Achilles die? arrow heel Paris', 1500)
    assert 'Paris' in ev and 'arrow' in ev

def test_search_r1_passages():
    c = load_corpus(shared_file('search-r1/corpus.jsonl'))
    assert len(c) == 10 and c.docs[0].title == 'Evan Morris' and c.docs[0].link == 'corpus://0'
    assert not c.docs[0].text.startswith('"')

def test_generic_jsonl_records_bad_lines(tmp_path):
    p = tmp_path/'c.jsonl'
    lines = [{'id': 'a', 'title': 'A', 'text': 'alpha text', 'url': 'https://x.org/a'}, 'not json',
             {'id': 'b', 'text': 3.5}, {'title': 'no id', 'text': 't'}, {'id': 'a', 'title': 'again', 'text': 'dup'},
             {'id': 7, 'title': 'B', 'text': 'beta'}, {'id': 'c', 'text': None}]
    p.write_text('\n'.join(l if isinstance(l, str) else json.dumps(l) for l in lines) + '\n\n')
    c = load_corpus(p)
    assert [d.id for d in c.docs] == ['a', 'b', '7']
    assert [(e.index, e.reason) for e in c.errors] == [(2, "not JSON: Expecting value at column 1: 'not json\\n'"),
                                                       (4, '"id" is missing or not a string'),
                                                       (5, "duplicate id 'a' (the first one is kept)"),
                                                       (7, '"text" is missing or not a string')]
    assert [d.id for d in read_docs(write_docs(c.docs, tmp_path/'again.jsonl'))[0]] == ['a', 'b', '7']

def test_corpus_errors_are_clear(tmp_path):
    (e := tmp_path/'empty.jsonl').write_text('')
    with pytest.raises(ValueError, match='no documents'): load_corpus(e)
    (b := tmp_path/'bad.json').write_text('[{"title": "x", ')
    with pytest.raises(ValueError, match='not a valid JSON array'): load_corpus(b)
    (ok := tmp_path/'ok.jsonl').write_text('{"id": 1, "text": "t"}')
    with pytest.raises(ValueError, match='unknown corpus format'): load_corpus(ok, fmt='csv')
    with pytest.raises(ValueError, match="duplicate document id 'x'"):
        LocalCorpus([Doc('x', 'a', 'b'), Doc('x', 'c', 'd')])

def test_clashing_urls_fall_back_to_corpus_ids():
    c = LocalCorpus([Doc('1', 'P', 'first paragraph', 'https://w.org/P'),
                     Doc('2', 'P', 'second paragraph', 'https://w.org/P')])
    assert ([d.link for d in c.docs] == ['https://w.org/P', 'corpus://2']
            and c.page('corpus://2').text == 'second paragraph')

# --- BM25 is what it says ---

def lucene_bm25(docs_ids, query_ids, k1=1.5, b=0.75):
    "Brute-force BM25 (bm25s's default 'lucene' variant) over token-id lists"
    n, avg = len(docs_ids), sum(map(len, docs_ids)) / len(docs_ids)
    df = Counter(t for d in docs_ids for t in set(d))
    idf = {t: math.log(1 + (n - df[t] + 0.5) / (df[t] + 0.5)) for t in df}
    def score(d):
        tf = Counter(d)
        return sum(idf[t] * tf[t] / (tf[t] + k1 * (1 - b + b * len(d) / avg)) for t in query_ids if t in tf)
    return np.array([score(d) for d in docs_ids])

def test_bm25_scores_match_brute_force():
    docs = json.loads(shared_file('hipporag/2wikimultihopqa_corpus.json').read_text())[:400]
    texts = [f"{d['title']}\n{d['text']}" for d in docs]
    idx = C.BM25(texts)
    ids = idx.tok.tokenize(texts, update_vocab=False, show_progress=False, return_as='ids')
    for q in ['Who directed the film?', 'queen of Lotharingia', 'born in Kiev', 'bishop of Elmham died',
              'film director of the film of films']:
        qids = [t for t in idx._ids(q)[0] if t != idx.tok.get_vocab_dict().get('', -1)]
        want = lucene_bm25(ids, qids)
        assert np.allclose(idx.scores(q), want, atol=1e-4)
        top = idx.top(q, 5)
        assert (len(top) == min(5, int((want > 0).sum()))
                and np.allclose([s for _, s in top], np.sort(want)[::-1][:len(top)], atol=1e-4))
        assert all(abs(want[i] - s) < 1e-4 for i, s in top)

def test_bm25_edge_queries(world):
    assert world.hits('') == [] and world.hits('the of and') == [] and world.hits('zzzz qqqq') == []
    assert len(world.hits('Lake Varnholm shore', k=100)) == 2

# --- the toolbox on a corpus ---

def test_toolbox_on_a_corpus(world):
    tb = Toolbox(world)
    res = json.loads(run(tb.run(ToolCall('search', {'query': ['founder of Oskelby', 'capital of Estmark']}))))
    assert [r['web_page_info_list'][0]['url'] for r in res] == ['https://wiki.example/Oskelby', 'https://wiki.example/Tarsvik']
    obs = run(tb.run({'name': 'visit', 'arguments': {'url': ['corpus://dalgaard', 'https://nowhere.org'],
                                                     'goal': 'Where was he born?'}}))
    first, second = obs.split(S.PAGE_SEPARATOR)
    assert parse_visit_observation(first)['summary'] == 'Henrik Dalgaard (1581–1650) was a merchant born in Tarsvik.'
    assert second == ("[visit error] https://nowhere.org: not in the corpus 'world' "
                      "(visit a URL from the search results)")

@pytest.mark.parametrize('call,obs', [(None, "[tool error] unknown tool None; the tools are search and visit"),
    (ToolCall('python', {}), "[tool error] unknown tool 'python'; the tools are search and visit"),
    (ToolCall('search', ['a']), '[search error] search needs "query": a list of strings'),
    (ToolCall('visit', {'url': 'corpus://tarsvik'}), '[visit error] visit needs "goal": a non-empty string'),
    ({'name': 'search'}, '[search error] search needs "query": a list of strings')])
def test_bad_calls_are_observations(world, call, obs):
    assert run(run_tool(call, world)) == obs

def test_parsed_model_output_runs(world):
    call, err = parse_call_body("{'name': 'search', 'arguments': {'query': 'Brennstad village',},}")
    assert err is None and json.loads(run(run_tool(call, world)))[0]['web_page_info_list'][0]['title'] == 'Brennstad'

def test_failing_backend_gives_partial_results():
    class Flaky:
        async def search(self, q, k):
            if 'bad' in q: raise RuntimeError('backend exploded')
            return [{'title': q, 'url': 'u', 'snippet': 's'}]
    obs = run(run_tool(ToolCall('search', {'query': ['good', 'bad one']}), Toolbox(Flaky())))
    head, err = obs.split('\n')
    assert json.loads(head)[0]['query'] == 'good' and err == "[search error] 'bad one': RuntimeError: backend exploded"
    assert (run(run_tool(ToolCall('search', {'query': 'bad'}), Toolbox(Flaky())))
            == "[search error] 'bad': RuntimeError: backend exploded")

json_values = st.recursive(st.one_of(st.none(), st.booleans(), st.integers(), st.text(max_size=12)),
                           lambda c: st.one_of(st.lists(c, max_size=3),
                                               st.dictionaries(st.sampled_from(['query', 'url', 'goal', 'x']), c,
                                                               max_size=3)),
                           max_leaves=8)

@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.sampled_from(['search', 'visit', 'other', '']), json_values)
def test_any_call_gives_an_observation(world, name, args):
    obs = run(run_tool(ToolCall(name, args), world))
    assert isinstance(obs, str) and obs
    if obs.startswith('['): assert obs.startswith(('[{', '[search error]', '[visit error]', '[tool error]'))

def test_generated_world_calls_all_run(tmp_path):
    "Every search and visit of 10_synth's expert trajectories works against its own corpus, as written to disk"
    from venus_nb.synth import SAMPLE, generate, write_world
    data = generate(SAMPLE)
    corpus = load_corpus(write_world(data, tmp_path)['corpus'])
    assert len(corpus) == len(data.corpus) and corpus.errors == []
    async def outcomes():
        out = Counter()
        for traj in data.trajectories():
            for turn in (t for t in traj.turns if t.call):
                obs = await run_tool(turn.call, corpus)
                out[turn.call.name, obs.startswith(('[search error]', '[visit error]', '[tool error]'))] += 1
        return out
    got = run(outcomes())
    assert (got[('search', True)] == got[('visit', True)] == 0 and got[('search', False)] > 100
            and got[('visit', False)] > 100)
