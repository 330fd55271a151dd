"""Programs in DiffTaichi's style, written here (DiffTaichi's own code is not copied): the
features its examples use, at tiny sizes, each gradient against central finite differences in
f64, in both modes. What they exercise, and which DiffTaichi program does the same:
- `ti.root.dense(ti.i, steps).dense(ti.j, n).place(x, v)` vector fields, `ti.root.lazy_grad()`,
  a Tape over many launches, `ti.static` loops, a Python lambda making fields (mass_spring);
- `dense(ti.l, steps).dense(ti.i, n)` indexed [i, t] (electric), `place(x, x.grad)` (wave);
- `a if inside else 0` that must not touch the element out of bounds (wave's get_p), a plain
  Python function called in a kernel (inlined, as Taichi does);
- checkpointing: `ti.ad.grad_replaced` / `grad_for` recomputing a scratch grid cleared every
  step, grads cleared by the user, `kernel.grad()` inside the Tape (diffmpm);
- `ti.random` in a kernel drawing initial weights (diff_sph), which must leave Python's global
  `random` stream alone (electric seeds it and draws after its first launch).
- a `ti.data_oriented` layer whose kernels are methods, laid out with `ti.axes`, a field passed
  as a `ti.template()` argument, and a loss made of a running `atomic_min`/`atomic_max` over the
  Tape's launches (Taichi's diff_sph).
"""
import subprocess
import sys

import numpy as np
import pytest

import tinyad as ti

H = 1e-6


def central_difference(loss_of, field, index):
    """d loss / d field[index] by central differences (loss_of reruns the whole program)."""
    saved = field[index]
    field[index] = saved + H
    up = loss_of()
    field[index] = saved - H
    down = loss_of()
    field[index] = saved
    return (up - down) / (2 * H)


def test_mass_spring_style_tape_over_steps(mode):
    steps, n = 12, 3
    scalar = lambda: ti.field(dtype=ti.f64)          # noqa: E731  (as DiffTaichi writes it)
    vec = lambda: ti.Vector.field(2, dtype=ti.f64)   # noqa: E731
    x, v, force = vec(), vec(), vec()
    stiffness, rest, loss = scalar(), scalar(), scalar()
    ti.root.dense(ti.i, steps).dense(ti.j, n).place(x, v, force)
    ti.root.dense(ti.i, n - 1).place(stiffness, rest)
    ti.root.place(loss)
    ti.root.lazy_grad()
    dt = 0.05

    @ti.kernel
    def spring_forces(t: ti.i32):
        for s in range(n - 1):
            d = x[t, s + 1] - x[t, s]
            length = d.norm() + 1e-4
            f = stiffness[s] * (length - rest[s]) / length * d
            ti.atomic_add(force[t, s], f)
            ti.atomic_add(force[t, s + 1], -f)

    @ti.kernel
    def advance(t: ti.i32):
        for i in range(n):
            v[t, i] = 0.98 * v[t - 1, i] + dt * (force[t - 1, i] + ti.Vector([0.0, -1.0]))
            x[t, i] = x[t - 1, i] + dt * v[t, i]

    @ti.kernel
    def compute_loss():
        c = ti.Vector([0.0, 0.0])
        for i in ti.static(range(n)):          # unrolled, as DiffTaichi's compute_center
            c += x[steps - 1, i]
        loss[None] = (c / n - ti.Vector([0.6, 0.2])).norm_sqr()

    @ti.kernel
    def clear_forces():
        for t, i in ti.ndrange(steps, n):
            force[t, i] = ti.Vector([0.0, 0.0])

    for i in range(n):
        x[0, i] = [0.2 + 0.15 * i, 0.3 + 0.05 * i * i]
    for s in range(n - 1):
        stiffness[s], rest[s] = 3.0 + s, 0.1

    def forward():
        for t in range(1, steps):
            spring_forces(t - 1)
            advance(t)
        compute_loss()

    def loss_of():
        clear_forces()
        forward()
        return loss[None]

    clear_forces()
    with ti.ad.Tape(loss):
        forward()
    for s in range(n - 1):
        assert stiffness.grad[s] == pytest.approx(central_difference(loss_of, stiffness, s),
                                                  rel=1e-6, abs=1e-9)
        assert rest.grad[s] == pytest.approx(central_difference(loss_of, rest, s),
                                             rel=1e-6, abs=1e-9)


def test_electric_and_wave_layouts(mode):
    steps, n_hidden = 6, 3
    hidden, w, x, loss = (ti.field(ti.f64) for _ in range(4))
    ti.root.dense(ti.l, steps).dense(ti.i, n_hidden).place(hidden)   # indexed hidden[i, t]
    ti.root.dense(ti.i, n_hidden).place(w, w.grad)                   # the gradient placed by hand
    ti.root.dense(ti.l, steps).place(x)
    ti.root.place(loss)
    ti.root.lazy_grad()                      # the rest: hidden.grad, x.grad, loss.grad
    assert hidden.shape == (n_hidden, steps)

    @ti.kernel
    def layer(t: ti.i32):
        for i in range(n_hidden):
            hidden[i, t] = ti.tanh(w[i] * x[t - 1] + 0.1 * i)

    @ti.kernel
    def step(t: ti.i32):
        acc = 0.0
        for i in ti.static(range(n_hidden)):
            acc += hidden[i, t]
        x[t] = x[t - 1] + 0.3 * acc

    @ti.kernel
    def compute_loss():
        loss[None] = x[steps - 1] ** 2

    x[0] = 0.4
    for i in range(n_hidden):
        w[i] = 0.5 - 0.3 * i

    def forward():
        for t in range(1, steps):
            layer(t)
            step(t)
        compute_loss()

    def loss_of():
        forward()
        return loss[None]

    with ti.ad.Tape(loss):
        forward()
    for i in range(n_hidden):
        assert w.grad[i] == pytest.approx(central_difference(loss_of, w, i), rel=1e-6)


def halve(value):        # a plain Python function, called from a kernel: Taichi inlines it
    return value * 0.5


def test_guarded_neighbour_reads_and_a_plain_python_call(mode):
    n = 6
    p = ti.field(ti.f64)
    loss = ti.field(ti.f64)
    ti.root.dense(ti.i, n).place(p, p.grad)
    ti.root.place(loss, loss.grad)

    @ti.func
    def get_p(i):
        return p[i] if 0 <= i < n else 0.0     # the element out of bounds is never read

    @ti.kernel
    def smooth():
        for i in range(n):
            lap = get_p(i - 1) + get_p(i + 1) - 2 * get_p(i)
            loss[None] += halve(lap) ** 2

    for i in range(n):
        p[i] = np.sin(i + 1.0)

    def loss_of():
        loss[None] = 0
        smooth()
        return loss[None]

    with ti.ad.Tape(loss):
        smooth()
    for i in range(n):
        assert p.grad[i] == pytest.approx(central_difference(loss_of, p, i), rel=1e-6)


def test_diffmpm_style_checkpointing(mode, capsys):
    steps, n, cells = 5, 4, 3
    x = ti.field(ti.f64)
    grid = ti.field(ti.f64)
    k, loss = ti.field(ti.f64), ti.field(ti.f64)
    ti.root.dense(ti.k, steps).dense(ti.l, n).place(x)    # k before l: x[t, p]
    ti.root.dense(ti.i, cells).place(grid)                 # scratch, recomputed going back
    ti.root.place(k, loss)
    ti.root.lazy_grad()

    @ti.kernel
    def clear_grid():
        for c in range(cells):
            grid[c] = 0
            grid.grad[c] = 0

    @ti.kernel
    def p2g(f: ti.i32):
        for q in range(n):
            grid[q % cells] += k[None] * ti.sin(x[f, q])

    @ti.kernel
    def g2p(f: ti.i32):
        for q in range(n):
            x[f + 1, q] = x[f, q] + 0.1 * grid[q % cells] * x[f, q]

    @ti.ad.grad_replaced
    def advance(s):
        clear_grid()
        p2g(s)
        g2p(s)

    @ti.ad.grad_for(advance)
    def advance_grad(s):
        clear_grid()
        p2g(s)             # recompute the grid this step's adjoint reads
        g2p.grad(s)
        p2g.grad(s)

    @ti.kernel
    def compute_loss():
        for q in range(n):
            loss[None] += x[steps - 1, q] ** 2

    for q in range(n):
        x[0, q] = 0.2 + 0.1 * q
    k[None] = 0.7

    def forward():
        for s in range(steps - 1):
            advance(s)
        compute_loss()

    def loss_of():
        loss[None] = 0
        forward()
        return loss[None]

    for _ in range(2):      # (as an optimiser's loop: the second Tape's rounds are its own)
        with ti.ad.Tape(loss):
            forward()
    # each recompute stands for its Tape's launch: no adjoint adds to an earlier round's sum
    assert capsys.readouterr().err == ""
    assert k.grad[None] == pytest.approx(central_difference(loss_of, k, None), rel=1e-6)
    for q in range(n):
        assert x.grad[0, q] == pytest.approx(central_difference(loss_of, x, (0, q)), rel=1e-6)


def test_clearing_a_gradient_without_its_field_in_grad_for_is_still_refused(mode):
    # Only a kernel that overwrites the field itself may reset its gradient in grad_for: here
    # the 2 * x that y's adjoint put into x.grad is owed to x's producer, and is thrown away.
    x = ti.field(ti.f64, shape=3, needs_grad=True)
    y = ti.field(ti.f64, shape=3, needs_grad=True)
    loss = ti.field(ti.f64, shape=(), needs_grad=True)

    @ti.kernel
    def clear_x_grad():
        for i in range(3):
            x.grad[i] = 0

    @ti.kernel
    def square():
        for i in range(3):
            y[i] = x[i] ** 2

    @ti.kernel
    def total():
        for i in range(3):
            loss[None] += y[i]

    @ti.ad.grad_replaced
    def step():
        square()

    @ti.ad.grad_for(step)
    def step_grad():
        square.grad()
        clear_x_grad()

    x.from_numpy(np.array([1.0, 2.0, 3.0]))
    with pytest.raises(ti.SilentZeroRuleError, match="Custom gradient assigns"):
        with ti.ad.Tape(loss):
            step()
            total()


def test_random_weights(mode):
    n = 5
    w = ti.field(ti.f64, shape=n, needs_grad=True)
    loss = ti.field(ti.f64, shape=(), needs_grad=True)

    @ti.kernel
    def init_weights():
        for i in range(n):
            w[i] = ti.random() * 2 - 1        # drawn once, outside the Tape

    @ti.kernel
    def compute_loss():
        for i in range(n):
            loss[None] += ti.exp(w[i]) * (i + 1)

    init_weights()
    drawn = w.to_numpy()
    assert np.all((drawn > -1) & (drawn < 1)) and len(set(drawn.tolist())) == n

    def loss_of():
        loss[None] = 0
        compute_loss()
        return loss[None]

    with ti.ad.Tape(loss):
        compute_loss()
    for i in range(n):
        assert w.grad[i] == pytest.approx(central_difference(loss_of, w, i), rel=1e-6)
        assert w.grad[i] == pytest.approx(np.exp(drawn[i]) * (i + 1), rel=1e-12)


@ti.data_oriented
class TinyLayer:
    """tanh(W @ input + b) per step, laid out as Taichi's diff_sph lays out its Linear layers."""

    def __init__(self, steps, n_in, n_out):
        self.n_in, self.n_out = n_in, n_out
        self.weights, self.bias, self.output = (ti.field(ti.f64) for _ in range(3))
        models = ti.root.dense(ti.i, 1)
        models.dense(ti.axes(1, 2), (n_out, n_in)).place(self.weights)
        models.dense(ti.axes(1), n_out).place(self.bias)
        models.dense(ti.axes(1, 2), (steps, n_out)).place(self.output)

    @ti.kernel
    def forward(self, t: ti.i32, inputs: ti.template()):
        for o in range(self.n_out):
            acc = self.bias[0, o]
            for j in ti.static(range(self.n_in)):
                acc += self.weights[0, o, j] * inputs[t, j]
            self.output[0, t, o] = ti.tanh(acc)


def test_diff_sph_style_layer_methods_and_a_running_min_max(mode):
    steps, n, dt = 6, 4, 0.1
    layer = TinyLayer(steps, 2, 2)
    features = ti.field(ti.f64, shape=(steps, 2))
    x = ti.Vector.field(2, ti.f64, shape=(steps, n), needs_grad=True)
    v = ti.Vector.field(2, ti.f64, shape=(steps, n), needs_grad=True)
    closest = ti.field(ti.f64, shape=(), needs_grad=True)
    highest = ti.field(ti.f64, shape=(), needs_grad=True)
    loss = ti.field(ti.f64, shape=(), needs_grad=True)
    ti.root.lazy_grad()
    target = ti.Vector([0.9, 0.7])

    @ti.kernel
    def advance(t: ti.i32):
        for i in range(n):
            push = ti.Vector([layer.output[0, t - 1, 0], layer.output[0, t - 1, 1]]) * 2.0
            v[t, i] = v[t - 1, i] + dt * (push + ti.Vector([0.0, -1.0]))
            x[t, i] = x[t - 1, i] + dt * v[t, i]

    @ti.kernel
    def track(t: ti.i32):
        for i in range(n):
            ti.atomic_min(closest[None], (x[t, i] - target).norm())
            ti.atomic_max(highest[None], x[t, i][1])

    @ti.kernel
    def compute_loss():
        loss[None] = closest[None] + 0.2 * (highest[None] - 1.0) ** 2

    for t in range(steps):
        features[t, 0], features[t, 1] = np.sin(t), np.cos(t)
    for i in range(n):
        x[0, i] = [0.1 + 0.2 * i, 0.05 * i * i]
    layer.weights.from_numpy(np.array([[[0.3, -0.2], [0.1, 0.4]]]))
    layer.bias.from_numpy(np.array([[0.05, 0.2]]))

    def forward():
        closest[None], highest[None] = 1e3, -1e3
        for t in range(1, steps):
            layer.forward(t - 1, features)
            advance(t)
            track(t)
        compute_loss()

    def loss_of():
        forward()
        return loss[None]

    with ti.ad.Tape(loss):
        forward()
    for index in [(0, 0, 0), (0, 0, 1), (0, 1, 0), (0, 1, 1)]:
        fd = central_difference(loss_of, layer.weights, index)
        assert layer.weights.grad[index] == pytest.approx(fd, rel=1e-6, abs=1e-9)
    for index in [(0, 0), (0, 1)]:
        fd = central_difference(loss_of, layer.bias, index)
        assert layer.bias.grad[index] == pytest.approx(fd, rel=1e-6, abs=1e-9)
    assert np.abs(layer.bias.grad.to_numpy()).min() > 1e-3    # both terms reach the layer


PROGRAM_SEEDING_RANDOM = """
import random, sys
import numpy as np
import tinyad as ti
ti.init(mode=sys.argv[1])
x = ti.field(ti.f32, shape=2)

@ti.kernel
def fill():
    for i in range(2):
        x[i] = ti.random()

random.seed(0)
np.random.seed(0)
before = (random.random(), np.random.rand())
fill()                                   # the first launch of the process
after = (random.random(), np.random.rand())
random.seed(0)
np.random.seed(0)
plain = [(random.random(), np.random.rand()) for _ in range(2)]
assert [before, after] == plain, ([before, after], plain)
print("same stream")
"""


@pytest.mark.parametrize("mode_name", ["interp", "fast"])
def test_first_launch_leaves_pythons_random_streams_alone(mode_name, tmp_path):
    # electric seeds `random` and draws from it after its first launch: its numbers follow
    # Taichi's only if tinyad (and what it imports lazily) draws nothing from it.
    program = tmp_path / "seeded.py"
    program.write_text(PROGRAM_SEEDING_RANDOM)
    ran = subprocess.run([sys.executable, str(program), mode_name],
                         capture_output=True, text=True, timeout=300)
    assert ran.returncode == 0 and "same stream" in ran.stdout, ran.stderr[-2000:]


def test_a_field_made_by_a_lambda_is_named_by_the_callers_variable(mode):
    # reports name fields: DiffTaichi makes them with `vec = lambda: ...`, then `v = vec()`
    vec = lambda: ti.Vector.field(2, dtype=ti.f64)   # noqa: E731
    velocity = vec()
    ti.root.dense(ti.i, 3).place(velocity)
    assert velocity.name == "velocity"

    class Layer:                                       # diff_sph: `self.output = scalar()`
        def __init__(self):
            self.output = vec()

    assert Layer().output.name == "self.output"


def test_fields_made_in_one_tuple_assignment_are_named_each_by_its_target(mode):
    spring_a, spring_b = ti.field(ti.i32, shape=3), ti.Vector.field(2, ti.f32, shape=3)
    assert (spring_a.name, spring_b.name) == ("spring_a", "spring_b")
    q, r = (ti.field(ti.f32, shape=2) for _ in range(2))     # no call per target: numbered
    assert q.name.startswith("field") and r.name.startswith("field")
