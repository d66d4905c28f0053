"""Resampling a `datasets.Dataset` gives what resampling the list gives, and refuses rows it cannot read."""
import pandas as pd, pytest
from test_trajectory import _with_bad_rows
import test_trajectory
from venus_nb.trajectory import to_dataset, as_trajectories, is_dataset
from venus_nb.data import clean
from venus_nb.resample import resample, resample_table, ResampleConfig

world = test_trajectory.world   # a fixture of test_trajectory.py

def test_resample_dataset_matches_list(noisy):
    kept, _ = clean(noisy)
    cfg = ResampleConfig(buckets=((20, 1), (40, 2), (None, 3)), seed=7)
    expanded = resample(kept, cfg)
    expanded_ds = resample(to_dataset(kept), cfg)
    assert is_dataset(expanded_ds) and len(expanded_ds) == len(expanded) > len(kept)
    assert as_trajectories(expanded_ds) == expanded
    pd.testing.assert_frame_equal(resample_table(to_dataset(kept), expanded_ds, cfg),
                                  resample_table(kept, expanded, cfg))

def test_resample_refuses_bad_rows(world):
    with pytest.raises(ValueError, match=r'4 of 7 rows cannot be read.*Dataset:2'): resample(_with_bad_rows(world))
