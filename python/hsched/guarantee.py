"""The guarantee algebra of Regehr 2001, ch. 5, as functions: convert a
guarantee into another kind (Table 5.2), test whether one satisfies
another, ask what a scheduler makes of the guarantee it receives and
gives its children (Table 5.1), and the §5.3.3 solutions of Theorem 5.7.
The same code as ``hsched check`` and ``hsched analyze`` (the
``hsched-guarantee`` crate).

Guarantees are strings as hierarchy files write them, times in
milliseconds: ``"RESCS 10 20"``, ``"PSBE 0.5 5"``, ``"ALL"``.

    >>> from hsched import guarantee as g
    >>> g.convert("RESCS 10 20", "PSBE").guarantee
    'PSBE 0.5 5'
    >>> g.provide("ps", "RESCS 10 20", [{"share": 5}] + [{"share": 1}] * 5, quantum="10ms").children[0]
    'PSBE 0.25 75'
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, List, Mapping, Optional, Sequence

from . import _args, _native
from ._args import DurationLike

__all__ = ["Conversion", "Provision", "convert", "satisfies", "provide", "psbe_share_for",
           "psbe_error_for", "period_for_pessimism"]


@dataclass(frozen=True)
class Conversion:
    """A converted guarantee and the rule of Table 5.2 that allows it."""

    guarantee: str
    rule: str


@dataclass(frozen=True)
class Provision:
    """What a scheduler does with a received guarantee: the guarantee it
    uses it as (``accepted``), and each child's guarantee with its rule."""

    accepted: str
    children: List[str]
    rules: List[str]


def convert(guarantee: str, to: str, *, period: Optional[DurationLike] = None) -> Conversion:
    """``guarantee`` as a guarantee of kind ``to`` (``"RESCS"``, ``"PSBE"``,
    ...); ``period`` is the target reservation's period (Theorem 5.7 needs
    one). Raises ``ValueError`` for a conversion Table 5.2 does not allow."""
    g = _args.text(guarantee, "guarantee")
    k = _args.text(to, "to")
    p = _args.opt_duration_ns(period, "period")
    out, rule = _native.guarantee_convert(g, k, p)
    return Conversion(out, rule)


def satisfies(received: str, required: str) -> "tuple[bool, str]":
    """``(True, received as the required kind)`` when ``received`` promises
    at least ``required``, else ``(False, why not)``."""
    return _native.guarantee_satisfies(_args.text(received, "received"), _args.text(required, "required"))


def provide(policy: str, received: str, children: Sequence[Mapping[str, Any]], *,
            quantum: Optional[DurationLike] = None, cap: Optional[float] = None) -> Provision:
    """What scheduler ``policy`` gives each of ``children`` when it receives
    ``received``: each child a dict of the edge parameters its parent keeps
    (``share``, ``priority``, ``amount`` and ``period`` as durations).
    ``quantum``: a ``ps`` instance's quantum (Equation 5.2's q); ``cap``:
    a ``rez`` instance's admission cap."""
    pol = _args.text(policy, "policy")
    rec = _args.text(received, "received")
    if not isinstance(children, (list, tuple)):
        raise TypeError(f"children: expected a list of dicts, got {type(children).__name__}")
    edges: List[Dict[str, float]] = []
    for i, c in enumerate(children):
        if not isinstance(c, Mapping):
            raise TypeError(f"children[{i}]: expected a dict, got {type(c).__name__}")
        e: Dict[str, float] = {}
        for key, value in c.items():
            if key in ("amount", "period"):
                e[f"{key}_ns"] = float(_args.duration_ns(value, f"children[{i}].{key}"))
            elif key == "share":
                e[key] = _args.number(value, f"children[{i}].share", 0.0)
            elif key == "priority":
                e[key] = float(_args.whole(value, f"children[{i}].priority", -(2**53), 2**53))
            else:
                raise ValueError(f"children[{i}]: `{key}` is not one of share, priority, amount, period")
        edges.append(e)
    q = _args.opt_duration_ns(quantum, "quantum")
    cp = None if cap is None else _args.number(cap, "cap", 0.0, 1.0)
    accepted, given = _native.guarantee_provide(pol, rec, edges, q, cp)
    return Provision(accepted, [g for g, _ in given], [r for _, r in given])


def psbe_share_for(amount: DurationLike, period: DurationLike, error: DurationLike) -> float:
    """The share s with which PSBE s ``error`` converts into ``amount`` per
    ``period`` (Theorem 5.7 solved for s: (amount + error) / period)."""
    return _native.psbe_share_for(_args.duration_ns(amount, "amount"), _args.duration_ns(period, "period"),
                                  _args.duration_ns(error, "error", allow_zero=True))


def psbe_error_for(amount: DurationLike, period: DurationLike, share: float) -> Optional[int]:
    """The largest error (ns) with which PSBE ``share`` still converts into
    ``amount`` per ``period``; None when the share is too small."""
    return _native.psbe_error_for(_args.duration_ns(amount, "amount"), _args.duration_ns(period, "period"),
                                  _args.number(share, "share", 0.0, 1.0))


def period_for_pessimism(share: float, error: DurationLike, pessimism: float) -> Optional[int]:
    """The shortest reservation period (ns) at which PSBE ``share``
    ``error`` converts into a reservation within ``pessimism`` (a fraction)
    of the share."""
    return _native.period_for_pessimism(_args.number(share, "share", 0.0, 1.0),
                                        _args.duration_ns(error, "error", allow_zero=True),
                                        _args.number(pessimism, "pessimism", 0.0, 1.0))
