"Every notebook runs top to bottom (as `nbdev_test` does), one pytest case each, so CI counts them with the tests."
import json, os, re, subprocess, sys
from pathlib import Path
import pytest
from venus_nb.models import has_module
from nbdev.config import get_config
from nbdev import test as nbdev_test

ROOT = Path(__file__).resolve().parents[1]/'nbs'
NBS = sorted(p for p in ROOT.rglob('*.ipynb') if '.ipynb_checkpoints' not in p.parts)

@pytest.mark.parametrize('nb', NBS, ids=[str(p.relative_to(ROOT).with_suffix('')) for p in NBS])
def test_notebook(nb, capsys):
    skip = get_config().tst_flags.split()
    ok, secs = nbdev_test.test_nb(nb, skip_flags=skip, basepath=get_config().config_path)
    assert ok, f'{nb.name} failed (traceback above); run it with: nbdev_test --path {nb}'

# Cells JupyterLab's "Run All" meets on a machine without what they need: each prints one line and runs nothing.
NEEDS = {'gpu': 'needs a CUDA GPU', 'verl': 'needs verl'}

def _raw_cells(nb:Path)->list:
    "Code cells' sources as JupyterLab sends them to the kernel (directives included)"
    return [''.join(c['source']) for c in json.loads(nb.read_text())['cells'] if c['cell_type'] == 'code']

def _flagged(nb:Path)->dict:
    "flag -> the sources of the cells carrying it, for the flags in NEEDS"
    from venus_nb.cells import cell_flags
    return {f: [s for s in _raw_cells(nb) if f in cell_flags(s.splitlines(keepends=True))] for f in NEEDS}

def _missing(flag:str)->bool:
    from venus_nb.models import gpu_available, has_module
    return not gpu_available() if flag == 'gpu' else not has_module('verl')

FLAGGED = [(nb, f) for nb in NBS for f, cells in _flagged(nb).items() if cells]

@pytest.mark.parametrize('nb,flag', FLAGGED, ids=[f'{p.stem}-{f}' for p, f in FLAGGED])
def test_run_all_skips_cells_this_machine_cannot_run(nb, flag, monkeypatch):
    "The notebook's setup cell (the one calling `skip_flagged`), then every flagged cell: one line each, no error"
    if not _missing(flag): pytest.skip(f'this machine has what `#| {flag}` cells need')
    from execnb.shell import CaptureShell
    monkeypatch.chdir(nb.parent)
    # its import and its call
    setup = [s for s in _raw_cells(nb) if 'skip_flagged' in s and s not in _flagged(nb)[flag]]
    assert any(f"skip_flagged('{flag}'" in s for s in setup), (
        f'{nb.name} has `#| {flag}` cells but no cell calls skip_flagged({flag!r}, ...)')
    k = CaptureShell(nb)
    for s in setup:
        k.run_cell(s)
        assert k.exc is None, k.exc
    for s in _flagged(nb)[flag]:
        res = k.run_cell(s)
        assert k.exc is None, f'{nb.name}: a `#| {flag}` cell raised {k.exc!r}'
        assert (res['stdout'].endswith(': skipped\n') and res['stdout'].count('\n') == 1
                and NEEDS[flag] in res['stdout']), res['stdout']
    assert k.run_cell('#| other\nx = 6 * 7\nx')['result'].result == 42   # cells without the flag still run

def test_skip_flagged_outside_ipython():
    "In plain Python there are no cells: nothing to register; a cell's flags are its opening `#|` lines"
    from venus_nb.cells import cell_flags
    code = "from venus_nb.cells import skip_flagged; print(skip_flagged('gpu', 'needs a CUDA GPU'))"
    r = subprocess.run([sys.executable, '-c', code], cwd=ROOT.parent,
                       env={**os.environ, 'PYTHONPATH': str(ROOT.parent)}, capture_output=True, text=True)
    assert r.stdout == 'None\n', r.stderr[-2000:]
    assert cell_flags(['#| export\n', '#| gpu\n', '\n', 'x = 1  #| verl\n', '#| slow\n']) == {'export', 'gpu'}


# nbdev's documentation build: `nbdev_docs` (and `nbdev_proc_nbs`) hand every notebook to `nbdev.serve_drv.main` with
# `FilterDefaults`, whose `exec_show_docs` runs the exported cells, the import cells and the `show_doc` cells.
VERL_KERNEL = 'venus-nb-verl'   # registered by `make verl-env`; nbs/42_verl_trainer asks for it

def _kernel(nb:Path)->str: return json.loads(nb.read_text())['metadata'].get('kernelspec', {}).get('name', 'python3')

def _kernel_python(name:str)->str|None:
    "The Python of a registered Jupyter kernel, or None"
    from jupyter_client.kernelspec import KernelSpecManager, NoSuchKernel
    try: return KernelSpecManager().get_kernel_spec(name).argv[0]
    except NoSuchKernel: return None

def _docs_preprocess(src:Path, dst:Path):
    "What the docs build does to one notebook before quarto renders it"
    from nbdev import serve_drv
    from nbdev.processors import FilterDefaults
    from ipywidgets import Widget
    # nbdev runs each notebook in a fresh process: no widgets of other tests in the saved widget state
    Widget.close_all()
    serve_drv.main((src, dst, FilterDefaults))

def _preprocess_in(python:str, src:Path, dst:Path):
    "The same in another environment's Python (the notebook's own kernel)"
    code = ('import sys; from pathlib import Path; from nbdev import serve_drv; '
            'from nbdev.processors import FilterDefaults; '
            'serve_drv.main((Path(sys.argv[1]), Path(sys.argv[2]), FilterDefaults))')
    env = {**os.environ, 'PYTHONPATH': str(ROOT.parent)}
    r = subprocess.run([python, '-c', code, str(src), str(dst)], cwd=ROOT.parent, env=env, capture_output=True,
                       text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]

# a notebook of another kernel (42_verl_trainer: verl's environment) starts that environment's Python: slow
DOC_NBS = [pytest.param(p, marks=pytest.mark.slow) if _kernel(p) != 'python3' else p for p in NBS]

@pytest.mark.parametrize('nb', DOC_NBS, ids=[str(p.relative_to(ROOT).with_suffix('')) for p in NBS])
def test_docs_preprocessing(nb, tmp_path, monkeypatch):
    "Every notebook goes through nbdev's docs pre-processing, and every `show_doc` it adds renders"
    dst, kernel = tmp_path/nb.name, _kernel(nb)
    if kernel == VERL_KERNEL and not has_module('verl'):
        python = _kernel_python(VERL_KERNEL)
        if python is None:
            pytest.skip(f'{nb.name} runs in the kernel {VERL_KERNEL!r}, not registered here (`make verl-env`)')
        _preprocess_in(python, nb, dst)
    else:
        monkeypatch.chdir(ROOT.parent)   # where `nbdev_docs` runs
        _docs_preprocess(nb, dst)
    cells = json.loads(dst.read_text())['cells']
    docs = [c for c in cells if c['cell_type'] == 'code' and 'show_doc(' in ''.join(c['source'])]
    assert all(c['outputs'] for c in docs), [''.join(c['source']) for c in docs if not c['outputs']][:3]
    exported = any(re.match(r'#\|\s*export', ''.join(c['source']))
                   for c in json.loads(nb.read_text())['cells'] if c['cell_type'] == 'code')
    assert bool(docs) == exported, 'a notebook that exports shows its API'


# Saved outputs: the lesson notebooks keep the outputs of their cheap cells, for GitHub and the docs.
# notebook -> why it keeps no outputs
NO_SAVED_OUTPUTS = {n: 'prose only: no code cells' for n in ('tutorials/setup', 'explanations/status',
                                                               'explanations/performance', 'explanations/defaults')}
ERROR_MARKS = ('Traceback', 'NameError')
MAX_OUTPUT_CHARS = 100_000   # one saved output's text; a dataclass repr that dumps its data runs to megabytes

def _saved(nb:Path)->list:
    return [o for c in json.loads(nb.read_text())['cells'] if c['cell_type'] == 'code' for o in c.get('outputs', [])]


@pytest.mark.parametrize('nb', NBS, ids=[str(p.relative_to(ROOT).with_suffix('')) for p in NBS])
def test_saved_outputs(nb):
    "At least one code cell with saved outputs (unless allowed above, with the reason), and no saved error"
    name, outs = str(nb.relative_to(ROOT).with_suffix('')), _saved(nb)
    if name in NO_SAVED_OUTPUTS: assert not outs, f'{name} now has saved outputs: drop it from NO_SAVED_OUTPUTS'
    else: assert outs, (f'{name} has no saved outputs: save them '
                        '(run it and save; cells flagged slow/gpu/verl/notest stay empty)')
    bad = [o for o in outs if o.get('output_type') == 'error' or any(m in json.dumps(o) for m in ERROR_MARKS)]
    assert not bad, f'{name} saved an error: {json.dumps(bad[0])[:500]}'
    texts = [''.join(v) for o in outs for v in [*o.get('data', {}).values(), o.get('text', '')]
             if isinstance(v, (str, list))]
    assert max(map(len, texts), default=0) <= MAX_OUTPUT_CHARS, (
        f'{name} saved an output of {max(map(len, texts)):,} characters: give its object a short `__repr__` '
        '(`base.summary_repr`) or show less')
