#!/usr/bin/env bash
# make run: the testbed demo in the background, gpotel-top in the foreground.
# Leaving gpotel-top (q or Ctrl-C) or Ctrl-C while starting tears everything down.
set -euo pipefail
cd "$(dirname "$0")/.."

BUILD=${BUILD:-build}
API=${GPOTEL_API:-127.0.0.1:1432}
OUT=$(mktemp -d /tmp/gpotel-run-XXXXXX)
demo_pid=""
testbed_dir=""

# history runs SQL in the history database (the history exporter's tables,
# config/history.yaml) of the demo's coordinator; without a pager, which
# would hold gpotel-top back until it is left.
history() {
	"$BUILD/gpotel-testbed" psql --dir "$testbed_dir" -- -qX -P pager=off -c '\connect gpotel_history' "$@"
}
HISTORY_ROWS="SELECT query_end, username, sess_id, ccnt, round(duration::numeric, 1) AS duration_s,
  round((cpu_time_user + cpu_time_system)::numeric, 3) AS cpu_s, status, left(query_text, 40) AS query
FROM gpotel_history.queries"

RULE_ACTIONS="SELECT rule_name, rule_mode, rule_action, outcome, count(*) AS firings, count(DISTINCT sess_id) AS sessions
FROM gpotel_history.rule_actions GROUP BY 1, 2, 3, 4 ORDER BY 1, 2, 3, 4"

stop_demo() {
	trap - EXIT INT TERM
	if [ -n "$testbed_dir" ] && kill -0 "$demo_pid" 2>/dev/null; then
		echo "the history tables kept these queries that used the most CPU:" >&2
		history -c "$HISTORY_ROWS ORDER BY cpu_s DESC NULLS LAST LIMIT 5" >&2 || true
		echo "what the workload rules (config/rules.yaml) did, firings by rule and outcome:" >&2
		history -c "$RULE_ACTIONS" >&2 || true
	fi
	if [ -n "$demo_pid" ] && kill -0 "$demo_pid" 2>/dev/null; then
		echo "stopping the demo (testbed, agents, collector)..." >&2
		kill -TERM "$demo_pid" 2>/dev/null || true
		wait "$demo_pid" || true
	fi
	echo "logs and OTLP output kept in $OUT" >&2
}
trap stop_demo EXIT
trap 'exit 130' INT TERM

# gpotel-top's k and K: the collector serves ActionService with a token made
# here, for a role of its own created below (a superuser: the demo's
# workloads run as one, and Greenplum 6 has no pg_signal_backend). The
# workload rule in enforce (config/rules.yaml) acts as the same role.
ACTION_TOKEN="$OUT/action.token"
(umask 077 && od -An -N32 -tx1 /dev/urandom | tr -d ' \n' >"$ACTION_TOKEN")
export GPOTEL_ACTIONS_ENABLED=true GPOTEL_ACTION_TOKEN_FILE="$ACTION_TOKEN"

"$BUILD/gpotel-testbed" demo --api "$API" --out "$OUT" --history --rules "$@" >"$OUT/demo.jsonl" 2>"$OUT/demo.err" &
demo_pid=$!
echo "starting the testbed and gpotel (events: $OUT/demo.jsonl)..." >&2

# The demo prints the running event once the collector answers.
for _ in $(seq 1 600); do
	if grep -q '"event":"running"' "$OUT/demo.jsonl" 2>/dev/null; then
		break
	fi
	if ! kill -0 "$demo_pid" 2>/dev/null; then
		echo "the demo stopped while starting:" >&2
		cat "$OUT/demo.err" >&2
		exit 1
	fi
	sleep 0.5
done
grep -q '"event":"running"' "$OUT/demo.jsonl" || { echo "the demo did not start within 5 minutes" >&2; exit 1; }
cat "$OUT/demo.jsonl" >&2

testbed_dir=$(grep '"event":"testbed"' "$OUT/demo.jsonl" | sed -n 's/.*"dir":"\([^"]*\)".*/\1/p')
if ! "$BUILD/gpotel-testbed" psql --dir "$testbed_dir" -- -qc "CREATE ROLE gpotel_actions LOGIN SUPERUSER" >"$OUT/actions-role.log" 2>&1; then
	echo "the action role could not be created (k and K will fail): $OUT/actions-role.log" >&2
fi
echo "k and K act with the token in $ACTION_TOKEN (gpotel-top --action-token-file)" >&2

# The first finished queries, as the history exporter wrote them.
echo "waiting for the first rows of gpotel_history.queries..." >&2
for _ in $(seq 1 120); do
	rows=$(history -At -c 'SELECT count(*) FROM gpotel_history.queries' 2>/dev/null | tail -1 || true)
	[ "${rows:-0}" -gt 0 ] 2>/dev/null && break
	sleep 0.5
done
history -c "$HISTORY_ROWS ORDER BY query_end LIMIT 10" >&2 || echo "no history rows yet: $OUT/collector.log says why" >&2

"$BUILD/gpotel-top" --addr "$API" --interval 2s --action-token-file "$ACTION_TOKEN"
