"""Peers imported as their users install them, with the shims the current jax needs."""

from __future__ import annotations

import functools
import types


def rax():
    """rax 0.4, whose transformations decorate with ``jax.util.wraps``, which current jax lacks."""
    import jax

    if not hasattr(jax, "util") or not hasattr(jax.util, "wraps"):
        jax.util = types.SimpleNamespace(wraps=lambda f, **_: functools.wraps(f))
    import rax as module

    return module
