"""Re-measure the committed selection results from their candidate tables (examples/select/*) with the library as it
is, and say whether every committed table comes back exactly (picks and summary); with --write, write them anew.

This is how the tables were recomputed on 2026-12-07, after `judges.answer_key` stopped turning a missing answer (NaN in
a table) into the vote key 'nan': first, with the old keys (`--old-keys`), the candidate tables reproduced every table
committed before; then the tables were written with today's keys. Where a candidate table lacks `correct` (the warm
start's did), it is rebuilt by exact match against the warm world's answers.

Run: .venv/bin/python examples/select/rescore.py [--old-keys] [--write]
"""
import sys
from pathlib import Path
import numpy as np, pandas as pd
from venus_nb import selection as S
from venus_nb.judges import answer_key, exact_match
from venus_nb.warm_start import WarmConfig, warm_world
from venus_nb.experiment import ExperimentConfig

HERE = Path(__file__).parent
FOLDERS = {'warm_start': WarmConfig(entities=80, held_out=64, rl=96),
           **{f'cpu_learn/{arm}': WarmConfig(**(ExperimentConfig.cpu_learn().warm or {}))
              for arm in ('start', 'igpo', 'grpo', 'grpo_fmt')}}

def correct_of(table:pd.DataFrame, cfg:WarmConfig)->np.ndarray:
    "Each rollout's correctness: the table's own, else exact match of its answer against the warm world's"
    if 'correct' in table: return table.correct.astype(bool).to_numpy()
    gts = {q['question']: q['answer'] for q in warm_world(cfg).validation}
    answered = lambda a: isinstance(a, str) and a.strip()
    return np.array([bool(answered(a)) and exact_match(a, gts[q]) >= 1.0 for q, a in zip(table.question, table.answer)])

def measured(cand:pd.DataFrame, keys:pd.Series, ok:np.ndarray, label:str)->S.Measurement:
    "Every selector's picks and measurement with these vote keys"
    c = cand.assign(key=keys)
    selectors = [s for s in S.SELECTORS if s != 'verifier' or 'verifier' in c.columns]
    sel = S.Selection(c, S.choose(c, selectors), S.selectors_of(selectors)).judged(ok)
    return S.measure(c, ok, sel.selectors, S.KS, 64, 0, label, sel)

def reproduces(m:S.Measurement, folder:Path)->bool:
    "The committed picks and summary, exactly"
    picks, table = pd.read_csv(folder/'selections.csv'), pd.read_csv(folder/'selection.csv')
    cols = ['accuracy', 'pass_at_1', 'pass_at_g']
    rows = lambda r: r.astype(float).fillna(-1).to_numpy()
    return (np.allclose(m.table[cols].to_numpy(float), table[cols].to_numpy(float), atol=1e-9, equal_nan=True)
            and (rows(m.selection.picks.row) == rows(picks.row)).all()
            and (m.selection.picks.correct.to_numpy() == picks.correct.to_numpy()).all())

def rescore(name:str, cfg:WarmConfig, old_keys:bool=False, write:bool=False):
    folder = HERE/name
    table = pd.read_csv(folder/'selection_candidates.csv')
    ok, cand = correct_of(table, cfg), table.drop(columns=['correct'], errors='ignore')
    keys = cand.answer.map(answer_key)
    if old_keys: keys = keys.where(cand.answer.notna(), 'nan')   # before the fix: 'nan' for a missing answer
    m = measured(cand, keys, ok, name)
    print(f"{name}: {'reproduces' if reproduces(m, folder) else 'differs from'} the committed tables; G = max:")
    print(m.table[m.table.g == m.table.g.max()][['selector', 'accuracy', 'gain', 'gain_lo', 'gain_hi', 'p_value']]
          .round(3).to_string(index=False))
    if write:
        m.selection.candidates = m.selection.candidates[list(table.columns) + ['correct'] * ('correct' not in table)]
        S.write_selection(folder, m)
        (folder/'selection.html').unlink(missing_ok=True)

if __name__ == '__main__':
    for name, cfg in FOLDERS.items(): rescore(name, cfg, '--old-keys' in sys.argv, '--write' in sys.argv)
