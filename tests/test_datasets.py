"""`datasets.Dataset` in and out: exact round trips, the same cleaning and resampling as a list, bad rows reported
with a reason."""
import json, warnings
import pandas as pd, pytest
from datasets import Dataset, List, Value
from conftest import ROOT, shared_file
from venus_nb.base import LoadError
from venus_nb.trajectory import (Trajectory, Loaded, read_jsonl, write_jsonl, to_dataset, from_dataset, as_loaded,
                                 as_trajectories, from_row, is_dataset)
from venus_nb.data import clean, CleanConfig, load_dr_venus, load_webdancer, load_react, load_qa_jsonl, as_questions
from venus_nb.resample import resample, resample_table, ResampleConfig
from venus_nb.synth import generate, SynthConfig

WORLD = ROOT/'data/sample/world'

@pytest.fixture(scope='module')
def world(): return read_jsonl(WORLD/'trajectories.jsonl').trajectories

@pytest.fixture(scope='module')
def noisy():
    "Generated trajectories with every kind of noise: bad JSON calls, other tools, string arguments, no answer"
    return generate(SynthConfig(n=60, seed=5)).trajectories()

OPENAI = [{'role': 'system', 'content': 'You research.'},
          {'role': 'user', 'content': [{'type': 'text', 'text': 'Who wrote Faust?'}]},
          {'role': 'assistant', 'content': None,
           'tool_calls': [{'id': 'c1', 'type': 'function',
                           'function': {'name': 'search', 'arguments': '{"query": ["Faust"]}'}}]},
          {'role': 'tool', 'tool_call_id': 'c1', 'content': 'Goethe wrote Faust.'},
          {'role': 'assistant', 'content': '<think>\nfound\n</think>\n<answer>Goethe</answer>'}]

def _mixed(world):
    "Varied message keys, gt as text, as a list and as text that reads as JSON, nested meta of different shapes"
    return [Trajectory.from_messages(OPENAI, gt=['Goethe', 'J. W. von Goethe'],
                                     meta={'run': {'seed': 3, 'tags': ['a', 'ü']}, 'score': 0.1}),
            Trajectory.from_messages(world[0].to_messages(), gt='42',
                                     meta={'id': 'w0', 'nested': [{'x': None}, 1.5e-7]}),
            Trajectory.from_messages(world[1].to_messages(), gt=None, meta={}),
            Trajectory.from_messages(world[2].to_messages(), gt='null', meta={'judge': True})]

def test_round_trip_sample_world_is_native_chat(world):
    ds = to_dataset(world)
    # the chat format TRL reads
    assert ds.features['messages'] == List({'content': Value('string'), 'role': Value('string')})
    assert ds.features['gt'] == Value('string') and ds.features['meta'] == Value('string')
    back = from_dataset(ds)
    assert back.errors == [] and back.trajectories == world and len(world) == 24

def test_round_trip_noisy_generated(noisy):
    assert any(t.format_errors() for t in noisy)   # the noise is there to survive
    assert as_trajectories(to_dataset(noisy)) == noisy

def test_round_trip_varied_keys_gt_lists_nested_meta(world):
    mixed = _mixed(world)
    ds = to_dataset(mixed)
    # text and lists of gt: stored as JSON text
    assert set(ds.column_names) == {'question', 'messages', 'gt_json', 'meta'}
    back = as_trajectories(ds)
    assert back == mixed
    # text that reads as JSON stays text
    assert [t.gt for t in back] == [['Goethe', 'J. W. von Goethe'], '42', None, 'null']
    assert (back[0].turns[0].source[0]['tool_calls'][0]['id'] == 'c1'
            and back[0].prompt[1]['content'][0]['type'] == 'text')

def test_gt_lists_alone_stay_native(world):
    trajs = [Trajectory.from_messages(t.to_messages(), gt=[t.gt, t.gt.upper()], meta=t.meta) for t in world[:3]]
    ds = to_dataset(trajs)
    assert ds.features['gt'] == List(Value('string')) and as_trajectories(ds) == trajs

def test_round_trip_survives_parquet_and_disk(world, tmp_path):
    mixed = _mixed(world) + world[3:6]
    ds = to_dataset(mixed)
    ds.to_parquet(str(tmp_path/'t.parquet'))
    ds.save_to_disk(str(tmp_path/'d'))
    from datasets import load_from_disk
    assert as_trajectories(Dataset.from_parquet(str(tmp_path/'t.parquet'))) == mixed
    assert as_trajectories(load_from_disk(str(tmp_path/'d'))) == mixed

def test_opening_round_trips_through_dataset_and_jsonl(world, tmp_path):
    msgs = [m if m['role'] != 'assistant' else {**m, 'content': m['content'].removeprefix('<think>')}
            for m in world[0].to_messages()]
    t = Trajectory.from_messages(msgs, world[0].question, world[0].gt, world[0].meta, opening='<think>')
    # read after the opening
    assert [u.raw for u in t.turns] == [u.raw for u in world[0].turns] and t.turns[0].opening == '<think>'
    ds = to_dataset([t, world[1]])
    assert ds['opening'] == ['<think>', ''] and as_trajectories(ds) == [t, world[1]]
    assert read_jsonl(write_jsonl([t], tmp_path/'o.jsonl')).trajectories == [t]
    assert 'opening' not in to_dataset(world).column_names

def test_meta_that_json_would_change_is_refused(world):
    bad = Trajectory.from_messages(world[0].to_messages(), meta={'span': (1, 2)})
    with pytest.raises(ValueError, match='meta of trajectory 1 changes through JSON'): to_dataset([world[1], bad])
    with pytest.raises(ValueError, match='meta of trajectory 0 is not JSON'):
        to_dataset([Trajectory.from_messages(world[0].to_messages(), meta={'s': {1}})])

@pytest.mark.parametrize('rel,loader', [('dr-venus/Trajectory-Example/SFT_Trajectories', load_dr_venus),
                                        ('webdancer/sample_traj.jsonl', load_webdancer),
                                        ('fireact/hotpotqa.jsonl', load_react)])
def test_round_trip_real_trajectories(rel, loader):
    trajs = loader(shared_file(rel)).trajectories
    back = from_dataset(to_dataset(trajs))
    assert back.errors == [] and back.trajectories == trajs and len(trajs) >= 10

def test_clean_dataset_equals_clean_list(noisy):
    kept, report = clean(noisy, CleanConfig(judge='em'))
    kept_ds, report_ds = clean(to_dataset(noisy), CleanConfig(judge='em'))
    assert is_dataset(kept_ds) and len(kept_ds) == len(kept) < len(noisy)
    assert as_trajectories(kept_ds) == kept
    pd.testing.assert_frame_equal(report_ds, report)
    assert list(report_ds.id[report_ds.kept]) == [t.meta['id'] for t in kept]

def _with_bad_rows(world):
    "Three good rows, then rows that cannot be read, each for its own reason"
    good = [{**r, 'messages': json.dumps(r['messages'])} for r in to_dataset(world[:3]).to_list()]
    bad = [{'question': 'q', 'messages': None, 'gt': None, 'meta': '{}'},
           {'question': 'q', 'messages': '[{"role": "user"', 'gt': None, 'meta': '{}'},
           {'question': 'q', 'messages': '[3]', 'gt': None, 'meta': '{}'},
           {'question': 'q', 'messages': good[0]['messages'], 'gt': None, 'meta': '["not", "a dict"]'}]
    return Dataset.from_list(good[:2] + bad + good[2:])

def test_bad_rows_are_load_errors_with_reasons(world):
    ds = _with_bad_rows(world)
    got = from_dataset(ds)
    assert got.trajectories == world[:3]
    assert [e.index for e in got.errors] == [2, 3, 4, 5]   # ds[index] is the row
    reasons = [e.reason for e in got.errors]
    assert ('NoneType, not a list' in reasons[0] and 'not JSON' in reasons[1] and 'message 0 is a int' in reasons[2]
            and '"meta" is a list' in reasons[3])

def test_clean_reports_bad_dataset_rows(world):
    ds = _with_bad_rows(world)
    kept, report = clean(ds)
    assert len(report) == len(ds) == len(kept) + int((~report.kept).sum())
    load = report[report.step == 'load']
    assert list(load.id) == ['Dataset:2', 'Dataset:3', 'Dataset:4', 'Dataset:5'] and load.reason.map(bool).all()
    assert report.funnel()['input'] == 7 and report.funnel()['load'] == 3

def test_resample_dataset_matches_list(noisy):
    kept, _ = clean(noisy)
    cfg = ResampleConfig(buckets=((20, 1), (40, 2), (None, 3)), seed=7)
    expanded = resample(kept, cfg)
    expanded_ds = resample(to_dataset(kept), cfg)
    assert is_dataset(expanded_ds) and len(expanded_ds) == len(expanded) > len(kept)
    assert as_trajectories(expanded_ds) == expanded
    pd.testing.assert_frame_equal(resample_table(to_dataset(kept), expanded_ds, cfg),
                                  resample_table(kept, expanded, cfg))

def test_resample_refuses_bad_rows(world):
    with pytest.raises(ValueError, match=r'4 of 7 rows cannot be read.*Dataset:2'): resample(_with_bad_rows(world))

def test_as_loaded_inputs(world):
    assert as_loaded(world).trajectories == world and as_trajectories(tuple(world)) == world
    recs = [dict(question=t.question, messages=t.to_messages(), gt=t.gt, meta=t.meta) for t in world[:2]]
    assert as_trajectories(recs) == world[:2]   # records as JSON holds them
    loaded = Loaded(world[:1], [LoadError('f.jsonl', 3, 'not JSON')])
    assert as_loaded(loaded) == loaded
    with pytest.raises(ValueError, match='f.jsonl'): as_trajectories(loaded)
    with pytest.raises(TypeError, match='read_jsonl'): as_trajectories(str(WORLD/'trajectories.jsonl'))
    with pytest.raises(ValueError, match='not a trajectory or a record'): as_trajectories([world[0], 3])

def test_other_columns_go_to_meta():
    row = {'messages': [{'role': 'user', 'content': 'q'},
                        {'role': 'assistant', 'content': '<think>\nx\n</think>\n<answer>y</answer>'}],
           'answer': ['y', 'Y'], 'id': 'a7', 'difficulty': 3, 'meta': '{"id": "kept", "src": "s"}'}
    t = from_row(row)
    assert t.meta == {'id': 'kept', 'difficulty': 3, 'src': 's'} and t.gt == ['y', 'Y'] and t.turns[0].answer == 'y'
    _, report = clean(Dataset.from_list([{k: v for k, v in row.items() if k != 'meta'}]))
    assert list(report.id) == ['a7']

def test_qa_loaders_make_datasets_in_one_call():
    loaded = load_qa_jsonl(WORLD/'qa.jsonl')
    ds = loaded.to_dataset()
    assert len(ds) == 24 and set(ds.column_names) == {'id', 'question', 'answer', 'source'}
    assert as_questions(ds) == loaded.trajectories == as_questions(loaded)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter('always')
        assert len(Loaded(loaded.trajectories, [LoadError('f.jsonl', 1, 'bad')]).to_dataset()) == 24
    assert 'not in the dataset' in str(w[0].message)
    with pytest.raises(ValueError, match='question 1'):
        as_questions(Dataset.from_list([{'id': 1, 'question': 'a'}, {'id': 2, 'question': None}]))

def test_world_questions_as_dataset_feed_an_experiment_start():
    from venus_nb.evaluation import world_questions
    from venus_nb.experiment import Start
    qs, _ = world_questions()
    start = Start(lambda: None, Dataset.from_list(qs[:4]), Dataset.from_list(qs[4:6]), None, None)
    assert start.train == qs[:4] and start.validation == qs[4:6]

def test_sft_data_reads_a_dataset(world, smol_tok):
    from venus_nb.sft import sft_data
    kept, _ = clean(sorted(world, key=lambda t: len(t.turns))[:3])
    a, b = sft_data(to_dataset(kept), smol_tok, 1024), sft_data(kept, smol_tok, 1024)
    assert a.examples == b.examples and len(a.examples) == len(kept) > 0
    pd.testing.assert_frame_equal(a.report, b.report)

def test_sft_refuses_bad_rows_before_loading_a_model(world, tmp_path):
    from venus_nb.sft import sft, SFTConfig
    bad = to_dataset(world[:2]).add_item({'question': 'q', 'messages': None, 'gt': None, 'meta': None})
    with pytest.raises(ValueError, match='1 of 3 rows cannot be read.*Dataset:2'):
        sft(bad, SFTConfig(model=str(tmp_path/'no-such-model'), output_dir=str(tmp_path/'out')))
    assert not (tmp_path/'out').exists()
