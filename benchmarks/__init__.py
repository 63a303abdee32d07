"""Side-by-side benchmarks of linen against Flax Linen, Haiku, Equinox and pure JAX.

Run ``python -m benchmarks.run --out bench-out`` (or ``--smoke`` for tiny sizes). The
models live in one file per library; :mod:`benchmarks._sizes` fixes their shapes, and
:mod:`benchmarks._peers` turns each library's models into the common
``init(key, x) -> params`` / ``apply(params, x) -> y`` pair the measures use.
"""
