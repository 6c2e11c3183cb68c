"""Delta's isolation levels (spec C13), named as the table property spells them."""

from __future__ import annotations

__all__ = ["LEVELS", "SERIALIZABLE", "WRITE_SERIALIZABLE"]

SERIALIZABLE = "Serializable"
WRITE_SERIALIZABLE = "WriteSerializable"
LEVELS = (SERIALIZABLE, WRITE_SERIALIZABLE)
