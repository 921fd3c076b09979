"""Ids: random ones (run ids, plan ids, owner ids: ``uuid.uuid4().hex`` without importing
:mod:`uuid`, which imports :mod:`platform` at start-up, ~10-20 ms of a one-call run) and
short names derived from text (:func:`checksum_hex`)."""

from __future__ import annotations

import os
import zlib

__all__ = ["checksum_hex", "uuid4_hex"]


def uuid4_hex() -> str:
    """32 hex digits of a random (version 4, RFC 4122 variant) UUID, as ``uuid.uuid4().hex``."""
    raw = bytearray(os.urandom(16))
    raw[6] = (raw[6] & 0x0F) | 0x40  # version 4
    raw[8] = (raw[8] & 0x3F) | 0x80  # the RFC 4122 variant
    return raw.hex()


def checksum_hex(data: bytes) -> str:
    """16 hex digits (CRC-32 and Adler-32) naming ``data``: a file or module name derived
    from paths and stamps, where nobody chooses the input to collide.  zlib, not hashlib,
    whose import (OpenSSL) costs a start-up ~5 ms of CPU."""
    return f"{zlib.crc32(data):08x}{zlib.adler32(data):08x}"
