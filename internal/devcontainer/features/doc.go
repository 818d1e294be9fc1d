// Package features fetches, orders and installs Dev Container Features the
// way the Features specification (containers.dev/implementors/features and
// features-distribution) and its reference CLI do.
//
// A feature is named in devcontainer.json by an OCI reference
// (ghcr.io/devcontainers/features/node:1), a folder beside the file
// (./rust) or an https URL of a tarball; ParseRef tells them apart. A
// Fetcher gets each one into a folder hutch owns: OCI artifacts through
// go-containerregistry (anonymous, or with the host user's docker
// credentials), tarballs over https, local folders copied beneath the
// folder of devcontainer.json without following a link. Everything fetched
// is untrusted: archives are unpacked with size and count caps and only
// their regular files and directories are kept.
//
// Resolve turns the file's features into an install plan: it reads each
// feature's devcontainer-feature.json (ParseMetadata), adds what dependsOn
// requires, and orders the whole by the specification's round-based
// algorithm (dependsOn, installsAfter, overrideFeatureInstallOrder). Each
// planned feature carries its options as the environment its install.sh
// sees (OptionEnv). WriteContext lays the plan out as a Docker build
// context whose Dockerfile installs one feature per layer on a base image
// and labels the result with devcontainer.metadata.
//
// The parsing, option and ordering code is pure; only fetch*.go, local.go,
// extract.go, cache.go and the context writer touch files or the network.
package features
