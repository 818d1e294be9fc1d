# The curated hutch sandbox image: the tools agents reach for.
#
# Built by `hutch image build` through the Engine API with the legacy
# builder, so it has no `# syntax=` line and uses no BuildKit feature (both
# would need a registry). BASE is a Debian bookworm image: debian:bookworm-slim
# when a registry answers, else hutch-base:bookworm, which hutch builds with
# debootstrap and imports.
#
# No tini or other init: hutch bind-mounts its own agent into every sandbox
# and runs it as PID 1, which reaps zombies and forwards signals.
ARG BASE=debian:bookworm-slim
FROM ${BASE}

# The time zone of the sandbox (a name under /usr/share/zoneinfo).
ARG TZ=UTC

ENV DEBIAN_FRONTEND=noninteractive

RUN apt-get update \
 && apt-get install -y --no-install-recommends \
      bash coreutils less procps locales tzdata \
      ca-certificates curl git openssh-client \
      python3 python3-pip python3-venv \
      nodejs npm \
      ripgrep fd-find jq \
      build-essential \
 && ln -sf /usr/bin/fdfind /usr/local/bin/fd \
 && sed -i 's/^# *en_US.UTF-8 UTF-8/en_US.UTF-8 UTF-8/' /etc/locale.gen \
 && locale-gen \
 && { test -f "/usr/share/zoneinfo/${TZ}" || { echo "unknown time zone: ${TZ}" >&2; exit 1; }; } \
 && ln -snf "/usr/share/zoneinfo/${TZ}" /etc/localtime \
 && echo "${TZ}" > /etc/timezone \
 && apt-get clean \
 && rm -rf /var/lib/apt/lists/*

ENV LANG=en_US.UTF-8 \
    LC_ALL=en_US.UTF-8 \
    TZ=${TZ} \
    PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin

LABEL hutch.image=sandbox

CMD ["/bin/bash"]
