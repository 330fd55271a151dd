"""The report of an adjoint a manual sweep skipped (tinyad/check/sweeps.py finds it); part of
the rule catalogue, tinyad/check/rules.py, which exports it (kept here to hold that file under
the line limit, as nonfinite_words.py is)."""
from __future__ import annotations

from tinyad.check.report import Access, Report
from tinyad.core.srcloc import SrcLoc


def adjoint_skipped(*, kernel: str, launch: int, field: str, later_kernel: str, gradient: str,
                    more: int, store_loc: SrcLoc | None, read: Access) -> Report:
    """A warning (stopping the gradient there may be meant): a manual sweep handed `field` a
    gradient and never ran the adjoint of the launch that wrote it; `gradient` was used."""
    through = f" and the {more} launch{'es' * (more > 1)} before it" if more else ""
    return Report(
        rule="Adjoint skipped (warning)", kernel=kernel, field=field, read=read,
        summary=f"{later_kernel}.grad() passed a gradient to {field}, but {kernel}.grad() "
                f"(forward launch #{launch}, which wrote {field}) has not run, and {gradient} "
                "is read.", write=Access(kind="store", loc=store_loc, kernel=kernel,
                                         launch=launch), write_replaces_read=False,
        consequence=f"the gradient that reached {field}.grad stops there: {gradient} misses "
                    f"what flows back through {kernel}{through} (Taichi: silently)",
        fix=f"call {kernel}.grad() after {later_kernel}.grad(), before reading {gradient} (each "
            "launch's .grad() in reverse launch order; in a checkpointed segment, of every "
            f"kernel it recomputes), or use ti.ad.Tape; if the gradient should stop at {field}, "
            f"read it with ti.stop_grad(...) in {later_kernel}")
