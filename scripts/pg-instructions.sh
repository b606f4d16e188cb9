#!/usr/bin/env bash
# The Postgres work of the writer's statements against COPY, counted in
# instructions: repeatable whatever else the machine runs, where timings on
# two shared cores move by a third from one minute to the next.
#
# A scratch cluster (initdb, trust, no fsync) holds three databases migrated
# by the poller binary. Into one, each transaction copies 2,000 payments and
# their 2,000 confirmed events straight into payments and payment_events
# (binary COPY, seqs given: the COPY ceiling of cmd/bench, with no
# numbering). Into another it sends what the writer sends for a range of
# 2,000 new payments (payments.Tx.InsertNewPayments, whose statements this
# repeats: change them together): the ids statement (nextval), the payments copied with
# those ids, their events copied into payment_events_staged, the
# ledger_commits row, and COMMIT, whose trigger numbers and moves the
# events. It leaves out the statements that cost little a payment (the
# writers' lock, the ledger check, pending rows, the cursor: under 0.2 µs a
# payment in pg_stat_statements, BENCHMARKS.md). Into the third it copies
# the payments alone, which splits each total into a payment's share and
# its event's.
#
# Each database is then run by a single-user backend (postgres --single)
# under valgrind --tool=callgrind, once over 5 transactions and then over
# 10 more; the difference (5 transactions, 10,000 burns), per burn, is what
# one burn costs the server, start-up and shutdown left out.
#
# Usage: scripts/pg-instructions.sh [poller-binary]
# (default: built from this tree). Needs valgrind and PostgreSQL's server
# binaries (pg_config --bindir); run as root (the server runs as postgres)
# or as the postgres user.
set -euo pipefail
shopt -s inherit_errexit

cd "$(dirname "$0")/.."
poller=${1:-}
work=$(mktemp -d /tmp/pg-instructions.XXXXXX)
chmod 755 "$work"
data=$work/data
cleanup() {
	if [[ -f $data/postmaster.pid ]]; then as_pg "$bindir/pg_ctl" -D "$data" -m immediate stop >/dev/null 2>&1 || true; fi
	rm -rf "$work"
}
trap cleanup EXIT
if [[ -z $poller ]]; then
	poller=$work/poller
	go build -o "$poller" ./cmd/poller
fi
bindir=$(pg_config --bindir 2>/dev/null || true)
if [[ ! -x $bindir/postgres ]]; then
	bindir=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -1)
fi
command -v valgrind >/dev/null || { echo "valgrind not found" >&2; exit 1; }

as_pg() {
	if [[ $(id -u) == 0 ]]; then runuser -u postgres -- "$@"; else "$@"; fi
}
if [[ $(id -u) == 0 ]]; then chown postgres "$work"; fi

port=$((20000 + RANDOM % 10000))
as_pg "$bindir/initdb" -D "$data" -U postgres -A trust --no-sync >/dev/null
as_pg "$bindir/pg_ctl" -D "$data" -o "-p $port -k $work -c fsync=off" -l "$work/log" -w start >/dev/null
stop() { as_pg "$bindir/pg_ctl" -D "$data" -w stop >/dev/null; }
url() { echo "postgres://postgres@127.0.0.1:$port/$1?sslmode=disable"; }

pay="chain_id, contract, tx_hash, log_index, block_number, block_hash, payer, digest, amount, burned_at"
ev="event_id, kind, chain_id, contract, tx_hash, log_index, block_number, block_hash, payer, digest, amount, burned_at, payment_id"
for db in ceiling payments writer; do
	as_pg "$bindir/createdb" -h 127.0.0.1 -p "$port" -U postgres "$db"
	schema=$(DATABASE_URL=$(url "$db") "$poller" migrate 2>&1 | tail -1)
done

# The rows, as binary COPY files: 15 transactions of 2,000 burns, each of
# its own transaction hash and digest, one payer and block hash a
# transaction, amounts near 2^200.
as_pg "$bindir/psql" -q -v ON_ERROR_STOP=1 -h 127.0.0.1 -p "$port" -U postgres ceiling <<SQL
CREATE TEMP TABLE rows AS
SELECT t, i, (t * 2000 + i)::bigint AS id,
       1::bigint AS chain_id, '0x5fbdb2315678afecb367f032d93f642f64180aa3' AS contract,
       '0x' || md5('tx' || t || ':' || i) || md5('tx2' || t || ':' || i) AS tx_hash,
       (i % 7)::int AS log_index, (1000 + t * 10 + i / 400)::bigint AS block_number,
       '0x' || md5('block' || t) || md5('block2' || t) AS block_hash,
       '0x' || left(md5('payer' || t) || md5('payer2' || t), 40) AS payer,
       '0x' || md5('digest' || t || ':' || i) || md5('digest2' || t || ':' || i) AS digest,
       (2::numeric ^ 200 + t * 2000 + i)::numeric(78, 0) AS amount,
       '2026-01-01T00:00:00Z'::timestamptz AS burned_at
FROM generate_series(0, 14) t, generate_series(1, 2000) i;
DO \$\$
DECLARE n int;
BEGIN
    FOR n IN 0..14 LOOP
        EXECUTE format('COPY (SELECT $pay FROM rows WHERE t = %s ORDER BY i) TO %L (FORMAT binary)', n, '$work/pay' || n);
        EXECUTE format('COPY (SELECT id, $pay FROM rows WHERE t = %s ORDER BY i) TO %L (FORMAT binary)', n, '$work/payid' || n);
        EXECUTE format('COPY (SELECT id, chain_id || '':'' || tx_hash || '':'' || log_index || '':confirmed:'' || block_hash, ''confirmed'', %s, id FROM rows WHERE t = %s ORDER BY i) TO %L (FORMAT binary)',
            '$pay', n, '$work/ev' || n);
        EXECUTE format('COPY (SELECT i::bigint, chain_id || '':'' || tx_hash || '':'' || log_index || '':confirmed:'' || block_hash, ''confirmed'', %s, id FROM rows WHERE t = %s ORDER BY i) TO %L (FORMAT binary)',
            '$pay', n, '$work/staged' || n);
    END LOOP;
END \$\$;
SQL
stop

# Statements end with a semicolon and an empty line (postgres --single -j).
script() { # kind first last
	local t
	for t in $(seq "$2" "$3"); do
		printf 'BEGIN;\n\n'
		if [[ $1 != writer ]]; then
			printf "COPY payments ($pay) FROM '%s' (FORMAT binary);\n\n" "$work/pay$t"
		fi
		if [[ $1 == ceiling ]]; then
			printf "COPY payment_events (seq, $ev) FROM '%s' (FORMAT binary);\n\n" "$work/ev$t"
		elif [[ $1 == writer ]]; then
			printf "WITH s AS MATERIALIZED (SELECT pg_get_serial_sequence('payments', 'id')::regclass AS seq) SELECT count(nextval(s.seq)) FROM s, generate_series(1, 2000);\n\n"
			printf "COPY payments (id, $pay) FROM '%s' (FORMAT binary);\n\n" "$work/payid$t"
			printf "COPY payment_events_staged (ord, $ev) FROM '%s' (FORMAT binary);\n\n" "$work/staged$t"
			printf 'INSERT INTO ledger_commits (events) VALUES (true);\n\n'
		fi
		printf 'COMMIT;\n\n'
	done
}
count() { # db kind first last
	script "$2" "$3" "$4" >"$work/script.sql"
	chmod 644 "$work/script.sql"
	as_pg valgrind --tool=callgrind --callgrind-out-file=/dev/null "$bindir/postgres" --single -j -D "$data" "$1" \
		<"$work/script.sql" >"$work/out" 2>"$work/err"
	if grep -q ERROR "$work/out" "$work/err"; then
		grep ERROR "$work/out" "$work/err" >&2
		exit 1
	fi
	sed -n 's/.*Collected : \([0-9]*\).*/\1/p' "$work/err"
}
per_burn() { # db kind
	local five fifteen
	five=$(count "$1" "$2" 0 4)
	fifteen=$(count "$1" "$2" 5 14)
	echo $(((fifteen - five) / 10000))
}

ceiling=$(per_burn ceiling ceiling)
payments=$(per_burn payments payments)
writer=$(per_burn writer writer)
echo "poller: $poller ($schema)"
echo "instructions a burn, transactions of 2,000 burns"
printf '  %-58s %8d\n' "COPY payments and payment_events (the ceiling)" "$ceiling"
printf '  %-58s %8d\n' "the writer: ids, COPY payments, COPY staged events, COMMIT" "$writer"
printf '  %-58s %8d\n' "COPY payments alone" "$payments"
printf '  %-58s %8d\n' "  so the event, by COPY" "$((ceiling - payments))"
printf '  %-58s %8d\n' "  so the event, by the writer (ids, staged, moved)" "$((writer - payments))"
awk -v w="$writer" -v c="$ceiling" 'BEGIN { printf "  writer ÷ ceiling %.3f: at most %.2f of the COPY ceiling with the backend never idle\n", w / c, c / w }'
