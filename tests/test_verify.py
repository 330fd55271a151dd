"""Gradient verification: ti.ad.verify (sympy and finite differences), ti.ad.formula, the
symbolic interpreter domain, and Taichi's Tape(grad_check=...)."""
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import tinyad as ti


def scalar(name, value=0.0, dtype=ti.f64):
    f = ti.field(dtype, shape=(), needs_grad=True, name=name)
    f[None] = value
    return f


def vector(name, values, dtype=ti.f64):
    f = ti.field(dtype, shape=len(values), needs_grad=True, name=name)
    f.from_numpy(np.array(values, dtype=dtype.np))
    return f


# ---- verify agrees on correct kernels -------------------------------------------------------

def test_polynomial_trig_exp_log(mode):
    x, y, loss = vector("x", [0.3, -1.2, 0.8]), vector("y", [1.5, 0.4, 2.0]), scalar("loss")

    @ti.kernel
    def k():
        for i in x:
            loss[None] += (x[i] ** 3 - 2 * x[i] * y[i] + ti.sin(x[i]) * ti.cos(y[i])
                           + ti.exp(0.5 * x[i]) * ti.log(y[i]) + ti.sqrt(y[i]) / (1 + x[i] ** 2)
                           + ti.tanh(x[i] * y[i]) + ti.atan2(x[i], y[i]))

    report = ti.ad.verify(k, loss, [x, y], method="both")
    assert report.ok and report.truths == ["sympy", "fd"]
    assert len(report.entries) == 6
    for e in report.entries:
        assert abs(e.autodiff - e.sympy) <= 1e-9 * max(1.0, abs(e.sympy))
        assert abs(e.fd - e.sympy) <= 1e-5 * max(1.0, abs(e.sympy))


def test_branches_on_data_and_select(mode):
    x, loss = vector("x", [0.7, -0.4, 1.3, -2.0]), scalar("loss")

    @ti.kernel
    def k():
        for i in x:
            if x[i] > 0:
                loss[None] += ti.sin(x[i]) * 2
            elif x[i] > -1:
                loss[None] += x[i] ** 2
            else:
                loss[None] -= 3 * x[i]
            loss[None] += ti.select(x[i] < 1, x[i] * x[i] * x[i], 4.0 * x[i])

    report = ti.ad.verify(k, loss, x, method="both")
    assert report.ok
    assert "Piecewise" in str(report.formula)


def test_vectors_and_matrices(mode):
    v = ti.Vector.field(3, ti.f64, shape=2, needs_grad=True)
    m = ti.Matrix.field(2, 2, ti.f64, shape=(), needs_grad=True)
    loss = scalar("loss")
    v.from_numpy(np.array([[0.5, -1.0, 2.0], [1.5, 0.25, -0.75]]))
    m.from_numpy(np.array([[1.0, 0.2], [-0.3, 0.8]]))

    @ti.kernel
    def k():
        for i in v:
            w = ti.Vector([v[i][0], v[i][1]])
            loss[None] += v[i].norm() + v[i].dot(v[i].cross(ti.Vector([1.0, 2.0, 3.0])) + v[i])
            loss[None] += (m[None] @ w).norm_sqr() + m[None].determinant() * v[i][2]

    report = ti.ad.verify(k, loss, [v, m], method="both")
    assert report.ok and len(report.entries) == 10
    names = [e.name for e in report.entries]
    assert names[:3] == ["v[0, 0]", "v[0, 1]", "v[0, 2]"] and names[-1] == "m[1, 1]"


def test_inner_loop_with_loop_carried_local(mode):
    x, loss = vector("x", [0.5, 0.9, -0.3]), scalar("loss")

    @ti.kernel
    def k(scale: ti.f64):
        for i in x:
            s = x[i]
            for j in range(4):
                s = s * x[i] * scale + ti.sin(s) * 0.5 + j
            loss[None] += s

    report = ti.ad.verify(lambda: k(0.8), loss, x, method="both")
    assert report.ok


def test_min_max_and_atomic_max(mode):
    x, y = vector("x", [0.2, 1.4, -0.6]), vector("y", [0.9, 0.3, -0.1])
    loss = scalar("loss")

    peak = scalar("peak", -10.0)

    @ti.kernel
    def k():
        for i in x:
            loss[None] += ti.max(x[i], y[i]) * 2 + ti.min(x[i] * y[i], 0.1)
            ti.atomic_max(peak[None], 3 * x[i])

    @ti.kernel
    def m():
        for i in x:
            loss[None] += ti.min(x[i], 0.5) ** 2
        loss[None] += peak[None]

    report = ti.ad.verify(lambda: (k(), m()), loss, [x, y], method="both")
    assert report.ok
    assert "Max" in str(report.formula) and "Min" in str(report.formula)


def test_several_kernels_a_while_loop_and_an_intermediate_field(mode):
    x, loss = vector("x", [0.4, 1.1, 0.7]), scalar("loss")
    y = ti.field(ti.f64, shape=3, needs_grad=True)

    @ti.kernel
    def square():
        for i in x:
            y[i] = x[i] * x[i]

    @ti.kernel
    def total():
        for i in y:
            j = 0
            while j < 2:
                loss[None] += y[i] * ti.cos(x[i]) + j
                j += 1

    report = ti.ad.verify(lambda: (square(), total()), loss, [x, y], method="both")
    assert report.ok
    assert [e.sympy for e in report.entries[3:]] == [0.0, 0.0, 0.0]   # y is overwritten


def test_stop_grad_is_respected_and_shown(mode):
    x, loss = vector("x", [0.5, 2.0]), scalar("loss")

    @ti.kernel
    def k():
        for i in x:
            loss[None] += ti.stop_grad(x[i] * x[i]) * x[i]

    assert ti.ad.verify(k, loss, x).ok
    assert str(ti.ad.formula(k, loss, x)) == "x_0*stop_grad(x_0**2) + x_1*stop_grad(x_1**2)"


def test_f32_programs_get_f32_tolerances(mode):
    ti.init(mode=mode, default_fp=ti.f32)
    x, loss = vector("x", [0.3, 0.6, 0.9], ti.f32), scalar("loss", dtype=ti.f32)

    @ti.kernel
    def k():
        for i in x:
            loss[None] += ti.exp(x[i]) * ti.sin(3.0 * x[i]) / (1.0 + x[i])

    report = ti.ad.verify(k, loss, x, method="both")
    assert report.ok
    assert max(e.error for e in report.entries) > 1e-9   # f32 rounding, within f32 tolerance


def test_with_both_sympy_decides_and_finite_differences_add_a_note(mode):
    x, loss = vector("x", [1.5, 0.7]), scalar("loss")

    @ti.kernel
    def k():
        for i in x:
            loss[None] += ti.floor(ti.stop_grad(x[i]) * 2) * x[i]   # a jump at x = 1.5

    report = ti.ad.verify(k, loss, x, method="both")
    assert report.ok and [e.truth for e in report.entries] == [3.0, 1.0]
    assert report.entries[0].fd > 10   # every step crosses the jump
    assert report.notes == ["finite differences disagree with sympy at x[0]: a kink or a jump "
                            "within a step of the point?"]


# ---- verify catches wrong gradients -----------------------------------------------------------

def _cube_with_gradient(x, loss, wrong):
    @ti.kernel
    def cube():
        for i in x:
            loss[None] += x[i] ** 3

    @ti.kernel
    def cube_grad():
        for i in x:
            x.grad[i] += (2.0 if wrong else 3.0) * x[i] * x[i] * loss.grad[None]

    @ti.ad.grad_replaced
    def forward():
        cube()

    @ti.ad.grad_for(forward)
    def backward():
        cube_grad()
    return forward


def test_a_correct_custom_gradient_passes(mode):
    x, loss = vector("x", [0.5, -1.5]), scalar("loss")
    assert ti.ad.verify(_cube_with_gradient(x, loss, wrong=False), loss, x, method="both").ok


def test_a_wrong_custom_gradient_is_caught(mode):
    x, loss = vector("x", [0.5, -1.5, 2.0]), scalar("loss")
    forward = _cube_with_gradient(x, loss, wrong=True)
    with pytest.raises(ti.GradientMismatchError) as info:
        ti.ad.verify(forward, loss, x)
    message = str(info.value)
    assert "3 of 3 elements disagree with sympy" in message
    assert "WRONG" in message and "x[2]" in message
    assert message.index("x[2]") < message.index("x[0]")   # the worst element comes first
    assert "loss = x_0**3 + x_1**3 + x_2**3" in message
    data = info.value.report.to_dict()
    assert data["ok"] is False and data["formula"] == "x_0**3 + x_1**3 + x_2**3"
    worst = max(data["entries"], key=lambda e: e["error"])
    assert worst["name"] == "x[2]" and worst["autodiff"] == 8.0 and worst["sympy"] == 12.0
    assert isinstance(info.value, ti.TinyadError)


def test_a_global_data_access_rule_violation_is_caught(mode):
    ti.init(mode=mode, default_fp=ti.f64, check="off")   # no rule checker: let it through
    x, b, loss = vector("x", [1.0, 2.0, 3.0]), scalar("b", 10.0), scalar("loss")

    @ti.kernel
    def broke_rule_1():   # from the Taichi docs: the adjoint reads b after `b += 100`
        loss[None] = x[1] * b[None]
        b[None] += 100

    with pytest.raises(ti.GradientMismatchError) as info:
        ti.ad.verify(broke_rule_1, loss, [x, b], method="both")
    report = info.value.report
    [wrong] = report.mismatches
    assert wrong.name == "x[1]" and wrong.autodiff == 110.0 and wrong.sympy == 10.0
    assert abs(wrong.fd - 10.0) < 1e-6 and report.notes == []   # fd agrees with sympy
    assert b[None] == 10.0 and x.to_numpy().tolist() == [1.0, 2.0, 3.0]   # restored


def test_report_without_raising(mode):
    x, loss = vector("x", [1.0, 2.0]), scalar("loss")
    forward = _cube_with_gradient(x, loss, wrong=True)
    report = ti.ad.verify(forward, loss, x, method="fd", raise_on_mismatch=False)
    assert not report.ok and not report and report.truths == ["fd"]
    assert [e.name for e in report.worst(1)] == ["x[1]"]
    assert set(report.to_dict()) >= {"ok", "loss", "params", "entries", "notes", "formula"}
    assert "gradient of loss w.r.t. x: 2 of 2 elements disagree" in report.render()


# ---- side effects, options and limits -----------------------------------------------------------

def test_fields_are_restored_and_grads_hold_autodiff(mode):
    x, loss, out = vector("x", [0.5, 1.5]), scalar("loss", 7.0), vector("out", [0.0, 0.0])

    @ti.kernel
    def k():
        for i in x:
            out[i] = x[i] * 2
            loss[None] += out[i] ** 2

    ti.ad.verify(k, loss, x, method="both")
    assert x.to_numpy().tolist() == [0.5, 1.5] and out.to_numpy().tolist() == [0.0, 0.0]
    assert loss[None] == 7.0
    assert x.grad.to_numpy().tolist() == [4.0, 12.0]   # 8 x: left by the Tape


def test_a_missing_needs_grad_is_caught(mode):
    ti.init(mode=mode, default_fp=ti.f64, check="off")   # no rule checker: let it through
    x, loss = vector("x", [0.5, 1.5]), scalar("loss")
    out = ti.field(ti.f64, shape=2)   # no needs_grad: the gradient through it is silently 0

    @ti.kernel
    def k():
        for i in x:
            out[i] = x[i] * 2
            loss[None] += out[i] ** 2

    with pytest.raises(ti.GradientMismatchError, match="2 of 2 elements disagree"):
        ti.ad.verify(k, loss, x)


def test_at_checks_at_other_values_and_restores(mode):
    x, loss = vector("x", [0.0, 0.0]), scalar("loss")

    @ti.kernel
    def k():
        for i in x:
            loss[None] += ti.log(x[i])

    report = ti.ad.verify(k, loss, x, at={x: [2.0, 4.0]})
    assert [e.sympy for e in report.entries] == [0.5, 0.25]
    assert x.to_numpy().tolist() == [0.0, 0.0]


def test_too_many_symbols(mode):
    x, loss = ti.field(ti.f64, shape=40, needs_grad=True), scalar("loss")
    x.from_numpy(np.linspace(0.1, 2.0, 40))

    @ti.kernel
    def k():
        for i in x:
            loss[None] += x[i] * x[i]

    with pytest.raises(ti.TinyadError, match="40 parameter elements would need 40 symbols, "
                                             "more than max_symbols=10"):
        ti.ad.verify(k, loss, x, max_symbols=10)
    report = ti.ad.verify(k, loss, x, max_symbols=10, fallback=True)
    assert report.ok and report.truths == ["fd"] and "sympy gave up" in report.notes[0]
    report = ti.ad.verify(k, loss, x, method="both", max_symbols=10)
    assert report.ok and report.truths == ["fd"]


def test_a_formula_that_grows_too_big_falls_back(mode):
    x, loss = vector("x", [0.3, 0.5]), scalar("loss")

    @ti.kernel
    def k():
        for i in x:
            v = x[i]
            for j in range(12):
                if v > 0.2:
                    v = v * 0.7 + 0.1 * ti.cos(v)
                else:
                    v = v + 0.3 * ti.sin(v)
            loss[None] += v

    with pytest.raises(ti.TinyadError, match="sympy cannot verify this gradient: the formula "
                                             "grew past 20000 terms"):
        ti.ad.verify(k, loss, x)
    assert ti.ad.verify(k, loss, x, method="both").truths == ["fd"]


def test_an_index_that_depends_on_a_parameter(mode):
    x, loss, table = vector("x", [0.3, 1.6]), scalar("loss"), ti.field(ti.f64, shape=4)
    table.from_numpy(np.array([1.0, 2.0, 3.0, 4.0]))

    @ti.kernel
    def k():
        for i in x:
            loss[None] += table[ti.cast(x[i] * 2, ti.i32)] * x[i]

    with pytest.raises(ti.TinyadError, match="an index or loop bound depends on the parameters"):
        ti.ad.verify(k, loss, x)
    report = ti.ad.verify(k, loss, x, fallback=True)
    assert report.ok and [e.fd for e in report.entries] == pytest.approx([1.0, 4.0])


def test_argument_errors(mode):
    x, loss = vector("x", [1.0]), scalar("loss")
    n = ti.field(ti.i32, shape=2)

    @ti.kernel
    def k():
        loss[None] += x[0]

    with pytest.raises(ti.TinyadError, match="method must be one of"):
        ti.ad.verify(k, loss, x, method="exact")
    with pytest.raises(ti.TinyadError, match="only float fields"):
        ti.ad.verify(k, loss, [n])
    with pytest.raises(ti.TinyadError, match="0-D field"):
        ti.ad.verify(k, x, [x])
    with pytest.raises(ti.TinyadError, match="cannot run inside a Tape"):
        with ti.ad.Tape(loss):
            ti.ad.verify(k, loss, x)
    with pytest.raises(ti.TinyadError, match="mode must be 'rev' or 'fwd'"):
        ti.ad.verify(k, loss, x, mode="forward")
    with pytest.raises(ti.TinyadError, match="has no dual field"):
        ti.ad.forward_reverse_check(k, loss, x)


# ---- formulas ---------------------------------------------------------------------------------

def test_formula_prints_readably(mode):
    x, w, loss = vector("x", [0.1, 0.2]), scalar("w", 3.0), scalar("loss")

    @ti.kernel
    def k(c: ti.f64):
        for i in x:
            loss[None] += ti.sin(x[i]) ** 2 + c * x[i] * w[None]

    assert str(ti.ad.formula(lambda: k(0.5), loss, x)) == \
        "3*x_0/2 + 3*x_1/2 + sin(x_0)**2 + sin(x_1)**2"
    assert str(ti.ad.formula(lambda: k(0.5), loss)) == \
        "w*x_0/2 + w*x_1/2 + sin(x_0)**2 + sin(x_1)**2"   # default: every needs_grad field
    assert loss[None] == 0.0 and x.to_numpy().tolist() == [0.1, 0.2]


def test_formula_names_multi_d_elements(mode):
    m, loss = ti.field(ti.f64, shape=(2, 2), needs_grad=True, name="m"), scalar("loss")

    @ti.kernel
    def k():
        for i, j in m:
            if i == j:
                loss[None] += m[i, j] * (i + 1)

    assert str(ti.ad.formula(k, loss, m)) == "m[0,0] + 2*m[1,1]"


# ---- the symbolic domain by itself ----------------------------------------------------------

def test_symbolic_interpreter_merges_branch_writes_with_piecewise(mode):
    import sympy as sp

    from tinyad.interp import Program
    from tinyad.interp.symbolic import SymbolicDomain, SymbolicMemory
    x, y = vector("x", [0.0, 0.0]), ti.field(ti.f64, shape=2)

    @ti.kernel
    def k():
        for i in x:
            if x[i] > 1:
                y[i] = x[i] * 2
            y[1] += 1.0

    k()
    xs = sp.symbols("a b", real=True)
    memory = SymbolicMemory(seeds={x: np.array(xs, dtype=object)})
    Program(k.ir, SymbolicDomain()).run((), memory=memory)
    a, b = xs
    assert str(memory.value(y, (0,))) == "Piecewise((2*a, a > 1), (0, True))"
    # y starts from the numeric run's [0, 2]: iteration 0 adds 1, iteration 1 maybe stores 2b
    assert str(memory.value(y, (1,))) == "Piecewise((2*b, b > 1), (3, True)) + 1"
    assert y.to_numpy().tolist() == [0.0, 2.0]   # the real field saw only the numeric run


# ---- Tape(grad_check=...) ---------------------------------------------------------------------

def test_tape_grad_check_passes_on_a_correct_kernel(mode, capsys):
    x, loss = vector("x", [0.5, 1.2, -0.7]), scalar("loss")
    v = ti.Vector.field(2, ti.f64, shape=2, needs_grad=True)
    v.from_numpy(np.array([[0.3, 0.4], [1.0, -2.0]]))

    @ti.kernel
    def k():
        for i in x:
            loss[None] += ti.sin(x[i]) * x[i] ** 2
        for i in v:
            loss[None] += v[i].norm()

    with ti.ad.Tape(loss, grad_check=[x, v]):
        k()
    out = capsys.readouterr().out
    assert "variable 0 passes grad check" in out and "variable 1 passes grad check" in out
    assert x.to_numpy().tolist() == [0.5, 1.2, -0.7]   # restored, then the forward replayed
    assert loss[None] == pytest.approx(float(np.sum(np.sin([0.5, 1.2, -0.7]) *
                                                    np.square([0.5, 1.2, -0.7])) + 0.5 + 5 ** 0.5))


def test_tape_grad_check_fails_on_a_wrong_custom_gradient(mode, capsys):
    x, loss = vector("x", [0.5, -1.5, 2.0]), scalar("loss")
    forward = _cube_with_gradient(x, loss, wrong=True)
    with pytest.raises(AssertionError, match="Not all variables pass grad check"):
        with ti.ad.Tape(loss, grad_check=[x]):
            forward()
    assert "variable 0 has relative error" in capsys.readouterr().out


def test_tape_grad_check_needs_an_f64_loss(mode):
    ti.init(mode=mode, default_fp=ti.f32)
    x, loss = vector("x", [0.5], ti.f32), scalar("loss", dtype=ti.f32)
    with pytest.raises(ti.TinyadError, match="Only f64 is supported when checking grad."):
        with ti.ad.Tape(loss, grad_check=[x]):
            pass


# ---- sympy is imported only when asked --------------------------------------------------------

def test_running_kernels_does_not_import_sympy(tmp_path):
    script = tmp_path / "prog.py"
    script.write_text(textwrap.dedent("""
        import sys
        import tinyad as ti
        ti.init(default_fp=ti.f64)
        x = ti.field(ti.f64, shape=3, needs_grad=True)
        loss = ti.field(ti.f64, shape=(), needs_grad=True)

        @ti.kernel
        def k():
            for i in x:
                loss[None] += ti.sin(x[i]) * x[i]

        with ti.ad.Tape(loss):
            k()
        assert "sympy" not in sys.modules, "running kernels imported sympy"
        ti.ad.verify(k, loss, x)
        assert "sympy" in sys.modules
        print("ok")
    """))
    result = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "ok"


# ---- the finite-difference corpus, checked by verify --------------------------------------

def _corpus():
    try:
        import test_corpus_fd
    except ImportError:   # the corpus is its own test module; without it there is nothing here
        return None, []
    return test_corpus_fd, [p for p in test_corpus_fd.CASES if not p.marks]


CORPUS, CORPUS_CASES = _corpus()


@pytest.mark.parametrize("index", range(len(CORPUS_CASES)), ids=[p.id for p in CORPUS_CASES])
def test_verify_agrees_on_the_corpus(mode, index):
    """Every kernel of tests/test_corpus_fd.py: sympy where the formula is small enough,
    finite differences where it is not (long loop-carried chains, data-dependent indices)."""
    corpus, cases = CORPUS, CORPUS_CASES
    corpus.RNG = np.random.default_rng(20240607)
    built = cases[index].values[0]()
    report = ti.ad.verify(built.run, built.loss, built.params, method="both", fallback=True)
    assert report.ok
