"""How long `make env` takes on a fresh machine, with uv (the Makefile's default) against pip alone (INSTALLER=pip).

Each repeat clones the repository's HEAD into a temporary folder and runs `make env` there with empty download
caches, as a fresh CI machine has, the two installers taking turns so that a slow spell on the network or the
machine falls on both. It prints each build's wall time, the median and min-max per installer, their ratio, and
whether the two environments hold the same packages (`pip freeze`, uv itself aside). Each build takes 1 to 4 min and
about 5 GB of disk, removed after it.
Run: .venv/bin/python bench/env_build.py [--repeats 3]
"""
import argparse, os, statistics, subprocess, tempfile, time
from pathlib import Path
from venus_nb.models import cpu_name

ROOT = Path(__file__).resolve().parents[1]

def build(installer:str, where:Path)->tuple[float, set]:
    "Wall seconds of `make env INSTALLER=installer` in a fresh clone under `where`, and the packages it installed"
    clone = where/'clone'
    subprocess.run(['git', 'clone', '-q', str(ROOT), str(clone)], check=True)
    caches = dict(PIP_CACHE_DIR=str(where/'pip-cache'), UV_CACHE_DIR=str(where/'uv-cache'))
    t = time.perf_counter()
    subprocess.run(['make', '-s', 'env', f'INSTALLER={installer}'], cwd=clone, check=True,
                   env={**os.environ, **caches}, stdout=subprocess.DEVNULL)
    seconds = time.perf_counter() - t
    freeze = subprocess.run([str(clone/'.venv/bin/python'), '-m', 'pip', 'freeze', '--exclude-editable'],
                            capture_output=True, text=True, check=True).stdout.split()
    return seconds, {p for p in freeze if not p.startswith('uv==')}

def main(repeats:int=3, installers=('pip', 'uv')):
    times, packages = {i: [] for i in installers}, {}
    for r in range(repeats):
        for installer in (installers if r % 2 == 0 else installers[::-1]):
            with tempfile.TemporaryDirectory(dir='/tmp') as where:
                seconds, packages[installer] = build(installer, Path(where))
            times[installer].append(seconds)
            print(f'repeat {r + 1}: {installer:3} {seconds:6.1f} s', flush=True)
    print(f'`make env` on a fresh clone, empty caches, {cpu_name()}, {repeats} repeats:')
    for i, ts in times.items():
        print(f'  {i:3}: median {statistics.median(ts):6.1f} s (min-max {min(ts):.1f}-{max(ts):.1f})')
    a, b = installers
    print(f'  {a}/{b}: {statistics.median(times[a]) / statistics.median(times[b]):.2f}x; same packages: '
          f'{packages[a] == packages[b]} ({len(packages[b])})')
    for i in installers:
        if extra := packages[i] - packages[installers[1 - installers.index(i)]]: print(f'  only with {i}: {extra}')

if __name__ == '__main__':
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument('--repeats', type=int, default=3)
    main(p.parse_args().repeats)
