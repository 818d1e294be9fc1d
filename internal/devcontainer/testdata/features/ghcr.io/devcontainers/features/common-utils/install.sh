#!/bin/sh
# hutch test stand-in for the install.sh of ghcr.io/devcontainers/features/common-utils
# (the real one downloads and installs; no registry or download site is
# reachable where hutch's tests run). It records what it was given, the
# options as the spec passes them (upper-cased environment variables) and
# the user variables, in /usr/local/share/hutch-feature-common-utils.env, then does
# only what works offline:
# the non-root user it is asked for (username, or for automatic the remote
# user, else vscode when no user with UID 1000 exists), with its UID and
# GID, a home and bash; zsh from Debian when installZsh is true. It upgrades
# nothing.
set -e
record=/usr/local/share/hutch-feature-common-utils.env
mkdir -p /usr/local/share
{
	echo "INSTALLZSH=${INSTALLZSH-}"
	echo "CONFIGUREZSHASDEFAULTSHELL=${CONFIGUREZSHASDEFAULTSHELL-}"
	echo "INSTALLOHMYZSH=${INSTALLOHMYZSH-}"
	echo "UPGRADEPACKAGES=${UPGRADEPACKAGES-}"
	echo "USERNAME=${USERNAME-}"
	echo "USERUID=${USERUID-}"
	echo "USERGID=${USERGID-}"
	echo "NONFREEPACKAGES=${NONFREEPACKAGES-}"
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

user=${USERNAME:-automatic}
if [ "$user" = "automatic" ]; then
	if [ -n "${_REMOTE_USER-}" ] && [ "${_REMOTE_USER}" != "root" ]; then
		user=${_REMOTE_USER}
	elif getent passwd 1000 >/dev/null; then
		user=$(getent passwd 1000 | cut -d: -f1)
	else
		user=vscode
	fi
fi
if [ "$user" != "none" ] && [ "$user" != "root" ] && ! id "$user" >/dev/null 2>&1; then
	uid=${USERUID:-automatic}
	gid=${USERGID:-automatic}
	[ "$gid" = "automatic" ] || groupadd --gid "$gid" "$user"
	if [ "$gid" = "automatic" ]; then group_opt=--user-group; else group_opt="--gid $gid"; fi
	if [ "$uid" = "automatic" ]; then uid_opt=""; else uid_opt="--uid $uid"; fi
	# shellcheck disable=SC2086
	useradd --create-home --shell /bin/bash $uid_opt $group_opt "$user"
fi
if [ "${INSTALLZSH:-true}" = "true" ]; then
	apt_install zsh
fi
