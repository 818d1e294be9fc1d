package service

import (
	"context"
	"net"
	"path/filepath"
	"strconv"
	"time"

	"github.com/hutchsandbox/hutch/internal/egress"
	"github.com/hutchsandbox/hutch/internal/events"
	"github.com/hutchsandbox/hutch/internal/metrics"
	"github.com/hutchsandbox/hutch/internal/netpolicy"
	"github.com/hutchsandbox/hutch/internal/office"
	"github.com/hutchsandbox/hutch/internal/sandbox"
	"github.com/hutchsandbox/hutch/internal/vault"
)

// egressJournalName is the file, in an office's state dir, of its
// placeholder events: every substitution and refusal, names only.
const egressJournalName = "egress-events.jsonl"

// EgressJournal is the path of an office's placeholder event journal.
func (s *Service) EgressJournal(officeKey string) string {
	return filepath.Join(office.StateDir(s.layout.StateDir, office.Key(officeKey)), egressJournalName)
}

// EgressCA is the office's egress CA, made on first use in its state dir
// (never mounted into a runtime; only its certificate is).
func (s *Service) EgressCA(officeKey string) (*egress.CA, error) {
	return egress.LoadOrCreateCA(office.StateDir(s.layout.StateDir, office.Key(officeKey)))
}

// EgressSecrets are the real values behind an office's placeholders, read
// from its vault at each call, so a rotated secret applies to the next
// request without re-creating the runtime. Managed modes key the vault by
// the office. A vault that cannot be read gives none: every placeholder
// then goes out unsubstituted, never a value.
func (s *Service) EgressSecrets(officeKey string) []egress.Secret {
	marks, err := s.vaults.Placeholders(officeKey)
	if err != nil || len(marks) == 0 {
		if err != nil {
			s.log.Warn("egress: cannot read the vault's placeholders", "office_key", officeKey, "error", err)
		}
		return nil
	}
	env, err := s.vaults.Env(officeKey)
	if err != nil {
		s.log.Warn("egress: cannot read the vault", "office_key", officeKey, "error", err)
		return nil
	}
	_, secrets := vault.ApplyPlaceholders(env, marks)
	out := make([]egress.Secret, 0, len(secrets))
	for _, sec := range secrets {
		hosts, err := netpolicy.ParseAllowlist(sec.Hosts)
		if err != nil {
			// Checked when marked; a mark that no longer parses sends the
			// value nowhere.
			s.log.Warn("egress: a placeholder's hosts do not parse; its value goes nowhere", "office_key", officeKey, "secret", sec.Name)
		}
		out = append(out, egress.Secret{Name: sec.Name, Placeholder: sec.Token, Value: sec.Value, Hosts: hosts, Expires: sec.Expires, Body: sec.Body})
	}
	return out
}

// egressRelays is the one set of egress proxies of this process, made on
// first use: the containers and pods whose agents relay connections.
func (s *Service) egressRelays() *egress.Relays {
	s.relaysMu.Lock()
	defer s.relaysMu.Unlock()
	if s.relays == nil {
		s.relays = &egress.Relays{Log: s.log, New: s.newEgressProxy}
	}
	return s.relays
}

func (s *Service) newEgressProxy(officeKey string) (*egress.Proxy, error) {
	ca, err := s.EgressCA(officeKey)
	if err != nil {
		return nil, err
	}
	return &egress.Proxy{
		Office: officeKey,
		Log:    s.log,
		// Relays serve containers and pods, which resolve sandbox.network
		// alike (only a microVM's default differs, and it has its own proxy).
		Policy:        func() netpolicy.Policy { return s.EgressPolicy(officeKey, sandbox.KindImage) },
		Secrets:       func() []egress.Secret { return s.EgressSecrets(officeKey) },
		CA:            ca,
		UpstreamRoots: s.egressRoots,
		Record:        s.egressRecorder(officeKey),
		Denied:        s.egressDenied(officeKey),
	}, nil
}

// egressActor is the context of what an office's egress proxy refuses,
// for the event log.
func egressActor(officeKey string) context.Context {
	return events.WithTarget(events.WithActor(context.Background(), events.Actor{Surface: events.SurfaceEgress}), officeKey)
}

// egressDenied is what an office's proxy tells of each connection or
// request the network policy refused (an agent reaching for a host it
// may not): counted, and a refusal event (at the rate refusal events
// are written).
func (s *Service) egressDenied(officeKey string) func(egress.Denial) {
	return func(d egress.Denial) {
		s.metrics.Refusal(metrics.SurfaceEgress, metrics.ReasonNetwork)
		s.recordRefusal(egressActor(officeKey), metrics.SurfaceEgress,
			metrics.ReasonNetwork+": "+net.JoinHostPort(d.Host, strconv.Itoa(d.Port))+" "+d.Reason)
	}
}

// egressRecorder is what an office's proxy tells of each placeholder use:
// its journal (for the portal) and the metrics; a refusal is an event of
// the log too, an attempted exfiltration when the host is not one the
// entry names.
func (s *Service) egressRecorder(officeKey string) func(egress.Event) {
	journal := egress.OpenJournal(s.EgressJournal(officeKey))
	return func(ev egress.Event) {
		if ev.Time.IsZero() {
			ev.Time = time.Now()
		}
		journal.Record(ev)
		s.metrics.Placeholder(ev.Kind, ev.Reason)
		if ev.Kind == egress.KindRefused {
			detail := "placeholder: " + ev.Secret + " toward " + net.JoinHostPort(ev.Host, strconv.Itoa(ev.Port)) + " " + ev.Reason
			if ev.Reason == egress.ReasonNotListed {
				detail += " (an attempted exfiltration)"
			}
			s.recordRefusal(egressActor(officeKey), metrics.SurfaceEgress, detail)
		}
	}
}
