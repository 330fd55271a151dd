"""The parts of Taichi's internals that its autodiff tests read (tinyad/taichi_internals.py),
following test_ad_snode_grad_type.py, test_clear_all_gradients.py and the internals half of
test_ad_global_data_access_rule_checker.py: `SNode.ptr` queries, `kernel.autodiff_mode`,
`Tape.calls` / `Tape.modes`, clearing every gradient. Both modes."""
import enum

import numpy as np
import pytest

import tinyad as ti
from tinyad.taichi_internals import AutodiffMode, SNodeGradType

# What a program holds when it imports Taichi's enums from a stand-in module (as Taichi's tests
# do under a harness): another class with the same names. tinyad's members equal them.
ForeignGradType = enum.Enum("SNodeGradType", "PRIMAL ADJOINT DUAL ADJOINT_CHECKBIT")
ForeignMode = enum.Enum("AutodiffMode", "NONE VALIDATION FORWARD REVERSE")


@pytest.mark.parametrize("how", ["needs", "lazy", "place"])
def test_snode_grad_type_names_the_twin_a_place_node_holds(mode, how):
    if how == "needs":
        x = ti.field(ti.f64, shape=3, needs_grad=True, needs_dual=True)
    elif how == "lazy":
        x = ti.field(ti.f64, shape=3)
        ti.root.lazy_grad()
        ti.root.lazy_dual()
    else:
        x = ti.field(ti.f64)
        ti.root.dense(ti.i, 3).place(x, x.grad, x.dual)
    assert x.snode.ptr.get_snode_grad_type() == SNodeGradType.PRIMAL
    assert x.grad.snode.ptr.get_snode_grad_type() == SNodeGradType.ADJOINT
    assert x.dual.snode.ptr.get_snode_grad_type() == SNodeGradType.DUAL
    assert x.grad.snode.ptr.get_snode_grad_type() == ForeignGradType.ADJOINT
    assert x.grad.snode.ptr.get_snode_grad_type() != ForeignGradType.PRIMAL
    # a gradient sits beside its primal: the same parent level, the same shape
    assert x.grad.snode is not x.snode and x.grad.shape == x.shape == (3,)
    if how != "needs":
        assert x.grad.snode.parent() is x.snode.parent()


@pytest.mark.parametrize("debug", [True, False])
def test_adjoint_checkbit_exists_where_taichi_allocates_one(mode, debug):
    ti.init(mode=mode, default_fp=ti.f64, debug=debug)
    x = ti.field(ti.f64)
    y = ti.field(ti.f64)
    ti.root.place(x, x.grad, y)
    z = ti.field(ti.f64, shape=(), needs_grad=True)
    assert x.snode.ptr.has_adjoint_checkbit() is debug
    assert z.snode.ptr.has_adjoint_checkbit() is debug
    assert y.snode.ptr.has_adjoint_checkbit() is False      # no gradient placed
    assert x.grad.snode.ptr.has_adjoint_checkbit() is False  # the gradient itself


def test_autodiff_mode_is_validation_inside_the_tape_only(mode):
    x = ti.field(ti.f64, shape=4, needs_grad=True)
    loss = ti.field(ti.f64, shape=(), needs_grad=True)

    @ti.kernel
    def first():
        loss[None] = x[1] * 3

    @ti.kernel
    def second():
        loss[None] += x[2] * x[2]

    x.from_numpy(np.arange(4.0))
    assert first.autodiff_mode == AutodiffMode.NONE and first.grad.autodiff_mode == \
        AutodiffMode.REVERSE
    with pytest.warns(UserWarning):
        with ti.ad.Tape(loss=loss, validation=True) as tape:
            first()
            second()
            assert [k for k, _ in tape.calls] == [first, second]
            assert all(k.autodiff_mode == ForeignMode.VALIDATION for k, _ in tape.calls)
    assert tape.modes == [AutodiffMode.VALIDATION] * 2
    assert all(k.autodiff_mode == AutodiffMode.NONE for k, _ in tape.calls)
    assert x.grad.to_numpy().tolist() == [0.0, 3.0, 4.0, 0.0]
    with ti.ad.Tape(loss=loss) as plain:
        first()
    assert plain.modes == [AutodiffMode.REVERSE] and plain.calls == [(first, ())]


def test_clear_all_gradients_zeroes_every_layout(mode):
    """test_clear_all_gradients: 0-D, 1-D and 2-D fields under lazy_grad, cleared twice."""
    x, y, z, w = (ti.field(ti.f64) for _ in range(4))
    n = 6
    ti.root.place(x)
    ti.root.dense(ti.i, n).place(y)
    ti.root.dense(ti.i, n).dense(ti.j, n).place(z, w)
    ti.root.lazy_grad()
    x.grad[None] = 3
    y.grad.fill(3)
    z.grad.fill(5)
    w.grad.fill(6)
    y.fill(1.5)
    for _ in range(2):
        ti.ad.clear_all_gradients()
        assert all(not f.grad.to_numpy().any() for f in (x, y, z, w))
    assert (y.to_numpy() == 1.5).all()        # the values stay
