"""Hand-computed checks of every reward rule (method §1.4-1.5, §2.1-2.3) and each RewardConfig variant; saved scores
no run writes are refused; absurd settings fail at construction."""
import math
import pytest
from test_base import refused
from venus_nb.rewards import RewardConfig, turn_advantages, reward_details

Z = lambda d, var: d / (math.sqrt(var + 1e-8) + 1e-6)   # official z-score of a deviation d with population variance var
ok = lambda n: [True] * n

def test_group_of_one_gets_zero_outcome_and_zero_ig():
    adv = turn_advantages([['visit', 'answer']], [[0.7, None]], [ok(2)], [1.0], [0])
    # one outcome -> std 1 -> O = 0; one IG -> I = 0; s = eta / (0 + eps) capped at s_max, times 0
    assert adv == [[0.0, 0.0]]

def test_no_visit_turns_is_outcome_only():
    adv = turn_advantages([['search', 'search', 'answer'], ['search', 'answer']], [[None] * 3, [None] * 2],
                          [ok(3), ok(2)], [1.0, 0.0], [0, 0])
    O = Z(0.5, 0.25)
    assert adv[0] == pytest.approx([O] * 3) and adv[1] == pytest.approx([-O] * 2)

def test_all_outcomes_equal_eta_floor():
    d = reward_details([['visit', 'answer']] * 2, [[0.1, None], [0.9, None]], [ok(2)] * 2, [0.0, 0.0], [0, 0])
    I = Z(0.4, 0.16)
    assert d.scale == pytest.approx(0.3 / (I + 1e-6))
    assert (d.advantages[0] == pytest.approx([d.scale * -I, 0.0])
            and d.advantages[1] == pytest.approx([d.scale * I, 0.0]))

def test_malformed_middle_search_creates_pooled_slot():
    d = reward_details([['search', 'visit', 'answer'], ['visit', 'search', 'answer']],
                       [[None, 0.5, None], [0.5, None, None]], [[False, True, True], ok(3)], [1.0, 1.0], [0, 0])
    assert d.slots[0].types == ['penalty', 'ig', 'outcome'] and d.slots[0].values[0] == -1.0
    vals = [-1.0, 0.5, 0.5]
    m = sum(vals) / 3
    var = sum((v - m) ** 2 for v in vals) / 3
    s = 0.3 / (sum(abs(Z(v - m, var)) for v in vals) / 3 + 1e-6)   # outcomes equal -> eta floor
    A1 = s * Z(0.5 - m, var)                      # visit slot, then outcome 0
    assert d.advantages[0] == pytest.approx([s * Z(-1.0 - m, var) + 0.95 * A1, A1, 0.0])

def test_penalty_replace_is_raw_minus_lambda():
    cfg = RewardConfig(penalty='replace', lambda_fmt=0.5)
    d = reward_details([['search', 'visit', 'answer']] * 2, [[None, 0.2, None], [None, 0.6, None]],
                       [[False, True, True], ok(3)], [1.0, 0.0], [0, 0], cfg)
    assert d.rewards[0][0] == -0.5 and d.advantages[0][0] == pytest.approx(-0.5 + 0.95 * d.slot_adv[0][1])

def test_malformed_final_turn_outcome_is_minus_lambda():
    d = reward_details([['search', 'answer'], ['search', 'answer']], [[None, None]] * 2, [[True, False], ok(2)],
                       [1.0, 1.0], [0, 0])
    assert d.slots[0].values[-1] == -1.0
    assert d.advantages[0] == pytest.approx([Z(-1.0, 1.0)] * 2) and d.advantages[1] == pytest.approx([Z(1.0, 1.0)] * 2)

@pytest.mark.parametrize('bad', [float('nan'), float('inf'), -float('inf')])
def test_nan_inf_ig_is_zero(bad):
    a = turn_advantages([['visit', 'answer']] * 2, [[bad, None], [0.0, None]], [ok(2)] * 2, [1.0, 0.0], [0, 0])
    b = turn_advantages([['visit', 'answer']] * 2, [[0.0, None], [0.0, None]], [ok(2)] * 2, [1.0, 0.0], [0, 0])
    assert a == b

def test_ig_exactly_zero_is_still_a_slot():
    d = reward_details([['visit', 'search', 'answer']] * 2, [[0.0, None, None], [1.0, None, None]], [ok(3)] * 2,
                       [1.0, 0.0], [0, 0])
    assert d.slots[0].types == ['ig', 'outcome'] and d.slots[0].turns == [0, 2]

def test_groups_are_normalised_separately_and_scale_is_batch_wide():
    kinds, ig = [['visit', 'answer']] * 4, [[0.1, None], [0.3, None], [5.0, None], [9.0, None]]
    d = reward_details(kinds, ig, [ok(2)] * 4, [1.0, 0.0, 1.0, 0.0], ['a', 'a', 'b', 'b'])
    assert [n[0] for n in d.normed] == pytest.approx([-Z(0.1, 0.01), Z(0.1, 0.01), -Z(2.0, 4.0), Z(2.0, 4.0)])
    mean_I = (2 * Z(0.1, 0.01) + 2 * Z(2.0, 4.0)) / 4
    assert d.scale == pytest.approx(min(Z(0.5, 0.25) / (mean_I + 1e-6), 10))

def test_split_credit_divides_immediate_reward():
    kinds = [['search', 'search', 'visit', 'answer']] * 2
    d = reward_details(kinds, [[None, None, 0.0, None], [None, None, 2.0, None]], [ok(4)] * 2, [0.0, 1.0], [0, 0],
                       RewardConfig(credit='split'))
    r, A_out = d.rewards[0][0], d.slot_adv[0][1]
    assert d.advantages[0] == pytest.approx([r / 3 + 0.95 * A_out] * 3 + [A_out])

def test_split_credit_never_divides_a_format_penalty():
    """A malformed search's −λ is its own: split divides a visit's IG among its segment, not a penalty, so the
    well-formed search before the malformed one takes the penalty slot's advantage whole, as under copy"""
    kinds = [['search', 'search', 'visit', 'answer'], ['search', 'visit', 'answer']]
    args = (kinds, [[None, None, 0.4, None], [None, 0.9, None]], [[True, False, True, True], ok(3)], [1.0, 0.0],
            [0, 0])
    split, copy = (reward_details(*args, RewardConfig(credit=c, penalty='replace')) for c in ('split', 'copy'))
    assert split.slots[0].types == ['penalty', 'ig', 'outcome']
    assert split.advantages[0][:2] == pytest.approx(copy.advantages[0][:2])
    assert split.advantages[0][:2] == pytest.approx([split.slot_adv[0][0]] * 2)
    assert split.slot_adv[0][0] == pytest.approx(-1.0 + 0.95 * split.slot_adv[0][1])
    # the visit's IG alone is split: its segment is the visit turn only, so split and copy agree there too
    assert split.advantages[0][2:] == pytest.approx(copy.advantages[0][2:])
    assert split.advantages[1][:2] == pytest.approx([split.rewards[1][0] / 2 + 0.95 * split.slot_adv[1][1]] * 2)

def test_grpo_and_joint():
    kinds, ig, fo = [['visit', 'answer']] * 2, [[0.1, None], [0.9, None]], [ok(2)] * 2
    g = turn_advantages(kinds, ig, fo, [1.0, 0.0], [0, 0], RewardConfig(estimator='grpo'))
    assert g[0] + g[1] == pytest.approx([Z(0.5, .25)] * 2 + [-Z(0.5, .25)] * 2)
    j = reward_details(kinds, ig, fo, [1.0, 0.0], [0, 0], RewardConfig(norm='joint'))
    vals = [0.1, 1.0, 0.9, 0.0]
    m = 0.5
    var = sum((v - m) ** 2 for v in vals) / 4
    assert j.scale == 1.0 and [j.normed[0][0], j.normed[0][1]] == pytest.approx([Z(0.1 - m, var), Z(1.0 - m, var)])

def test_a_registered_estimator_is_used(monkeypatch):
    """A function added to ESTIMATORS under a new name is a valid `estimator` and makes the advantages; the rest of the
    details stay IGPO's"""
    from venus_nb.rewards import ESTIMATORS
    seen = []
    def by_group(slots, rewards, slot_adv, groups, cfg):
        seen.append((groups, cfg))
        return [[float(g)] * (s.turns[-1] + 1) for s, g in zip(slots, groups)]
    monkeypatch.setitem(ESTIMATORS, 'by_group', by_group)
    kinds, ig, fo = ([['visit', 'answer'], [], ['search', 'visit', 'answer']], [[0.1, None], [], [None, 0.9, None]],
                     [ok(2), [], ok(3)])
    cfg = RewardConfig(estimator='by_group')
    d = reward_details(kinds, ig, fo, [1.0, 0.0, 0.0], [3, 5, 3], cfg)
    # only rollouts with turns reach it
    assert d.advantages == [[3.0, 3.0], [], [3.0, 3.0, 3.0]] and seen == [([3, 3], cfg)]
    igpo = reward_details(kinds, ig, fo, [1.0, 0.0, 0.0], [3, 5, 3])
    assert ((d.slots, d.normed, d.scale, d.rewards, d.slot_adv)
            == (igpo.slots, igpo.normed, igpo.scale, igpo.rewards, igpo.slot_adv))

def test_estimator_names_are_checked_against_the_table(monkeypatch):
    from venus_nb.rewards import ESTIMATORS, grpo_advantages
    with pytest.raises(ValueError, match=r"estimator must be one of \('igpo', 'grpo'\), got 'ppo'"):
        RewardConfig(estimator='ppo')
    for bad in (None, 3, ['igpo'], {}):
        with pytest.raises(ValueError, match='estimator'): RewardConfig(estimator=bad)
    monkeypatch.setitem(ESTIMATORS, 'ppo', grpo_advantages)
    args = [['visit', 'answer']] * 2, [[0.1, None], [0.9, None]], [ok(2)] * 2, [1.0, 0.0], [0, 0]
    assert (turn_advantages(*args, RewardConfig(estimator='ppo'))
            == turn_advantages(*args, RewardConfig(estimator='grpo')))

def test_gamma_counts_rewarded_turns_only():
    d = reward_details([['search'] * 5 + ['visit', 'answer']] * 2, [[None] * 5 + [0.0, None], [None] * 5 + [1.0, None]],
                       [ok(7)] * 2, [1.0, 0.0], [0, 0], RewardConfig(gamma=0.5))
    assert d.advantages[0][0] == pytest.approx(d.rewards[0][0] + 0.5 * d.rewards[0][1])

def test_bad_lengths_raise_clearly():
    with pytest.raises(ValueError, match='one entry per turn'):
        turn_advantages([['visit', 'answer']], [[None]], [ok(2)], [1.0], [0])

def test_empty_rollout_gives_empty_list():
    assert turn_advantages([[], ['answer']], [[], [None]], [[], [True]], [0.0, 1.0], [0, 1]) == [[], [0.0]]

def test_ig_from_logprobs_log_and_prob_diff():
    from venus_nb.rewards import GTLogps, ig_from_logps
    lp = GTLogps(-2.0, [None, -1.5, None, -1.0, None])
    got = ig_from_logps(lp)
    assert (got[0] is None and got[2] is None and got[4] is None and got[1] == pytest.approx(0.5)
            and got[3] == pytest.approx(0.5))
    p = ig_from_logps(lp, RewardConfig(ig='prob_diff'))
    assert (p[1] == pytest.approx(math.exp(-1.5) - math.exp(-2.0))
            and p[3] == pytest.approx(math.exp(-1.0) - math.exp(-1.5)))

def test_token_advantages_only_on_trained_tokens():
    from venus_nb.rewards import token_advantages
    from venus_nb.trajectory import Tokenized
    tk = Tokenized(list(range(10)), [0, 0, 1, 1, 0, 0, 1, 1, 1, 0], [(2, 4), (6, 9)], [(4, 6), None], 2)
    assert token_advantages(tk, [0.5, -1.0]) == [0, 0, 0.5, 0.5, 0, 0, -1.0, -1.0, -1.0, 0]

def test_visit_bonus_ranks_rollouts_by_well_formed_visits_before_normalisation():
    from venus_nb.rewards import with_visit_bonus
    kinds = [['visit', 'visit', 'answer'], ['visit', 'answer'], ['search', 'answer']]
    ok = [[True, False, True], [True, True], [True, True]]   # rollout 0's second visit is malformed: it earns nothing
    assert with_visit_bonus(kinds, ok, [0.0, 0.0, 1.0], 0.25) == [0.25, 0.25, 1.0]
    cfg = RewardConfig(scored='none', penalty='replace', visit_bonus=2.0)
    adv = turn_advantages(kinds, [[None] * 3, [None] * 2, [None] * 2], [[True] * 3, [True] * 2, [True] * 2],
                          [0.0, 0.0, 1.0], [0, 0, 0], cfg)
    # 4, 2 and 1: at β = 2 even one visit ranks above the one right answer that never visited
    assert adv[0][-1] > adv[1][-1] > adv[2][-1]
    plain = turn_advantages(kinds, [[None] * 3, [None] * 2, [None] * 2], [[True] * 3, [True] * 2, [True] * 2],
                            [0.0, 0.0, 1.0], [0, 0, 0], RewardConfig(scored='none', penalty='replace'))
    assert plain[2][-1] > 0 > plain[0][-1] == plain[1][-1]
    for bad in (-0.1, float('nan'), float('inf')):
        with pytest.raises(ValueError, match='visit_bonus'): RewardConfig(visit_bonus=bad)

# run-folder readers: saved scores no run writes are errors naming the file and rollout, never NaN advantages
def test_scored_load_refuses_scores_no_run_writes(tmp_path):
    import json
    from venus_nb.rewards import Scored
    from venus_nb.trajectory import Trajectory
    msgs = [dict(role='user', content='Q?'), dict(role='assistant', content='<think>a</think>\n<answer>y</answer>')]
    t = Trajectory.from_messages(msgs, gt='y')
    good = Scored([t, t], [0, 0], [[None], [None]], [1.0, 0.0])
    assert Scored.load(good.save(tmp_path/'ok.jsonl')).outcome == [1.0, 0.0]
    for change, why in ((dict(ig=[1e308]), 'has ig'), (dict(outcome=float('nan')), 'has outcome'),
                        (dict(outcome='1'), 'has outcome'), (dict(group=True), 'has group'),
                        (dict(group='0'), 'whole numbers in some rollouts and texts in others')):
        p = good.save(tmp_path/'bad.jsonl')
        rows = [json.loads(l) for l in p.read_text().splitlines()]
        rows[1]['meta']['scored'] |= change
        p.write_text(''.join(json.dumps(r) + '\n' for r in rows))
        with pytest.raises(ValueError, match=rf'bad\.jsonl: .*{why}'): Scored.load(p)

# ---------------------------------------------------------------------------------------------------------------------
# Absurd settings are refused when the config is built

REWARD_BAD = [('gamma', -0.1), ('gamma', 1.5), ('gamma', math.nan), ('lambda_fmt', -1.0), ('eta', -0.3),
              ('s_max', 0.0), ('eps', 0.0), ('temperature', 0.0)]

@pytest.mark.parametrize('field,value', REWARD_BAD, ids=[f'{f}={v}' for f, v in REWARD_BAD])
def test_absurd_reward_settings_fail_at_construction(field, value):
    refused(RewardConfig, field, value)
