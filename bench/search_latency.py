"""Offline search latency: `LocalCorpus` (bm25s) over the 6,119-paragraph HippoRAG 2WikiMultihopQA corpus vs a
brute-force BM25 that scores every paragraph in Python for each query, on the same tokens.

Queries: the 2Wiki questions of R1-Searcher's eval set (../shared/data), 200 of them. Target (issue 4): median query
latency under 50 ms after indexing. Both rankings are compared to show they are the same BM25.
Run: .venv/bin/python bench/search_latency.py
"""
import json, math, statistics, sys, time
from collections import Counter
from pathlib import Path
from venus_nb.corpus import load_corpus

DATA = Path(__file__).resolve().parents[1].parent/'shared/data'
CORPUS, QUESTIONS = DATA/'hipporag/2wikimultihopqa_corpus.json', DATA/'r1-searcher/eval_set/2wiki_500.jsonl'

def timed(f, *a):
    t = time.perf_counter()
    out = f(*a)
    return out, time.perf_counter() - t

def pct(xs, p): return sorted(xs)[min(len(xs) - 1, int(p / 100 * len(xs)))] * 1000

class BruteBM25:
    "BM25 (the Lucene variant bm25s uses by default) scoring every document per query, in plain Python"
    def __init__(self, docs_ids, k1=1.5, b=0.75):
        self.tf, self.len = [Counter(d) for d in docs_ids], [len(d) for d in docs_ids]
        n, self.avg, self.k1, self.b = len(docs_ids), sum(self.len) / len(docs_ids), k1, b
        df = Counter(t for d in self.tf for t in d)
        self.idf = {t: math.log(1 + (n - c + 0.5) / (c + 0.5)) for t, c in df.items()}

    def top(self, q_ids, k=10):
        q = [t for t in q_ids if t in self.idf]   # a repeated query word counts each time, as in bm25s
        s = [sum(self.idf[t] * tf[t] / (tf[t] + self.k1 * (1 - self.b + self.b * n / self.avg)) for t in q if t in tf)
             for tf, n in zip(self.tf, self.len)]
        return sorted((i for i in range(len(s)) if s[i] > 0), key=lambda i: -s[i])[:k]

def main(n_queries=200, n_brute=60):
    if not CORPUS.exists(): sys.exit(f'skip: {CORPUS} not found (third-party data lives in ../shared/data)')
    qs = ([json.loads(l)['question'] for l in QUESTIONS.read_text().splitlines()][:n_queries] if QUESTIONS.exists()
          else [])
    corpus, t_index = timed(load_corpus, CORPUS)
    qs = qs or [d.title for d in corpus.docs[:n_queries]]
    corpus.hits(qs[0])   # warm-up
    lat_top = [timed(corpus.index.top, q, 10)[1] for q in qs]
    lat_hits = [timed(corpus.hits, q, 10)[1] for q in qs]
    ids = corpus.index.tok.tokenize([f'{d.title}\n{d.text}' for d in corpus.docs], update_vocab=False,
                                    show_progress=False, return_as='ids')
    brute, t_brute_index = timed(BruteBM25, ids)
    q_ids = [corpus.index._ids(q)[0] for q in qs[:n_brute]]
    lat_brute = [timed(brute.top, q, 10)[1] for q in q_ids]
    same = sum([i for i, _ in corpus.index.top(q, 1)] == brute.top(qi, 1) for q, qi in zip(qs, q_ids))
    print(f'{len(corpus):,} paragraphs, {len(qs)} queries (2Wiki questions); '
          f'index built in {t_index:.2f} s (load + bm25s), brute-force tables in {t_brute_index:.2f} s')
    for name, lat in [('bm25s top-10', lat_top), ('LocalCorpus.hits (top-10 + snippets)', lat_hits),
                      (f'brute force ({n_brute} queries)', lat_brute)]:
        print(f'{name:38} p50 {pct(lat, 50):7.2f} ms | p90 {pct(lat, 90):7.2f} ms | p99 {pct(lat, 99):7.2f} ms | '
              f'max {max(lat) * 1000:7.2f} ms')
    med = statistics.median(lat_hits) * 1000
    print(f'brute/bm25s median = {statistics.median(lat_brute) / statistics.median(lat_top):.0f}x | '
          f'same top-1 on {same}/{len(q_ids)} queries')
    print(f'median LocalCorpus.hits latency {med:.2f} ms: {"PASS" if med < 50 else "FAIL"} (target < 50 ms)')

if __name__ == '__main__': main()
