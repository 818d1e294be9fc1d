#!/bin/sh
# hutch test stand-in for the install.sh of ghcr.io/devcontainers/features/python
# (the real one downloads and installs; no registry or download site is
# reachable where hutch's tests run). It records what it was given, the
# options as the spec passes them (upper-cased environment variables) and
# the user variables, in /usr/local/share/hutch-feature-python.env, then does
# only what works offline:
# Debian's python3, python3-pip and python3-venv (what the real one installs
# for os-provided; it builds other versions from source), linked as
# /usr/local/python/current, and a stub pipx in /usr/local/py-utils/bin when
# installTools is true.
set -e
record=/usr/local/share/hutch-feature-python.env
mkdir -p /usr/local/share
{
	echo "VERSION=${VERSION-}"
	echo "INSTALLTOOLS=${INSTALLTOOLS-}"
	echo "OPTIMIZE=${OPTIMIZE-}"
	echo "SHARED=${SHARED-}"
	echo "INSTALLPATH=${INSTALLPATH-}"
	echo "INSTALLJUPYTERLAB=${INSTALLJUPYTERLAB-}"
	echo "CONFIGUREJUPYTERLABALLOWORIGIN=${CONFIGUREJUPYTERLABALLOWORIGIN-}"
	echo "HTTPPROXY=${HTTPPROXY-}"
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

if [ "${VERSION-os-provided}" != "none" ]; then
	apt_install python3 python3-pip python3-venv
	dir=${INSTALLPATH:-/usr/local/python}
	mkdir -p "$dir/current/bin"
	ln -sf "$(command -v python3)" "$dir/current/bin/python3"
	ln -sf "$(command -v python3)" "$dir/current/bin/python"
fi
if [ "${INSTALLTOOLS:-true}" = "true" ]; then
	stub pipx /usr/local/py-utils/bin/pipx
fi
