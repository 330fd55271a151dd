"""Run a generated program in one mode and precision, and judge the runs.

`check(program)` runs it in interp and fast mode in f64 (optionally also f32), differentiates it
(with ti.ad.Tape, or by hand: loss.grad[None] = 1 and kernel.grad() in a correct reverse order),
and compares:
  * the two modes' values (every field after the forward pass) and gradients. f64: both modes
    evaluate the same IR with the same libm calls; they may differ only in the order of atomic
    sums and fast-math reassociation (a few ulps times the condition of the expression), so
    rtol = atol = 1e-9 of the array's scale. f32: the same, measured in f32 ulps: both modes round
    each op to f32 once (ops.py via_f64), so rtol = atol = 1e-4 (about 800 ulps) of the scale;
  * the f64 gradient with central finite differences of the f64 loss (step H). An element where
    the one-sided differences disagree (a kink or a jump within H: abs, min/max, a branch,
    floor) is skipped and counted; elsewhere the truncation error is about H^2 * f''' / 6 and
    the rounding error about 2e-10 * |loss|, both far below the tolerance (FD_RTOL, FD_ATOL);
  * the rule checker: any report (an error, or a warning printed) on these clean programs is a
    false report.
The outcome says which of these happened; `kind` is "agreed", "disagreed", "false-report",
"refused" (tinyad refused the program with a clear error naming its line) or "broken" (an
unclear error, or a generator bug).
"""
from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import io
import tempfile
import warnings
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

import tinyad as ti
from tinyad.check.rules import RuleViolation
from tinyad.core.errors import TinyadError

from . import gen

H = 1e-6              # finite-difference step (inputs are O(1))
FD_RTOL = 1e-6       # of |central difference|, plus FD_ATOL of the loss
FD_ATOL = 1e-7
KINK = 1e-3           # one-sided differences further apart than this (relative): not smooth
MODE_RTOL = {"f64": 1e-9, "f32": 1e-4}
SOURCE_DIR = Path(tempfile.gettempdir()) / "tinyad-fuzz"


@dataclass
class Run:
    values: dict          # field name -> array after the forward pass (and "loss")
    grads: dict           # parameter name -> gradient
    refusal: str | None = None     # a TinyadError raised while differentiating
    report: str | None = None      # a rule report: error raised or warning printed
    fd: dict | None = None         # parameter name -> (central difference, smooth mask)


@dataclass
class Outcome:
    kind: str
    reason: str = ""
    kinks: int = 0        # elements whose FD check was skipped (not smooth there)
    checked: int = 0      # elements whose gradient was compared with FD
    runs: dict = field(default_factory=dict)


def load(source: str, like=None):
    """Import `source` from a file, so tracebacks and tinyad's errors name its real lines.
    `like` (a module load made): a file of the same name, in a folder of its own, for a
    program that keeps that one's kernels and adds more (a planted bug): fast mode's disk
    cache, whose generated code names the file, finds the kernels they share compiled."""
    SOURCE_DIR.mkdir(exist_ok=True)
    digest = hashlib.sha1(source.encode()).hexdigest()[:12]
    path = SOURCE_DIR / f"fuzz_{digest}.py"
    if like is not None:
        path = SOURCE_DIR / digest / Path(like.__file__).name
        path.parent.mkdir(exist_ok=True)
    path.write_text(source)
    spec = importlib.util.spec_from_file_location(f"fuzz_{digest}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class Instance:
    """A built program: its fields filled with inputs, ready to run."""

    def __init__(self, module, mode: str, fp: str, seed: int, check: str = "error"):
        dtype = {"f64": ti.f64, "f32": ti.f32}[fp]
        ti.init(mode=mode, default_fp=dtype, check=check)
        self.p = module.build(dtype)
        rng = np.random.default_rng(seed)
        for f in self.p["params"] + self.p["data"]:
            f.from_numpy(rng.uniform(-1, 1, size=_full_shape(f)).astype(f.dtype.np))
        for f in self.p["ints"]:
            f.from_numpy(rng.integers(0, f.shape[0], size=f.shape).astype(f.dtype.np))

    def zero(self, grads: bool):
        for f in self.p["state"] + [self.p["loss"]]:
            f.fill(0)
        if grads:
            for f in self.p["params"] + self.p["state"] + [self.p["loss"]]:
                f.grad.fill(0)

    def launch(self):
        for kernel, args in self.p["launches"]:
            kernel(*args)

    def loss(self) -> float:
        self.zero(grads=False)
        self.launch()
        return float(self.p["loss"][None])

    def differentiate(self):
        """Differentiate; with rounds=2, first take a gradient step from Python and clear the
        gradients (an optimisation loop), then differentiate again."""
        for round_ in range(self.p.get("rounds", 1)):
            if round_:
                for f in self.p["params"]:
                    f.from_numpy(f.to_numpy() - 0.05 * f.grad.to_numpy())
            self.sweep()

    def sweep(self):
        """One forward pass and its gradient. A planted bug (plant.py) may add a step:
        `python_write` (field, i): field[i] += 0.5 in Python inside the Tape; `between`: kernels
        launched after the forward pass, before the sweep; `seeded=False`: loss.grad left 0;
        `keep_grads`: the parameters' gradients are not cleared."""
        p = self.p
        self.zero(grads=not p.get("keep_grads"))
        if p.get("keep_grads"):
            for f in p["state"] + [p["loss"]]:
                f.grad.fill(0)
        if p["sweep"] is None:
            with ti.ad.Tape(p["loss"]):
                self.launch()
                if p.get("python_write"):
                    f, i = p["python_write"]
                    f[i] = f[i] + 0.5
            return
        self.launch()
        for kernel, args in p.get("between", ()):
            kernel(*args)
        if p.get("seeded", True):
            p["loss"].grad[None] = 1
        for kernel, args in p["sweep"]:
            kernel.grad(*args)

    def values(self) -> dict:
        out = {f.name: f.to_numpy() for f in self.p["state"]}
        out["loss"] = self.p["loss"].to_numpy()
        return out

    def finite_differences(self) -> dict:
        """Central differences per parameter element, and where the loss is smooth there."""
        base = self.loss()
        out = {}
        for f in self.p["params"]:
            x = f.to_numpy()
            central, smooth = np.zeros(x.shape), np.ones(x.shape, bool)
            for index in np.ndindex(x.shape):
                plus, minus = x.copy(), x.copy()
                plus[index] += H
                minus[index] -= H
                f.from_numpy(plus)
                up = self.loss()
                f.from_numpy(minus)
                down = self.loss()
                central[index] = (up - down) / (2 * H)
                ahead, behind = (up - base) / H, (base - down) / H
                smooth[index] = abs(ahead - behind) <= KINK * (1 + abs(central[index]))
            f.from_numpy(x)
            out[f.name] = (central, smooth)
        return out


def _full_shape(f):
    return tuple(f.shape) + tuple(f.element_shape)


def run(module, mode: str, fp: str = "f64", seed: int = 0, fd: bool = False) -> Run:
    """One run. TinyadErrors raised while building or launching propagate (the caller sorts
    them); those raised while differentiating are recorded."""
    stderr = io.StringIO()
    with warnings.catch_warnings(), contextlib.redirect_stderr(stderr):
        warnings.simplefilter("ignore", ti.NonDifferentiableWarning)
        inst = Instance(module, mode, fp, seed)
        result = Run({}, {})
        try:
            inst.differentiate()
        except RuleViolation as error:
            result.report = f"{type(error).__name__}: {error.report.rule}"
        except TinyadError as error:
            result.refusal = _refusal(error, module)
        result.values = inst.values()
        result.grads = {f.name: f.grad.to_numpy() for f in inst.p["params"]}
        point = [f.to_numpy() for f in inst.p["params"]]
        if fd and result.refusal is None and result.report is None:
            # the same program at the same point, unchecked: forward runs cost half as much
            unchecked = Instance(module, mode, fp, seed, check="off")
            for f, value in zip(unchecked.p["params"], point):
                f.from_numpy(value)
            result.fd = unchecked.finite_differences()
    printed = [line for line in stderr.getvalue().splitlines()
               if line.strip() and not line.startswith("[tinyad]")]
    if printed and result.report is None:
        result.report = "warning printed: " + printed[0].strip()[:120]
    return result


def _refusal(error: Exception, module) -> str:
    text = str(error)
    first = text.strip().splitlines()[0] if text.strip() else ""
    names_line = Path(module.__file__).name in text
    return f"{type(error).__name__}: {first[:100]}" + ("" if names_line else " [no user line]")


def compare(a: np.ndarray, b: np.ndarray, rtol: float) -> bool:
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    scale = max(1.0, float(np.max(np.abs(a), initial=0)), float(np.max(np.abs(b), initial=0)))
    return bool(np.all(np.abs(a - b) <= rtol * scale)) and not np.isnan(a).any() \
        and not np.isnan(b).any()


def check(program, modes=("interp", "fast"), f32: bool = False, seed: int = 0) -> Outcome:
    """Run `program` in each mode (f64, and f32 if asked), FD in f64 in the first mode."""
    try:
        module = load(program.source)
    except Exception as error:  # noqa: BLE001  (a generator bug: the source does not import)
        return Outcome("broken", f"source does not import: {type(error).__name__}: {error}")
    fd_ok = "ti.stop_grad(" not in program.source
    runs = {}
    try:
        for fp in ("f64", "f32") if f32 else ("f64",):
            for k, mode in enumerate(modes):
                runs[mode, fp] = run(module, mode, fp, seed, fd=(k == 0 and fp == "f64" and fd_ok))
    except TinyadError as error:
        return Outcome("refused" if "[no user line]" not in _refusal(error, module) else "broken",
                       _refusal(error, module), runs=runs)
    except Exception as error:  # noqa: BLE001
        return Outcome("broken", f"internal: {type(error).__name__}: {error}"[:200], runs=runs)
    return judge(runs, modes)


def check_seeded(seed: int, fast_every: int, f32: bool, small: bool):
    """Generate and check program `seed`, in fast mode too if `fast_every` divides the seed: ->
    (program, outcome without its runs' arrays, modes). The long profile's worker processes run
    this (tests/fuzz/__main__.py)."""
    program = gen.generate_seeded(seed, small=small)
    fast = fast_every and seed % fast_every == 0
    modes = ("interp", "fast") if fast else ("interp",)
    outcome = check(program, modes=modes, f32=bool(fast and f32), seed=seed)
    outcome.runs = {}
    return program, outcome, modes


def judge(runs: dict, modes) -> Outcome:
    reference = runs[modes[0], "f64"]
    for name, value in reference.values.items():
        if not np.isfinite(value).all():   # an argument left its op's domain: a generator bug
            return Outcome("broken", f"{name} is not finite in {modes[0]} f64", runs=runs)
    for key, r in runs.items():
        if r.report:
            return Outcome("false-report", f"{key[0]}: {r.report}", runs=runs)
    refusals = {r.refusal for r in runs.values()}
    if len(refusals) > 1:
        return Outcome("disagreed", f"refusals differ: {refusals}", runs=runs)
    first = runs[modes[0], "f64"]
    for (mode, fp), r in runs.items():
        other = runs[modes[0], fp]
        for name in other.values:
            if not compare(other.values[name], r.values[name], MODE_RTOL[fp]):
                return Outcome("disagreed", f"{mode} {fp}: value of {name}", runs=runs)
        if r.refusal is None:
            for name in other.grads:
                if not compare(other.grads[name], r.grads[name], MODE_RTOL[fp]):
                    return Outcome("disagreed", f"{mode} {fp}: gradient of {name}", runs=runs)
    if first.refusal:
        return Outcome("refused", first.refusal, runs=runs)
    kinks = checked = 0
    for name, (central, smooth) in (first.fd or {}).items():
        grad = first.grads[name]
        kinks += int((~smooth).sum())
        checked += int(smooth.sum())
        loss_scale = 1 + abs(float(first.values["loss"]))
        bad = smooth & (np.abs(grad - central) > FD_RTOL * np.abs(central) + FD_ATOL * loss_scale)
        if bad.any():
            index = tuple(int(i) for i in np.argwhere(bad)[0])
            return Outcome("disagreed", f"FD: d loss/d {name}{list(index)}: autodiff "
                           f"{grad[index]:.9g}, finite differences {central[index]:.9g}",
                           kinks, checked, runs)
    return Outcome("agreed", "" if first.fd is not None else "no FD (stop_grad)", kinks, checked,
                   runs)
