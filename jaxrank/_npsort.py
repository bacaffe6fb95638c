"""Host-side (numpy) argsort of 64-bit integer keys by a value sort.

numpy sorts plain integers several times faster than it argsorts them. Here each key's lowest
bits are replaced by its index along the last axis, the packed keys are value-sorted, and the
indices are read back from the low bits: a stable argsort by the keys' remaining top bits. Keys
that differ only in the replaced bits come out in index order, which callers either accept (the
bits are a hash's) or check for. Kept free of JAX so that reading trec files need not import it.
"""

from __future__ import annotations

import numpy as np


def index_bits(n: int) -> int:
    """Bits that hold an index below ``n`` (at least one)."""
    return max(1, (n - 1).bit_length())


def argsort_high_bits(key: np.ndarray) -> np.ndarray:
    """Stable argsort along the last axis of int64 or uint64 ``key`` by its top
    ``64 - index_bits(n)`` bits; the result has ``key``'s dtype and shape."""
    low = key.dtype.type((1 << index_bits(key.shape[-1])) - 1)
    packed = key & ~low
    packed |= np.arange(key.shape[-1], dtype=key.dtype)
    packed.sort(axis=-1)
    packed &= low
    return packed
