"""Autodiff transforms, IR -> IR: reverse mode (the adjoint kernel)."""
