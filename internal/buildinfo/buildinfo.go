// Package buildinfo says which build of hutch runs, from the binary's
// build info and its -ldflags version: what hutch version and GET
// /v1/version answer, and what hutch_build_info is labelled with, read
// one way for all three.
package buildinfo

import (
	"runtime"
	"runtime/debug"

	"github.com/hutchsandbox/hutch/client"
)

// Read is this binary's build; version is its -ldflags version ("dev"
// by default).
func Read(version string) client.Version {
	bi, _ := debug.ReadBuildInfo()
	return Of(version, bi)
}

// Of is what bi (nil: none) says of a build whose -ldflags version is
// version.
func Of(version string, bi *debug.BuildInfo) client.Version {
	v := client.Version{Version: version, Module: "(devel)", GoVersion: runtime.Version()}
	if bi == nil {
		return v
	}
	if bi.Main.Version != "" {
		v.Module = bi.Main.Version
	}
	if bi.GoVersion != "" {
		v.GoVersion = bi.GoVersion
	}
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			v.Commit = s.Value
		case "vcs.time":
			v.CommitTime = s.Value
		case "vcs.modified":
			v.Modified = s.Value == "true"
		}
	}
	return v
}
