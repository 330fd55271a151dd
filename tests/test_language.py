"""Forward semantics of the kernel language (values, not gradients), each against numpy or an
exact expectation."""
import numpy as np
import pytest

import tinyad as ti


def test_while_and_break_in_forward_kernels(mode):
    out = ti.field(ti.i32, shape=5)

    @ti.kernel
    def collatz_steps():
        for i in out:
            n = i + 3
            steps = 0
            while n != 1:
                if n % 2 == 0:
                    n = n // 2
                else:
                    n = 3 * n + 1
                steps += 1
            out[i] = steps

    @ti.kernel
    def first_square_above(limit: ti.i32) -> ti.i32:
        found = 0
        ti.loop_config(serialize=True)  # an outermost loop must be serial to break
        for k in range(100):
            if k * k > limit:
                found = k
                break
        return found

    collatz_steps()
    def steps(n):
        count = 0
        while n != 1:
            n, count = (n // 2 if n % 2 == 0 else 3 * n + 1), count + 1
        return count
    assert out.to_numpy().tolist() == [steps(i + 3) for i in range(5)]
    assert first_square_above(50) == 8


def test_kernel_return_values_and_scalar_arguments(mode):
    x = ti.field(ti.f64, shape=4)
    x.from_numpy(np.array([1.0, 2.0, 3.0, 4.0]))

    @ti.kernel
    def weighted_sum(w: ti.f64, skip: ti.i32) -> ti.f64:
        total = 0.0
        for i in range(4):
            if i != skip:
                total += w * x[i]
        return total

    assert weighted_sum(0.5, 1) == pytest.approx(0.5 * (1 + 3 + 4))


def test_integer_arithmetic_follows_taichi(mode):
    out = ti.field(ti.f64, shape=6)
    iout = ti.field(ti.i32, shape=4)

    @ti.kernel
    def k(a: ti.i32, b: ti.i32):
        out[0] = a / b            # true division gives a float
        out[1] = ti.cast(2.7, ti.i32)
        out[2] = ti.cast(-2.7, ti.i32)
        out[3] = float(a) ** 0.5
        out[4] = ti.floor(-2.5)
        out[5] = ti.round(2.5)
        iout[0] = a // b
        iout[1] = a % b
        iout[2] = -a // b         # floor division, like Python
        iout[3] = -a % b          # result takes the divisor's sign, like Python

    k(7, 2)
    assert out.to_numpy().tolist() == [3.5, 2, -2, pytest.approx(7 ** 0.5), -3, 2]
    assert iout.to_numpy().tolist() == [3, 1, -4, 1]


def test_f32_kernels_round_like_f32(f32_mode):
    x = ti.field(ti.f32, shape=())

    @ti.kernel
    def k():
        x[None] = 0.1 + 0.2

    k()
    assert x[None] == float(np.float32(0.1) + np.float32(0.2))
    assert x.dtype == ti.f32 and x.to_numpy().dtype == np.float32


def test_a_vector_made_with_dt_keeps_its_type_in_a_local(f32_mode):
    """Under the default f32, `ti.Vector.zero(ti.f64, 2)` and `ti.Vector([...], dt=ti.f64)`
    make f64 locals, as in Taichi (PlasticineLab's f64 SVD gradient starts from such zeros):
    they hold 1 + 1e-12, which an f32 local rounds to 1."""
    x = ti.field(ti.f64, shape=())
    out = ti.field(ti.f64, shape=3)

    @ti.kernel
    def k():
        z = ti.Vector.zero(ti.f64, 2)
        z[0] = x[None]
        v = ti.Vector([0, 1], dt=ti.f64)
        v[0] = x[None]
        m = ti.Matrix.identity(ti.f64, 2)
        m[0, 1] = x[None]
        out[0], out[1], out[2] = z[0] - 1, v[0] - 1, m[0, 1] - 1

    x[None] = 1 + 1e-12
    k()
    assert out.to_numpy() == pytest.approx([1e-12] * 3, rel=1e-3, abs=0)
    assert ti.Vector([1, 2], dt=ti.f64).to_numpy().dtype == np.float64


def test_precision_loss_warns_at_the_users_line(mode):
    x = ti.field(ti.f64, shape=())

    @ti.kernel
    def k():
        a = 1
        a = x[None] * 2.5
        x[None] = a

    x[None] = 1.0
    with pytest.warns(UserWarning, match="Local store may lose precision: i32 <- f64"):
        k()
    assert x[None] == 2


def test_static_loops_ifs_and_closures(mode):
    weights = [1.0, 10.0, 100.0]
    use_offset = True
    x = ti.field(ti.f64, shape=3)

    @ti.kernel
    def k():
        for i in ti.static(range(3)):
            x[i] = weights[i]
            if ti.static(use_offset and i == 2):
                x[i] += 0.5

    k()
    assert x.to_numpy().tolist() == [1.0, 10.0, 100.5]


def test_ndrange_offsets_grouped_and_struct_for(mode):
    grid = ti.field(ti.i32, shape=(4, 5))
    box = ti.field(ti.i32, shape=(4, 5))
    vec = ti.Vector.field(2, ti.i32, shape=(4, 5))

    @ti.kernel
    def k():
        for i, j in grid:
            grid[i, j] = 10 * i + j
        for i, j in ti.ndrange((1, 3), (2, 5)):
            box[i, j] = 1
        for I in ti.grouped(vec):
            vec[I] = I

    k()
    assert grid.to_numpy().tolist() == [[10 * i + j for j in range(5)] for i in range(4)]
    expected = np.zeros((4, 5), int)
    expected[1:3, 2:5] = 1
    assert box.to_numpy().tolist() == expected.tolist()
    assert vec.to_numpy()[3, 4].tolist() == [3, 4]


def test_atomics_return_old_values(mode):
    counter = ti.field(ti.i32, shape=())
    slots = ti.field(ti.i32, shape=6)
    best = ti.field(ti.f64, shape=2)

    @ti.kernel
    def k():
        for i in range(6):
            slot = ti.atomic_add(counter[None], 1)
            slots[slot] = i
        for i in range(6):
            ti.atomic_max(best[0], ti.sin(float(i)))
            ti.atomic_min(best[1], ti.sin(float(i)))

    k()
    assert counter[None] == 6
    assert sorted(slots.to_numpy().tolist()) == list(range(6))
    assert best.to_numpy().tolist() == [max(0, max(np.sin(range(6)))), min(np.sin(range(6)))]


def test_bitwise_updates_of_a_field_element_are_atomic(mode):
    """In Taichi `flags[j] |= bit` on a field element is an atomic or (and `&=`, `^=`; also
    ti.atomic_and/or/xor, which return the old value). tinyad loaded, computed and stored, so
    parallel iterations on one element lost updates in fast mode (and the checks reported a
    race). 4096 iterations onto 8 elements, against numpy's serial fold; u32 for the full
    32 bits."""
    n = 4096
    target = ti.field(ti.i32, shape=n)
    ors = ti.field(ti.i32, shape=8)
    xors = ti.field(ti.i32, shape=8)
    ands = ti.field(ti.u32, shape=())
    old = ti.field(ti.i32, shape=3)

    @ti.kernel
    def mark():
        for i in range(n):
            ors[target[i]] |= 1 << (i % 5)
            xors[(target[i] + 1) % 8] ^= 1 << (i % 3)
            ands[None] &= ti.u32(0xFFFFFFFF) ^ (ti.u32(1) << ti.u32(i % 7))

    @ti.kernel
    def olds():
        old[0] = ti.atomic_or(ors[0], 256)
        old[1] = ti.atomic_and(ors[0], 7)
        old[2] = ti.atomic_xor(xors[1], 1)

    where = np.random.default_rng(0).integers(0, 8, n).astype(np.int32)
    target.from_numpy(where)
    ands[None] = 0xFFFFFFFF
    mark()
    want_or, want_xor, want_and = np.zeros(8, np.int64), np.zeros(8, np.int64), 0xFFFFFFFF
    for i, j in enumerate(where):
        want_or[j] |= 1 << (i % 5)
        want_xor[(j + 1) % 8] ^= 1 << (i % 3)
        want_and &= 0xFFFFFFFF ^ (1 << (i % 7))
    assert ors.to_numpy().tolist() == want_or.tolist()
    assert xors.to_numpy().tolist() == want_xor.tolist()
    assert int(ands[None]) == want_and
    or0, xor1 = int(ors[0]), int(xors[1])
    olds()
    assert old.to_numpy().tolist() == [or0, or0 | 256, xor1]
    assert (int(ors[0]), int(xors[1])) == ((or0 | 256) & 7, xor1 ^ 1)


def test_bitwise_atomics_need_integers(mode):
    f = ti.field(ti.f32, shape=4)

    @ti.kernel
    def on_float():
        for i in range(4):
            ti.atomic_or(f[i], 1)   # <- error

    with pytest.raises(ti.TinyadTypeError, match="ti.atomic_or needs integers") as info:
        on_float()
    assert info.value.loc.line == on_float.fn.__code__.co_firstlineno + 3


def test_funcs_inline_with_vectors_and_early_returns(mode):
    out = ti.field(ti.f64, shape=4)

    @ti.func
    def clamp01(v):
        if v < 0:
            return 0.0
        if v > 1:
            return 1.0
        return v

    @ti.func
    def rotate(p, angle):
        c, s = ti.cos(angle), ti.sin(angle)
        return ti.Vector([c * p[0] - s * p[1], s * p[0] + c * p[1]])

    @ti.kernel
    def k():
        out[0] = clamp01(-3.0)
        out[1] = clamp01(0.25)
        q = rotate(ti.Vector([1.0, 0.0]), np.pi / 2)
        out[2] = q.x
        out[3] = q.y + clamp01(7.0)

    k()
    assert out.to_numpy() == pytest.approx([0.0, 0.25, 0.0, 2.0], abs=1e-12)


def test_a_return_nested_in_ifs_with_statements_after_it(mode):
    """Taichi's test_multiple_return: an `if` that returns on one path and goes on on another
    takes what follows into that path. tinyad refused it ("return must be the last
    statement"); now values in both modes, and the gradient through such a func against its
    derivative, piece by piece."""
    counter = ti.field(ti.i32, shape=())

    @ti.func
    def foo(val: ti.i32) -> ti.i32:
        if counter[None] > 10:
            if counter[None] > 20:
                return 1
            counter[None] += 1
        counter[None] += val
        return 0

    @ti.kernel
    def run() -> ti.i32:
        return foo(15) * 100 + foo(10) * 10 + foo(100)

    assert run() == 1 and counter[None] == 26      # Taichi's numbers: 0, 0, 1 and 26

    x = ti.field(ti.f64, shape=3, needs_grad=True)
    loss = ti.field(ti.f64, shape=(), needs_grad=True)

    @ti.func
    def piecewise(v):
        if v > 1.0:
            if v > 2.0:
                return v * v            # v > 2: v^2
            v = 3.0 * v                  # 1 < v <= 2: sin(3v)
        return ti.sin(v)                 # v <= 1: sin(v)

    @ti.kernel
    def total():
        for i in x:
            loss[None] += piecewise(x[i])

    x.from_numpy(np.array([0.5, 1.5, 2.5]))
    with ti.ad.Tape(loss=loss):
        total()
    assert loss[None] == pytest.approx(np.sin(0.5) + np.sin(4.5) + 6.25, rel=1e-12)
    assert x.grad.to_numpy() == pytest.approx([np.cos(0.5), 3 * np.cos(4.5), 5.0], rel=1e-12)


def test_a_func_returns_from_inside_its_loops(mode):
    """Taichi's test_return_in_for / _in_while / _in_if_in_for: a search loop's `return i`.
    tinyad refused it; now a flag ends the search (a `for` loop's later iterations do nothing,
    so no `break`), and a gradient flows through the element the search found."""
    x = ti.field(ti.f64, shape=6, needs_grad=True)
    out = ti.field(ti.i32, shape=5)
    loss = ti.field(ti.f64, shape=(), needs_grad=True)

    @ti.func
    def first_positive():
        for i in range(6):
            if x[i] > 0:
                return i
        return -1

    @ti.func
    def count_down(n: ti.i32) -> ti.i32:
        k = n
        while True:
            k -= 1
            if k < 3:
                return k * 10

    @ti.func
    def pair(t: ti.i32) -> ti.i32:
        for i in range(4):
            for j in range(4):
                if i * j == t:
                    return i * 10 + j
        return -1

    @ti.func
    def squares_up_to_8() -> ti.i32:
        a = 0
        for i in ti.static(range(10)):
            a += i * i
            if ti.static(i == 8):
                return a
        return -5

    @ti.kernel
    def run():
        out[0] = first_positive()
        out[1] = count_down(7)
        out[2] = pair(6)
        out[3] = pair(100)
        out[4] = squares_up_to_8()

    values = np.array([-1.0, -2.0, 3.0, 4.0, -5.0, 6.0])
    x.from_numpy(values)
    run()
    assert out.to_numpy().tolist() == [2, 20, 23, -1, 204]

    @ti.func
    def next_positive_squared(i):
        for j in range(i, 6):
            if x[j] > 0:
                return x[j] * x[j]
        return 0.0

    @ti.kernel
    def total():
        for i in range(6):
            loss[None] += next_positive_squared(i)

    with ti.ad.Tape(loss=loss):
        total()
    found = [2, 2, 2, 3, 5, 5]          # the first positive at or after each i
    assert loss[None] == pytest.approx(sum(values[j] ** 2 for j in found), rel=1e-12)
    expected = np.zeros(6)
    for j in found:
        expected[j] += 2 * values[j]
    assert x.grad.to_numpy() == pytest.approx(expected, rel=1e-12)


def test_a_kernel_returns_under_static_ifs_and_not_under_run_time_ones(mode):
    @ti.kernel
    def pick(a: ti.template()) -> ti.i32:
        if ti.static(a == 1):
            return 1
        elif ti.static(a == 2):
            return 2
        return 3

    assert (pick(1), pick(2), pick(123)) == (1, 2, 3)    # Taichi's test_return_in_static_if

    @ti.kernel
    def run_time(a: ti.f32) -> ti.f32:
        if a > 0:
            return 1.0   # <- error
        return 2.0

    with pytest.raises(ti.TinyadSyntaxError, match="Return inside non-static if") as info:
        run_time(1.0)
    assert info.value.loc.line == run_time.fn.__code__.co_firstlineno + 3


def test_assigning_a_vector_an_expression_of_itself_reads_it_first(mode):
    """`v = R @ v`, `d = d.normalized()`, `g[i] -= g[i].dot(n) * n`: the right-hand side reads
    the whole old value. tinyad wrote the target entry by entry, so later entries read earlier
    new ones (Taichi's mpm_lagrangian_forces example drifted from Taichi's once the body hit
    the circle). Values in both modes, and a gradient through `v = R @ v`."""
    out = ti.field(ti.f64, shape=8)
    g = ti.Vector.field(2, ti.f64, shape=(), needs_grad=True)
    loss = ti.field(ti.f64, shape=(), needs_grad=True)

    @ti.kernel
    def k():
        R = ti.Matrix([[0.0, -1.0], [1.0, 0.0]])
        d = ti.Vector([-0.4, 0.1])
        if out[7] == 0.0:
            d = d.normalized()
        f = ti.Vector([1.0, 2.0])
        f = R @ f
        h = ti.Vector([1.0, 2.0])
        h -= h.dot(ti.Vector([1.0, 1.0])) * ti.Vector([1.0, 1.0])
        out[0], out[1], out[2], out[3], out[4], out[5] = d[0], d[1], f[0], f[1], h[0], h[1]
        g[None] = R @ g[None]
        loss[None] = g[None][0] * 3.0 + g[None][1] ** 2

    g[None] = [1.0, 2.0]
    with ti.ad.Tape(loss):
        k()
    d = np.array([-0.4, 0.1]) / np.hypot(-0.4, 0.1)
    assert out.to_numpy()[:6] == pytest.approx([*d, -2.0, 1.0, -2.0, -1.0], rel=1e-12)
    assert g[None].to_numpy() == pytest.approx([-2.0, 1.0])
    # loss = 3 (R g)_0 + (R g)_1^2 = -3 g_1 + g_0^2: the gradient at g = (1, 2) is (2, -3)
    assert g.grad[None].to_numpy() == pytest.approx([2.0, -3.0], rel=1e-12)


def test_a_func_may_change_an_entry_of_its_vector_argument(mode):
    """Taichi passes a ti.func's arguments by value: its pbf2d example clamps `p[i]` of its
    vector parameter and returns p. tinyad refused the store ("a trace-time value"); now the
    func works on its own copy, and the caller's vector is unchanged."""
    out = ti.Vector.field(2, ti.f64, shape=2)

    @ti.func
    def clamp_first(p):
        if p[0] > 1.0:
            p[0] = 1.0
        p.y += 10.0
        return p

    @ti.kernel
    def k():
        q = ti.Vector([3.0, 4.0])
        out[1] = clamp_first(q)
        out[0] = q

    k()
    assert out.to_numpy().tolist() == [[3.0, 4.0], [1.0, 14.0]]


def test_a_template_parameter_takes_its_callers_local_by_reference(mode):
    """Taichi passes a local to a ti.template() parameter by reference: SPH codes accumulate
    over neighbours with for_all_neighbors(p_i, task, ret), each task adding into `ret`
    (DFSPH_difftaichi). For i = 0, ret = (-s, -s, -s, x_0 s) with s = x_1 + x_2 + x_3, so
    loss = ret[3] + ret[0] has d/dx_0 = s = 9 and d/dx_j = x_0 - 1 = 0, as Taichi 1.7.4 gives."""
    x = ti.field(ti.f64, shape=4, needs_grad=True)
    out = ti.Vector.field(4, ti.f64, shape=(), needs_grad=True)
    counts = ti.field(ti.i32, shape=2)
    loss = ti.field(ti.f64, shape=(), needs_grad=True)

    @ti.func
    def task(i, j, ret: ti.template()):
        ret[3] += x[j] * x[i]
        for k in ti.static(range(3)):
            ret[k] -= x[j]

    @ti.func
    def for_all_neighbors(i, f: ti.template(), ret: ti.template()):
        for j in range(4):
            if j != i:
                f(i, j, ret)

    @ti.func
    def count(c: ti.template(), s: ti.template(), by_value):
        c += 1
        s.n += 2
        by_value += 1

    @ti.kernel
    def gather():
        for i in range(1):
            ret = ti.Vector([0.0, 0.0, 0.0, 0.0])
            for_all_neighbors(i, task, ret)
            out[None] = ret
            c, s, v = 0, ti.Struct(n=0), 0
            count(c, s, v)
            count(c, s=s, by_value=v)
            counts[0], counts[1] = c, s.n * 10 + v

    @ti.kernel
    def total():
        loss[None] = out[None][3] + out[None][0]

    x.from_numpy(np.arange(1.0, 5.0))
    with ti.ad.Tape(loss=loss):
        gather()
        total()
    assert out[None].to_numpy().tolist() == [-9.0, -9.0, -9.0, 9.0]
    assert counts.to_numpy().tolist() == [2, 40]
    assert x.grad.to_numpy().tolist() == [9.0, 0.0, 0.0, 0.0]


def test_integer_vector_types_make_integer_vectors(mode):
    """ti.math.ivec2 is Taichi's i32 vector: ivec2(3.7, 2) is [3, 2] and indexes a field. It
    was the float vec2, so indexing with it was refused."""
    f = ti.field(ti.f32, shape=(4, 4))
    out = ti.field(ti.f64, shape=2)

    @ti.kernel
    def k():
        p = ti.math.ivec2(3.7, 2)
        f[p] = 5.0
        q = ti.math.ivec3(7, 8, 9) // 2
        out[0], out[1] = p[0], q[2]

    k()
    assert (f[3, 2], out[0], out[1]) == (5.0, 3.0, 4.0)


def test_normalized_with_eps_is_taichis(mode):
    """Taichi's v.normalized(eps) is v / (|v| + eps); tinyad computed v / sqrt(|v|^2 + eps),
    which moved DiffTaichi's billiards by 2e-8 at each collision. Value and gradient."""
    v = ti.Vector.field(2, ti.f64, shape=(), needs_grad=True)
    loss = ti.field(ti.f64, shape=(), needs_grad=True)

    @ti.kernel
    def k():
        d = v[None].normalized(1e-3)
        loss[None] = d[0] + 3.0 * d[1]

    u = np.array([0.02, 0.035])
    v[None] = u
    with ti.ad.Tape(loss):
        k()
    n = np.linalg.norm(u)
    assert loss[None] == pytest.approx((u[0] + 3.0 * u[1]) / (n + 1e-3), rel=1e-12)
    w = np.array([1.0, 3.0])     # d/du of w.u / (|u| + eps)
    want = w / (n + 1e-3) - (w @ u) * u / (n * (n + 1e-3) ** 2)
    assert v.grad[None].to_numpy() == pytest.approx(want, rel=1e-10)


def test_glsl_style_math_as_taichis(mode):
    """ti.math's GLSL-style helpers (Taichi's definitions), in a kernel, against numpy; and a
    gradient through smoothstep and refract against its formula."""
    out = ti.field(ti.f64, shape=12)
    v = ti.Vector.field(3, ti.f64, shape=(), needs_grad=True)
    loss = ti.field(ti.f64, shape=(), needs_grad=True)

    @ti.kernel
    def k():
        x, n = v[None], ti.Vector([0.0, 1.0, 0.0])
        out[0] = ti.math.smoothstep(0.0, 2.0, x[0])
        out[1] = ti.math.fract(-x[1])
        out[2] = ti.math.step(0.5, x[2]) + ti.math.step(x[2], 0.5)
        out[3] = ti.math.mod(-x[1], 1.5)
        out[4] = ti.math.degrees(x[0]) + ti.math.radians(x[1])
        out[5] = ti.math.distance(x, n)
        out[6] = ti.math.reflect(x, n)[1]
        out[7] = ti.math.refract(x.normalized(), n, 0.5)[1]
        out[8] = ti.math.refract(ti.Vector([1.0, 0.01, 0.0]), n, 2.0)[0]   # totally reflected
        out[9] = ti.math.rotation2d(x[0])[0, 1] + ti.math.vdir(x[1])[1]
        out[10] = ti.math.isnan(ti.sqrt(-x[0])) + 2 * ti.math.isinf(1.0 / (x[0] - x[0]))
        out[11] = ti.math.eye(3)[1, 1] + ti.math.translate(1.0, 2.0, 3.0)[1, 3]
        loss[None] = ti.math.smoothstep(0.0, 2.0, x[0]) + ti.math.refract(
            x.normalized(), n, 0.5)[1]

    x = np.array([0.7, 1.3, 0.2])
    v[None] = x
    with ti.ad.Tape(loss):
        k()
    t = np.clip(x[0] / 2.0, 0, 1)
    u = x / np.linalg.norm(x)
    c = u[1]
    kk = 1 - 0.25 * (1 - c * c)
    want = [t * t * (3 - 2 * t), -x[1] - np.floor(-x[1]), 0.0 + 1.0,
            -x[1] - 1.5 * np.floor(-x[1] / 1.5),
            np.degrees(x[0]) + np.radians(x[1]), np.linalg.norm(x - [0, 1, 0]), -x[1],
            0.5 * u[1] - (0.5 * c + np.sqrt(kk)), 0.0, -np.sin(x[0]) + np.sin(x[1]), 1 + 2, 1 + 2]
    assert out.to_numpy() == pytest.approx(want, rel=1e-12)
    h, grad = 1e-6, np.zeros(3)      # d loss / d x by central differences of the formula
    for i in range(3):
        def f(y):
            t, w = np.clip(y[0] / 2.0, 0, 1), y / np.linalg.norm(y)
            return t * t * (3 - 2 * t) + 0.5 * w[1] - (0.5 * w[1] + np.sqrt(
                1 - 0.25 * (1 - w[1] ** 2)))
        e = np.eye(3)[i] * h
        grad[i] = (f(x + e) - f(x - e)) / (2 * h)
    assert v.grad[None].to_numpy() == pytest.approx(grad, rel=1e-6)


def test_vectors_and_matrices_in_python_scope_and_kernels(mode):
    m = ti.Matrix.field(2, 2, ti.f64, shape=())
    v = ti.Vector.field(3, ti.f64, shape=2)

    @ti.kernel
    def k():
        a = ti.Matrix([[1.0, 2.0], [3.0, 4.0]])
        m[None] = a @ a.transpose() + ti.Matrix.identity(ti.f64, 2) * a.determinant()
        u = ti.Vector([1.0, 2.0, 3.0])
        w = ti.Vector([0.0, 1.0, 0.0])
        v[0] = u.cross(w) + u.normalized() * u.norm()
        v[1] = ti.Vector([u.dot(w), u.norm_sqr(), (u.outer_product(w)).trace()])

    k()
    a = np.array([[1.0, 2.0], [3.0, 4.0]])
    assert m.to_numpy()[()] == pytest.approx(a @ a.T + np.eye(2) * np.linalg.det(a))
    u, w = np.array([1.0, 2.0, 3.0]), np.array([0.0, 1.0, 0.0])
    assert v.to_numpy()[0] == pytest.approx(np.cross(u, w) + u)
    assert v.to_numpy()[1] == pytest.approx([2.0, 14.0, 2.0])
    p = ti.Vector([3.0, 4.0])
    assert p.norm() == 5.0 and (p * 2).to_numpy().tolist() == [6.0, 8.0]
    v[1] = [1, 2, 3]
    assert v[1].to_numpy().tolist() == [1, 2, 3]


def test_fill_sets_every_entry_of_a_field_element_or_a_local_matrix(mode):
    """Taichi's Matrix.fill in a kernel (DFSPH_difftaichi's trial programs clear x[0, i] so):
    y_i = x_i.sum() + m.sum() = 3 (i + 1) p + 4 p, so dy/dp = 3 (i + 1) + 4 both ways."""
    p = ti.field(ti.f64, shape=(), needs_grad=True, needs_dual=True)
    x = ti.Vector.field(3, ti.f64, shape=2, needs_grad=True, needs_dual=True)
    y = ti.field(ti.f64, shape=2, needs_grad=True, needs_dual=True)
    loss = ti.field(ti.f64, shape=(), needs_grad=True)

    @ti.kernel
    def k():
        for i in range(2):
            x[i].fill(p[None] * (i + 1))
            m = ti.Matrix([[1.0, 2.0], [3.0, 4.0]])
            m.fill(p[None])
            y[i] = x[i].sum() + m.sum()

    @ti.kernel
    def total():
        for i in y:
            loss[None] += y[i]

    p[None] = 0.5
    with ti.ad.Tape(loss=loss):
        k()
        total()
    assert x.to_numpy() == pytest.approx(np.array([[0.5] * 3, [1.0] * 3]))
    assert y.to_numpy() == pytest.approx([3.5, 5.0])
    assert p.grad[None] == pytest.approx(7 + 10)
    with ti.ad.FwdMode(loss=y, param=p):
        k()
    assert y.dual.to_numpy() == pytest.approx([7, 10])


def test_fill_takes_one_number_for_a_vector_or_matrix(mode):
    x = ti.Vector.field(2, ti.f64, shape=2)
    s = ti.field(ti.f64, shape=2)

    @ti.kernel
    def vector_value():
        x[0].fill(ti.Vector([1.0, 2.0]))

    @ti.kernel
    def scalar_target():
        s[0].fill(1.0)

    @ti.kernel
    def by_keyword():
        x[1].fill(val=2.0)

    by_keyword()
    assert x[1].to_numpy().tolist() == [2.0, 2.0]

    fields = [s, x]

    @ti.kernel
    def a_field_in_a_list():        # fields[0] is a field: its own fill, as before
        fields[0].fill(3.0)

    a_field_in_a_list()
    assert s.to_numpy().tolist() == [3.0, 3.0]

    with pytest.raises(ti.TinyadTypeError, match="takes a number") as e:
        vector_value()
    assert "x[0].fill(ti.Vector" in e.value.loc.text
    with pytest.raises(ti.TinyadTypeError, match="fills a vector or a matrix"):
        scalar_target()


def test_random_is_reproducible_from_the_seed(mode):
    x = ti.field(ti.f64, shape=8)

    @ti.kernel
    def k():
        for i in x:
            x[i] = ti.random()

    def draw():
        ti.init(mode=mode, random_seed=7, default_fp=ti.f64)
        nonlocal x
        x = ti.field(ti.f64, shape=8)
        k()
        return x.to_numpy()

    first, second = draw(), draw()
    assert np.array_equal(first, second)
    assert ((0 <= first) & (first < 1)).all() and len(set(first.tolist())) == 8


def test_serialized_loop_runs_in_order(mode):
    x = ti.field(ti.i32, shape=6)

    @ti.kernel
    def prefix_sum():
        ti.loop_config(serialize=True)
        for i in range(1, 6):
            x[i] += x[i - 1]

    x.from_numpy(np.arange(6, dtype=np.int32))
    prefix_sum()
    assert x.to_numpy().tolist() == np.cumsum(np.arange(6)).tolist()
    assert "parallel" not in str(prefix_sum.ir)


def test_root_dense_layouts_and_fill(mode):
    a = ti.field(ti.f32)
    b = ti.Vector.field(2, ti.f32)
    ti.root.dense(ti.ij, (3, 2)).place(a, b)
    ti.root.dense(ti.i, 3).dense(ti.j, 4)
    assert a.shape == (3, 2) and b.shape == (3, 2) and b.to_numpy().shape == (3, 2, 2)
    a.fill(1.5)
    assert a.to_numpy().sum() == 9.0


def test_init_accepts_taichi_options(capsys):
    ti.init(arch=ti.cpu, offline_cache=False, cpu_max_num_threads=1)
    assert "offline_cache" in capsys.readouterr().err
    with pytest.raises(TypeError, match="unknown option"):
        ti.init(not_an_option=1)


def test_print_ir_prints_each_kernel_and_its_adjoint_when_made(mode, capsys):
    """ti.init(print_ir=True), as Taichi's: the IR each variant runs, once, as it is made."""
    ti.init(mode=mode, print_ir=True)
    x = ti.field(ti.f64, shape=2, needs_grad=True)
    y = ti.field(ti.f64, shape=2, needs_grad=True)

    @ti.kernel
    def double():
        for i in x:
            y[i] = 2 * x[i]

    double()
    double()
    y.grad.fill(1.0)
    double.grad()
    printed = capsys.readouterr().out
    assert printed.count("kernel double():") == 1 and printed.count("kernel double_grad():") == 1
    assert "y[i] = 2.0 * x[i]" in printed and "x.grad[i] +=" in printed
    assert x.grad.to_numpy().tolist() == [2.0, 2.0]


@pytest.mark.parametrize("arch", ["gpu", "dx11", "dx12", "gles", "amdgpu"])
def test_every_taichi_arch_name_runs_a_kernel(mode, arch):
    """Taichi's arch names all exist (a test's `exclude=[ti.gles]` names them too); a GPU arch
    runs on CUDA where fast mode finds one, else on the CPU."""
    ti.init(mode=mode, arch=getattr(ti, arch))
    x = ti.field(ti.f32, shape=4)

    @ti.kernel
    def fill():
        for i in x:
            x[i] = 2 * i

    fill()
    assert x.to_numpy().tolist() == [0, 2, 4, 6]


def test_fields_reached_through_python_containers(mode):
    outs = {"a": ti.field(ti.f32, shape=4), "b": ti.field(ti.i32, shape=4)}
    pair = (ti.field(ti.f32, shape=4),)

    @ti.kernel
    def fill():
        for i in range(4):
            outs["a"][i] = i * 2.0
            outs["b"][i] += i
            pair[0][i] = outs["a"][i] + 1

    fill()
    fill()
    np.testing.assert_array_equal(outs["a"].to_numpy(), [0, 2, 4, 6])
    np.testing.assert_array_equal(outs["b"].to_numpy(), [0, 2, 4, 6])
    np.testing.assert_array_equal(pair[0].to_numpy(), [1, 3, 5, 7])

    @ti.kernel
    def missing_key():
        for i in range(4):
            outs["c"][i] = 1.0

    with pytest.raises(ti.TinyadTypeError) as info:     # names the key and the user's line
        missing_key()
    assert "has no key 'c'" in str(info.value) and 'outs["c"][i] = 1.0' in str(info.value)


def test_grouped_loop_over_a_0d_field_runs_once_and_differentiates(mode):
    """Taichi runs `for I in ti.grouped(x)` over a 0-D field once, with an empty index."""
    x = ti.field(ti.f64, shape=(), needs_grad=True)
    y = ti.field(ti.f64, shape=(), needs_grad=True)

    @ti.kernel
    def cube():
        for I in ti.grouped(x):
            y[I] += x[I] ** 3

    x[None] = 1.5
    with ti.ad.Tape(y):
        cube()
    assert y[None] == pytest.approx(1.5 ** 3)
    assert x.grad[None] == pytest.approx(3 * 1.5 ** 2)


def test_plain_python_functions_and_lambdas_are_inlined_as_taichi_does(mode):
    """Taichi calls an undecorated function (or a lambda) at trace time with kernel values, so
    arithmetic helpers need no @ti.func; their gradients flow as through any expression."""
    x = ti.field(ti.f64, shape=3, needs_grad=True)
    loss = ti.field(ti.f64, shape=(), needs_grad=True)
    square = lambda v: v * v  # noqa: E731

    def scaled(v, k=3.0):
        return k * square(v) + 1.0

    @ti.kernel
    def total():
        for i in x:
            loss[None] += scaled(x[i]) + ti.sin(x[i])

    values = np.array([0.3, -1.2, 2.0])
    x.from_numpy(values)
    with ti.ad.Tape(loss):
        total()
    assert loss[None] == pytest.approx(np.sum(3 * values ** 2 + 1 + np.sin(values)))
    assert np.allclose(x.grad.to_numpy(), 6 * values + np.cos(values))


def test_a_plain_function_that_branches_on_a_kernel_value_asks_for_ti_func(mode):
    x = ti.field(ti.f64, shape=3)

    def clamp_positive(v):
        return v if v > 0 else 0.0

    @ti.kernel
    def k():
        for i in x:
            x[i] = clamp_positive(x[i] - 1.0)

    with pytest.raises(ti.TinyadSyntaxError, match="truth value") as info:
        k()
    assert "ti.select" in str(info.value) or "if" in info.value.hint


def test_continue_in_parallel_serial_and_static_loops(mode):
    """`continue` skips the rest of the body (a flag in the IR); the gradient follows."""
    x = ti.field(ti.f64, shape=6, needs_grad=True)
    loss = ti.field(ti.f64, shape=(), needs_grad=True)

    @ti.kernel
    def total():
        for i in x:
            if x[i] < 0:
                continue
            s = 0.0
            for k in range(3):
                if k == 1:
                    continue
                s += x[i] ** (k + 1)
            for j in ti.static(range(2)):
                if ti.static(j == 0):
                    continue
                s += 10 * x[i]
            loss[None] += s

    values = np.array([1.0, -2.0, 0.5, 3.0, -0.1, 2.0])
    x.from_numpy(values)
    with ti.ad.Tape(loss):
        total()
    kept = values >= 0
    assert loss[None] == pytest.approx(np.sum((values + values ** 3 + 10 * values)[kept]))
    assert np.allclose(x.grad.to_numpy(), np.where(kept, 1 + 3 * values ** 2 + 10, 0))


def test_data_oriented_classes_with_kernel_and_func_methods(mode):
    """Taichi's @ti.data_oriented: kernels and funcs as methods reading the object's fields."""

    @ti.data_oriented
    class Springs:
        def __init__(self, n, stiffness):
            self.x = ti.field(ti.f64, shape=n, needs_grad=True)
            self.energy = ti.field(ti.f64, shape=(), needs_grad=True)
            self.stiffness = stiffness

        @ti.func
        def spring(self, d):
            return 0.5 * self.stiffness * d * d

        @ti.kernel
        def total(self):
            for i in range(self.x.shape[0] - 1):
                self.energy[None] += self.spring(self.x[i + 1] - self.x[i] - 1.0)

    springs = Springs(4, stiffness=2.0)
    values = np.array([0.0, 1.2, 1.9, 3.4])
    springs.x.from_numpy(values)
    with ti.ad.Tape(springs.energy):
        springs.total()
    stretch = np.diff(values) - 1.0
    assert springs.energy[None] == pytest.approx(np.sum(stretch ** 2))
    expected = np.zeros(4)
    expected[:-1] -= 2.0 * stretch
    expected[1:] += 2.0 * stretch
    assert np.allclose(springs.x.grad.to_numpy(), expected)

    springs.x.grad.fill(0)
    springs.energy[None] = 0.0
    springs.energy.grad[None] = 1.0
    springs.total()
    springs.total.grad()                                 # the method's adjoint, by hand
    assert np.allclose(springs.x.grad.to_numpy(), expected)
