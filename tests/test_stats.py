"Statistics on hand-made matrices: the two-stage bootstrap against the one-stage one, exact sign tests, Holm."
import numpy as np, pytest
from venus_nb.stats import (MIN_SEEDS, bootstrap_mean, one_stage_bootstrap, two_stage_bootstrap, sign_test, holm,
                            holm_bounds,
                            paired_stats, seed_tests, seed_note, directed_verdict, resampled)

width = lambda r: r[2] - r[1]

def test_two_stage_equals_one_stage_when_seeds_agree():
    row = (np.arange(50) % 5 == 0).astype(float)
    agree = np.tile(row, (4, 1))
    assert two_stage_bootstrap(agree) == pytest.approx(one_stage_bootstrap(agree), abs=1e-12)
    assert bootstrap_mean(agree) == pytest.approx(one_stage_bootstrap(row[None]), abs=1e-12)

def test_two_stage_widens_the_interval_when_seeds_disagree():
    disagree = np.zeros((4, 50))
    disagree[:2, :40] = 1.0         # two runs learned (40 of 50 right), two did not: same mean as 20 of 50 each
    one, two = one_stage_bootstrap(disagree), two_stage_bootstrap(disagree)
    assert one[0] == two[0] == pytest.approx(0.4)
    assert width(two) > 2 * width(one)
    assert bootstrap_mean(disagree) == two                       # 4 seeds: seeds are resampled
    assert bootstrap_mean(disagree[:2]) == one_stage_bootstrap(disagree[:2])   # 2: questions only
    assert (resampled(MIN_SEEDS - 1), resampled(MIN_SEEDS)) == ('questions', 'seeds and questions')

def test_one_seed_keeps_the_one_stage_numbers_exactly():
    "Single-seed results (every committed run) keep their intervals: the seeds are drawn after the questions"
    m = np.random.default_rng(3).random((1, 64))
    assert two_stage_bootstrap(m) == pytest.approx(one_stage_bootstrap(m), abs=1e-12)
    assert bootstrap_mean(m) == one_stage_bootstrap(m)

def test_bad_matrices_are_refused():
    for bad, said in [(np.ones(3), 'seeds × questions'), (np.ones((0, 3)), 'seeds × questions'),
                      ([[0.5, np.nan]], 'missing cells')]:
        with pytest.raises(ValueError, match=said): bootstrap_mean(bad)

def test_sign_test_one_and_two_sided():
    assert sign_test([1] * 5) == 2 / 32 and sign_test([1] * 5, 'greater') == 1 / 32
    assert sign_test([1] * 5, 'less') == 1.0
    assert sign_test([1] * 9 + [-1], 'greater') == pytest.approx(11 / 1024)
    assert sign_test([-1] * 9 + [1], 'less') == pytest.approx(11 / 1024)
    with pytest.raises(ValueError, match='alternative'): sign_test([1], 'up')
    with pytest.raises(ValueError, match='1 differences are NaN'): sign_test([1, 1, np.nan, 1])   # not a tie

def test_per_seed_and_pooled_exact_tests():
    d = np.array([[1, 1, 1, 1, 0], [1, 1, 0, 0, -1], [1, 1, 1, 0, 0]], dtype=float)
    rows = seed_tests(d, 'greater')
    assert [(r['better'], r['worse']) for r in rows] == [(4, 0), (2, 1), (3, 0)]
    assert [r['p_value'] for r in rows] == [1 / 16, 0.5, 1 / 8]
    pooled = paired_stats(d, alternative="greater")      # per question over the seeds: 4 better, 1 worse
    assert (pooled["better"], pooled["worse"], pooled["p_value"]) == (4, 1, 6 / 32)

def test_holm_on_a_hand_table():
    # sorted: 0.001 × 5, 0.01 × 4, 0.012 × 3 (= 0.036, raised to 0.04 by the step before), 0.04 × 2, 0.3 × 1
    p = [0.04, 0.001, 0.3, 0.012, 0.01]
    assert holm(p) == pytest.approx([0.08, 0.005, 0.3, 0.04, 0.04])
    assert holm([0.5]) == pytest.approx([0.5]) and holm([0.6, 0.7]) == pytest.approx([1.0, 1.0])
    with pytest.raises(ValueError, match=r'\[0, 1\]'): holm([0.1, -0.1])

def test_verdict_words_match_the_test():
    assert directed_verdict(0.02, 0.2, 0.01) == 'higher'
    assert directed_verdict(-0.05, 0.2, 0.01) == 'not measured higher'
    assert directed_verdict(-0.2, 0.05, 0.01, '<') == 'not measured lower'
    assert 'the exact test does not' in directed_verdict(0.02, 0.2, 0.2)
    assert seed_note(3) is None and 'claim nothing' in seed_note(2)

def test_bootstrap_interval_covers_the_mean_and_narrows_with_data():
    rng = np.random.default_rng(0)
    small, big = bootstrap_mean(rng.random((3, 10))), bootstrap_mean(rng.random((3, 400)))
    for mean, lo, hi in (small, big): assert lo <= mean <= hi
    assert big[2] - big[1] < small[2] - small[1]
    assert bootstrap_mean(np.ones((2, 3)) * 0.25) == (0.25, 0.25, 0.25)
    with pytest.raises(ValueError, match='seeds × questions'): bootstrap_mean(np.ones(3))

def test_sign_test_is_exact():
    assert sign_test([1, 1, 1]) == 0.25                            # 3 discordant, all one way: 2 × (1/2)³
    assert sign_test([1] * 5 + [0] * 100) == pytest.approx(0.0625)
    assert sign_test([1, -1, 1, -1]) == 1.0 and sign_test([0, 0]) == 1.0
    assert sign_test([1] * 9 + [-1]) == pytest.approx(2 * 11 / 1024)

def test_three_discordant_questions_are_no_difference_measured():
    d = np.zeros((3, 64))
    d[0, 0] = d[1, 5] = d[2, 9] = 1.0     # 192 paired samples, 3 differ, all one way
    s = paired_stats(d)
    assert (s['discordant'], s['better'], s['worse']) == (3, 3, 0) and s['p_value'] == 0.25
    assert s['lo'] == 0.0 and s['verdict'] == 'no difference measured'
    big = np.full((1, 64), 0.25)
    big[0, :8] = 0                    # 56 questions better, none worse
    s = paired_stats(big)
    assert s['verdict'] == 'higher' and s['lo'] > 0 and s['p_value'] < 1e-10 and s['discordant'] == 56

def test_holm_bounds_are_held_and_attained_by_the_unknown_p_values():
    "Over a grid of fills (0, 1, each known value, values between) each known Holm p stays in its bounds, meeting both"
    import itertools
    rng = np.random.default_rng(1)
    for _ in range(200):
        k, u = int(rng.integers(1, 5)), int(rng.integers(1, 3))
        known = rng.choice([0.0, 0.001, 0.01, 0.02, 0.03, 0.2, 1.0], size=k)
        least, most = holm_bounds(np.r_[known, [np.nan] * u])
        assert np.isnan(least[k:]).all() and np.isnan(most[k:]).all()
        seen = np.array([a for fill in itertools.product(sorted(set(known) | {0.0, 0.005, 0.015, 0.5, 1.0}), repeat=u)
                         for a in (holm(np.r_[list(fill), known])[u:], holm(np.r_[known, list(fill)])[:k])])
        assert np.allclose(seen.min(0), least[:k]) and np.allclose(seen.max(0), most[:k]), (known, least, most)
    assert [b.tolist() for b in holm_bounds([0.04, 0.3])] == [holm([0.04, 0.3]).tolist()] * 2   # nothing unknown
    with pytest.raises(ValueError, match='NaN for unknown'): holm_bounds([0.2, 1.5])
