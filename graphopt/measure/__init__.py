"""Measuring on this machine (apart from importing, :mod:`graphopt.importers`): every op of an
imported graph timed for real (:mod:`.profile`), Inductor's compiled kernels timed with the ops
they compute (:mod:`.kernels`), and this CPU as a device from short microbenchmarks
(:mod:`.machine`). Each imports torch when called."""
