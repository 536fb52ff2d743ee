#!/usr/bin/env bash
# Burns N cores (default 2) until it is killed: the load that `make test-stress`
# runs beside the PostgreSQL-backed tests.
set -u
n=${1:-2}
pids=()
for _ in $(seq "$n"); do
	(while :; do :; done) &
	pids+=($!)
done
trap 'kill "${pids[@]}" 2>/dev/null; exit 0' TERM INT
wait
