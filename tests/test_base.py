"The one record reader and the one settings file: every bad record a LoadError with its line, every config saved alike."
import json
from dataclasses import asdict, dataclass
import pytest
from venus_nb.base import read_records, load_records, load_config, save_config, LoadError, BadRecord

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
