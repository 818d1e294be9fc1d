#!/bin/sh
# hutch test stand-in for the install.sh of ghcr.io/devcontainers/features/node
# (the real one downloads and installs; no registry or download site is
# reachable where hutch's tests run). It records what it was given, the
# options as the spec passes them (upper-cased environment variables) and
# the user variables, in /usr/local/share/hutch-feature-node.env, then does
# only what works offline:
# Debian's nodejs where node is missing, and nvm's current/bin with node
# linked and stubs of npm, npx, yarn and pnpm.
set -e
record=/usr/local/share/hutch-feature-node.env
mkdir -p /usr/local/share
{
	echo "VERSION=${VERSION-}"
	echo "NODEGYPDEPENDENCIES=${NODEGYPDEPENDENCIES-}"
	echo "NVMINSTALLPATH=${NVMINSTALLPATH-}"
	echo "NPMVERSION=${NPMVERSION-}"
	echo "PNPMVERSION=${PNPMVERSION-}"
	echo "NVMVERSION=${NVMVERSION-}"
	echo "INSTALLYARNUSINGAPT=${INSTALLYARNUSINGAPT-}"
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

if [ "${VERSION-lts}" != "none" ]; then
	command -v node >/dev/null 2>&1 || apt_install nodejs
	dir=${NVMINSTALLPATH:-/usr/local/share/nvm}
	mkdir -p "$dir/current/bin"
	ln -sf "$(command -v node)" "$dir/current/bin/node"
	for p in npm npx yarn pnpm; do stub "$p" "$dir/current/bin/$p"; done
	printf '%s\n' 'nvm() { echo "nvm (hutch feature stand-in) $*" >&2; }' >"$dir/nvm.sh"
fi
