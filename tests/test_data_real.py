"Loaders and cleaning on real data in ../shared/data: nothing crashes, every drop and edit has a reason, counts add up."
import pytest
from conftest import shared_file
from venus_nb.data import (clean, CleanConfig, load_dr_venus, load_webdancer, load_react, load_verl_parquet,
                           load_xbench, load_browsecomp_zh, load_qa_jsonl)

LOADERS = {'dr-venus/Trajectory-Example/SFT_Trajectories': load_dr_venus, 'webdancer/sample_traj.jsonl': load_webdancer,
           'fireact/hotpotqa.jsonl': load_react}

def _accounted(trajs, kept, report):
    assert len(report) == len(trajs) == len(kept) + int((~report.kept).sum())
    assert report[~report.kept].reason.map(bool).all() and report[~report.kept].step.notna().all()
    assert all(':' in e for es in report.edits for e in es)  # every edit names its turn and what changed
    f = report.funnel()
    assert list(f.values) == sorted(f.values, reverse=True) and f.iloc[-1] == len(kept)

@pytest.mark.parametrize('rel', LOADERS)
def test_real_trajectories_clean_with_reasons(rel):
    loaded = LOADERS[rel](shared_file(rel))
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
