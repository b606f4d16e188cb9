#!/usr/bin/env python3
"""How a catch-up's writer spends its Postgres session: each statement's
server time, and the time the backend waited for the client in between,
read from the server log.

The server logs every statement with its duration and a millisecond
timestamp when a catch-up runs with

    ALTER SYSTEM SET log_min_duration_statement = 0;
    ALTER SYSTEM SET log_line_prefix = '%m [%p] %d ';
    SELECT pg_reload_conf();

(reset both afterwards: logging every statement slows the server). Give
this script the log lines written meanwhile, e.g. those of
`go run ./cmd/bench -dense-node anvil -shape even`. The writer's session
is the one of each bench_catchup_* database that copied payments; its span
runs from its first BEGIN to its last statement. "busy" is the server's
time in statements (parse, bind and execute are logged apart, as pgx sends
them); a gap is the time from the end of one to the start of the next, the
backend idle while the client works or waits, named by the two statements
around it.

Usage: scripts/writer-gaps.py LOGFILE
"""

import collections
import datetime
import re
import sys

LINE = re.compile(r"(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d+) \S+ \[(\d+)\] (\S*) \w+:\s+(.*)")
DURATION = re.compile(r"duration: ([\d.]+) ms\s+")
VERB = re.compile(r"^(statement|execute [^:]*|bind [^:]*|parse [^:]*):\s*")


def records(path):
    """The log's entries as [time, pid, database, message], continuation
    lines joined to their entry."""
    out = []
    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f:
            m = LINE.match(line)
            if m:
                out.append([m.group(1), m.group(2), m.group(3), m.group(4)])
            elif out:
                out[-1][3] += " " + line.strip()
    return out


def main(path):
    recs = records(path)
    writers = {}
    for _, pid, db, msg in recs:
        if db.startswith("bench_catchup") and 'copy "payments"' in msg:
            writers.setdefault(pid, db)
    if not writers:
        sys.exit("no writer session (COPY into payments in a bench_catchup_* database) in " + path)
    for pid, db in writers.items():
        busy = collections.defaultdict(float)
        calls = collections.Counter()
        gaps = collections.defaultdict(float)
        start = end = None
        last = None
        ranges = 0
        for when, p, _, msg in recs:
            d = DURATION.search(msg)
            if p != pid or not d:
                continue
            text = VERB.sub("", DURATION.sub("", msg, count=1))
            if start is None and not text.lower().startswith("begin"):
                continue
            took = float(d.group(1)) / 1000
            t = datetime.datetime.strptime(when, "%Y-%m-%d %H:%M:%S.%f").timestamp()
            kind = " ".join(text.split()[:5])[:50] or "(unnamed)"
            ranges += 'copy "payments"' in text
            if start is None:
                start = t - took
            if end is not None:
                gaps[last + "  ->  " + kind] += max(0.0, t - took - end)
            busy[kind] += took
            calls[kind] += 1
            end, last = t, kind
        span = end - start
        print(f"{db} (backend {pid}): {ranges} ranges in {span:.3f} s, "
              f"busy {sum(busy.values()):.3f} s, waiting for the client {sum(gaps.values()):.3f} s")
        for kind, s in sorted(busy.items(), key=lambda kv: -kv[1])[:8]:
            print(f"  busy {s:7.3f} s  {calls[kind]:5d} logged  {kind}")
        for kind, s in sorted(gaps.items(), key=lambda kv: -kv[1])[:8]:
            print(f"  gap  {s:7.3f} s  {kind}")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    main(sys.argv[1])
