#!/usr/bin/env bash
# Soak: one `lagless serve` with N clients over UDP for S seconds, one client leaving and
# one joining every second (each bot plays N seconds, a new one starts every second), then
# the figures a fleet cares about: the server's resident memory over time (flat?), its
# timeouts (a healthy client timed out?), and the slots left at the end.
#
#   tools/soak.sh [BINARY] [CLIENTS=64] [SECONDS=600] [SCENE=cubes]
#
# SERVE_ARGS adds options to `serve` (e.g. SERVE_ARGS="--snapshot-hz 16").
#
# Writes soak/server.log (the per-second lines), soak/server.json and soak/summary.txt.
set -euo pipefail
L=${1:-target/release/lagless}
N=${2:-64}
S=${3:-600}
SCENE=${4:-cubes}
D=soak
rm -rf "$D" && mkdir -p "$D"
"$L" keygen --out "$D/k" 2>/dev/null
PORT=$((43000 + RANDOM % 2000))
ADMIN=$((PORT + 1))
TOTAL=$((S + N))
for i in $(seq 1 "$TOTAL"); do
  "$L" token --key-file "$D/k" --client-id "$i" --server "127.0.0.1:$PORT" \
    --out "$D/$i.token" --expire-s $((S + 3 * N + 120)) 2>/dev/null
done
"$L" serve --scene "$SCENE" --bind "127.0.0.1:$PORT" --key-file "$D/k" --max-clients $((N + 8)) \
  --seconds $((S + 2 * N + 30)) --admin "127.0.0.1:$ADMIN" --drain-s 0 \
  --json "$D/server.json" ${SERVE_ARGS:-} 2> "$D/server.log" &
SERVER=$!
sleep 1
# Ramp up: one bot a second, each playing N seconds, so from second N on one leaves and
# one joins every second.
for i in $(seq 1 "$TOTAL"); do
  nice -n 10 "$L" connect --scene "$SCENE" --token "$D/$i.token" --ack-only --script pattern \
    --seconds "$N" --json "$D/c$i.json" > /dev/null 2> "$D/c$i.err" &
  if [ $((i % 60)) -eq 0 ]; then
    curl -s "127.0.0.1:$ADMIN/metrics" > "$D/metrics-$i.txt" || true
  fi
  sleep 1
done
wait_clients() { curl -s "127.0.0.1:$ADMIN/metrics" | awk '/^lagless_clients\{/ {s += $2} END {print s + 0}'; }
for _ in $(seq 1 $((N + 20))); do
  [ "$(wait_clients)" = "0" ] && break
  sleep 1
done
curl -s "127.0.0.1:$ADMIN/metrics" > "$D/metrics-end.txt" || true
wait "$SERVER" || true
python3 - "$D" "$N" "$S" <<'PY'
import json, re, sys, glob
d, n, s = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
rss, clients = [], []
for line in open(f"{d}/server.log"):
    if ' server ' in line or line.rstrip().endswith('"server"') or ' INFO server ' in line:
        m = re.search(r'rss_mb=([0-9.]+)', line); c = re.search(r'clients=(\d+)', line)
        if m and c:
            rss.append(float(m.group(1))); clients.append(int(c.group(1)))
full = [i for i, c in enumerate(clients) if c >= n - 1]
out = []
if full:
    a, b = full[0], full[-1]
    steady = rss[a:b + 1]
    half = len(steady) // 2
    last = steady[half:]
    growth = (max(last) - last[0]) / last[0] * 100 if last else float('nan')
    out.append(f"seconds at {n - 1}+ clients: {len(steady)}")
    out.append(f"RSS MB at full, then over the last half: start {steady[0]:.1f}, "
               f"last half {last[0]:.1f} -> max {max(last):.1f} (growth {growth:.2f}%)")
srv = json.load(open(f"{d}/server.json"))["server"]
out.append(f"server: connects {srv.get('connects')}, timeouts {srv.get('timeouts')}, "
           f"clients_max {srv.get('clients_max')}, rss_mb_end {srv.get('rss_mb_end')}, "
           f"ticks_per_s {srv.get('ticks_per_s')}, tick_wall_ms_p99 {srv.get('tick_wall_ms_p99')}")
ended = {}
for f in glob.glob(f"{d}/c*.json"):
    try:
        e = json.load(open(f))["client"]["ended"]
    except Exception:
        e = "no report"
    ended[e] = ended.get(e, 0) + 1
out.append(f"clients ended: {ended}")
# A timeout of a client that had already finished (its disconnect packets lost) is not a
# healthy client timing out: tell them apart.
done_ids = set()
for f in glob.glob(f"{d}/c*.json"):
    try:
        if json.load(open(f))["client"]["ended"] == "done":
            done_ids.add(f.split("/c")[-1][:-5])
    except Exception:
        pass
timed_out = re.findall(r'client left client_id=(\d+) .*reason="TimedOut"', open(f"{d}/server.log").read())
healthy = [c for c in timed_out if c not in done_ids]
out.append(f"timeouts: {len(timed_out)}, of clients still playing: {len(healthy)} {healthy}")
end = open(f"{d}/metrics-end.txt").read() if glob.glob(f"{d}/metrics-end.txt") else ""
left = sum(float(l.split()[-1]) for l in end.splitlines() if l.startswith("lagless_clients{"))
out.append(f"clients left connected at the end: {left:.0f}")
text = "\n".join(out)
print(text)
open(f"{d}/summary.txt", "w").write(text + "\n")
PY
