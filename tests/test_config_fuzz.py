"""Fuzzing the config loaders: any file, any `--set`, is loaded with its values of the right types or refused
with one clear error naming it"""
import json, math
from dataclasses import fields
import pytest
import yaml
from hypothesis import given, settings, HealthCheck, strategies as st
from venus_nb.terminal import CLIError
from venus_nb.cli import parse_sets, stages, merged, main
from venus_nb.igpo import IGPOConfig
from venus_nb.rollout import RolloutConfig
from venus_nb.rewards import RewardConfig
from venus_nb.judges import LLMJudge
from venus_nb.experiment import ExperimentConfig

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

set_pairs = st.lists(st.one_of(st.tuples(st.lists(st.sampled_from(NAMES + ['', 'x']), min_size=1, max_size=3)
                                         .map('.'.join),
                                         st.sampled_from(['4', '1e-5', 'true', 'null', '[1, 4]', '{a: 1}', 'x', '', '[',
                                                          'nan', '9' * 400]))
                               .map('='.join), st.text(max_size=12)), max_size=5)

@FUZZ
@given(name=st.sampled_from(['igpo', 'rollout', 'eval']), pairs=set_pairs, d=settings_maps)
def test_any_set_pairs_and_settings_resolve_well_typed_or_are_one_cli_error(name, pairs, d):
    st_ = stages()[name]
    try: inputs, cfg = st_.resolve(merged(merged(st_.defaults(), {'questions': 'q.jsonl'}),
                                          merged(d, parse_sets(pairs))))
    except CLIError: return
    well_typed(cfg)

def test_known_bad_cli_settings_are_one_error_naming_the_key(tmp_path, capsys):
    """The CLI's failures the fuzzing found: a --set under a key already set to a value, a nested config given a value,
    wrong types, unreadable files"""
    with pytest.raises(CLIError, match='rollout is set to a value'): parse_sets(['rollout=3', 'rollout.G=4'])
    st_ = stages()['igpo']
    for d, key in [({'rollout': 3}, 'rollout: expected a mapping'),
                   ({'rollout': {'G': 'four'}}, 'rollout.G: expected a whole number'),
                   ({'steps': True}, 'steps: expected a whole number'), ({'betas': [0.9, 'x']}, r'betas\[1\]'),
                   ({'lr': 'nan'}, 'lr: expected a finite number')]:
        with pytest.raises(CLIError, match=key):
            st_.resolve(merged(merged(st_.defaults(), {'questions': 'q.jsonl'}), d))
    for raw in (b'\x80', b'[' * 100_000, b'steps: ' + b'9' * 5000):
        (tmp_path/'c.yaml').write_bytes(raw)
        with pytest.raises(SystemExit):
            main(['igpo', '--config', str(tmp_path/'c.yaml'), '--questions', 'q.jsonl', '--out', str(tmp_path/'o')])
        err = capsys.readouterr().err
        assert err.startswith('venus-nb: error:') and 'c.yaml' in err and '--traceback' not in err, err
