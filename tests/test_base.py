"""The one record reader and the one settings file: every bad record a LoadError with its line, JSON arrays read a
record at a time within the cap, every config saved alike, files written whole (fsynced, renamed, never torn by two
writers), any settings file or bytes loaded well typed or refused naming the file, absurd settings refused."""
import json, math, multiprocessing as mp, os, tracemalloc
from dataclasses import asdict, dataclass, fields
from pathlib import Path
import pytest, yaml
from hypothesis import given, settings, HealthCheck, strategies as st
from venus_nb.base import (read_records, load_records, load_config, save_config, LoadError, BadRecord,
                           MAX_RECORD_BYTES, atomic_open, write_atomic)
from venus_nb.corpus import load_corpus
from venus_nb.igpo import IGPOConfig
from venus_nb.rollout import RolloutConfig
from venus_nb.rewards import RewardConfig
from venus_nb.judges import LLMJudge
from venus_nb.experiment import ExperimentConfig
from venus_nb.sft import SFTConfig

def test_every_non_blank_line_is_kept_or_a_load_error(tmp_path):
    p = tmp_path/'r.jsonl'
    p.write_bytes(b'\xef\xbb\xbf{"n": 1}\n\n \nnot json\n{"n": "caf\xe9"}\n' + b'[' * 500 + b']' * 500
                  + b'\n{"n": 2}\r\n{"n": 3')
    got, errors = read_records(p, lambda r, f, n: (f, n, r['n']))
    assert got == [(str(p), 1, 1), (str(p), 7, 2)]   # a UTF-8 BOM and a CRLF ending are fine
    assert [(e.index, e.reason.split(':')[0]) for e in errors] == [
        (4, 'not JSON'), (5, 'not UTF-8'), (6, 'JSON nested deeper than 100 levels'),
        (8, 'cut short (no newline at the end of the file)')]

def test_a_reason_is_a_bad_records_message_or_names_the_exception(tmp_path):
    def parse(r, *_):
        if r == 1: raise BadRecord('one is not allowed')
        return 10 // r
    got, errors = load_records([('a', 1, 1), ('a', 2, 0), ('b', 7, ValueError('broken')), ('b', 8, 5)], parse)
    assert got == [2] and errors == [LoadError('a', 1, 'one is not allowed'),
                                     LoadError('a', 2, 'ZeroDivisionError: integer division or modulo by zero'),
                                     LoadError('b', 7, 'ValueError: broken')]

def test_json_array_files(tmp_path):
    (p := tmp_path/'a.json').write_text('\n  [{"n": 1}, null, {"n": 2}]')
    assert read_records(p, array=True) == ([{'n': 1}, None, {'n': 2}], [])
    # without `array` it is JSONL: that line is one record
    assert read_records(p) == ([[{'n': 1}, None, {'n': 2}]], [])
    (q := tmp_path/'b.json').write_text('[{"n": 1},')
    with pytest.raises(ValueError, match='b.json: not a valid JSON array'): read_records(q, array=True)
    with pytest.raises(FileNotFoundError, match='nothing.jsonl: no such file'): read_records(tmp_path/'nothing.jsonl')

@dataclass
class Small:
    lr: float = 0.1
    names: tuple = ('a',)
    def __post_init__(self): self.names = tuple(self.names)

def test_load_config_reads_json_and_yaml_and_refuses_unknown_keys(tmp_path):
    assert load_config(Small, save_config(Small(0.5, ('x', 'y')), tmp_path/'s.json')) == Small(0.5, ('x', 'y'))
    (tmp_path/'s.yml').write_text('names: [b, c]\n')
    (tmp_path/'empty.yaml').write_text('')
    assert (load_config(Small, tmp_path/'s.yml') == Small(names=('b', 'c'))
            and load_config(Small, tmp_path/'empty.yaml') == Small())
    (tmp_path/'typo.json').write_text('{"lr": 1, "nmes": []}')
    (tmp_path/'list.json').write_text('[1]')
    with pytest.raises(ValueError, match='unknown setting nmes; valid: lr, names'):
        load_config(Small, tmp_path/'typo.json')
    with pytest.raises(ValueError, match='not a mapping of Small settings'): load_config(Small, tmp_path/'list.json')

def test_every_config_file_is_indented_json_of_its_fields(tmp_path):
    "The configs' own save/load go through base: the same files as before (indented JSON of `asdict`), read back equal"
    from venus_nb.web import ToolConfig
    from venus_nb.rollout import RolloutConfig
    from venus_nb.sft import SFTConfig
    from venus_nb.igpo import IGPOConfig, config_json
    from venus_nb.experiment import ExperimentConfig
    for cfg in (ToolConfig(top_k=3), RolloutConfig(G=2), SFTConfig(lora_r=8, betas=[0.8, 0.9]), IGPOConfig(steps=3),
                ExperimentConfig(seeds=[4])):
        p = cfg.save(tmp_path/f'{type(cfg).__name__}.json')
        want = config_json(cfg) if isinstance(cfg, IGPOConfig) else asdict(cfg)
        assert p.read_text() == json.dumps(want, indent=1) and type(cfg).load(p) == cfg, type(cfg).__name__

# ---------------------------------------------------------------------------------------------------------------------
# Hostile sizes and races: JSON arrays read within the record cap, writes two processes can race on

MB = 1 << 20

def sparse(path:Path, head:bytes, size:int)->Path:
    "`path` holding `head`, then NUL bytes up to `size` that take no disk space"
    with open(path, 'wb') as f:
        f.write(head)
        f.truncate(size)
    return path

def peak_mb(f)->tuple:
    "What `f()` returns (or raises), and the most memory Python held while it ran, in MiB"
    tracemalloc.start()
    try:
        try: out = f()
        except Exception as e: out = e
        return out, tracemalloc.get_traced_memory()[1] / MB
    finally: tracemalloc.stop()

# ---- JSON arrays are read a record at a time, each record within the cap

def test_json_array_over_the_cap_is_never_read_whole(tmp_path):
    big = sparse(tmp_path/'big.json', b'[{"id": "a", "title": "A", "text": "first"}, {"id": "b", "text": "',
                 4 * MAX_RECORD_BYTES)
    out, peak = peak_mb(lambda: read_records(big, array=True))
    assert isinstance(out, ValueError) and 'big.json: not a valid JSON array' in str(out), out
    assert peak < 16, f'{peak:.0f} MiB held to read a {big.stat().st_size / MB:.0f} MiB array'
    out, peak = peak_mb(lambda: load_corpus(big))
    assert isinstance(out, ValueError) and 'big.json' in str(out) and peak < 16, (out, peak)

def test_json_array_record_over_the_cap_is_a_load_error_naming_the_file_and_the_cap(tmp_path):
    p = tmp_path/'long.json'
    p.write_text(json.dumps([{'id': 'a', 'text': 'short'}, {'id': 'b', 'text': 'x' * 5000},
                             {'id': 'c', 'text': 'never read'}]))
    kept, errors = read_records(p, array=True, max_line_bytes=1000)
    assert kept == [{'id': 'a', 'text': 'short'}]
    assert (len(errors) == 1 and errors[0].source == str(p) and errors[0].index == 1
            and '1,000 bytes' in errors[0].reason), errors

def test_json_array_streamed_reads_like_json_loads(tmp_path):
    recs = [{'n': i, 'text': 'café ☃ 😀 ' * (i % 7), 'f': [1.5e3, -2, None, True, False, {'x': 'a\\"b\\u00e9'}]}
            for i in range(3000)]
    for i, text in enumerate([json.dumps(recs), json.dumps(recs, indent=3, ensure_ascii=False),
                              '\n  ' + json.dumps(recs, separators=(',', ':'))]):
        p = tmp_path/f'{i}.json'
        p.write_bytes(text.encode())   # across many 64 KiB chunks, cut anywhere
        assert read_records(p, array=True) == (recs, [])
    for text in ['[]', ' [ ] \n', '[1, 2.5, "x", null, -0, 1e400]']:
        (p := tmp_path/'s.json').write_text(text)
        assert read_records(p, array=True) == (json.loads(text), [])
    (p := tmp_path/'bom.json').write_bytes(b'\xef\xbb\xbf[{"n": 1}]')
    assert read_records(p, array=True) == ([{'n': 1}], [])
    (p := tmp_path/'deep.json').write_text('[{"n": 1}, ' + '[' * 150 + ']' * 150 + ', {"n": 2}]')
    kept, errors = read_records(p, array=True)
    assert kept == [{'n': 1}, {'n': 2}] and [e.index for e in errors] == [1] and 'deeper than 100' in errors[0].reason
    for bad in ['[1, 2,]', '[1 2]', '[1, 2] 3', '[1, 2', '[{"n": 1}, tru', '["a\x00"]', '[1, 2]]']:
        (p := tmp_path/'bad.json').write_text(bad)
        with pytest.raises(ValueError, match='bad.json: not a valid JSON array'): read_records(p, array=True)

# ---- writes: unique temporary files, fsynced, renamed; two writers never tear a file

SIZE = 256 * 1024

def _writer(path, k, n, errors):
    "Write `path` `n` times, each time whole with one byte repeated (the byte says which writer); errors go to `errors`"
    for i in range(n):
        try: write_atomic(path, bytes([65 + k]) * (SIZE + 4096 * (i % 7)))
        except Exception as e:
            errors.put(f'{type(e).__name__}: {e}')
            return

@pytest.mark.skipif('fork' not in mp.get_all_start_methods(), reason='the writers are forked')
def test_two_processes_writing_one_file_leave_one_whole_version(tmp_path):
    path, ctx = tmp_path/'shared.bin', mp.get_context('fork')
    errors = ctx.Queue()
    procs = [ctx.Process(target=_writer, args=(path, k, 150, errors)) for k in range(2)]
    for p in procs: p.start()
    seen = set()
    while any(p.is_alive() for p in procs):
        try: data = path.read_bytes()
        except FileNotFoundError: continue
        if data: seen.add((len(set(data)), (len(data) - SIZE) % 4096))
    for p in procs: p.join()
    errs = [errors.get(timeout=1) for _ in range(errors.qsize())]
    data = path.read_bytes()
    assert errs == [] and [p.exitcode for p in procs] == [0, 0], errs
    assert len(set(data)) == 1 and (len(data) - SIZE) % 4096 == 0 and seen <= {(1, 0)}, seen
    assert [f.name for f in tmp_path.iterdir()] == ['shared.bin']   # no temporary file left behind

def test_atomic_open_fsyncs_before_the_rename_and_cleans_up(tmp_path, monkeypatch):
    calls, real_replace, real_fsync = [], os.replace, os.fsync
    monkeypatch.setattr(os, 'fsync', lambda fd: calls.append('fsync') or real_fsync(fd))
    monkeypatch.setattr(os, 'replace', lambda a, b: calls.append('replace') or real_replace(a, b))
    write_atomic(tmp_path/'a.txt', 'text')
    assert calls[:2] == ['fsync', 'replace'] and (tmp_path/'a.txt').read_text() == 'text'
    with pytest.raises(KeyError):
        with atomic_open(tmp_path/'a.txt') as f:
            f.write('half')
            raise KeyError('boom')
    assert [f.name for f in tmp_path.iterdir()] == ['a.txt'] and (tmp_path/'a.txt').read_text() == 'text'

def test_write_verl_sft_keeps_the_old_files_when_a_write_fails(tmp_path, monkeypatch):
    import pandas as pd
    from venus_nb import verl_export as vx
    monkeypatch.setattr(vx, 'verl_sft_frame',
                        lambda *a, **k: pd.DataFrame({'messages': [[{'role': 'user', 'content': 'q'}]]}))
    monkeypatch.setattr(vx, 'sft_chat_template', lambda tok: '{{ messages }}')
    out = vx.write_verl_sft([], tmp_path, None)
    old = {n: (out/n).read_bytes() for n in ('train.parquet', 'sft.yaml')}
    def half_then_fail(self, f, *a, **k):
        (open(f, 'wb') if isinstance(f, (str, Path)) else f).write(b'PAR1 half')
        raise OSError('disk full')
    monkeypatch.setattr(pd.DataFrame, 'to_parquet', half_then_fail)
    with pytest.raises(OSError): vx.write_verl_sft([], tmp_path, None)
    assert {n: (out/n).read_bytes() for n in old} == old

# ---------------------------------------------------------------------------------------------------------------------
# Fuzzing the config loaders: any file is loaded with its values of the right types or refused with one clear error
# naming it

CLASSES = [IGPOConfig, RolloutConfig, ExperimentConfig, RewardConfig]
NAMES = sorted({f.name for c in CLASSES + [LLMJudge] for f in fields(c)} | {'llm_judge', 'callable'})
FUZZ = settings(max_examples=200, deadline=None, suppress_health_check=list(HealthCheck))

scalars = st.one_of(st.none(), st.booleans(), st.integers(-3, 12), st.integers(), st.integers(-10**40, 10**40),
                    st.floats(allow_nan=True, allow_infinity=True),
                    st.sampled_from(['em', 'f1', '1e-5', 'nan', 'x', '', 'float32', 'copy']), st.text(max_size=8))
keys = st.one_of(st.sampled_from(NAMES), st.text(max_size=6))
values = st.recursive(scalars, lambda inner: st.one_of(st.lists(inner, max_size=4),
                                                       st.dictionaries(keys, inner, max_size=5)), max_leaves=20)
settings_maps = st.dictionaries(keys, values, max_size=6)

SIMPLE = {'int': (int,), 'float': (int, float), 'str': (str,), 'bool': (bool,), 'tuple': (tuple,), 'dict': (dict,),
          'None': (type(None),)}

def well_typed(cfg, where=''):
    "Every field of a loaded config holds a value of its annotated type (nested configs checked too)"
    for f in fields(cfg):
        v, kinds = getattr(cfg, f.name), [k.strip() for k in str(f.type).split('|')]
        if any(k not in SIMPLE for k in kinds):
            if hasattr(v, '__dataclass_fields__'): well_typed(v, f'{where}{f.name}.')
            continue
        assert (isinstance(v, tuple(t for k in kinds for t in SIMPLE[k]))
                and not (isinstance(v, bool) and 'bool' not in kinds)), (where + f.name, v)
        if isinstance(v, float): assert math.isfinite(v), (where + f.name, v)

def clean_refusal(e:Exception, path):
    "One clear error naming the file, not a traceback from deep inside"
    assert isinstance(e, ValueError) and str(path) in str(e), f'{type(e).__name__}: {e}'

def _dump(d, suffix):
    return yaml.safe_dump(d, allow_unicode=True) if suffix == '.yaml' else json.dumps(d)

@FUZZ
@given(cls=st.sampled_from([IGPOConfig, RolloutConfig, ExperimentConfig]), d=settings_maps,
       suffix=st.sampled_from(['.json', '.yaml']))
def test_any_settings_file_loads_well_typed_or_is_refused_naming_it(tmp_path_factory, cls, d, suffix):
    path = tmp_path_factory.mktemp('fuzz')/f'c{suffix}'
    path.write_text(_dump(d, suffix))
    try: cfg = cls.load(path)
    except Exception as e: return clean_refusal(e, path)
    well_typed(cfg)
    if cls is ExperimentConfig: well_typed(IGPOConfig(**cfg.igpo))

SPECIAL = [b'\xef\xbb\xbf{}', b'\xef\xbb\xbf', b'\x80', b'\x00', b'', b'[' * 100_000, b'{"a": ' * 50_000,
           b'a: ' * 30_000, b'steps: ' + b'9' * 5000, b'{"steps": ' + b'9' * 5000 + b'}', b'\xff\xfe{}',
           b'{"steps": 1e400}', b'{"lr": NaN}', b'&a [*a]', b'x: &a [1, 2]\ny: &b [*a, *a]\nz: [*b, *b]',
           b'!!python/object/apply:os.system ["true"]', b'{1: 2, a: 3}', b'- 1\n- 2']

@FUZZ
@given(cls=st.sampled_from([IGPOConfig, RolloutConfig, ExperimentConfig]),
       raw=st.one_of(st.binary(max_size=64), st.text(max_size=64).map(str.encode)),
       suffix=st.sampled_from(['.json', '.yaml']))
def test_any_bytes_load_or_are_refused_naming_the_file(tmp_path_factory, cls, raw, suffix):
    path = tmp_path_factory.mktemp('raw')/f'c{suffix}'
    path.write_bytes(raw)
    try: cfg = cls.load(path)
    except Exception as e: return clean_refusal(e, path)
    well_typed(cfg)

@pytest.mark.parametrize('suffix', ['.json', '.yaml'])
def test_hostile_bytes_are_refused_naming_the_file(tmp_path, suffix):
    "A BOM, broken UTF-8, nesting deeper than Python parses, ints too long to read, NaN and inf, YAML tags and aliases"
    for raw in SPECIAL:
        path = tmp_path/f'c{suffix}'
        path.write_bytes(raw)
        for cls in (IGPOConfig, ExperimentConfig):
            try: well_typed(cls.load(path))
            except Exception as e: clean_refusal(e, path)

def test_known_bad_files_are_refused_with_the_key(tmp_path):
    "The failures the fuzzing found, each refused with the key it is about"
    cases = {'{"steps": "x"}': 'steps', '{"steps": 1e400}': 'steps', '{"lr": NaN}': 'lr', '{"rollout": 3}': 'rollout',
             '{"rollout": {"G": "four"}}': 'rollout.G', '{"rollout": {"bogus": 1}}': 'rollout.bogus',
             '{"betas": 3}': 'betas', '{"betas": [0.9, "x"]}': 'betas[1]',
             '{"rewards": {"gamma": "a"}}': 'rewards.gamma', '{"report_to": 3}': 'report_to',
             '{"judge": {"llm_judge": 3}}': 'judge.llm_judge',
             '{"judge": {"llm_judge": {"zzz": 1}}}': 'judge.llm_judge.zzz',
             '{"judge": {"callable": 3}}': 'judge.callable', '{"steps": true}': 'steps', '\ufeff{"steps": 2}': None}
    for text, key in cases.items():
        (tmp_path/'c.json').write_text(text)
        if key is None:
            assert IGPOConfig.load(tmp_path/'c.json').steps == 2
            continue
        with pytest.raises(ValueError, match=str(tmp_path/'c.json')) as e: IGPOConfig.load(tmp_path/'c.json')
        assert key in str(e.value), (text, str(e.value))
    (tmp_path/'c.yaml').write_text('lr: 1e-5\nbetas: [0.8, 0.9]\n')   # YAML reads 1e-5 as a text: it is the number
    assert (IGPOConfig.load(tmp_path/'c.yaml').lr, IGPOConfig.load(tmp_path/'c.yaml').betas) == (1e-5, (0.8, 0.9))
    for text, key in {'{"igpo": {"steps": "x"}}': 'igpo.steps', '{"igpo": 3}': 'igpo', '{"seeds": [0.5]}': 'seeds[0]',
                      '{"igpo": {"bogus": 1}}': 'igpo.bogus', '{"7": 1, "x": 2}': "'7'"}.items():
        (tmp_path/'e.json').write_text(text)
        with pytest.raises(ValueError) as e: ExperimentConfig.load(tmp_path/'e.json')
        assert key in str(e.value), (text, str(e.value))
    (tmp_path/'k.yaml').write_text('1: 2\nx: 3\n')   # keys that are not all texts
    with pytest.raises(ValueError, match='unknown settings 1, x; valid: G, max_turns'):
        RolloutConfig.load(tmp_path/'k.yaml')

# ---------------------------------------------------------------------------------------------------------------------
# Absurd settings are refused when their config is built (a ValueError naming the field); `refused` is every config's
# test of that (each config class's ranges are tested in its module's file)

def refused(cls, field, value, **kw):
    "Building `cls` with `field=value` raises a ValueError that names `cls.field`"
    with pytest.raises(ValueError, match=rf'^{cls.__name__}\.{field} must be'): cls(**{field: value}, **kw)

def test_sensible_edges_still_build():
    "Greedy sampling, no KL, no clip options, discount 0 and 1, full fine-tuning, k = G: all accepted"
    IGPOConfig(kl_coef=0.0, tis_cap=None, dual_clip=None, lora_r=None, max_len=None, seed=2**32 - 1, steps=1,
               rollout=dict(temperature=0.0, top_p=1.0, seed=2**32 - 1), rewards=dict(gamma=0.0))
    RewardConfig(gamma=1.0)
    ExperimentConfig(G=2, ks=(1, 2), igpo={})
    SFTConfig(lora_r=None, epochs=0.5, warmup=0.0)

def test_absurd_settings_in_a_file_are_refused_naming_the_file(tmp_path):
    (p := tmp_path/'igpo.yaml').write_text('grad_clip: -1\n')
    with pytest.raises(ValueError, match=r'igpo\.yaml: IGPOConfig\.grad_clip must be in \(0, inf\), got -1'):
        IGPOConfig.load(p)

def test_a_figure_and_a_long_multibyte_name_are_written_whole(tmp_path, monkeypatch):
    "static_svg goes through atomic_open (a full disk kept half a figure); a temp name is cut by bytes, not characters"
    import plotly.graph_objects as go
    from matplotlib.figure import Figure
    from venus_nb.base import static_svg, write_atomic
    fig = go.Figure([go.Scatter(x=[1, 2, 4], y=[0.1, 0.3, 0.2], name='a')])
    whole = static_svg(fig, tmp_path/'f.svg').read_bytes()
    def full_disk(self, f, **kw):
        f.write(b'<svg')
        raise OSError(28, 'No space left on device')
    monkeypatch.setattr(Figure, 'savefig', full_disk)
    with pytest.raises(OSError): static_svg(fig, tmp_path/'f.svg')
    assert (tmp_path/'f.svg').read_bytes() == whole and [p.name for p in tmp_path.iterdir()] == ['f.svg']
    name = '字' * 80 + '.json'   # 245 bytes: a legal name whose first 200 characters are 600 bytes
    assert write_atomic(tmp_path/name, '{}').read_text() == '{}'

def test_plain_text_of_a_table_of_rules_alone():
    from venus_nb.terminal import plain
    assert plain('text\n|---|\nmore') == 'text\nmore'

def test_an_array_record_under_the_limit_that_ends_a_read_is_kept(tmp_path):
    "A record parsed whole near the end of a 64 KiB read was measured with the text after it, and the rest was lost"
    from venus_nb.base import read_records
    big = [{'t': 'x' * 65500}, {'t': 'y'}]
    (f := tmp_path/'big.json').write_text(json.dumps(big))
    got, errs = read_records(f, array=True, max_line_bytes=len(json.dumps(big[0])) + 5)
    assert got == big and errs == []
    got, errs = read_records(f, array=True, max_line_bytes=len(json.dumps(big[0])) - 1)   # one byte over: refused
    assert not got and 'longer than' in str(errs[0])
