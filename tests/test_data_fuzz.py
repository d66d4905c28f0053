"Truncations, byte garbage, missing keys and wrong types never crash the loaders or the cleaner."
import json
from hypothesis import given, settings, strategies as st, HealthCheck
from venus_nb.data import clean, load_dr_venus, load_webdancer, load_react, load_qa_jsonl
from venus_nb.synth import generate, SynthConfig
from venus_nb.trajectory import Trajectory

RECORDS = generate(SynthConfig(n=6, seed=3, lengths=((2, 8, 1.0),))).records
LINES = [json.dumps(r) for r in RECORDS]

mutated = st.one_of(
    st.tuples(st.sampled_from(LINES), st.integers(0, 3000)).map(lambda p: p[0][:p[1]]),               # truncation
    st.binary(max_size=80).map(lambda b: b.decode('latin-1').replace('\n', ' ').replace('\r', ' ')),  # byte garbage
    st.tuples(st.sampled_from(RECORDS), st.sampled_from(['messages', 'question', 'gt']))
        .map(lambda p: json.dumps({k: v for k, v in p[0].items() if k != p[1]})),
    st.tuples(st.sampled_from(RECORDS), st.sampled_from([None, 3, 'x', [], {}, [None], [{'role': 1}]]))
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
                                                           st.sampled_from([m['content'] for r in RECORDS
                                                                            for m in r['messages']][:40]))})

@settings(max_examples=150, deadline=None)
@given(st.lists(st.lists(msg, max_size=8), min_size=1, max_size=5), st.sampled_from([None, 'em', 'f1']))
def test_cleaner_never_crashes_and_accounts(convs, judge):
    from venus_nb.data import CleanConfig
    trajs = [Trajectory.from_messages(m, gt='x') for m in convs]
    kept, report = clean(trajs, CleanConfig(judge=judge))
    assert len(kept) + int((~report.kept).sum()) == len(trajs) == len(report)
    assert report[~report.kept].reason.map(bool).all()
