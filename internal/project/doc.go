// Package project decides what the shared project sandbox of seed 004 is:
// one container per checkout, shared by the human and every agent working
// in it, with the project mounted at its own path and nothing else of the
// user's unless they mount it.
//
// It is pure on purpose: paths, the settings file's bytes, a parsed
// devcontainer.json and facts about the engine come in as data, and
// names, refusals, a Dockerfile and a Spec come out. Walking up to .git,
// resolving symlinks, reading files and talking to the engine live in the
// caller, so every rule here is a table test and no rule can be bypassed
// by an effect happening first.
//
// The pieces, in the order a caller uses them:
//
//   - CheckProject refuses a project too broad to mount (/, a top-level
//     directory, the home directory or an ancestor of it).
//   - ParseSettings reads the settings file into Settings, turning every
//     bad entry into a note; Effective merges the global keys with the
//     project's override and records where each value came from.
//   - Resolve turns the project, the effective settings, the devcontainer
//     config and the engine flavour into a Spec: the container's name,
//     image or Recipe, mounts, env, user, network, limits, labels, notes
//     and a hash of everything that shapes the container.
//   - Recipe renders the thin Dockerfile that puts the agent CLIs on top of
//     a base image; its Tag changes exactly when the Dockerfile does.
//   - Features are a devcontainer.json's features, installed on the
//     recipe's base first; FeaturesTag names their image by the plan the
//     caller fetched (the base image's ID, each feature's content, options
//     and order).
//
// Notes are advisories for the user (a setting that was ignored, a
// devcontainer key that is not applied); they never fail a bring-up.
// Errors are refusals: a mount of the engine socket, the home directory
// or / is refused wherever it comes from, because silently dropping a
// mount the user asked for would be worse than saying no.
package project
