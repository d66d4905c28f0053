"""Cleaning + turn-aware resampling throughput on generated trajectories (issue 3).

Generates 10,000 trajectories with the default length mix (about 60% at <= 50 turns, a tail past 150), parses them
(not counted), then times each cleaning step and the resampling for 1K, 5K and 10K trajectories. Prints per-step
seconds, trajectories/s and turns/s, the ratio of the 10K time to 10x the 1K time (1.0 = linear scaling) and the
process's peak memory. Targets: 10K cleaned + resampled in < 15 s, peak memory < 2 GB.
Run: .venv/bin/python bench/clean_resample.py
"""
import resource, tempfile, time
from venus_nb.data import clean
from venus_nb.resample import resample
from venus_nb.synth import generate, SynthConfig, write_world
from venus_nb.trajectory import read_jsonl

def run(trajs):
    t0 = time.perf_counter()
    kept, report = clean(trajs)
    t1 = time.perf_counter()
    out = resample(kept)
    t2 = time.perf_counter()
    return report.attrs['seconds'], t1 - t0, t2 - t1, len(kept), len(out)

def main(sizes=(1_000, 5_000, 10_000)):
    t = time.perf_counter()
    with tempfile.TemporaryDirectory() as d:  # generate to disk, then load as a user would
        files = write_world(generate(SynthConfig(n=max(sizes), seed=7)), d)
        trajs = read_jsonl(files['trajectories']).trajectories
    turns = sum(len(x.turns) for x in trajs)
    print(f'generated, wrote and read back {len(trajs):,} trajectories ({turns:,} turns, '
          f'{sum(len(x.turns) <= 50 for x in trajs) / len(trajs):.0%} at <= 50 turns) '
          f'in {time.perf_counter() - t:.1f}s (not counted)')
    totals = {}
    for n in sizes:
        steps, t_clean, t_res, kept, out = run(trajs[:n])
        n_turns = sum(len(x.turns) for x in trajs[:n])
        totals[n] = t_clean + t_res
        print(f'{n:>6,}: clean {t_clean:5.2f}s ({" ".join(f"{k} {v:.2f}" for k, v in steps.items())}) | '
              f'resample {t_res:.3f}s | '
              f'{n / totals[n]:,.0f} traj/s, {n_turns / totals[n]:,.0f} turns/s | kept {kept:,} -> {out:,} rows')
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f'10K clean+resample {totals[max(sizes)]:.2f}s (target < 15 s) | '
          f'scaling 10K / (10 x 1K) = {totals[max(sizes)] / (10 * totals[min(sizes)]):.2f} (1.0 = linear) | '
          f'peak RSS {peak:,.0f} MB (target < 2048)')

if __name__ == '__main__': main()
