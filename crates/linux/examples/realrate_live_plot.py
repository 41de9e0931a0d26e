#!/usr/bin/env python3
"""Plot a live real-rate pipeline run (docs/real-rate.md, "Live").

Input: the CSV that `HSCHED_PROGRESS_TRACE=FILE hsched run
examples/pipeline-live.toml` writes (crates/linux/src/progress.rs):

  q,t_s,queue,fill,size,consumers,producers   one line per queue and sample
  p,t_s,thread,proportion,cpu_ns,rchar,wchar,pid  one line per monitored thread

Output: an SVG with throughput, fill levels and proportions over time, and
a summary on stdout. Python 3 standard library only.

  python3 crates/linux/examples/realrate_live_plot.py TRACE.csv OUT.svg
"""

import sys
from collections import defaultdict

PULSES = [(4.0, 6.0), (8.0, 9.0), (11.0, 11.5)]  # on the source's clock
WIN = 0.2  # seconds per throughput / CPU window


def load(path):
    queues = defaultdict(list)  # name -> [(t, fill/size, consumers, producers)]
    threads = defaultdict(list)  # name -> [(t, prop, cpu_ns, rchar, wchar)]
    pids = {}  # thread name -> process id (string)
    for line in open(path):
        f = line.rstrip("\n").split(",")
        if f[0] == "q":
            queues[f[2]].append(
                (float(f[1]), float(f[3]) / float(f[4]), f[5].split(), f[6].split()))
        elif f[0] == "p":
            threads[f[2]].append(
                (float(f[1]), float(f[3]), int(f[4]), int(f[5]), int(f[6])))
            pids[f[2]] = f[7]
    return queues, threads, pids


def stages(queues):
    """source, filter, sink pids (as strings) and the two queue names."""
    cons, prods = {}, {}
    for name, s in queues.items():
        if len(s) < 50:  # short-lived helper pipes
            continue
        cons[name], prods[name] = s[-1][2][0], s[-1][3][0]
    # q1: source -> filter; q2: filter -> sink; the filter is on both.
    q1 = next(q for q in cons if cons[q] in prods.values())
    q2 = next(q for q in cons if q != q1)
    return prods[q1], cons[q1], cons[q2], q1, q2


def windows(series, idx, t0, t1):
    """Per-window rate of the counter at index idx of series [(t, ...)]."""
    out, k, last = [], 0, None
    t = t0
    while t < t1:
        while k < len(series) and series[k][0] < t + WIN:
            k += 1
        if k == 0:
            t += WIN
            continue
        v = series[k - 1][idx]
        if last is not None:
            out.append((t + WIN / 2, (v - last) / WIN))
        last, t = v, t + WIN
    return out


def averaged(series, t1):
    """Mean of a sampled value [(t, v)] per window."""
    out, t = [], 0.0
    while t < t1:
        vs = [v for tt, v in series if t <= tt < t + WIN]
        if vs:
            out.append((t + WIN / 2, sum(vs) / len(vs)))
        t += WIN
    return out


def mean(xs):
    return sum(xs) / len(xs) if xs else float("nan")


def main():
    trace, out = sys.argv[1], sys.argv[2]
    queues, threads, pids = load(trace)
    src, flt, snk, q1, q2 = stages(queues)
    name = {}
    for th in threads:
        pid = pids[th]
        for role, p in (("source", src), ("filter", flt), ("sink", snk)):
            if pid == p:
                name[role] = th
    name["hog"] = "hog"
    t_src = threads[name["source"]][0][0]  # the source's clock starts here
    pulses = [(t_src + a, t_src + b) for a, b in PULSES]
    t_end = max(s[-1][0] for s in threads.values())
    # Throughput: bytes the source wrote and the sink read, per second.
    src_rate = windows(threads[name["source"]], 4, t_src + 0.4, t_end)
    snk_rate = windows(threads[name["sink"]], 3, t_src + 0.4, t_end)
    cpu = {r: windows(threads[name[r]], 2, 0.0, t_end) for r in name}
    fills = {q: [(s[0], s[1]) for s in queues[q]] for q in (q1, q2)}
    props = {r: [(s[0], s[1]) for s in threads[name[r]]] for r in name}

    def in_pulse(t):
        return any(a <= t < b for a, b in pulses)

    def phase_stats(series, settle):
        base = [v for t, v in series
                if t > t_src + 1.0 and not in_pulse(t)
                and not any(b <= t < b + settle for _, b in pulses)]
        pul = [v for t, v in series
               if any(a + settle <= t < b for a, b in pulses)]
        return mean(base), mean(pul)

    print(f"trace {trace}: source {name['source']}, filter {name['filter']}, "
          f"sink {name['sink']}, q1 {q1}, q2 {q2}; source start {t_src:.3f} s")
    print("                     base (settled)   pulse (after 0.3 s)")
    for label, s in [("source KB/s", [(t, v / 1e3) for t, v in src_rate]),
                     ("sink KB/s", [(t, v / 1e3) for t, v in snk_rate]),
                     ("q1 fill", fills[q1]), ("q2 fill", fills[q2])] + \
            [(f"{r} proportion", props[r]) for r in ("source", "filter", "sink", "hog")] + \
            [(f"{r} CPU share", cpu[r]) for r in ("source", "filter", "sink", "hog")]:
        b, p = phase_stats(s, 0.3)
        if "CPU" in label:
            b, p = b / 1e9, p / 1e9
        print(f"{label:18} {b:12.3f} {p:18.3f}")
    for r in name:
        s = threads[name[r]]
        print(f"{r:7} CPU over the run: {s[-1][2] / 1e9:.3f} s")
    print(f"sink bytes read after start-up: "
          f"{(threads[name['sink']][-1][3] - threads[name['sink']][0][3]) / 1e3:.0f} KB")
    # Response: first WIN window after each rising edge where the sink
    # reads within 10 % of the doubled rate.
    for a, b in pulses:
        base_rate = mean([v for t, v in src_rate if a - 1.0 < t < a])
        hit = next((t for t, v in snk_rate
                    if a < t < b and abs(v - 2 * base_rate) < 0.1 * 2 * base_rate), None)
        if hit is not None:
            print(f"pulse at {a - t_src:.1f} s: sink within 10 % of the doubled rate "
                  f"after {hit - WIN / 2 - a:.2f} s (window {WIN} s)")
        else:
            print(f"pulse at {a - t_src:.1f} s: sink never within 10 % of the doubled rate")

    # ----- SVG -------------------------------------------------------------
    W, H, L, R, T = 900, 640, 70, 20, 30
    panels = [("throughput (KB/s)", 0, 600), ("pipe fill (fraction)", 0, 1),
              ("proportion", 0, 0.8)]
    ph = (H - T - 40) / len(panels) - 20
    x = lambda t: L + (W - L - R) * t / t_end
    svg = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" '
           f'font-family="sans-serif" font-size="11">',
           f'<rect width="{W}" height="{H}" fill="white"/>',
           f'<text x="{L}" y="16" font-size="13">Live: source | filter | sink under '
           f'realrate with a CPU hog (examples/pipeline-live.toml)</text>']
    colors = {"source": "#1f77b4", "filter": "#d62728", "sink": "#2ca02c",
              "hog": "#7f7f7f", q1: "#d62728", q2: "#2ca02c"}

    def poly(pts, top, lo, hi, color, width=1.2, dash=None):
        if not pts:
            return
        y = lambda v: top + ph - ph * (min(max(v, lo), hi) - lo) / (hi - lo)
        d = " ".join(f"{x(t):.1f},{y(v):.1f}" for t, v in pts if 0 <= t <= t_end)
        da = f' stroke-dasharray="{dash}"' if dash else ""
        svg.append(f'<polyline fill="none" stroke="{color}" stroke-width="{width}"{da} points="{d}"/>')

    for i, (title, lo, hi) in enumerate(panels):
        top = T + 10 + i * (ph + 20)
        for a, b in pulses:
            svg.append(f'<rect x="{x(a):.1f}" y="{top}" width="{x(b) - x(a):.1f}" '
                       f'height="{ph:.1f}" fill="#f3e6c8"/>')
        svg.append(f'<rect x="{L}" y="{top}" width="{W - L - R}" height="{ph:.1f}" '
                   f'fill="none" stroke="black"/>')
        svg.append(f'<text x="{L + 4}" y="{top + 12}">{title}</text>')
        for k in range(5):
            v = lo + (hi - lo) * k / 4
            yy = top + ph - ph * k / 4
            svg.append(f'<text x="{L - 6}" y="{yy + 4:.1f}" text-anchor="end">{v:g}</text>')
            svg.append(f'<line x1="{L}" x2="{W - R}" y1="{yy:.1f}" y2="{yy:.1f}" stroke="#ddd"/>')
        if i == 0:
            poly([(t, v / 1e3) for t, v in src_rate], top, lo, hi, colors["source"])
            poly([(t, v / 1e3) for t, v in snk_rate], top, lo, hi, colors["sink"])
            legend = [("source writes", colors["source"]), ("sink reads", colors["sink"])]
        elif i == 1:
            poly(fills[q1], top, lo, hi, colors[q1], 0.8)
            poly(fills[q2], top, lo, hi, colors[q2], 0.8)
            legend = [("q1 source→filter", colors[q1]), ("q2 filter→sink", colors[q2])]
        else:
            for r in ("source", "filter", "sink", "hog"):
                poly(averaged(props[r], t_end), top, lo, hi, colors[r], 1.2)
                poly([(t, v / 1e9) for t, v in cpu[r]], top, lo, hi, colors[r], 1.6, "4,3")
            legend = [(r, colors[r]) for r in ("source", "filter", "sink", "hog")] + \
                     [(f"solid: proportion, dashed: CPU share ({WIN} s means)", "black")]
        lx = W - R - 10
        for j, (lab, c) in enumerate(reversed(legend)):
            svg.append(f'<text x="{lx}" y="{top + 14 + 13 * j}" text-anchor="end" fill="{c}">{lab}</text>')
    bottom = T + 10 + len(panels) * (ph + 20) - 20
    for s in range(0, int(t_end) + 1, 2):
        svg.append(f'<text x="{x(s):.1f}" y="{bottom + 14:.1f}" text-anchor="middle">{s}</text>')
    svg.append(f'<text x="{(W + L) / 2}" y="{bottom + 30:.1f}" text-anchor="middle">'
               f'time (s); shaded: the source doubles its rate</text>')
    svg.append("</svg>")
    open(out, "w").write("\n".join(svg) + "\n")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
