"""What the optimisation examples share: a progress bar over the loop, with the loss in it (only
when stderr is a terminal, so pipes and CI logs stay clean), and `--plot out.png` through the
optional `plot` extra (matplotlib)."""
from __future__ import annotations

import argparse
import sys


class LossBar:
    """`with LossBar(rounds, "optimising") as bar: ... bar.advance(loss)`."""

    def __init__(self, total: int, description: str, stream=None):
        self.total, self.description = total, description
        self.stream = stream or sys.stderr
        self._progress = self._task = None

    def __enter__(self):
        if hasattr(self.stream, "isatty") and self.stream.isatty():
            from rich.console import Console  # noqa: PLC0415  (only drawn in a terminal)
            from rich.progress import (BarColumn, MofNCompleteColumn, Progress,  # noqa: PLC0415
                                       TextColumn, TimeElapsedColumn)
            self._progress = Progress(
                TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                TextColumn("loss {task.fields[loss]}"), TimeElapsedColumn(),
                console=Console(file=self.stream), transient=False)
            self._progress.start()
            self._task = self._progress.add_task(self.description, total=self.total, loss="-")
        return self

    def advance(self, loss: float) -> None:
        if self._progress is not None:
            self._progress.update(self._task, advance=1, loss=f"{loss:.5g}")

    def __exit__(self, *exc):
        if self._progress is not None:
            self._progress.stop()


def parser(description: str) -> argparse.ArgumentParser:
    """An example's argument parser, with --plot PATH already in it."""
    arguments = argparse.ArgumentParser(description=description)
    arguments.add_argument("--plot", metavar="PATH", help="write a PNG picture to PATH "
                           "(needs matplotlib: pip install 'tinyad[plot]')")
    return arguments


def save_png(path: str | None, draw) -> bool:
    """Call draw(figure) and write the figure to `path` as a PNG; -> whether it was written.
    Without matplotlib, one line says how to get it."""
    if not path:
        return False
    try:
        import matplotlib  # noqa: PLC0415  (the optional `plot` extra)
    except ImportError:
        print("--plot needs matplotlib: pip install 'tinyad[plot]' (no picture written)",
              file=sys.stderr)
        return False
    matplotlib.use("Agg")   # headless
    from matplotlib import pyplot  # noqa: PLC0415
    figure = pyplot.figure(figsize=(8, 3.6), dpi=100)
    draw(figure)
    figure.tight_layout()
    figure.savefig(path)
    pyplot.close(figure)
    print(f"picture written to {path}")
    return True
