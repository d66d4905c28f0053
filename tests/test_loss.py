"""The loss: the clipped surrogate with KL by hand, k3, masks and the token mean."""
import math
import pytest, torch
from hypothesis import given, settings, strategies as st
from venus_nb.loss import LossConfig, loss_terms, k3_kl, masked_mean, igpo_loss

def test_ratio_one_is_plain_policy_gradient_plus_kl():
    g = torch.Generator().manual_seed(1)
    logp = (torch.randn(3, 7, generator=g) - 2).requires_grad_()
    ref = logp.detach() + 0.3 * torch.randn(3, 7, generator=g)
    adv = torch.randn(3, 7, generator=g)
    mask = (torch.rand(3, 7, generator=g) > 0.4).float()
    mask[0, 0] = 1
    cfg = LossConfig(kl_coef=0.05)
    loss = igpo_loss(loss_terms(logp, logp.detach(), ref, adv, cfg), mask, cfg)
    kl = (torch.exp(ref - logp.detach()) - (ref - logp.detach()) - 1)
    want = -(adv * mask).sum() / mask.sum() + 0.05 * (kl * mask).sum() / mask.sum()
    assert torch.allclose(loss, want, atol=1e-6)
    t = loss_terms(logp, logp.detach(), ref, adv, cfg)
    assert torch.allclose(t['ratio'], torch.ones_like(logp)) and t['clipped'].sum() == 0
    # no reference (kl_coef=0 path): the KL term is zero
    no_ref = igpo_loss(loss_terms(logp, logp.detach(), None, adv, cfg), mask, cfg)
    assert torch.allclose(no_ref, -(adv * mask).sum() / mask.sum(), atol=1e-6)

def test_k3_kl_by_hand():
    d = math.log(.25) - math.log(.5)
    assert (float(k3_kl(torch.tensor(math.log(.5)), torch.tensor(math.log(.25))))
            == pytest.approx(math.exp(d) - d - 1, abs=1e-6))
    assert float(k3_kl(torch.tensor(-1.0), torch.tensor(-1.0))) == 0.0                      # same policy: zero
    assert float(k3_kl(torch.tensor(-30.0), torch.tensor(0.0))) == 10.0                     # clamped to [-10, 10]
    g = torch.Generator().manual_seed(0)
    lp, ref = 3 * torch.randn(1000, generator=g), 3 * torch.randn(1000, generator=g)
    assert (k3_kl(lp, ref) >= 0).all()

def test_masked_tokens_get_no_gradient():
    g = torch.Generator().manual_seed(2)
    logp = torch.randn(2, 9, generator=g).requires_grad_()
    old = logp.detach() + 0.5 * torch.randn(2, 9, generator=g)     # ratios away from 1: clipping and dual clip fire
    ref = logp.detach() + torch.randn(2, 9, generator=g)
    adv = 2 * torch.randn(2, 9, generator=g)
    mask = torch.tensor([[0, 0, 1, 1, 1, 0, 0, 1, 1], [0, 1, 1, 0, 0, 0, 0, 0, 0.]])
    igpo_loss(loss_terms(logp, old, ref, adv, (c := LossConfig(kl_coef=0.1))), mask, c).backward()
    assert (logp.grad[mask == 0] == 0).all()
    assert (logp.grad[mask == 1] != 0).any()

def test_token_mean_weights_sequences_by_tokens():
    "Two sequences with 2 and 6 trained tokens: the loss is the mean over all 8 tokens, not the mean of the two means"
    logp = torch.zeros(2, 8)
    mask = torch.tensor([[1, 1, 0, 0, 0, 0, 0, 0], [1, 1, 1, 1, 1, 1, 0, 0.]])
    adv = torch.tensor([[1.0] * 8, [0.0] * 8])
    loss = igpo_loss(loss_terms(logp, logp, None, adv), mask, LossConfig(kl_coef=0))
    assert float(loss) == pytest.approx(-2 / 8)      # seq-mean would give -0.5
    assert float(masked_mean(torch.ones(3), torch.zeros(3))) == 0.0   # an empty mask is 0, not NaN

@settings(max_examples=60, deadline=None)
@given(st.integers(1, 4), st.integers(1, 12), st.integers(0, 2**31 - 1))
def test_unclipped_loss_is_ratio_surrogate(b, n, seed):
    g = torch.Generator().manual_seed(seed)
    logp, old, ref = (torch.randn(b, n, generator=g) * 2 - 3 for _ in range(3))
    adv = torch.randn(b, n, generator=g) * 3
    mask = (torch.rand(b, n, generator=g) > 0.5).float()
    cfg = LossConfig(clip_low=1e6, clip_high=1e6, dual_clip=None, kl_coef=0.0)
    got = igpo_loss(loss_terms(logp, old, ref, adv, cfg), mask, cfg)
    want = masked_mean(-adv * torch.exp(logp - old), mask)
    assert torch.allclose(got, want, rtol=1e-5, atol=1e-6)

def test_a_policy_drifted_far_from_pi_old_gives_finite_gradients():
    "A log-ratio of ±100 (a policy far from π_old after many epochs): clamped as verl does, no inf ratio, no NaN grad"
    logp = torch.tensor([100.0, -100.0, 0.1], requires_grad=True)
    terms = loss_terms(logp, torch.zeros(3), None, torch.tensor([1.0, -1.0, -1.0]))
    terms['pg'].sum().backward()
    assert torch.isfinite(terms['ratio']).all() and torch.isfinite(logp.grad).all()
