"""The rule checker a backend runs, the same for every backend: the launch checks and the replay
witness (tinyad/check/replaycheck.py) with NaN and infinity in gradients (check/nonfinite.py),
and what a checking backend keeps of its kernels' recording variants (check/accessrecord.py):
the one that records a launch's accesses that its IR does not settle, and the one that finds
which read a report names (check/readevidence.py). The backend runs both variants as any
other kernel: the interpreter walks them, fast mode compiles them.
"""
from __future__ import annotations

from tinyad.check.accessrecord import AccessRecorder
from tinyad.check.facts import kernel_facts
from tinyad.check.nonfinite import NonFiniteChecks
from tinyad.check.readevidence import draws_random, recorded_again
from tinyad.check.replaycheck import WitnessChecker


class Checker(NonFiniteChecks, WitnessChecker):
    """The rule checker of one ti.init."""


class CheckingBackend:
    """What a backend that checks keeps: its checker and its kernels' recording variants (a
    mixin of the backends: they call `start_checker` once their storage is set, and run the
    variants with their `prepare`, `storage` and `rng`)."""

    def start_checker(self, config) -> Checker:
        """The rule checker of ti.init's `config` (its check is not "off")."""
        checker = Checker(config.check, self.storage.to_host)
        checker.checks_nonfinite = config.check_nonfinite
        checker.evidence_of = self._read_evidence
        self.unchecked_noted: set = set()   # kernels whose in-launch check the user was told of
        self.recorders: dict = {}           # (traced, fields) -> AccessRecorder or None
        self.evidence_recorders: dict = {}  # (traced, id(field)) -> the recorder of its
        # replayed loads of that field, or None
        return checker

    def _read_evidence(self, launch, fld):
        """What a launch's replayed loads of `fld` read, run again for a report that names one
        (check/readevidence.py), or None where that cannot be known."""
        traced = launch.compiled
        key = (traced, id(fld))
        if key not in self.evidence_recorders:
            self.evidence_recorders[key] = None if draws_random(traced.ir) else \
                AccessRecorder.of(traced.ir, [fld], kernel_facts(traced).replayed,
                                  replayed_only=True)
        recorder = self.evidence_recorders[key]
        if recorder is None:
            return None
        try:
            return recorded_again(recorder, launch, self.storage, self.rng, self.prepare)
        except Exception:  # noqa: BLE001  (the report names the box's read then, as before)
            self.evidence_recorders[key] = None
            return None
