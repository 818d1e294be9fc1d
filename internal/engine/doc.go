// Package engine connects hutch to a container engine through the Docker
// Engine API (github.com/moby/moby/client, with API version negotiation),
// which Docker 20.10 and later and Podman's compatible socket both serve.
// It holds the label keys that mark what hutch owns, the one message an
// unreachable engine produces, and the classification of engine errors
// into hutch's error classes. No docker CLI is ever run.
package engine
