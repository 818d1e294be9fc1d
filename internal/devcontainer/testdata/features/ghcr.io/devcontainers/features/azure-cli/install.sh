#!/bin/sh
# hutch test stand-in for the install.sh of ghcr.io/devcontainers/features/azure-cli
# (the real one downloads and installs; no registry or download site is
# reachable where hutch's tests run). It records what it was given, the
# options as the spec passes them (upper-cased environment variables) and
# the user variables, in /usr/local/share/hutch-feature-azure-cli.env, then does
# only what works offline:
# a stub az in /usr/local/bin (the real one comes from Microsoft's apt
# repository or PyPI), and a stub bicep when installBicep.
set -e
record=/usr/local/share/hutch-feature-azure-cli.env
mkdir -p /usr/local/share
{
	echo "VERSION=${VERSION-}"
	echo "EXTENSIONS=${EXTENSIONS-}"
	echo "INSTALLBICEP=${INSTALLBICEP-}"
	echo "INSTALLUSINGPYTHON=${INSTALLUSINGPYTHON-}"
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

stub az /usr/local/bin/az
if [ "${INSTALLBICEP-false}" = "true" ]; then
	stub bicep /usr/local/bin/bicep
fi
