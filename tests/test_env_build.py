"`make env`'s installer switch, and bench/env_build.py's summary of builds taken in turns."
import importlib.util, subprocess
from conftest import ROOT

def dry_env(tmp_path, installer:str)->str:
    "What `make env` would run for a fresh environment in tmp_path"
    return subprocess.run(['make', '-n', 'env', f'VENV={tmp_path}/v', f'INSTALLER={installer}'], cwd=ROOT,
                          capture_output=True, text=True, check=True).stdout

def test_uv_installs_the_library_with_pip_behind_it_and_pip_alone_when_asked(tmp_path):
    uv, pip = dry_env(tmp_path, 'uv'), dry_env(tmp_path, 'pip')
    assert 'uv pip install' in uv and 'install -q -U pip uv' in uv
    assert 'uv failed: installing with pip' in uv          # pip takes over where uv fails
    assert 'torch==2.13.0' in uv.split('uv pip install')[0]   # torch goes through pip first, before uv
    assert 'bin/uv' not in pip and 'pip uv' not in pip and pip.count('pip --disable-pip-version-check install') == 4

def test_the_bench_takes_turns_and_compares_medians_and_packages(monkeypatch, capsys):
    spec = importlib.util.spec_from_file_location('env_build', ROOT/'bench'/'env_build.py')
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    order, seconds = [], {'pip': iter([120.0, 150.0, 130.0]), 'uv': iter([40.0, 60.0, 50.0])}
    def build(installer, where):
        order.append(installer)
        return next(seconds[installer]), {'torch==2.13.0', 'uv==0.9' if installer == 'uv' else 'pip==26.0'}
    monkeypatch.setattr(bench, 'build', build)
    bench.main(repeats=3)
    out = capsys.readouterr().out
    assert order == ['pip', 'uv', 'uv', 'pip', 'pip', 'uv']
    assert 'pip: median  130.0 s (min-max 120.0-150.0)' in out and 'uv : median   50.0 s (min-max 40.0-60.0)' in out
    assert 'pip/uv: 2.60x; same packages: False' in out and "only with pip: {'pip==26.0'}" in out
