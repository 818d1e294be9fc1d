// Package box is the I/O half of the project sandbox: it finds the
// project a directory belongs to, reads the settings and the
// devcontainer.json (only once trusted), asks the pure project package
// for the spec, and makes the engine match it: it adopts an editor's
// running container, starts or creates hutch's own (building its images
// when their tags are missing: the devcontainer's Dockerfile, its
// features, fetched and installed on that base, then the recipe's
// layers), runs commands and shells in it, and counts the sessions
// attached so the last one out can stop it.
//
// hutch's own container runs the hutch agent as its init, listening on a
// unix socket in a bind-mounted run directory, so a command costs a round
// trip on that socket rather than an engine exec. An adopted container
// gets the agent copied in (as the container mode does). Interactive
// sessions use an engine exec with a TTY.
//
// Under sandbox-network allowlist or none the container has no network,
// and its agent relays connections to an egress proxy the box runs in the
// hutch process, for as long as that process holds the agent's channel
// (see egress.go).
package box
