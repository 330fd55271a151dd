"""The rule catalogue: every autodiff rule tinyad checks, its error class, its report and how the
report is rendered; the launch checks both backends run; the judge that alone decides an
element-level rule from either backend's evidence (trail.py within a launch, changes.py across
launches); and the proofs from a kernel's IR that let them leave accesses unchecked (boxes.py,
hazards.py, zeroing.py, scans.py, reached.py, checkpoints.py)."""
