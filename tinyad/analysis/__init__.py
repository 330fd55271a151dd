"""IR queries, a layer above the core and below its users (autodiff, check, the backends): which
locals a block assigns and reads, loop trip counts and bounds, the loads an adjoint replays
(queries.py), and every global access with the loops around it (sites.py). They answer; the
checker's proofs built on them live in tinyad/check/."""
