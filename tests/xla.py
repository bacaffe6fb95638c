"""XLA's optimisation passes switched for a block: off for modules of many small programs,
on again for the programs whose run outweighs their compile."""

import contextlib

import jax


@contextlib.contextmanager
def optimisations(on: bool):
    before = jax.config.read("jax_disable_most_optimizations")
    jax.config.update("jax_disable_most_optimizations", not on)
    try:
        yield
    finally:
        jax.config.update("jax_disable_most_optimizations", before)
