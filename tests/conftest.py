"Shared fixtures: where the third-party data lives, and skips with a clear message when it is absent."
import json, os
from pathlib import Path
import pytest

ROOT = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get('VENUS_NB_SHARED', ROOT.parent/'shared'/'data'))

def shared_file(rel):
    "Path of a file in ../shared/data, or skip the test saying what is missing"
    p = SHARED/rel
    if not p.exists(): pytest.skip(f'third-party data not found: {p} (tests read ../shared/data; see its SOURCES.md)')
    return p

@pytest.fixture(scope='session')
def dr_venus_records():
    d = shared_file('dr-venus/Trajectory-Example/SFT_Trajectories')
    return [json.loads(p.read_text()) for p in sorted(d.glob('*.json'))]

@pytest.fixture(scope='session')
def qwen3_tok():
    from venus_nb.models import qwen3_tokenizer
    return qwen3_tokenizer()

@pytest.fixture(scope='session')
def smol_tok():
    from venus_nb.models import embedded_tokenizer
    return embedded_tokenizer()
