"""Struct fields and field offsets, as Taichi 1.7.4 has them: `ti.Struct.field`,
`ti.types.struct(...).field`, `s[i].member` in kernels and Python scope, gradients through float
members; `offset=` on fields (indices start at the offset, bounds checked against its range).
Gradients are compared with analytic values."""
import numpy as np
import pytest

import tinyad as ti


def _particles(n=4):
    vec2 = ti.types.vector(2, float)
    particle = ti.types.struct(pos=vec2, mass=float, id=ti.i32)
    return particle.field(shape=n, needs_grad=True)


def test_struct_members_in_kernels_and_python_scope(mode):
    ps = _particles()

    @ti.kernel
    def init():
        for i in ps:
            ps[i].pos = ti.Vector([i * 1.0, i + 0.5])
            ps[i].mass = 1.0 + i
            ps[i].id = i * 10

    init()
    arrays = ps.to_numpy()
    assert sorted(arrays) == ["id", "mass", "pos"]
    assert arrays["pos"].tolist() == [[0, 0.5], [1, 1.5], [2, 2.5], [3, 3.5]]
    assert ps[2].mass == 3.0 and ps[3].id == 30 and list(ps[1].pos) == [1.0, 1.5]
    ps[3].mass = 7.0                      # Python scope writes through
    ps[0] = {"pos": [5.0, 6.0], "mass": 2.0, "id": -1}
    assert ps.mass.to_numpy().tolist() == [2.0, 2.0, 3.0, 7.0]
    assert ps.pos[0].to_numpy().tolist() == [5.0, 6.0] and ps.id[0] == -1
    assert ps.shape == (4,) and ps.keys() == ["pos", "mass", "id"]
    assert ps.id.grad is None             # integer members have no gradient


def test_gradients_flow_through_float_members(mode):
    ps = _particles()
    loss = ti.field(float, shape=(), needs_grad=True)
    pos = np.array([[0.5, 1.0], [1.0, -1.5], [2.0, 0.25], [-3.0, 3.5]])
    mass = np.array([1.0, 2.0, 3.0, 0.5])
    ps.from_numpy({"pos": pos, "mass": mass, "id": np.arange(4, dtype=np.int32)})

    @ti.kernel
    def energy():
        for i in ps:
            p = ps[i]                      # a copy of every member
            loss[None] += p.mass * p.pos.norm_sqr() + ps[i].pos[1] * p.id

    with ti.ad.Tape(loss=loss):
        energy()
    ids = np.arange(4)
    assert loss[None] == pytest.approx(np.sum(mass * (pos ** 2).sum(1) + pos[:, 1] * ids))
    expected = 2 * mass[:, None] * pos + np.stack([np.zeros(4), ids], 1)
    np.testing.assert_allclose(ps.pos.grad.to_numpy(), expected)
    np.testing.assert_allclose(ps.mass.grad.to_numpy(), (pos ** 2).sum(1))


def test_a_struct_copy_keeps_its_values_and_structs_assign_whole(mode):
    s = ti.Struct.field({"a": float, "v": ti.types.vector(3, float)}, shape=2)
    st = ti.types.struct(a=float, v=ti.types.vector(3, float))

    @ti.func
    def make(i):
        return st(a=i * 2.0, v=ti.Vector([1.0, 2.0, 3.0]) * i)

    @ti.kernel
    def fill():
        for i in range(2):
            s[i] = make(i + 1)

    @ti.kernel
    def copy_then_write() -> float:
        p = s[1]
        s[1].a = 100.0                     # p keeps the value it copied
        p.a += 0.5
        p.v[2] = -1.0
        return p.a + s[1].a + p.v[2] + s[1].v[2]

    fill()
    assert s.a.to_numpy().tolist() == [2.0, 4.0]
    assert s.v.to_numpy().tolist() == [[1, 2, 3], [2, 4, 6]]
    assert copy_then_write() == pytest.approx(4.5 + 100.0 - 1.0 + 6.0)


def test_struct_fields_placed_under_root(mode):
    s = ti.Struct.field({"x": float, "y": float})
    ti.root.dense(ti.i, 3).place(s)
    loss = ti.field(float, shape=(), needs_grad=True)
    ti.root.lazy_grad()

    @ti.kernel
    def f():
        for i in s:
            loss[None] += s[i].x * s[i].y

    s.x.from_numpy(np.array([1.0, 2.0, 3.0]))
    s.y.from_numpy(np.array([4.0, 5.0, 6.0]))
    with ti.ad.Tape(loss=loss):
        f()
    assert loss[None] == pytest.approx(32.0)
    assert s.x.grad.to_numpy().tolist() == [4.0, 5.0, 6.0]
    assert s.y.grad.to_numpy().tolist() == [1.0, 2.0, 3.0]


def test_unknown_member_names_the_line(mode):
    s = ti.Struct.field({"a": float}, shape=2)

    @ti.kernel
    def typo():
        s[0].b = 1.0

    with pytest.raises(ti.TinyadError, match="no member 'b'") as info:
        typo()
    assert "s[0].b = 1.0" in str(info.value)


# ---- offset= ------------------------------------------------------------------------------------

def test_offset_fields_index_from_their_offset(mode):
    x = ti.field(float, shape=4, offset=-2, needs_grad=True)
    v = ti.Vector.field(2, float, shape=(3, 2), offset=(1, -1), needs_grad=True)
    y = ti.field(float)
    ti.root.dense(ti.i, 3).place(y, offset=(10,))
    loss = ti.field(float, shape=(), needs_grad=True)

    @ti.kernel
    def fill():
        for i in x:
            x[i] = i * 1.5
        for i, j in v:
            v[i, j] = ti.Vector([i, j]) * 1.0
        for i in y:
            y[i] = i

    @ti.kernel
    def f():
        for i in range(-2, 2):
            loss[None] += x[i] ** 3
        for I in ti.grouped(v):
            loss[None] += v[I].dot(v[I])

    fill()
    assert x.to_numpy().tolist() == [-3.0, -1.5, 0.0, 1.5]
    assert x[-2] == -3.0 and y[11] == 11.0 and list(v[3, -1]) == [3.0, -1.0]
    with ti.ad.Tape(loss=loss):
        f()
    xs = np.arange(-2, 2) * 1.5
    i, j = np.meshgrid(np.arange(1, 4), np.arange(-1, 1), indexing="ij")
    assert loss[None] == pytest.approx(np.sum(xs ** 3) + np.sum(i ** 2 + j ** 2))
    np.testing.assert_allclose(x.grad.to_numpy(), 3 * xs ** 2)
    assert x.grad[-1] == pytest.approx(3 * 1.5 ** 2)
    np.testing.assert_allclose(v.grad.to_numpy(), 2 * v.to_numpy())


def test_offset_bounds_are_checked_against_the_offset_range(mode):
    x = ti.field(float, shape=4, offset=-2)

    @ti.kernel
    def past_the_end():
        x[2] = 1.0

    with pytest.raises(ti.TinyadIndexError, match=r"index \(2,\).*offset \(-2,\)") as info:
        x[2] = 0.0
    assert "the indices run over [-2, 2)" in str(info.value)     # the hint gives the real range
    assert x[-2] == 0.0
    if mode == "interp":      # fast mode checks bounds under ti.init(debug=True), as Taichi does
        with pytest.raises(ti.TinyadIndexError, match=r"index \(2,\).*offset \(-2,\)"):
            past_the_end()
    with pytest.raises(ti.TinyadTypeError, match="offset"):
        ti.field(float, shape=(2, 2), offset=(1,))


def test_funcs_take_structs_by_value_and_kernels_refuse_struct_arguments(mode):
    st = ti.types.struct(a=float, b=ti.i32)
    s = st.field(shape=2)

    @ti.func
    def doubled(p: st) -> st:
        p.a *= 2                           # a copy: s[1] keeps its value
        return p

    @ti.kernel
    def k():
        s[0] = doubled(s[1])

    @ti.kernel
    def takes_struct(p: st):
        s[0].a = p.a

    s[1] = {"a": 1.5, "b": 3}
    k()
    assert (s[0].a, s[0].b, s[1].a) == (3.0, 3, 1.5)
    with pytest.raises(ti.TinyadTypeError, match="kernel argument 'p' is a struct"):
        takes_struct(st(a=1.0, b=2))


def test_a_dataclass_is_a_struct_type_whose_funcs_are_its_methods(mode):
    """`@ti.dataclass` (Taichi's test_custom_struct / test_struct cases): members from the
    annotations, values made by name or in order, nested dataclasses, ti.func methods on a
    value and on a field's element (and a gradient through one, against its derivative), a
    Python-scope method. tinyad said "no ti.dataclass"."""
    vec3 = ti.types.vector(3, float)

    @ti.dataclass
    class Sphere:
        center: vec3
        radius: float

        @ti.func
        def volume(self):
            return 4.0 / 3.0 * np.pi * self.radius ** 3

        def py_scope_area(self):
            return 4.0 * np.pi * self.radius ** 2

    @ti.dataclass
    class Pair:
        first: Sphere
        weight: float

        @ti.func
        def weighted_volume(self):
            return self.weight * self.first.volume()

    assert Sphere(center=vec3(0.0), radius=2.0).py_scope_area() == pytest.approx(16 * np.pi)
    made = Pair(Sphere(vec3(1.0, 2.0, 3.0), 0.5))           # in order; weight left zero
    assert (made.first.radius, made.weight) == (0.5, 0.0)

    spheres = Sphere.field(shape=3, needs_grad=True)
    loss = ti.field(float, shape=(), needs_grad=True)
    out = ti.field(float, shape=2)

    @ti.kernel
    def total():
        for i in spheres:
            loss[None] += spheres[i].volume()

    @ti.kernel
    def values():
        p = Pair(Sphere(vec3(1.0, 2.0, 3.0), 2.0), weight=3.0)
        out[0] = p.weighted_volume()
        out[1] = p.first.center.sum()

    radii = np.array([1.0, 1.5, 2.0])
    spheres.radius.from_numpy(radii)
    with ti.ad.Tape(loss=loss):
        total()
    assert loss[None] == pytest.approx(sum(4 / 3 * np.pi * radii ** 3), rel=1e-6)
    assert spheres.radius.grad.to_numpy() == pytest.approx(4 * np.pi * radii ** 2, rel=1e-6)
    values()
    assert out.to_numpy() == pytest.approx([3 * 4 / 3 * np.pi * 8, 6.0], rel=1e-6)


def test_a_dataclass_member_with_a_default_is_refused(mode):
    with pytest.raises(ti.TinyadSyntaxError, match="Default value in @dataclass"):
        @ti.dataclass
        class Foo:
            a: int
            b: float = 3.14
