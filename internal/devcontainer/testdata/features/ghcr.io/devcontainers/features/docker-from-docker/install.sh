#!/bin/sh
# hutch test stand-in for the install.sh of ghcr.io/devcontainers/features/docker-from-docker
# (the real one downloads and installs; no registry or download site is
# reachable where hutch's tests run). It records what it was given, the
# options as the spec passes them (upper-cased environment variables) and
# the user variables, in /usr/local/share/hutch-feature-docker-from-docker.env, then does
# only what works offline:
# its entrypoint /usr/local/share/docker-init.sh, which runs the command it
# is given (the real one bridges the host's socket, which this feature's
# metadata mounts, and which hutch refuses), and a stub docker.
set -e
record=/usr/local/share/hutch-feature-docker-from-docker.env
mkdir -p /usr/local/share
{
	echo "VERSION=${VERSION-}"
	echo "MOBY=${MOBY-}"
	echo "DOCKERDASHCOMPOSEVERSION=${DOCKERDASHCOMPOSEVERSION-}"
	echo "_REMOTE_USER=${_REMOTE_USER-}"
	echo "_REMOTE_USER_HOME=${_REMOTE_USER_HOME-}"
	echo "_CONTAINER_USER=${_CONTAINER_USER-}"
	echo "_CONTAINER_USER_HOME=${_CONTAINER_USER_HOME-}"
} >"$record"

# stub NAME PATH writes an executable that reports its arguments and
# succeeds, standing in for a program the real feature installs.
stub() {
	mkdir -p "$(dirname "$2")"
	printf '#!/bin/sh\necho "%s (hutch feature stand-in) $*" >&2\n' "$1" >"$2"
	chmod 0755 "$2"
}

# apt_install installs Debian packages that are not there yet.
apt_install() {
	missing=""
	for p in "$@"; do
		dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing="$missing $p"
	done
	[ -z "$missing" ] && return 0
	export DEBIAN_FRONTEND=noninteractive
	apt-get update
	# shellcheck disable=SC2086
	apt-get install -y --no-install-recommends $missing
	rm -rf /var/lib/apt/lists/*
}

printf '%s\n' '#!/bin/sh' '# hutch test stand-in for docker-init.sh: runs its command.' 'exec "$@"' >/usr/local/share/docker-init.sh
chmod 0755 /usr/local/share/docker-init.sh
if [ "${VERSION-latest}" != "none" ]; then
	stub docker /usr/local/bin/docker
fi
