#!/usr/bin/env bash
# install-packages.sh PACKAGE...: installs Debian packages the testbed needs
# (make demo-deps, make testbed-deps), starting no service and leaving none
# enabled that was not: the testbed runs its own PostgreSQL and Prometheus
# instances, never the system's. Nothing to install, nothing done.
set -euo pipefail
[ $# -gt 0 ] || exit 0

# The services the packages would start or enable: postgresql-NN's main
# cluster (under postgresql.service), prometheus.service.
UNITS=(postgresql.service prometheus.service)

undo=()
cleanup() {
	local i
	for ((i = ${#undo[@]} - 1; i >= 0; i--)); do
		rm -f "${undo[i]}" 2>/dev/null || rmdir "${undo[i]}" 2>/dev/null || true
	done
}
trap cleanup EXIT

# invoke-rc.d and deb-systemd-invoke start nothing while policy-rc.d answers 101.
if [ ! -e /usr/sbin/policy-rc.d ]; then
	printf '#!/bin/sh\n# make testbed-deps: start no service while installing\nexit 101\n' >/usr/sbin/policy-rc.d
	chmod 755 /usr/sbin/policy-rc.d
	undo+=(/usr/sbin/policy-rc.d)
fi

# postgresql-NN creates a main cluster on install unless createcluster.conf
# (which includes createcluster.d) says not to.
confdir=/etc/postgresql-common/createcluster.d
conf=$confdir/00-gpotel-no-main-cluster.conf
if [ ! -e "$conf" ]; then
	if [ ! -d "$confdir" ]; then
		mkdir -p "$confdir"
		undo+=("$confdir")
	fi
	echo 'create_main_cluster = false' >"$conf"
	undo+=("$conf")
fi

# A unit the install enables is disabled again; one enabled before stays.
systemd=false
[ -d /run/systemd/system ] && command -v systemctl >/dev/null && systemd=true
declare -A enabled_before=()
if $systemd; then
	for unit in "${UNITS[@]}"; do
		enabled_before[$unit]=$(systemctl is-enabled "$unit" 2>/dev/null || true)
	done
fi

apt-get update
DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "$@"

if $systemd; then
	for unit in "${UNITS[@]}"; do
		if [ "${enabled_before[$unit]}" != enabled ] && [ "$(systemctl is-enabled "$unit" 2>/dev/null || true)" = enabled ]; then
			systemctl disable "$unit"
		fi
	done
fi
