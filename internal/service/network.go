package service

import (
	"github.com/hutchsandbox/hutch/internal/netpolicy"
	"github.com/hutchsandbox/hutch/internal/office"
	"github.com/hutchsandbox/hutch/internal/sandbox"
	"github.com/hutchsandbox/hutch/internal/settings"
)

// network resolves a conversation's egress policy in a mode from the
// global settings and the conversation's own.
func (s *Service) network(key office.Key, kind sandbox.Kind) (settings.Network, error) {
	n, _, err := s.networkAndSettings(key, kind)
	return n, err
}

// networkAndSettings is network, and the global runtime settings it read
// (what a command's limits and time zone come from too).
func (s *Service) networkAndSettings(key office.Key, kind sandbox.Kind) (settings.Network, settings.Runtime, error) {
	global, err := settings.LoadRuntime(settings.GlobalPath(s.layout.StateDir))
	if err != nil {
		return settings.Network{}, settings.Runtime{}, err
	}
	conv, err := settings.LoadRuntime(settings.ConversationPath(s.layout.StateDir, string(key)))
	if err != nil {
		return settings.Network{}, settings.Runtime{}, err
	}
	return settings.ResolveNetwork(global, conv, kind == sandbox.KindGondolin), global, nil
}

// Network is a conversation's effective egress policy in mode.
func (s *Service) Network(addr office.Address, mode sandbox.Mode) (settings.Network, error) {
	return s.network(addr.Key(), mode.Kind)
}

// EgressPolicy is what the egress proxy of an office enforces now. The
// proxy reads it for every connection, so a changed allowlist applies to
// the next one without re-creating the runtime. A setting that cannot be
// read refuses every host (fail closed).
func (s *Service) EgressPolicy(officeKey string, kind sandbox.Kind) netpolicy.Policy {
	n, err := s.network(office.Key(officeKey), kind)
	if err != nil {
		s.log.Warn("egress: cannot read the network settings; refusing every host", "office_key", officeKey, "error", err)
		return netpolicy.Policy{Mode: netpolicy.ModeNone}
	}
	return n.Policy()
}

// SetNetwork sets the sandbox.network (and, when allow is not nil,
// sandbox.network.allow) of one conversation, or globally when addr is
// nil. An empty mode clears the setting, as does an empty *allow. The
// runtime picks the change up on its next command: a change between open
// and a proxied mode re-creates it, a new allowlist does not.
func (s *Service) SetNetwork(addr *office.Address, mode string, allow *string) error {
	if mode != "" {
		if _, err := netpolicy.ParseMode(mode); err != nil {
			return err
		}
	}
	if allow != nil && *allow != "" {
		if _, err := settings.ParseNetworkAllow(*allow); err != nil {
			return err
		}
	}
	path := settings.GlobalPath(s.layout.StateDir)
	if addr != nil {
		if _, err := s.registry.Record(*addr); err != nil {
			return err
		}
		if _, err := office.EnsureStateDir(s.layout.StateDir, addr.Key()); err != nil {
			return err
		}
		path = settings.ConversationPath(s.layout.StateDir, string(addr.Key()))
	}
	if err := settings.SetRuntime(path, "sandbox.network", mode); err != nil {
		return err
	}
	if allow != nil {
		return settings.SetRuntime(path, "sandbox.network.allow", *allow)
	}
	return nil
}

// GlobalNetwork is the global egress policy of a container or pod.
func (s *Service) GlobalNetwork() (settings.Network, error) {
	global, err := settings.LoadRuntime(settings.GlobalPath(s.layout.StateDir))
	if err != nil {
		return settings.Network{}, err
	}
	return settings.ResolveNetwork(global, settings.Runtime{}, false), nil
}

// StoredNetwork is the sandbox.network one conversation's settings (or,
// for nil, the global ones) hold; "" when unset.
func (s *Service) StoredNetwork(addr *office.Address) (netpolicy.Mode, error) {
	path := settings.GlobalPath(s.layout.StateDir)
	if addr != nil {
		path = settings.ConversationPath(s.layout.StateDir, string(addr.Key()))
	}
	r, err := settings.LoadRuntime(path)
	return r.Network, err
}
