"""The rule catalogue: every autodiff rule tinyad checks, its error class, its report and how the
report is rendered. The checks that find violations live with the backends that run kernels."""
