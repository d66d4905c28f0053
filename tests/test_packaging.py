"The library matches the notebooks, and a built wheel works on its own (no nbs/, no editable install)."
import os, shutil, subprocess, sys, sysconfig, venv
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent

def _tracked_copy(dst):
    "Copy the files git tracks (plus untracked, unignored ones) into `dst`: a clean checkout of the work tree"
    files = subprocess.run(['git', 'ls-files', '-co', '--exclude-standard'], cwd=ROOT, capture_output=True, text=True,
                           check=True).stdout.split()
    for f in files:
        if (ROOT/f).is_file():
            (dst/f).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT/f, dst/f)
    return dst

def test_export_leaves_no_diff(tmp_path):
    repo = _tracked_copy(tmp_path/'repo')
    before = {p.relative_to(repo): p.read_text() for p in (repo/'venus_nb').rglob('*.py')}
    subprocess.run([str(BIN/'nbdev_export')], cwd=repo, check=True, capture_output=True)
    after = {p.relative_to(repo): p.read_text() for p in (repo/'venus_nb').rglob('*.py')}
    changed = sorted(str(k) for k in before.keys() | after.keys() if before.get(k) != after.get(k))
    assert not changed, f'nbdev_export changed {changed}: run `make export` and commit notebooks and library together'

def test_wheel_installs_and_runs_without_nbs(tmp_path):
    repo = _tracked_copy(tmp_path/'repo')
    subprocess.run([sys.executable, '-m', 'build', '--wheel', '--outdir', str(tmp_path/'dist'), str(repo)],
                   check=True, capture_output=True)
    wheel = next((tmp_path/'dist').glob('venus_nb-*.whl'))
    env_dir = tmp_path/'fresh'
    venv.create(env_dir, with_pip=True)
    py = env_dir/'bin'/'python'
    subprocess.run([str(py), '-m', 'pip', 'install', '-q', '--no-deps', str(wheel)], check=True, capture_output=True)
    # the heavy dependencies (torch, transformers) come from this environment's site-packages, appended after the
    # fresh venv's own, so `venus_nb` itself can only be the wheel's copy
    site = Path(subprocess.run([str(py), '-c', 'import sysconfig; print(sysconfig.get_paths()["purelib"])'],
                               capture_output=True, text=True, check=True).stdout.strip())
    (site/'deps.pth').write_text(sysconfig.get_paths()['purelib'] + '\n')
    run = dict(cwd=tmp_path, capture_output=True, text=True, env={**os.environ, 'PYTHONPATH': ''})
    where = subprocess.run([str(py), '-c', ('import venus_nb, venus_nb.trajectory, venus_nb.models; '
                                            'print(venus_nb.__file__)')], **run)
    assert where.returncode == 0, where.stderr
    assert Path(where.stdout.strip()).is_relative_to(env_dir), where.stdout
    helped = subprocess.run([str(env_dir/'bin'/'venus-nb'), '--help'], **run)
    assert helped.returncode == 0 and 'demo' in helped.stdout, helped.stderr
    reqs = subprocess.run([str(py), '-c', 'from importlib.metadata import requires; print(requires("venus-nb"))'],
                          **run).stdout
    assert 'transformers' in reqs and 'torch' in reqs
