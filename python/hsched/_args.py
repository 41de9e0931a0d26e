"""Argument checks shared by the API: wrong types raise ``TypeError`` and
wrong values ``ValueError``, each naming the argument."""

from __future__ import annotations

import datetime
import math
from typing import Optional, Union

from . import _native

#: A duration: a string with a unit as hierarchy files write it
#: (``"10ms"``, ``"1.5s"``), a whole number of nanoseconds, or a
#: :class:`datetime.timedelta`.
DurationLike = Union[str, int, datetime.timedelta]


def duration_ns(value: DurationLike, name: str, *, allow_zero: bool = False) -> int:
    """``value`` in nanoseconds; ``name`` is the argument it came from."""
    if isinstance(value, bool):
        raise TypeError(f"{name}: expected a duration such as '10ms', got a bool")
    if isinstance(value, str):
        try:
            ns = _native.parse_duration(value)
        except ValueError as e:
            raise ValueError(f"{name}: {e}") from None
    elif isinstance(value, datetime.timedelta):
        ns = (value.days * 86_400 + value.seconds) * 1_000_000_000 + value.microseconds * 1_000
    elif isinstance(value, int):
        ns = value
    elif isinstance(value, float):
        raise TypeError(
            f"{name}: a float is ambiguous; give a string with a unit ('{value}s') "
            "or whole nanoseconds (an int)"
        )
    else:
        raise TypeError(
            f"{name}: expected a duration ('10ms', an int of nanoseconds or a timedelta), "
            f"got {type(value).__name__}"
        )
    if ns < 0 or (ns == 0 and not allow_zero):
        raise ValueError(f"{name}: the duration must be {'non-negative' if allow_zero else 'longer than zero'}")
    if ns >= 1 << 64:
        raise ValueError(f"{name}: the duration is too long")
    return int(ns)


def opt_duration_ns(value: Optional[DurationLike], name: str) -> Optional[int]:
    """:func:`duration_ns`, passing ``None`` through."""
    return None if value is None else duration_ns(value, name)


def whole(value: object, name: str, lo: int, hi: int) -> int:
    """A whole number in ``[lo, hi]``."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name}: expected an int, got {type(value).__name__}")
    if not lo <= value <= hi:
        raise ValueError(f"{name}: {value} is out of range: give a whole number from {lo} to {hi}")
    return value


def number(value: object, name: str, lo: float = -math.inf, hi: float = math.inf) -> float:
    """A finite real number in ``[lo, hi]``."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{name}: expected a number, got {type(value).__name__}")
    v = float(value)
    if not math.isfinite(v) or not lo <= v <= hi:
        raise ValueError(f"{name}: {value} is out of range [{lo}, {hi}]")
    return v


def boolean(value: object, name: str) -> bool:
    """A bool (not a truthy object)."""
    if not isinstance(value, bool):
        raise TypeError(f"{name}: expected True or False, got {type(value).__name__}")
    return value


def text(value: object, name: str) -> str:
    """A string."""
    if not isinstance(value, str):
        raise TypeError(f"{name}: expected a str, got {type(value).__name__}")
    return value


def seed(value: Optional[object], name: str = "seed") -> Optional[int]:
    """A seed: a whole number from 0 to 2**64 - 1, or None."""
    if value is None:
        return None
    return whole(value, name, 0, (1 << 64) - 1)
