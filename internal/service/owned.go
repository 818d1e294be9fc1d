package service

import (
	"context"
	"errors"

	"github.com/hutchsandbox/hutch/internal/errdefs"
	"github.com/hutchsandbox/hutch/internal/sandbox"
)

// ManagedKinds are the modes whose runtimes hutch makes and owns, in the
// order listings show them. Each labels its runtimes with this state dir
// (containers, pods) or keeps them under it (microVM disks), so each can
// list exactly this installation's.
var ManagedKinds = []sandbox.Kind{sandbox.KindImage, sandbox.KindGondolin, sandbox.KindKube}

// managedModeOf is the mode whose lifecycle lists kind's runtimes: one
// per kind, whatever image each runtime was made from.
func managedModeOf(k sandbox.Kind) sandbox.Mode {
	if k == sandbox.KindGondolin {
		return sandbox.Mode{Kind: k, Target: "default"}
	}
	return sandbox.Mode{Kind: k}
}

// OwnedRuntime is one runtime this installation owns and its mode.
type OwnedRuntime struct {
	Kind sandbox.Kind
	sandbox.Status
}

// ModeNote says why a mode's runtimes were left out: its engine (Docker,
// QEMU, a cluster) is absent or does not answer.
type ModeNote struct {
	Kind   sandbox.Kind
	Reason string
}

// OwnedRuntimes lists the runtimes of every managed mode this state dir
// owns, whatever mode $HUTCH_SANDBOX names. skip leaves out the kinds
// listed elsewhere (a daemon's mode); nil skips none. A mode whose engine
// is absent is left out with a note, not an error: a host with Docker and
// no cluster still lists its containers.
func (s *Service) OwnedRuntimes(ctx context.Context, skip func(sandbox.Kind) bool) ([]OwnedRuntime, []ModeNote, error) {
	var out []OwnedRuntime
	var notes []ModeNote
	for _, k := range ManagedKinds {
		if skip != nil && skip(k) {
			continue
		}
		m, err := s.ManagedFor(ctx, managedModeOf(k))
		if err != nil {
			notes = append(notes, ModeNote{Kind: k, Reason: err.Error()})
			continue
		}
		list, err := m.List(ctx)
		if absent(err) {
			notes = append(notes, ModeNote{Kind: k, Reason: err.Error()})
			continue
		}
		if err != nil {
			return nil, nil, err
		}
		for _, st := range list {
			out = append(out, OwnedRuntime{Kind: k, Status: st})
		}
	}
	return out, notes, nil
}

// RemoveOwned removes an office's runtime in every managed mode that has
// one (an office used in two modes has two) and returns those modes. skip
// and the notes are OwnedRuntimes'. No mode having one returns none.
func (s *Service) RemoveOwned(ctx context.Context, key string, skip func(sandbox.Kind) bool) ([]sandbox.Kind, []ModeNote, error) {
	var removed []sandbox.Kind
	var notes []ModeNote
	for _, k := range ManagedKinds {
		if skip != nil && skip(k) {
			continue
		}
		m, err := s.ManagedFor(ctx, managedModeOf(k))
		if err != nil {
			notes = append(notes, ModeNote{Kind: k, Reason: err.Error()})
			continue
		}
		// Remove itself says whether there was anything (ErrNotFound when
		// not), leftovers included: a container gone without its network.
		err = m.Remove(ctx, key)
		switch {
		case err == nil:
			removed = append(removed, k)
		case errdefs.IsNotFound(err):
		case absent(err):
			notes = append(notes, ModeNote{Kind: k, Reason: err.Error()})
		default:
			return removed, notes, err
		}
	}
	return removed, notes, nil
}

// absent reports whether err means the mode's engine is not there to ask.
func absent(err error) bool {
	return errors.Is(err, errdefs.ErrUnavailable) || errors.Is(err, errdefs.ErrNotSupported)
}
