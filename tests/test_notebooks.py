"Every notebook runs top to bottom (as `nbdev_test` does), one pytest case each, so CI counts them with the tests."
from pathlib import Path
import pytest
from nbdev.config import get_config
from nbdev import test as nbdev_test

ROOT = Path(__file__).resolve().parents[1]/'nbs'
NBS = sorted(p for p in ROOT.rglob('*.ipynb') if '.ipynb_checkpoints' not in p.parts)

@pytest.mark.parametrize('nb', NBS, ids=[str(p.relative_to(ROOT).with_suffix('')) for p in NBS])
def test_notebook(nb, capsys):
    skip = get_config().tst_flags.split()
    ok, secs = nbdev_test.test_nb(nb, skip_flags=skip, basepath=get_config().config_path)
    assert ok, f'{nb.name} failed (traceback above); run it with: nbdev_test --path {nb}'
