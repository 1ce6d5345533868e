#!/bin/sh
# The container image's entrypoint: runs `lockstep` with the container's
# command (by default `serve`).
#
# A console published beyond the container (serve --gui 0.0.0.0:8385)
# starts only once its admin password is set, and the password is set
# through a running daemon. So when the command is `serve` and
# $LOCKSTEP_CONSOLE_PASSWORD_FILE is set, this first runs the same node
# with its console on loopback, sets the password from the file's first
# line (`lockstep console password --password-file`), stops that node and
# then runs the real one. The file is the password: it is applied at every
# start, and a password changed in the console lasts until the next one.
set -eu

bootstrap=
if [ "${1:-}" = serve ] && [ -n "${LOCKSTEP_CONSOLE_PASSWORD_FILE:-}" ]; then
	bootstrap=yes
	for arg in "$@"; do
		case $arg in
		--no-gui | --no-gui=true) bootstrap= ;;
		esac
	done
	if [ -z "$bootstrap" ]; then
		echo "lockstep-entrypoint: serve --no-gui has no console; LOCKSTEP_CONSOLE_PASSWORD_FILE is ignored" >&2
	fi
fi
if [ -z "$bootstrap" ]; then
	exec lockstep "$@"
fi

pwfile=$LOCKSTEP_CONSOLE_PASSWORD_FILE
if ! [ -f "$pwfile" ] || ! [ -r "$pwfile" ]; then
	echo "lockstep-entrypoint: LOCKSTEP_CONSOLE_PASSWORD_FILE=$pwfile is not a file this user (uid $(id -u)) can read" >&2
	exit 2
fi

# The same flags, so the node opens the same home and store; the last
# --gui wins, and port 0 takes a free port.
lockstep "$@" --gui 127.0.0.1:0 &
pid=$!
trap 'kill -TERM "$pid" 2>/dev/null; wait "$pid" || true; exit 143' INT TERM

# Ready once `status` gets an answer: the node has written serve.json and
# its console answers. A serve.json left by a killed run names a console
# that no longer listens, so it does not count.
tries=0
until lockstep status >/dev/null 2>&1; do
	if ! kill -0 "$pid" 2>/dev/null; then
		status=0
		wait "$pid" || status=$?
		echo "lockstep-entrypoint: the node stopped (exit $status) before its console was up to set the password" >&2
		exit 1
	fi
	tries=$((tries + 1))
	if [ "$tries" -gt 1200 ]; then
		echo "lockstep-entrypoint: the node was not ready within 10 minutes; stopping it" >&2
		kill -TERM "$pid" 2>/dev/null || true
		wait "$pid" || true
		exit 1
	fi
	sleep 0.5
done

if ! lockstep console password --password-file "$pwfile" >/dev/null; then
	kill -TERM "$pid" 2>/dev/null || true
	wait "$pid" || true
	exit 1
fi
echo "lockstep-entrypoint: console password set from $pwfile" >&2
kill -TERM "$pid"
status=0
wait "$pid" || status=$?
if [ "$status" -ne 0 ]; then
	echo "lockstep-entrypoint: the node that set the password exited with $status" >&2
	exit 1
fi
trap - INT TERM
exec lockstep "$@"
