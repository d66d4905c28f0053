"""The warm start: its world, its cache (keyed by the config, reused, rebuilt on demand) on a tiny model, and, slow,
the real one on the embedded model: well-formed turns and a Pass@1 that leaves room to learn."""
import json, os
from pathlib import Path
import pytest
from venus_nb.models import tiny_model
from venus_nb.warm_start import WarmConfig, warm_start, warm_world, warm_dir, well_formed

TINY = dict(train=3, held_out=2, rl=1, steps=2, G=2, max_turns=2, max_new_tokens=16, engine='transformers', entities=20)

@pytest.fixture
def tiny_dir(tmp_path, monkeypatch):
    monkeypatch.setenv('VENUS_NB_CACHE', str(tmp_path/'cache'))
    pol = tiny_model()
    pol.model.save_pretrained(tmp_path/'tiny')
    pol.tokenizer.save_pretrained(tmp_path/'tiny')
    return str(tmp_path/'tiny')

def test_the_world_splits_are_disjoint_and_noiseless():
    w = warm_world(WarmConfig(train=10, held_out=5, rl=5))
    assert (len(w.train), len(w.validation), len(w.rl)) == (10, 5, 5)
    assert all(t.format_errors() == [] and t.turns[-1].answer == t.gt for t in w.train)
    assert len({q['question'] for q in w.validation + w.rl} | {t.question for t in w.train}) == 20
    with pytest.raises(ValueError, match='distinct questions'): warm_world(WarmConfig(entities=2, train=200))

def test_bf16_autocast_only_where_the_hardware_is_fast():
    """bf16=None resolves to what `fast_bf16` finds (a CPU without bf16 kernels runs bf16 matmuls in a slow loop);
    the key follows it"""
    import torch
    from venus_nb.models import fast_bf16
    assert WarmConfig().bf16 is fast_bf16() and isinstance(fast_bf16(), bool)
    if not torch.cuda.is_available(): assert fast_bf16() == torch.ops.mkldnn._is_mkldnn_bf16_supported()
    assert WarmConfig(bf16=True).key() != WarmConfig(bf16=False).key()
    assert WarmConfig().key() == WarmConfig(bf16=fast_bf16()).key()

def test_cached_by_config(tiny_dir):
    cfg = WarmConfig(model=tiny_dir, **TINY)
    first = warm_start(cfg, verbose=False)
    assert not first.cached and first.path == warm_dir(cfg)/'model' and (first.path/'config.json').exists()
    rep = json.loads((warm_dir(cfg)/'report.json').read_text())
    assert {'well_formed', 'pass_at_1', 'rollouts', 'engine', 'sft_seconds', 'check_seconds', 'seconds',
            'config'} <= set(rep)
    assert rep['rollouts'] == 4 and rep['engine'] == 'transformers' and WarmConfig(**rep['config']) == cfg
    again = warm_start(cfg, verbose=False)
    assert again.cached and again.report == first.report and again.config == cfg
    other = WarmConfig(model=tiny_dir, **(TINY | {'steps': TINY['steps'] + 1}))   # one step would be all warmup
    assert warm_dir(other) != warm_dir(cfg) and not warm_start(other, verbose=False).cached
    assert not warm_start(cfg, force=True, verbose=False).cached
    assert not first.passed and 'Warm start' in first._repr_markdown_()    # a random tiny model writes no DR-Venus turn

def test_well_formed_share(tiny_dir):
    w = warm_world(WarmConfig(train=4, held_out=1, rl=1))
    assert well_formed(w.train) == 1.0 and well_formed([]) == 0.0

@pytest.mark.slow
def test_the_embedded_warm_start_is_ready_for_rl():
    w = warm_start(verbose=False)
    r = w.report
    assert r['well_formed'] >= 0.9, r
    assert 0.1 < r['pass_at_1'] < 0.9, r
    assert w.passed

def test_the_engine_computes_as_the_warm_start_was_trained(monkeypatch):
    "A pinned `bf16` reaches vLLM: a float32 warm start is checked and trained from by a float32 engine on any machine"
    import venus_nb.rollout as rollout, venus_nb.warm_start as ws
    made = []
    monkeypatch.setattr(ws, 'has_module', lambda name: True)
    monkeypatch.setattr(rollout, 'vllm_engine', lambda folder, **kw: made.append(kw) or kw)
    assert (WarmConfig(bf16=False).dtype, WarmConfig(bf16=True).dtype) == ('float32', 'bfloat16')
    ws.engine_for_folder('m', 'vllm', dtype=WarmConfig(bf16=False).dtype)
    ws.engine_for_folder('m', 'auto')
    assert made == [dict(max_model_len=4096, dtype='float32'), dict(max_model_len=4096)]   # None: fast_dtype() decides

def test_an_engine_for_training_is_exact_and_the_faster_way_on_its_device(monkeypatch):
    "On CPU a float32 engine that reloads merged weights, whatever the warm start's dtype; on a GPU bf16 serving LoRA"
    import torch, venus_nb.rollout as rollout, venus_nb.warm_start as ws
    made = []
    monkeypatch.setattr(ws, 'has_module', lambda name: True)
    monkeypatch.setattr(rollout, 'vllm_engine', lambda folder, **kw: made.append(kw) or kw)
    monkeypatch.setattr(torch.cuda, 'is_available', lambda: False)
    ws.engine_for_folder('m', 'vllm', dtype='bfloat16', trains=True)
    monkeypatch.setattr(torch.cuda, 'is_available', lambda: True)
    ws.engine_for_folder('m', 'vllm', dtype='bfloat16', trains=True)
    assert made == [dict(max_model_len=4096, dtype='float32'),
                    dict(max_model_len=4096, dtype='bfloat16', enable_lora=True)]


def test_the_test_split_leaves_the_warm_world_and_its_cache_key_as_they_were():
    "Keys and question digests from before the test split existed: the warm start and every earlier run stay theirs"
    import hashlib, json
    from collections import Counter
    from venus_nb.experiment import ExperimentConfig
    digest = lambda w: hashlib.sha256(json.dumps([[t.question for t in w.train], w.validation, w.rl], sort_keys=True,
                                                 default=str).encode()).hexdigest()[:16]
    learn = WarmConfig(**ExperimentConfig.cpu_learn().warm)
    for cfg, key, questions in [(WarmConfig(bf16=False), 'd044c77cf30e', '9835f8fb8a9df5e1'),
                                (WarmConfig(bf16=True), 'e8ac76ed440a', '9835f8fb8a9df5e1'),
                                (learn, '41f7f607cd5a', '93abd14320a7dc2a')]:
        assert cfg.key() == key
        assert digest(warm_world(cfg)) == digest(warm_world(cfg, test=16)) == questions
    w = warm_world(learn, test=ExperimentConfig.confirm().test_questions)
    asked = [{t.question for t in w.train}, {q['question'] for q in w.validation}, {q['question'] for q in w.rl},
             {q['question'] for q in w.test}]
    assert sum(map(len, asked)) == len(set.union(*asked))          # the four splits are disjoint
    kinds = Counter(q['kind'] for q in w.test)
    assert len(w.test) >= 128 and kinds['1-hop'] >= 48 and w.test_corpus is not w.corpus
    with pytest.raises(ValueError, match='test world has only'): warm_world(learn, test=10_000)

def test_a_model_folder_is_keyed_by_where_it_is_and_what_it_holds(tmp_path):
    "Two folders named alike, or one folder changed, are other models: other cache folders"
    from venus_nb.warm_start import warm_dir
    for name in ('a', 'b'):
        (tmp_path/name/'model').mkdir(parents=True)
        (tmp_path/name/'model'/'config.json').write_text(json.dumps({'hidden_size': 8 if name == 'a' else 16}))
    a, b = (warm_dir(WarmConfig(model=str(tmp_path/n/'model'))) for n in 'ab')
    assert a != b and a.name.startswith('model-')
    (tmp_path/'a'/'model'/'config.json').write_text(json.dumps({'hidden_size': 32}))
    assert warm_dir(WarmConfig(model=str(tmp_path/'a'/'model'))) != a
    assert warm_dir(WarmConfig()) == warm_dir(WarmConfig())   # a name that is no folder: keyed by its text

def test_a_failed_warm_start_leaves_nothing_and_a_new_one_swaps_in_whole(tiny_dir, monkeypatch):
    import venus_nb.warm_start as W
    cfg = WarmConfig(model=tiny_dir, **TINY)
    def broken(*a): raise RuntimeError('out of memory')
    monkeypatch.setattr(W, '_train', broken)
    with pytest.raises(RuntimeError): warm_start(cfg, verbose=False)
    assert not [p for p in W.warm_dir(cfg).parent.iterdir()]   # no half-made copy of a model left
    monkeypatch.undo()
    monkeypatch.setenv('VENUS_NB_CACHE', str(Path(tiny_dir).parent/'cache'))
    first = warm_start(cfg, verbose=False)
    seen = []
    real = os.replace
    def replace_(src, dst):
        seen.append((Path(src).name, Path(dst).name))
        return real(src, dst)
    monkeypatch.setattr(W.os, 'replace', replace_)
    again = warm_start(cfg, force=True, verbose=False)
    assert not again.cached and again.path == first.path and (again.path/'config.json').exists()
    # the old folder leaves in one rename before the new one comes in: never a cache folder without its model
    assert [s[1] for s in seen][-2:] == [seen[-2][1], W.warm_dir(cfg).name] and seen[-2][1].startswith('old-')
    assert sorted(p.name for p in W.warm_dir(cfg).parent.iterdir()) == [W.warm_dir(cfg).name]

def test_a_gpu_that_only_emulates_bf16_is_not_fast(monkeypatch):
    "torch counts a V100 or T4 as bf16-capable (emulated); vLLM refuses bf16 there and training crawls"
    import torch
    from venus_nb.models import fast_bf16, fast_dtype
    monkeypatch.setattr(torch.cuda, 'is_available', lambda: True)
    monkeypatch.setattr(torch.cuda, 'is_bf16_supported', lambda including_emulation=True: including_emulation)
    assert not fast_bf16() and fast_dtype() == 'float32'
    monkeypatch.setattr(torch.cuda, 'is_bf16_supported', lambda including_emulation=True: True)   # an A100
    assert fast_bf16() and fast_dtype() == 'bfloat16'
