#!/usr/bin/env bash
# make demo: a dev chain with burn traffic and two poller replicas against a
# local Postgres, without Docker. The chain reorganises its last blocks
# now and then; the replicas send every payment event to a webhook receiver
# (its log: webhook-receiver.log). Shows the events as they are committed
# (poller tail: seen at the head, confirmed at finality, retracted by a
# reorg); Ctrl-C stops everything.
#   DEMO_DATABASE_URL   admin URL of the local server (default postgres://postgres@127.0.0.1:5432/postgres)
#   DEMO_BURN_RATE      burns per second (default 3)
#   DEMO_SECONDS        run unattended for this many seconds, then stop and
#                       exit 0 only if seen and confirmed events were printed
#                       and every process was still running (default: until Ctrl-C)
set -euo pipefail
cd "$(dirname "$0")/.."

admin_url=${DEMO_DATABASE_URL:-postgres://postgres@127.0.0.1:5432/postgres}
burn_rate=${DEMO_BURN_RATE:-3}
seconds=${DEMO_SECONDS:-}
if [ -n "$seconds" ] && ! [[ "$seconds" =~ ^[1-9][0-9]*$ ]]; then
  echo "demo: DEMO_SECONDS must be a whole number of seconds, got '$seconds'" >&2
  exit 2
fi
db=burnpoller_demo
db_url="${admin_url%/*}/$db"
logs=$(mktemp -d)

if ! psql "$admin_url" -qtAc 'SELECT 1' >/dev/null 2>&1; then
  echo "demo: no Postgres at $admin_url; start it (e.g. pg_ctlcluster --skip-systemctl-redirect \$(ls /etc/postgresql) main start) or set DEMO_DATABASE_URL" >&2
  exit 1
fi
psql "$admin_url" -qc "DROP DATABASE IF EXISTS $db WITH (FORCE)" -c "CREATE DATABASE $db"

pids=()
cleanup() {
  trap - INT TERM EXIT
  echo; echo "demo: stopping"
  for pid in "${pids[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
  echo "demo: logs are in $logs"
}
trap cleanup INT TERM HUP PIPE EXIT

./bin/devchain --addr 127.0.0.1:8545 --block-time 500ms --burn-rate "$burn_rate" --reorg-every 15s --reorg-depth 3 \
  >"$logs/devchain.json" 2>"$logs/devchain.log" &
pids+=($!)
for _ in $(seq 1 100); do [ -s "$logs/devchain.json" ] && break; sleep 0.2; done
[ -s "$logs/devchain.json" ] || { echo "demo: devchain did not start; see $logs/devchain.log" >&2; exit 1; }
contract=$(sed -n 's/.*"burn_contract":"\(0x[0-9a-fA-F]*\)".*/\1/p' "$logs/devchain.json")
echo "demo: devchain at http://127.0.0.1:8545, burn contract $contract"

DATABASE_URL="$db_url" LOG_FORMAT=text ./bin/poller migrate 2>"$logs/migrate.log" ||
  { echo "demo: poller migrate failed; see $logs/migrate.log" >&2; exit 1; }

hook_secret=demo-webhook-secret-$RANDOM$RANDOM
WEBHOOK_SECRET="$hook_secret" ./bin/webhook-receiver --addr 127.0.0.1:9000 2>"$logs/webhook-receiver.log" &
pids+=($!)
echo "demo: webhook receiver on http://127.0.0.1:9000, log $logs/webhook-receiver.log"

for i in 1 2; do
  DATABASE_URL="$db_url" RPC_URL=http://127.0.0.1:8545 CHAIN_ID=1337 BURN_CONTRACT="$contract" \
  WEBHOOK_URL=http://127.0.0.1:9000/burnpoller WEBHOOK_SECRET="$hook_secret" WEBHOOK_EVENTS=seen,retracted,confirmed \
  HTTP_ADDR="127.0.0.1:808$i" POLL_INTERVAL=500ms LOG_FORMAT=text \
    ./bin/poller run 2>"$logs/poller-$i.log" &
  pids+=($!)
  echo "demo: replica $i on http://127.0.0.1:808$i (/readyz, /livez, /metrics), log $logs/poller-$i.log"
done
echo "demo: finalized blocks come every 32 blocks (16s); payments appear as they are committed"

# The live view: every payment event, read by seq as its transaction commits.
if [ -z "$seconds" ]; then
  DATABASE_URL="$db_url" LOG_FORMAT=text ./bin/poller tail
  exit
fi

# Unattended: tail for DEMO_SECONDS, then judge what it printed.
DATABASE_URL="$db_url" LOG_FORMAT=text ./bin/poller tail 2>"$logs/tail.log" > >(tee "$logs/tail.out") &
pids+=($!)
sleep "$seconds"
dead=()
for pid in "${pids[@]}"; do kill -0 "$pid" 2>/dev/null || dead+=("$pid"); done
seen=$(grep -c ' seen ' "$logs/tail.out" || true)
confirmed=$(grep -c ' confirmed ' "$logs/tail.out" || true)
echo "demo: after ${seconds}s: $seen seen and $confirmed confirmed events printed"
status=0
if [ "${#dead[@]}" -gt 0 ]; then
  echo "demo: FAIL: ${#dead[@]} process(es) stopped before the end (pids ${dead[*]}); see $logs" >&2
  status=1
fi
if [ "$seen" -eq 0 ] || [ "$confirmed" -eq 0 ]; then
  echo "demo: FAIL: expected both seen and confirmed events; see $logs" >&2
  status=1
fi
exit "$status"
