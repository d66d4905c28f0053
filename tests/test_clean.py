"The correctness filter of the cleaning: one clear error for a judge it cannot use, one spelling for no filter."
import pytest
from venus_nb.data import CleanConfig, clean, step_correct
from venus_nb.synth import generate, SynthConfig

@pytest.fixture(scope='module')
def trajs():
    return generate(SynthConfig(n=6, seed=1)).trajectories()

def test_a_judge_it_cannot_use_is_one_error_before_any_trajectory(trajs, monkeypatch):
    monkeypatch.delenv('VENUS_NB_JUDGE_URL', raising=False)
    for bad, says in [('bleu', "expected 'none'"), ('llm', 'VENUS_NB_JUDGE_URL'), (lambda a: 1.0, r'judge\(question')]:
        with pytest.raises((ValueError, TypeError), match=says): CleanConfig(judge=bad)
    cfg = CleanConfig(judge='em')
    cfg.judge = 'bleu'   # set after the config was made: refused once, not written into every row
    with pytest.raises(ValueError, match='bleu'): clean(trajs, cfg)

def test_none_and_the_string_none_both_mean_no_filter(trajs):
    for judge in (None, 'none'):
        cfg = CleanConfig(judge=judge)
        assert cfg.judge is None and step_correct(trajs[0], cfg) == (trajs[0], [])
        assert not clean(trajs, cfg)[1].step.eq('correct').any()
