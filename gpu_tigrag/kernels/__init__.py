"""Numba kernels: each has a `numba.njit` CPU twin and a `numba.cuda` kernel with the same contract.

The CUDA kernels are compiled only when first launched, so importing this package never
needs a GPU; under NUMBA_ENABLE_CUDASIM=1 they run on the CPU simulator for tests.
"""
