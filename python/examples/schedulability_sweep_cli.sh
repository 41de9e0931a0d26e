#!/usr/bin/env bash
# The sweep of schedulability_sweep.py through the hsched command in a
# shell loop, for comparison: the same 1 000 task sets (hsched generate with
# the same seeds), analyzed and simulated for 2 s under the same two
# hierarchies, one process after another. Prints one CSV line per set:
# utilization,seed,a_certified,a_misses,b_certified,b_misses
#
#   python/examples/schedulability_sweep_cli.sh [SETS_PER_UTILIZATION] > cli.csv
set -euo pipefail
SETS="${1:-100}"
HSCHED="${HSCHED:-hsched}"
DIR="$(mktemp -d)"
trap 'rm -rf "$DIR"' EXIT
cat > "$DIR/header-b.toml" <<'TOML'
[[scheduler]]
name = "root"
policy = "fp"

[[scheduler]]
name = "res"
policy = "rez"
parent = "root"
params = { priority = 2 }
cap = 0.95

[[scheduler]]
name = "app"
policy = "fp"
parent = "res"
params = { amount = "9ms", period = "10ms" }

[[scheduler]]
name = "ts"
policy = "ts"
parent = "root"
params = { priority = 1 }

[[thread]]
name = "background"
scheduler = "ts"
workload = { kind = "cpu-bound" }

TOML
misses() { grep -o '"deadline_misses": [0-9]*' | awk '{s += $2} END {print s + 0}'; }
certified() { if grep -q '"certified": true'; then echo True; else echo False; fi; }
echo "utilization,seed,a_certified,a_misses,b_certified,b_misses"
for u in 0.55 0.6 0.65 0.7 0.75 0.8 0.85 0.9 0.95 1.0; do
    for ((seed = 0; seed < SETS; seed++)); do
        gen=("$HSCHED" generate --tasks 8 --utilization "$u" --seed "$seed" --period-min 10ms --period-max 100ms)
        "${gen[@]}" > "$DIR/a.toml"
        { cat "$DIR/header-b.toml"; "${gen[@]}" --scheduler app --priorities; } > "$DIR/b.toml"
        line="$u,$seed"
        for f in a b; do
            c=$("$HSCHED" analyze "$DIR/$f.toml" --json | certified || true)
            m=$("$HSCHED" sim "$DIR/$f.toml" --duration 2s --seed "$seed" --json | misses)
            line="$line,$c,$m"
        done
        echo "$line"
    done
done
