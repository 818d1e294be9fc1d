package agent

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"time"

	"github.com/hutchsandbox/hutch/internal/errdefs"
)

// GuestOps are the duties of an agent that is a microVM's init, which
// only the guest side can carry out (mounts, cgroup files, reboot). They
// live behind this interface so that this package stays free of them and
// the endpoints can be tested with a fake; internal/microvm/guest
// implements it.
type GuestOps interface {
	// Setup applies a validated setup: mounts, files, the commands'
	// cgroup limits. Its time zone is the Server's business.
	Setup(ctx context.Context, setup GuestSetup) error
	// PowerOff syncs the disks and ends the VM. It is called once every
	// command has been killed and the caller has its answer.
	PowerOff()
}

// powerOffDelay is how long the agent waits between answering a
// poweroff and ending the VM, so that the 204 leaves the guest first.
const powerOffDelay = 50 * time.Millisecond

// errNotGuest answers the guest endpoints of an agent that is no
// microVM's init.
var errNotGuest = errdefs.New(errdefs.ErrNotFound, "This agent is not a microVM guest: it serves no /v1/guest endpoints")

func (s *Server) handleGuestSetup(w http.ResponseWriter, r *http.Request) {
	if s.Guest == nil {
		writeError(w, errNotGuest)
		return
	}
	var setup GuestSetup
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxGuestSetupBody)).Decode(&setup); err != nil {
		if mbe := (*http.MaxBytesError)(nil); errors.As(err, &mbe) {
			writeError(w, errdefs.New(errdefs.ErrInvalid, "Guest setup request is larger than 64 MiB"))
			return
		}
		writeError(w, errdefs.New(errdefs.ErrInvalid, "Guest setup request is not valid JSON: "+err.Error()))
		return
	}
	if err := setup.Validate(); err != nil {
		writeError(w, err)
		return
	}
	if err := s.Guest.Setup(r.Context(), setup); err != nil {
		s.log.Warn("agent: guest setup failed", "err", err)
		writeError(w, err)
		return
	}
	if setup.TimeZone != "" {
		s.timeZone.Store(&setup.TimeZone)
	}
	if n := setup.Network; n != nil && n.Proxy != "" {
		s.proxy.Store(&n.Proxy)
	}
	s.log.Info("agent: guest set up", "mounts", len(setup.Mounts), "files", len(setup.Files),
		"pids", setup.Pids, "memory_bytes", setup.MemoryBytes, "time_zone", setup.TimeZone, "network", setup.Network != nil)
	w.WriteHeader(http.StatusNoContent)
}

func (s *Server) handleGuestPowerOff(w http.ResponseWriter, _ *http.Request) {
	if s.Guest == nil {
		writeError(w, errNotGuest)
		return
	}
	n := s.reaper.killAll()
	s.log.Info("agent: powering off", "killed_commands", n)
	w.WriteHeader(http.StatusNoContent)
	_ = http.NewResponseController(w).Flush()
	s.powerOff.Do(func() {
		go func() {
			time.Sleep(powerOffDelay)
			s.Guest.PowerOff()
		}()
	})
}

// guestEnv is what the guest setups asked to add to every command's env:
// the time zone and the proxy.
func (s *Server) guestEnv() map[string]string {
	env := map[string]string{}
	if tz := s.timeZone.Load(); tz != nil {
		env["TZ"] = *tz
	}
	if p := s.proxy.Load(); p != nil {
		for _, k := range []string{"HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy"} {
			env[k] = *p
		}
		for _, k := range []string{"NO_PROXY", "no_proxy"} {
			env[k] = "localhost,127.0.0.1,::1"
		}
	}
	return env
}
