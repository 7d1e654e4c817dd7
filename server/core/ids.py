"""Time-ordered, coordination-free note ids (ULID: 48-bit ms timestamp + 80 random bits, Crockford base32).

Pure: imports only the standard library; time and randomness are passed in.
"""

from __future__ import annotations

_ALPHABET = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"


def new_ulid(ms: int, randomness: bytes) -> str:
    """A 26-character ULID. `randomness` must be 10 bytes."""
    if len(randomness) != 10:
        raise ValueError("a ULID needs 10 random bytes")
    value = (ms & 0xFFFF_FFFF_FFFF) << 80 | int.from_bytes(randomness, "big")
    chars = []
    for _ in range(26):
        chars.append(_ALPHABET[value & 31])
        value >>= 5
    return "".join(reversed(chars))
