package project

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/netip"
	"net/url"
	"sort"
	"strconv"
	"strings"

	"github.com/hutchsandbox/hutch/internal/errdefs"
)

// loopbackHosts are the host names that mean "this machine": inside a
// bridged container they mean the container itself.
var loopbackHosts = map[string]bool{"127.0.0.1": true, "localhost": true, "::1": true, "0.0.0.0": true}

// Endpoint is a host service an agent's configuration points at.
type Endpoint struct {
	// Original is the URL as configured, Rewritten as the container must
	// use it.
	Original, Rewritten string
	// Port is the URL's port (the scheme's default when it names none).
	Port int
}

// RewriteLoopback rewrites s when it is a URL whose host is loopback
// (127.0.0.1, localhost, ::1, 0.0.0.0) to the same URL on gatewayHost,
// the name under which the container reaches the host. Anything else,
// including URLs of other hosts, is returned unchanged with ok false.
func RewriteLoopback(s, gatewayHost string) (Endpoint, bool) {
	u, err := url.Parse(s)
	if err != nil || u.Scheme == "" || u.Host == "" || u.Opaque != "" {
		return Endpoint{}, false
	}
	host := strings.ToLower(u.Hostname())
	if !loopbackHosts[host] {
		return Endpoint{}, false
	}
	port := u.Port()
	if port == "" {
		port = map[string]string{"http": "80", "ws": "80", "https": "443", "wss": "443"}[strings.ToLower(u.Scheme)]
	}
	n, err := strconv.Atoi(port)
	if err != nil {
		return Endpoint{}, false
	}
	h := gatewayHost
	if strings.Contains(h, ":") {
		h = "[" + h + "]"
	}
	if u.Port() != "" {
		h += ":" + u.Port()
	}
	u.Host = h
	return Endpoint{Original: s, Rewritten: u.String(), Port: n}, true
}

// RewriteMCPConfig rewrites every loopback URL among the string values of
// an MCP client configuration (server URLs, and URLs in their env or
// headers alike) for use inside the container, and returns the new
// configuration (indented JSON) and what it rewrote. Data that is not a
// JSON object is refused.
func RewriteMCPConfig(data []byte, gatewayHost string) ([]byte, []Endpoint, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, nil, errdefs.New(errdefs.ErrInvalid, fmt.Sprintf("The MCP config is not valid JSON: %v", err))
	}
	if _, ok := v.(map[string]any); !ok {
		return nil, nil, errdefs.New(errdefs.ErrInvalid, "The MCP config must be a JSON object ({\"mcpServers\": {...}})")
	}
	var eps []Endpoint
	var walk func(any) any
	walk = func(x any) any {
		switch t := x.(type) {
		case map[string]any:
			for k, e := range t {
				t[k] = walk(e)
			}
		case []any:
			for i, e := range t {
				t[i] = walk(e)
			}
		case string:
			if ep, ok := RewriteLoopback(t, gatewayHost); ok {
				eps = append(eps, ep)
				return ep.Rewritten
			}
		}
		return x
	}
	v = walk(v)
	out, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return nil, nil, err
	}
	sort.Slice(eps, func(i, j int) bool { return eps[i].Original < eps[j].Original })
	return append(out, '\n'), eps, nil
}

// Listener is a TCP socket listening on the host.
type Listener struct {
	Addr netip.Addr
	Port int
}

// ListenerAdvice says what to do when the host service behind ep cannot
// be reached from the sandbox, or "" when it can: the container reaches
// the host at gatewayIP, so a service bound to loopback alone is out of
// its reach. The advice never suggests 0.0.0.0, which would expose the
// service to every network the host is on.
func ListenerAdvice(ep Endpoint, listeners []Listener, gatewayIP string) string {
	var loopbackOnly, any bool
	for _, l := range listeners {
		if l.Port != ep.Port {
			continue
		}
		any = true
		a := l.Addr.Unmap()
		switch {
		case a.IsUnspecified(), a.String() == gatewayIP:
			return ""
		case a.IsLoopback():
			loopbackOnly = true
		}
	}
	switch {
	case loopbackOnly:
		return fmt.Sprintf("%s: the service on port %d listens only on the host's loopback, which the sandbox cannot reach (it reaches the host through the bridge gateway %s). Bind the service to %s, or set sandbox-network to host for this project.",
			ep.Original, ep.Port, gatewayIP, gatewayIP)
	case !any:
		return fmt.Sprintf("%s: nothing listens on port %d on this host yet; the agent reaches it as %s once it does (bound to %s).", ep.Original, ep.Port, ep.Rewritten, gatewayIP)
	}
	return ""
}

// SetOverride returns the settings file data with key set to value in
// the "projects" override of project, every other key kept (SetSetting).
// Empty data is an empty file. It fails on data that is not a JSON
// object, and on a value the file could not hold.
func SetOverride(data []byte, project, key string, value any) ([]byte, error) {
	v, err := json.Marshal(value)
	if err != nil {
		return nil, err
	}
	text := string(v)
	return SetSetting(data, project, key, &text)
}
