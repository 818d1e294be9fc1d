#!/bin/sh
# hutch test stand-in for the install.sh of ghcr.io/devcontainers/features/dotnet
# (the real one downloads and installs; no registry or download site is
# reachable where hutch's tests run). It records what it was given, the
# options as the spec passes them (upper-cased environment variables) and
# the user variables, in /usr/local/share/hutch-feature-dotnet.env, then does
# only what works offline:
# a stub dotnet in /usr/share/dotnet, the DOTNET_ROOT of its metadata
# (the real one downloads the SDKs from Microsoft), unless version is none.
set -e
record=/usr/local/share/hutch-feature-dotnet.env
mkdir -p /usr/local/share
{
	echo "VERSION=${VERSION-}"
	echo "ADDITIONALVERSIONS=${ADDITIONALVERSIONS-}"
	echo "DOTNETRUNTIMEVERSIONS=${DOTNETRUNTIMEVERSIONS-}"
	echo "ASPNETCORERUNTIMEVERSIONS=${ASPNETCORERUNTIMEVERSIONS-}"
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

if [ "${VERSION-latest}" != "none" ]; then
	stub dotnet /usr/share/dotnet/dotnet
fi
