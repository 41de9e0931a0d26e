#!/usr/bin/env python3
"""Regehr 2001, §5.3.3: the worked examples of providing a reservation
through a proportional-share scheduler, as guarantee chains. §5.3.3.1: an
SFQ scheduler (10 ms quantum) receives RESCS 10 20 and schedules T1
(weight 0.5) and T2-T6 (0.1 each); what reservation does T1 get? §5.3.3.2:
an EEVDF scheduler (error one 10 ms quantum) at the root must give a video
thread 5 ms every 33 ms; what share does that take, and what quantum would
keep the over-reservation to 10 %? Each step is hsched's guarantee code
(hsched.guarantee, the hsched-guarantee crate that hsched check uses),
printed beside the dissertation's figure. Analysis only: no simulation, so
--short is the same.

    python experiments/worked_examples_5_3_3.py
"""

from __future__ import annotations

import re
import sys
import time
from typing import List, Tuple

from hsched import guarantee as g
from _common import Check, arguments, report


def numbers(text: str) -> Tuple[str, List[float]]:
    """'PSBE 0.25 75' -> ('PSBE', [0.25, 75.0])."""
    kind, *rest = text.split()
    return kind, [float(x) for x in rest]


def chain_checks(label: str, got: str, doc: str, tol: float = 1e-9) -> List[Check]:
    """One check per number of a guarantee, and that the kind is the same."""
    gk, gv = numbers(got)
    dk, dv = numbers(doc)
    checks = [Check(f"{label}: kind {doc.split()[0]} (1 = same)", 1, 1 if gk == dk else 0, 0)]
    names = {"PSBE": ["share", "error ms"], "RESCS": ["amount ms", "period ms"]}.get(dk, ["a", "b"])
    checks += [Check(f"{label}: {n}", d, x, tol) for n, d, x in zip(names, dv, gv)]
    return checks


def main() -> int:
    arguments(__doc__.splitlines()[0])
    started = time.monotonic()
    checks: List[Check] = []
    print("§5.3.3.1, SFQ (q = 10 ms) under RESCS 10 20, T1 weight 0.5, T2-T6 weight 0.1:")
    # Theorem 5.4: RESCS 10 20 -> PSBE (10/20) (10/20 (20 - 10)) = PSBE 0.5 5.
    c = g.convert("RESCS 10 20", "PSBE")
    print(f"  1. RESCS 10 20 as PSBE: {c.guarantee:<16} dissertation PSBE 0.5 5      [{c.rule}]")
    checks += chain_checks("Theorem 5.4, RESCS 10 20 as PSBE", c.guarantee, "PSBE 0.5 5")
    # Equation 5.2 through the ps mapping: T1's weight is 0.5 of 1.0 (given
    # as 5 and 1, the same ratios, which binary fractions hold exactly).
    p = g.provide("ps", "RESCS 10 20", [{"share": 5}] + [{"share": 1}] * 5, quantum="10ms")
    print(f"  2. SFQ uses it as {p.accepted}; T1 receives {p.children[0]:<12} dissertation PSBE 0.25 75  [{p.rules[0]}]")
    checks += chain_checks("Equation 5.2, T1's guarantee", p.children[0], "PSBE 0.25 75")
    print(f"     T2-T6 each receive {p.children[1]}")
    # Theorem 5.7 at y = 400 ms: RESCS (400·0.25 - 75) 400 = RESCS 25 400.
    r = g.convert(p.children[0], "RESCS", period="400ms")
    print(f"  3. as a reservation at 400 ms: {r.guarantee:<12} dissertation RESCS 25 400  [{r.rule}]")
    checks += chain_checks("Theorem 5.7, T1 at 400 ms", r.guarantee, "RESCS 25 400")
    _, (amount, period) = numbers(r.guarantee)
    checks.append(Check("T1's guaranteed share in any 400 ms, %", 6.25, 100 * amount / period, 1e-9))
    ok, via = g.satisfies(p.children[0], "RESCS 25 400")
    bad, why = g.satisfies(p.children[0], "RESCS 26 400")
    print(f"     requesting RESCS 25 400: {'met' if ok else 'not met'} ({via}); RESCS 26 400: "
          f"{'met' if bad else 'not met'} ({why})")
    checks.append(Check("RESCS 25 400 is met (1 = yes)", 1, int(ok), 0))
    checks.append(Check("RESCS 26 400 is met (0 = no)", 0, int(bad), 0))
    # 10 % pessimism: y = δ / (s · 0.1) = 75 / 0.025 = 3000 ms.
    y = g.period_for_pessimism(0.25, "75ms", 0.10)
    r3 = g.convert(p.children[0], "RESCS", period=f"{y}ns")
    print(f"  4. period for 10 % pessimism: {y / 1e6:g} ms (dissertation 3000 ms, 'or 3 s'); "
          f"there T1 gets {r3.guarantee}")
    checks.append(Check("period for 10 % pessimism, ms", 3000, y / 1e6, 1e-6))
    _, (a3, p3) = numbers(r3.guarantee)
    checks.append(Check("its share at 3000 ms, % of 25 %", 90, 100 * (a3 / p3) / 0.25, 1e-6))

    print("\n§5.3.3.2, EEVDF (δ = one 10 ms quantum) at the root, a video thread needing 5 ms / 33 ms:")
    s = g.psbe_share_for("5ms", "33ms", "10ms")
    print(f"  1. share for 5/33 with δ = 10 ms: s = (5 + 10)/33 = {s:.4f} (dissertation 0.45)")
    checks.append(Check("EEVDF share needed for 5 ms / 33 ms", 0.45, s, 0.005))
    for share in (s, 0.44):
        ok, why = g.satisfies(f"PSBE {share!r} 10", "RESCS 5 33")
        print(f"     PSBE {share:.4f} 10 gives RESCS 5 33: {'yes' if ok else 'no'} ({why})")
        checks.append(Check(f"PSBE {share:.2f} 10 meets RESCS 5 33 (1 = yes)", 1 if share == s else 0, int(ok), 0))
    print(f"  2. over-reservation: {s / (5 / 33):.1f}x the thread's 15 % (dissertation: 45 % for 15 %)")
    checks.append(Check("allocated / needed", 3.0, s / (5 / 33), 0.01))
    s10 = 1.1 * 5 / 33
    q = g.psbe_error_for("5ms", "33ms", s10)
    print(f"  3. at 10 % over-reservation (s = {s10:.4f}) the quantum may be {q / 1e6:.3f} ms "
          "(dissertation: 'the required scheduling quantum is 0.5 ms')")
    checks.append(Check("quantum for 10 % over-reservation, ms", 0.5, q / 1e6, 1e-6))
    for err in (0.5, 0.6):
        ok, _ = g.satisfies(f"PSBE {s10!r} {err}", "RESCS 5 33")
        checks.append(Check(f"PSBE {s10:.4f} {err} meets RESCS 5 33 (1 = yes)", 1 if err == 0.5 else 0, int(ok), 0))
    print()
    return report("Regehr 2001, §5.3.3: reservations from proportional share, step by step",
                  "Regehr 2001, §5.3.3.1 (SFQ) and §5.3.3.2 (EEVDF)", checks, started)


if __name__ == "__main__":
    sys.exit(main())
