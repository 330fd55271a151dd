"""N-body gravity by autodiff: the force is minus the gradient of the potential energy.

The "Case study: gravity simulation" of Taichi's autodiff documentation, without the GUI.
compute_U sums the potential energy U; ti.ad.Tape(U) gives dU/dx in x.grad, and advance()
uses -x.grad as the force. At the end, x.grad is compared with central finite differences.

Run it:  tinyad run examples/gravity.py      (or: python examples/gravity.py)
         tinyad run examples/gravity.py --plot forces.png    (the forces autodiff found)
"""
import tinyad as ti
from tinyad.examples._show import parser, save_png

options = parser(__doc__.splitlines()[0]).parse_args()
# f64, so that the finite-difference check at the end is sharp. Taichi's docs use f32.
ti.init(default_fp=ti.f64, random_seed=0)

N = 8
dt = 1e-5
frames = 5
substeps = 50  # as in the docs: 50 substeps per frame

x = ti.Vector.field(2, dtype=float, shape=N, needs_grad=True)  # particle positions
v = ti.Vector.field(2, dtype=float, shape=N)                   # particle velocities
U = ti.field(dtype=float, shape=(), needs_grad=True)           # potential energy


@ti.kernel
def compute_U():
    for i, j in ti.ndrange(N, N):
        r = x[i] - x[j]
        # r.norm(1e-3) is sqrt(r.norm()**2 + 1e-3): no division by zero when i == j
        U[None] += -1 / r.norm(1e-3)  # U += -1 / |r|


@ti.kernel
def advance():
    for i in x:
        v[i] += dt * -x.grad[i]  # dv/dt = -dU/dx
    for i in x:
        x[i] += dt * v[i]  # dx/dt = v


@ti.kernel
def init():
    for i in x:
        x[i] = [ti.random(), ti.random()]


def substep():
    with ti.ad.Tape(loss=U):
        compute_U()  # on leaving the Tape, x.grad holds dU/dx
    advance()


def energy_at(positions) -> float:
    """U for the given positions (an N x 2 array), computed without a Tape."""
    x.from_numpy(positions)
    U[None] = 0
    compute_U()
    return U[None]


def finite_difference_check(h: float = 1e-6) -> float:
    """Largest relative gap between x.grad and central differences of U, over all of x."""
    with ti.ad.Tape(loss=U):
        compute_U()
    autodiff = x.grad.to_numpy()
    base = x.to_numpy()
    worst = 0.0
    for i in range(N):
        for d in range(2):
            plus, minus = base.copy(), base.copy()
            plus[i, d] += h
            minus[i, d] -= h
            numeric = (energy_at(plus) - energy_at(minus)) / (2 * h)
            worst = max(worst, abs(numeric - autodiff[i, d]) / max(1.0, abs(numeric)))
            if i == 0:
                print(f"  dU/dx[0][{d}]: autodiff {autodiff[i, d]:+.6f}   "
                      f"finite difference {numeric:+.6f}")
    x.from_numpy(base)
    return worst


init()
for frame in range(frames):
    for _ in range(substeps):
        substep()
    print(f"frame {frame}: U = {U[None]:.6f}")

print("x.grad against central finite differences:")
worst = finite_difference_check()
print(f"largest relative difference over all {2 * N} components: {worst:.2e}")
assert worst < 1e-5, "autodiff and finite differences disagree"



def draw(figure):
    """The particles and the force on each, -dU/dx (x.grad from the check's Tape)."""
    axes = figure.subplots()
    at, force = x.to_numpy(), -x.grad.to_numpy()
    scale = 0.15 / max(abs(force).max(), 1e-12)      # the longest arrow: 0.15
    axes.quiver(at[:, 0], at[:, 1], force[:, 0] * scale, force[:, 1] * scale, angles="xy",
                scale_units="xy", scale=1, color="tab:red", width=0.004)
    axes.plot(at[:, 0], at[:, 1], "o", color="black")
    axes.set(xlabel="x", ylabel="y", aspect="equal",
             title=f"{N} particles and the forces -dU/dx that autodiff gave")


save_png(options.plot, draw)
print("\nHow did autodiff get those forces? Step through it: tinyad lesson 1"
      "  (tinyad lessons lists all of them)")
