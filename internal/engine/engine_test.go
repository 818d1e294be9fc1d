package engine

import (
	"errors"
	"testing"

	"github.com/hutchsandbox/hutch/internal/errdefs"
)

func TestCanUpdateLimits(t *testing.T) {
	for _, tt := range []struct {
		flavor  Flavor
		version string
		want    bool
	}{
		{FlavorDocker, "20.10.24+dfsg1", true},
		{FlavorDocker, "", true},
		{FlavorPodman, "4.3.1", false},
		{FlavorPodman, "5.0.3", false},
		{FlavorPodman, "5.1.0", true},
		{FlavorPodman, "6.0.0-dev", true},
		{FlavorPodman, "unknown", true},
	} {
		e := &Engine{Flavor: tt.flavor, ServerVersion: tt.version}
		if got := e.CanUpdateLimits(); got != tt.want {
			t.Errorf("%s %q: CanUpdateLimits() = %v, want %v", tt.flavor, tt.version, got, tt.want)
		}
	}
}

// Podman 4 answers a create under a taken name with status 500 and this
// text, not with Docker's 409.
func TestIsConflict_PodmanNameInUse(t *testing.T) {
	err := errors.New(`Error response from daemon: container create: creating container storage: the container name "hutch-x" is already in use by 34b0. You have to remove that container to be able to reuse that name: that name is already in use`)
	if !IsConflict(err) {
		t.Error("IsConflict does not recognise Podman's name-in-use error")
	}
	if !errdefs.IsConflict(Classify(err, "create container hutch-x")) {
		t.Error("Classify does not map Podman's name-in-use error to ErrConflict")
	}
	if IsConflict(errors.New("no such container")) || IsConflict(nil) {
		t.Error("IsConflict recognises what is no conflict")
	}
}
