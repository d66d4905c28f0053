"""The offline side of `search` and `visit`: extractive summaries, passages, snippets and URL keys, the corpus loaders
on the shared data and on hostile files (bad lines, unicode line breaks, deep nesting, nothing readable, fuzzed
lines in linear time), whole-or-nothing writes, R1-Searcher passages, and BM25 against a brute-force reference."""
import json, math, random, re
from collections import Counter
import numpy as np, pytest
from hypothesis import given, settings, strategies as st
from conftest import shared_file
from test_web import fuzz_lines, best_time
import test_tools
from venus_nb import corpus as C
from venus_nb.corpus import (Doc, LocalCorpus, extractive_summary, load_corpus, passages, read_docs, snippet, url_key,
                             write_docs)

world = test_tools.world   # a fixture of test_tools.py

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

def test_search_finds_chinese_and_accented_text():
    "Chinese text has no spaces between words and is matched by character pairs; accents and full-width forms fold"
    docs = [Doc('a', '埃菲尔铁塔', '埃菲尔铁塔建于1889年，位于巴黎。它高三百米。'),
            Doc('b', '东京塔', '东京塔建于1958年。'),
            Doc('c', 'São Paulo', 'São Paulo is the largest city of Brazil.'), Doc('d', 'Oslo', 'Oslo is a city.')]
    corpus = LocalCorpus(docs)
    assert [h['url'] for h in corpus.hits('埃菲尔铁塔是哪一年建成的？')][:1] == ['corpus://a']
    assert corpus.hits('东京塔')[0]['url'] == 'corpus://b' and corpus.hits('巴黎')[0]['url'] == 'corpus://a'
    assert [h['url'] for h in corpus.hits('Sao Paulo')] == [h['url'] for h in corpus.hits('SÃO PAULO')] == ['corpus://c']
    assert corpus.hits('ＳＡＯ ＰＡＵＬＯ')[0]['url'] == 'corpus://c'   # full-width letters
    assert corpus.hits('巴黎')[0]['snippet'] == '埃菲尔铁塔建于1889年，位于巴黎。'   # a Chinese sentence ends at 。
    assert C.terms('서울특별시 Seoul') == ['서울특별시', 'Seoul']   # Hangul is spaced into words: kept whole

def test_equal_scores_rank_in_the_corpus_order():
    "Ties go by position, so a search answers the same whatever sort kernels numpy picks on this CPU"
    assert C.best_of(np.array([1., 2, 2, 0, 2, 3]), 3) == [(5, 3.0), (1, 2.0), (2, 2.0)]
    assert C.best_of(np.array([0., 0]), 2) == [] and C.best_of(np.array([]), 3) == []
    assert C.best_of(np.array([1., 1, 1]), 5) == [(0, 1.0), (1, 1.0), (2, 1.0)]
    rng = np.random.default_rng(0)
    for _ in range(200):
        s = rng.integers(0, 4, rng.integers(1, 40)).astype(float)
        k = int(rng.integers(1, 12))
        want = sorted((i for i in range(len(s)) if s[i] > 0), key=lambda i: (-s[i], i))[:k]
        assert [i for i, _ in C.best_of(s, k)] == want
    same = LocalCorpus([Doc(str(i), '', 'Lake Varnholm shore') for i in range(30)])
    assert [h['url'] for h in same.hits('Lake Varnholm', k=10)] == [f'corpus://{i}' for i in range(10)]

# ---------------------------------------------------------------------------------------------------------------------
# R1-Searcher passages parse as the old patterns did

def _old_passage(p):
    import re
    p = p.strip()
    if len(p) > 1 and p[0] == p[-1] == '"': p = p[1:-1].replace('""', '"')
    if m := re.match(r'Title:\s*(.*?)\s+Text:\s*(.*)', p, re.S): return m[1].strip(), m[2].strip()
    title, sep, text = p.partition('   ')
    return (title.strip(), text.strip()) if sep and title.strip() else None

def _old_react(text):
    import re
    m = re.search(r'Action:\s*(\w+)\[(.*)\]\s*$', text, re.S)
    return (m.group(1), m.group(2).strip()) if m else None

@settings(max_examples=2000, deadline=None)
@given(st.lists(st.sampled_from(['Title:', ' ', 'Text:', '\n', '"', 'x', '   ', '""', '\t']), max_size=14).map(''.join),
       st.lists(st.sampled_from(['Action:', ' ', '\n', 'a', '[', ']', 'Action: search[', '\t', '\u3000']),
                max_size=14).map(''.join))
def test_passages_and_react_parse_as_the_old_patterns(passage, react):
    from venus_nb.corpus import parse_r1_passage
    from venus_nb.trajectory import _react_parts
    assert parse_r1_passage(passage) == _old_passage(passage)
    call, answer = _react_parts(react)
    new = (None if call is None and answer is None else ('finish', answer) if call is None
           else (call.name, call.arguments.get('query', [call.arguments.get('input')])[0]))
    assert new == _old_react(react)

# ---------------------------------------------------------------------------------------------------------------------
# Hostile corpus files: whole-or-nothing writes, line breaks, bad lines, fuzzed lines

def test_write_docs_is_whole_or_nothing(tmp_path):
    p = write_docs([Doc('a', 'A', 'old text')], tmp_path/'c.jsonl')
    before = p.read_bytes()
    with pytest.raises(TypeError): write_docs([Doc('b', 'B', 'new'), Doc('c', 'C', object())], p)
    assert p.read_bytes() == before and [f.name for f in tmp_path.iterdir()] == ['c.jsonl']

BREAKS = '\u2028\u2029\x85\x0b\x0c\x1c\x1d\x1e\r'

def test_corpus_with_unicode_line_breaks_round_trips(tmp_path):
    docs = [Doc(f'd{i}', f'title{c}x', f'line one{c}line two {c}', f'https://x.org/{i}') for i, c in enumerate(BREAKS)]
    back, errors = read_docs(write_docs(docs, tmp_path/'c.jsonl'))
    assert errors == [] and back == docs

def test_corpus_line_that_is_not_utf8_is_reported(tmp_path):
    (p := tmp_path/'c.jsonl').write_bytes(b'{"id": "a", "text": "ok"}\n{"id": "b", "text": "caf\xe9"}\n'
                                          b'{"id": "c", "text": "fine"}\n')
    docs, errors = read_docs(p)
    assert ([d.id for d in docs] == ['a', 'c']
            and [(e.source, e.index, e.reason.split(':')[0]) for e in errors] == [(str(p), 2, 'not UTF-8')])

def test_corpus_deeply_nested_line_is_a_bad_record(tmp_path):
    (p := tmp_path/'c.jsonl').write_text('{"id": "a", "text": "ok"}\n' + '[' * 100_000 + '\n')
    docs, errors = read_docs(p)
    assert [d.id for d in docs] == ['a'] and [e.index for e in errors] == [2]
    # a file that starts with '[' is one JSON array
    for bad in [b'[' * 100_000, b'[{"id": "a", "text": "caf\xe9"}]', b'[[[ \x00\xff']:
        (q := tmp_path/'c.json').write_bytes(bad)
        with pytest.raises(ValueError, match='c.json: not a valid JSON array'): read_docs(q)

def test_fuzz_read_docs_counts_and_stays_linear(tmp_path):
    good = lambda rng: json.dumps({'id': str(rng.random()), 'title': 't',
                                   'text': 'words ' * rng.randrange(1, 50)}).encode()
    def check(n, seed):
        # a JSONL file (a first '[' means a JSON array)
        lines = [good(random.Random(seed))] + fuzz_lines(n, random.Random(seed), good)
        (p := tmp_path/f'f{n}-{seed}.jsonl').write_bytes(b'\n'.join(lines))
        docs, errors = read_docs(p, 'jsonl')
        assert len(docs) + len(errors) == sum(1 for l in lines if l.strip()), (n, seed)
        assert all(e.source == str(p) and 1 <= e.index <= n + 1 for e in errors)
        return p
    for seed in range(20): check(50, seed)
    small, big = check(500, 1), check(2000, 2)
    t1, t4 = best_time(lambda: read_docs(small, 'jsonl')), best_time(lambda: read_docs(big, 'jsonl'))
    assert t4 < 8 * t1 + 0.05, (t1, t4)

def test_corpus_with_no_readable_record_says_why(tmp_path):
    (p := tmp_path/'c.jsonl').write_bytes(b'not json\n\xff\xfe\n')
    with pytest.raises(ValueError,
                       match=r'c.jsonl: no documents to index; 2 unreadable lines skipped \(line 1: not JSON'):
        C.load_corpus(p)
    (e := tmp_path/'e.jsonl').write_text('\n\n')
    with pytest.raises(ValueError, match=r'e.jsonl: no documents to index \(the file is empty\)'): C.load_corpus(e)

def test_a_url_with_an_upper_case_host_finds_its_page():
    "A host has no case and http is https; the path and a corpus id keep theirs"
    assert url_key('HTTP://EN.Wikipedia.org/wiki/Kestra_River/') == 'https://en.wikipedia.org/wiki/Kestra_River'
    assert url_key('corpus://AbC') == 'corpus://AbC'
    c = LocalCorpus([Doc('d1', 'Kestra', 'The Sael flows through Kestra.', 'https://en.wikipedia.org/wiki/Kestra')])
    assert c.page('https://EN.WIKIPEDIA.org/wiki/Kestra').title == 'Kestra'
