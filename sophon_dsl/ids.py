"""Random ids (run ids, plan ids, owner ids): ``uuid.uuid4().hex`` without importing
:mod:`uuid`, which imports :mod:`platform` at start-up (~10-20 ms of a one-call run)."""

from __future__ import annotations

import os

__all__ = ["uuid4_hex"]


def uuid4_hex() -> str:
    """32 hex digits of a random (version 4, RFC 4122 variant) UUID, as ``uuid.uuid4().hex``."""
    raw = bytearray(os.urandom(16))
    raw[6] = (raw[6] & 0x0F) | 0x40  # version 4
    raw[8] = (raw[8] & 0x3F) | 0x80  # the RFC 4122 variant
    return raw.hex()
