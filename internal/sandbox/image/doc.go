// Package image is the mode image:<image>: one managed container per
// conversation, created by hutch through the Docker Engine API from a
// locally present image, hardened, with the door policy's projection as
// bind mounts and the vault's files read-only. The static hutch binary
// is the container's init and its agent: commands and file operations
// travel to it over a unix socket in a per-runtime directory, so a warm
// command costs a fork, not a docker exec, and vault env travels per
// command, never into the container's config.
//
// Provisioning runs before every command and is serialised per office:
// the container is created when missing, started when stopped, and
// re-created when what the conversation needs (image, mounts, credential
// files, network, agent) no longer matches its fingerprint label, keeping
// its writable layer through a snapshot image.
package image
