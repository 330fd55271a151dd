"""The check of a custom gradient (a `grad_for` function) that assigns a gradient
instead of adding to it: a store that replaces a nonzero gradient discards what earlier
adjoints added (`custom_gradient_assigns`). The boxes such a kernel may store into are copied
before it runs; after it, the judge compares them (tinyad/check/changes.py)."""
from __future__ import annotations

from tinyad.check import changes
from tinyad.check.report import Access
from tinyad.check.regions import box_slices, regions_of


class CustomGradientStores:
    """A mixin of the checker (tinyad/check/replaycheck.py WitnessChecker)."""

    def before_custom_grad(self, traced, scalars):
        """Inside a grad_for function: the .grad boxes a kernel may store into, before it does."""
        if not self.in_custom_grad:
            return None
        regions = regions_of(traced)
        values = regions.arg_values(scalars)
        saved = []
        for site in regions.grad_stores:
            if self.gradient_consumed(site.field):
                continue
            box = regions.box(site, values)
            if box is not None:
                saved.append((site, box, self.host(site.field)[box_slices(box)].copy()))
        return saved

    def after_custom_grad(self, saved, launch) -> None:
        """A store that replaced a nonzero gradient discards what earlier adjoints added (the
        judge decides, check/changes.py)."""
        for site, box, before in saved or ():
            error = changes.gradient_assigned(
                site.field.name, before, self.host(site.field)[box_slices(box)],
                Access("store", site.node.loc, launch.kernel, launch.number, None, None,
                       launch.time), tuple(lo for lo, _ in box))
            if error is not None:
                self.report(error)
                return
