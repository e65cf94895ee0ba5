"""Unstable sorts judged honestly: tied elements may come in any order, a wrong index never passes."""

import torch
from torch.testing._internal.opinfo.core import SampleInput

from jaxdev.audit import check
from jaxdev.audit.facts import TIED_INDICES

X = torch.tensor([3, 1, 3, 1, 2], dtype=torch.int8)


def judge(op, sample, actual):
    expected = getattr(torch, op)(sample.input, *sample.args, **sample.kwargs)
    return check.compare_tied(TIED_INDICES[op], sample, actual, expected, 0.0, 0.0)


def test_sort_accepts_any_order_of_ties_and_catches_a_wrong_index():
    sample = SampleInput(X)
    values, cpu = torch.sort(X)
    assert values.tolist() == [1, 1, 2, 3, 3]
    swapped = cpu.clone()
    swapped[[0, 1]] = cpu[[1, 0]]  # the two 1s in the other order
    swapped[[3, 4]] = cpu[[4, 3]]  # the two 3s too
    assert not torch.equal(swapped, cpu)
    assert judge("sort", sample, (values, swapped)) is None
    # an index that points at another value is wrong
    wrong = cpu.clone()
    wrong[2] = cpu[3]
    verdict = judge("sort", sample, (values, wrong))
    assert verdict.status == "wrong" and "gather another value" in verdict.reason
    # right values everywhere, but an element twice: not a permutation
    repeated = cpu.clone()
    repeated[1] = cpu[0]
    verdict = judge("sort", sample, (values, repeated))
    assert verdict.status == "wrong" and "not a permutation" in verdict.reason
    # out of range
    verdict = judge("sort", sample, (values, cpu + 5))
    assert verdict.status == "wrong" and "out of range" in verdict.reason
    # wrong values are wrong whatever the indices
    assert judge("sort", sample, (values.flip(0), cpu.flip(0))).status == "wrong"


def test_a_stable_sort_must_match_cpu_exactly():
    sample = SampleInput(X, kwargs={"stable": True})
    values, cpu = torch.sort(X, stable=True)
    swapped = cpu.clone()
    swapped[[0, 1]] = cpu[[1, 0]]
    assert judge("sort", sample, (values, swapped)).status == "wrong"
    assert judge("sort", sample, (values, cpu)) is None


def test_argsort_along_a_dim_with_descending():
    x = torch.tensor([[2.0, 2.0, 1.0], [0.0, float("nan"), float("nan")]])
    sample = SampleInput(x, args=(1, True))
    cpu = torch.argsort(x, 1, True)
    other = cpu.clone()
    other[0, [0, 1]] = cpu[0, [1, 0]]  # the tied 2.0s
    other[1, [0, 1]] = cpu[1, [1, 0]]  # the NaNs (sorted first when descending)
    assert not torch.equal(other, cpu)
    assert judge("argsort", sample, other) is None
    broken = cpu.clone()
    broken[0, [0, 2]] = cpu[0, [2, 0]]  # 1.0 before 2.0: gathers another value
    assert judge("argsort", sample, broken).status == "wrong"


def test_signed_zeros_are_not_ties_for_the_gather():
    x = torch.tensor([0.0, -0.0])
    sample = SampleInput(x)
    values, cpu = torch.sort(x)
    # indices swapped but values kept: gathering gives the other zero, bit for bit different
    assert judge("sort", sample, (values, cpu.flip(0))).status == "wrong"
    # values and indices swapped together: a valid arrangement (the values compare equal to CPU's)
    assert judge("sort", sample, (values.flip(0), cpu.flip(0))) is None


def test_topk_and_kthvalue_pick_any_tied_element():
    x = torch.tensor([[5, 3, 3, 1], [4, 4, 4, 0]], dtype=torch.int16)
    sample = SampleInput(x, args=(2, 1))
    values, cpu = torch.topk(x, 2, 1)
    assert values.tolist() == [[5, 3], [4, 4]]
    other = torch.tensor([[0, 2], [2, 0]])
    assert judge("topk", sample, (values, other)) is None
    assert judge("topk", sample, (values, torch.tensor([[0, 3], [2, 0]]))).status == "wrong"  # 1 is not 3

    # kthvalue drops the dim unless keepdim: the 2nd smallest of each row
    for keepdim in (False, True):
        sample = SampleInput(x, args=(2, 1, keepdim))
        values, cpu = torch.kthvalue(x, 2, 1, keepdim)
        flat = cpu.flatten()
        alternative = torch.stack([3 - flat[0], (flat[1] + 1) % 3]).view(cpu.shape)  # another tied element
        assert not torch.equal(alternative, cpu)
        assert judge("kthvalue", sample, (values, alternative)) is None
        assert judge("kthvalue", sample, (values, torch.tensor([0, 3]).view(cpu.shape))).status == "wrong"


def test_mode_and_median_by_keyword_dim():
    x = torch.tensor([[1.0, 2.0, 1.0, 2.0, 2.0], [7.0, 7.0, 7.0, 3.0, 3.0]])
    sample = SampleInput(x, kwargs={"dim": -1, "keepdim": False})
    values, cpu = torch.median(x, dim=-1)
    assert values.tolist() == [2.0, 7.0]
    # each row's median is at several positions (2.0 at 1, 3, 4; 7.0 at 0, 1, 2): take one CPU did not
    alternative = torch.where(cpu == torch.tensor([1, 0]), torch.tensor([3, 1]), torch.tensor([1, 0]))
    assert not torch.equal(alternative, cpu)
    assert judge("median", sample, (values, alternative)) is None
    assert judge("median", sample, (values, torch.tensor([0, 2]))).status == "wrong"
    values, cpu = torch.mode(x)
    sample = SampleInput(x)
    alternative = torch.where(cpu == torch.tensor([3, 1]), torch.tensor([4, 2]), torch.tensor([3, 1]))
    assert not torch.equal(alternative, cpu)
    assert judge("mode", sample, (values, alternative)) is None
    assert judge("mode", sample, (values, torch.tensor([0, 1]))).status == "wrong"


def test_gradients_may_land_on_any_tied_element_but_not_elsewhere():
    x = torch.tensor([[2.0, 1.0, 2.0, 0.0], [5.0, 5.0, float("nan"), float("nan")]])
    seeds = torch.tensor([[10.0, 20.0, 30.0, 40.0], [1.0, 2.0, 3.0, 4.0]])
    for op, args, forward in (
        ("sort", (1,), lambda t: torch.sort(t, 1).values),
        ("msort", (), lambda t: torch.msort(t.T).T),  # msort sorts dim 0
        ("topk", (2, 1), lambda t: torch.topk(t, 2, 1).values),
    ):
        sample = SampleInput(x.T.contiguous() if op == "msort" else x, args=args)
        leaf = sample.input.clone().requires_grad_()
        out = forward(leaf.T if op == "msort" else leaf)
        (cpu,) = torch.autograd.grad(out, leaf, seeds[:, : out.shape[1]] if op == "topk" else seeds)
        d = 0 if op == "msort" else 1
        swapped = cpu.clone()
        # the tied pairs: (2.0 at 0 and 2) and (5.0 at 0 and 1) / (NaN at 2 and 3) in row 1
        pairs = [((0, 0), (0, 2)), ((1, 0), (1, 1)), ((1, 2), (1, 3))]
        for a, b in pairs:
            a, b = (a[::-1], b[::-1]) if d == 0 else (a, b)
            swapped[a], swapped[b] = cpu[b].clone(), cpu[a].clone()
        assert not torch.equal(swapped, cpu)
        rule = TIED_INDICES[op]
        assert check.compare_tied_grads(rule, sample, (swapped,), (cpu,), 0.0, 0.0) is None, op
        # the gradients of the 1.0 and a 2.0 swapped: they are not tied, so it is wrong
        moved = cpu.clone()
        one, two = ((1, 0), (0, 0)) if d == 0 else ((0, 1), (0, 0))
        assert cpu[one] != cpu[two]
        moved[two], moved[one] = cpu[one].clone(), cpu[two].clone()
        verdict = check.compare_tied_grads(rule, sample, (moved,), (cpu,), 0.0, 0.0)
        assert verdict.status == "wrong" and "reordering within tied elements" in verdict.reason, op
        # stable=True: the order is specified, no reordering allowed
        stable = SampleInput(sample.input, args=args, kwargs={"stable": True})
        if op == "sort" and not torch.equal(swapped, cpu):
            assert check.compare_tied_grads(rule, stable, (swapped,), (cpu,), 0.0, 0.0).status == "wrong"
