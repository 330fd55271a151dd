"""The ratios of `python -m benchmarks`: tinyad's fast mode against each peer, side by side.

Per workload and size: tinyad fast fwd+bwd (warm) over each peer's (below 1: tinyad is
faster), and each system's cold compile seconds (first calls with an empty cache minus the
steady state). `plot` draws the fwd+bwd ratios as grouped bars (matplotlib, the `plot` extra).
"""
from __future__ import annotations

import math
import os

PEERS = ("taichi", "warp", "jax")
PEER_NAMES = {"taichi": "Taichi 1.7.4", "warp": "Warp", "jax": "JAX"}


def _fwd_bwd(rows, run):
    """{(workload, size): fwd+bwd seconds} of the rows of one run ("fast warm", ...)."""
    return {(w, s): r["fwd_bwd_s"] for w, s, m, r, _ in rows if m == run and "error" not in r}


def ratios(rows, peers, run="fast warm"):
    """[(workload, size, {peer: tinyad/peer fwd+bwd}, {system: cold compile s})], in row order;
    tinyad's from its `run` rows ("fast warm", or "fast captured": its ti.capture'd version)."""
    tinyad = _fwd_bwd(rows, run)
    warm = {peer: _fwd_bwd(rows, f"{peer} warm") for peer in peers}
    cold = {(w, s, m.split()[0]): r["compile_s"] for w, s, m, r, _ in rows
            if m.endswith(" cold") and "error" not in r}
    out, seen = [], set()
    for workload, size, *_ in rows:
        key = (workload, size)
        if key in seen or key not in tinyad:
            continue
        seen.add(key)
        out.append((workload, size,
                    {p: tinyad[key] / warm[p][key] for p in peers if key in warm[p]},
                    {m: cold[workload, size, m] for m in ("fast", *peers)
                     if (workload, size, m) in cold}))
    return out


def ratio_table(rows, peers):
    """Two tables of 80 columns or fewer: tinyad/peer fwd+bwd ratios, then cold compiles."""
    systems = ("fast", *peers)
    names = ["tinyad" if m == "fast" else m for m in systems]
    found = ratios(rows, peers)

    def table(title, columns, cell):
        head = f"{'workload':<12}{'size':<25}" + "".join(f"{c:>10}" for c in columns)
        lines = [title, head, "-" * len(head)]
        for workload, size, ratio, cold in found:
            lines.append(f"{workload:<12}{size[:24]:<25}" + "".join(cell(ratio, cold, k)
                                                              for k in range(len(columns))))
        return lines

    def number(value):
        return f"{value:>10.2f}" if value is not None else f"{'-':>10}"

    ratio_lines = table("tinyad fast fwd+bwd over each peer's (below 1: tinyad is faster)",
                        [f"/{p}" for p in peers],
                        lambda ratio, cold, k: number(ratio.get(peers[k])))
    found = ratios(rows, peers, "fast captured")
    if found and peers:
        ratio_lines += [""] + table("tinyad captured (ti.capture) fwd+bwd over each peer's",
                                    [f"/{p}" for p in peers],
                                    lambda ratio, cold, k: number(ratio.get(peers[k])))
    found = ratios(rows, peers)
    cold_lines = table("cold compile, seconds", names,
                       lambda ratio, cold, k: number(cold.get(systems[k])))
    return "\n".join(ratio_lines + [""] + cold_lines)


def plot(rows, peers, path):
    """Grouped bars of tinyad/peer per workload and size into path (a .png, or a directory for
    benchmarks.png in it): -> the file written, or why none was."""
    try:
        import matplotlib  # noqa: PLC0415
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt  # noqa: PLC0415
    except ImportError:
        return "no plot: matplotlib is not installed (pip install -e \".[plot]\")"
    if os.path.isdir(path):
        path = os.path.join(path, "benchmarks.png")
    data = ratios(rows, peers)
    shown = [p for p in peers if any(p in ratio for *_, ratio, _ in data)]
    if not data or not shown:
        return "no plot: no peer was measured"
    fig, ax = plt.subplots(figsize=(max(6.0, 1.6 * len(data)), 4))
    width = 0.8 / len(shown)
    for k, peer in enumerate(shown):
        xs = [i + (k - (len(shown) - 1) / 2) * width for i in range(len(data))]
        ys = [ratio.get(peer, math.nan) for *_, ratio, _ in data]
        ax.bar(xs, ys, width, label=PEER_NAMES[peer])
    ax.axhline(1.0, color="black", linewidth=0.8)
    ax.set_yscale("log")
    ax.set_xticks(range(len(data)), [f"{w}\n{s}" for w, s, *_ in data], fontsize=8)
    ax.set_ylabel("tinyad fast fwd+bwd / peer's\n(below 1: tinyad is faster)")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return f"plot: {path}"
