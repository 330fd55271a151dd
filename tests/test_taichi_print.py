"""print() in kernels, as in Taichi 1.7.4: values joined by spaces, Taichi's default formats
(f32 %f, f64 %.12f, integers %d), vectors as [a, b], f-strings, sep= and end=. The adjoint kernel
prints nothing; both modes print the same text."""
import pytest

import tinyad as ti


def test_values_are_joined_by_spaces_in_taichis_formats(mode, capsys):
    a = ti.field(ti.f32, shape=())
    b = ti.field(ti.f64, shape=())

    @ti.kernel
    def show(n: ti.i32):
        a[None] = 0.1
        b[None] = 0.1
        print("n =", n, a[None], b[None], n * 2 + 1)

    show(7)
    assert capsys.readouterr().out == "n = 7 0.100000 0.100000000000 15\n"


def test_vectors_matrices_fstrings_sep_and_end(f32_mode, capsys):
    @ti.kernel
    def show(k: ti.i32):
        v = ti.Vector([1.0, 2.5]) * k
        m = ti.Matrix([[1, 2], [3, 4]]) * k
        print(v, m, sep=" | ")
        print(f"k={k}, half={k / 2:.2f}, {{literal}}", end="!\n")
        print("no newline", end="")
        print(" then one")

    show(2)
    assert capsys.readouterr().out == ("[2.000000, 5.000000] | [[2, 4], [6, 8]]\n"
                                       "k=2, half=1.00, {literal}!\n"
                                       "no newline then one\n")


def test_prints_come_in_launch_order_and_the_adjoint_prints_nothing(mode, capsys):
    x = ti.field(ti.f64, shape=3, needs_grad=True)
    loss = ti.field(ti.f64, shape=(), needs_grad=True)

    @ti.kernel
    def step(t: ti.i32):
        for i in ti.static(range(3)):
            print("step", t, "i", i)
            loss[None] += x[i] * x[i] * t

    x.from_numpy(__import__("numpy").array([1.0, 2.0, 3.0]))
    with ti.ad.Tape(loss=loss):
        step(1)
        step(2)
    lines = capsys.readouterr().out.splitlines()
    assert lines == [f"step {t} i {i}" for t in (1, 2) for i in range(3)]
    # d/dx_i sum_t t x_i^2 = 2 x_i (1 + 2): the print changes no gradient
    assert x.grad.to_numpy().tolist() == pytest.approx([6.0, 12.0, 18.0])


def test_a_parallel_loop_prints_every_iteration(mode, capsys):
    @ti.kernel
    def each():
        for i in range(300):          # fast mode may run these on threads: any order
            print("i", i)

    each()
    lines = capsys.readouterr().out.splitlines()
    assert sorted(lines) == sorted(f"i {i}" for i in range(300))


def test_print_shows_in_the_ir_and_only_in_the_primal(mode):
    x = ti.field(ti.f64, shape=(), needs_grad=True)
    y = ti.field(ti.f64, shape=(), needs_grad=True)

    @ti.kernel
    def k():
        print("x is", x[None])
        y[None] = x[None] ** 2

    x[None] = 3.0
    k()
    y.grad[None] = 1.0
    k.grad()
    assert x.grad[None] == pytest.approx(6.0)
    assert "print('x is {:.12f}\\n', x[])" in str(k.ir)
    assert "print(" not in str(k.grad.ir)


def test_print_rejects_what_it_cannot_show(mode):
    x = ti.field(ti.f32, shape=2)

    @ti.kernel
    def to_file():
        print(x[0], file=None)

    @ti.kernel
    def a_field():
        print(x)

    with pytest.raises(ti.TinyadSyntaxError, match="sep= and end="):
        to_file()
    with pytest.raises(ti.TinyadTypeError, match="cannot show"):
        a_field()


def test_a_vector_or_matrix_in_python_scope_prints_as_taichis(mode, capsys):
    """print(x[i]) as Taichi 1.7.4 prints it: numpy's str of its values, in the field's dtype
    (DFSPH_difftaichi's trial programs print their particles so)."""
    x = ti.Vector.field(3, ti.f32, shape=2)
    m = ti.Matrix.field(2, 2, ti.f64, shape=())
    x[0] = [0.1, 0.2, 0.3]
    m[None] = [[1.5, 2], [3, 4]]
    print(x[0], m[None])
    print(ti.Vector([1, 2]), repr(x[1]))
    assert capsys.readouterr().out == ("[0.1        0.2        0.30000001] [[1.5 2. ]\n [3.  4. ]]\n"
                                       "[1 2] [0. 0. 0.]\n")
