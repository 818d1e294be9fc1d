package project

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/docker/go-units"

	"github.com/hutchsandbox/hutch/internal/errdefs"
	"github.com/hutchsandbox/hutch/internal/lazyregexp"
	"github.com/hutchsandbox/hutch/internal/netpolicy"
)

// The settings keys of the project sandbox.
const (
	KeyEnabled      = "sandbox-enabled"
	KeyImage        = "sandbox-image"
	KeyBase         = "sandbox-base"
	KeyPackages     = "sandbox-packages"
	KeySetup        = "sandbox-setup"
	KeyAgents       = "sandbox-agents"
	KeyMount        = "sandbox-mount"
	KeyEnv          = "sandbox-env"
	KeyUser         = "sandbox-user"
	KeyNetwork      = "sandbox-network"
	KeyNetworkAllow = "sandbox-network-allow"
	KeyMemory       = "sandbox-memory"
	KeyCPUs         = "sandbox-cpus"
	KeyPersist      = "sandbox-persist"
	KeyDevcontainer = "sandbox-devcontainer"
	KeyLifecycle    = "sandbox-lifecycle-timeout"
)

// Defaults the settings do not spell out.
const (
	// DefaultBase is the base of the generated image.
	DefaultBase = "debian:bookworm-slim"
	// DefaultAgent is installed when sandbox-agents is not set.
	DefaultAgent = "claude"
	// DefaultLifecycleTimeout bounds each lifecycle command of a
	// devcontainer.json. The scripts they run live in the checkout,
	// which agents edit: one made to hang must not hold up the sandbox
	// (and the lock every session of the project takes) for ever.
	DefaultLifecycleTimeout = 30 * time.Minute
	// MaxLifecycleTimeout is the longest sandbox-lifecycle-timeout.
	MaxLifecycleTimeout = 24 * time.Hour
)

// Values of sandbox-network (Resolved.Network). open, allowlist and none
// are the egress policies of netpolicy; host is open on the host's own
// network. bridge, the name of open before there were policies, is read
// as open.
const (
	NetworkOpen      = "open"
	NetworkAllowlist = "allowlist"
)

// Engine network modes (Spec.Network). NetworkHost and NetworkNone are
// also values of sandbox-network: host is the engine's host mode, and
// none (like allowlist) puts the container on the engine's none.
const (
	NetworkBridge = "bridge"
	NetworkHost   = "host"
	NetworkNone   = "none"
)

// EgressAddr is where, inside a sandbox whose network is allowlist or
// none, the hutch agent listens for connections to relay to hutch's
// egress proxy: its commands' HTTPS_PROXY.
const EgressAddr = "127.0.0.1:3128"

// SourceDefault is where a value came from when nothing set it.
const SourceDefault = "default"

type kind int

const (
	kindBool kind = iota
	kindString
	kindImage
	kindList
	kindNetwork
	kindAllow
	kindMemory
	kindCPUs
	kindDuration
)

// Keys are the settings keys, in the order settings tables list them.
var Keys = []string{
	KeyEnabled, KeyImage, KeyBase, KeyPackages, KeySetup, KeyAgents, KeyMount,
	KeyEnv, KeyUser, KeyNetwork, KeyNetworkAllow, KeyMemory, KeyCPUs, KeyPersist, KeyDevcontainer,
	KeyLifecycle,
}

var kinds = map[string]kind{
	KeyEnabled:      kindBool,
	KeyImage:        kindImage,
	KeyBase:         kindImage,
	KeyPackages:     kindList,
	KeySetup:        kindList,
	KeyAgents:       kindList,
	KeyMount:        kindList,
	KeyEnv:          kindList,
	KeyUser:         kindString,
	KeyNetwork:      kindNetwork,
	KeyNetworkAllow: kindAllow,
	KeyMemory:       kindMemory,
	KeyCPUs:         kindCPUs,
	KeyPersist:      kindBool,
	KeyDevcontainer: kindBool,
	KeyLifecycle:    kindDuration,
}

// layer is the keys one level of a settings file sets, parsed: bool,
// string, []string, int64 (memory) or float64 (cpus).
type layer map[string]any

// Settings is a parsed settings file: its global sandbox keys and the
// per-project overrides under "projects". The zero value is a file that
// sets nothing.
type Settings struct {
	// Source names the file in notes and in Resolved.Sources.
	Source   string
	global   layer
	projects map[string]layer
	// ignored holds, per project ("" for the top level), the keys whose
	// value was left out with a note; anyKey when the project's whole
	// override was. Policy reads it: a typo must not widen a policy.
	ignored map[string]map[string]bool
}

// anyKey in Settings.ignored stands for every key of a layer.
const anyKey = "*"

func (s *Settings) ignore(project, key string) {
	if s.ignored == nil {
		s.ignored = map[string]map[string]bool{}
	}
	if s.ignored[project] == nil {
		s.ignored[project] = map[string]bool{}
	}
	s.ignored[project][key] = true
}

// ParseSettings reads a settings file: a JSON object whose sandbox-* keys
// apply to every project, and whose "projects" object maps an absolute
// project path to the same keys for that project alone:
//
//	{"sandbox-enabled": true, "sandbox-packages": ["jq"],
//	 "projects": {"/home/me/code/api": {"sandbox-memory": "8g"}}}
//
// Booleans may be written as JSON booleans or as the strings true, 1, yes,
// false, 0 or no; lists as a list of strings or one string. An empty
// string sets a key back to its default (so a project can undo a global
// value) and null is as if the key were absent. Keys that do not start
// with sandbox- belong to other features and are skipped.
//
// A bad entry (a wrong type, an unknown sandbox-* key, a network other
// than open, allowlist, none or host, an allowlist entry that is not a
// host, a memory that is not a size, cpus that are not positive) is left out and described in a note naming source and
// key: a typo must not keep a sandbox from starting. Only a file that is
// not a JSON object is an error (ErrFailedPrecondition, naming source and
// line); an empty file sets nothing.
func ParseSettings(source string, data []byte) (Settings, []string, error) {
	s := Settings{Source: source}
	if len(bytes.TrimSpace(data)) == 0 {
		return s, nil, nil
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal(data, &top); err != nil || top == nil {
		return Settings{}, nil, errdefs.New(errdefs.ErrFailedPrecondition, notJSON(source, data, err))
	}
	var notes []string
	s.global = parseLayer(&s, source, "", top, &notes)
	if raw, ok := top["projects"]; ok && !isNull(raw) {
		var projects map[string]json.RawMessage
		if json.Unmarshal(raw, &projects) != nil || projects == nil {
			notes = append(notes, fmt.Sprintf("%s: projects must be an object mapping project paths to settings, not %s; per-project settings are ignored.", source, kindOf(raw)))
		}
		for _, p := range sortedKeys(projects) {
			if !path.IsAbs(p) {
				notes = append(notes, fmt.Sprintf("%s: the project %q under projects is not an absolute path; its settings are ignored.", source, p))
				continue
			}
			var obj map[string]json.RawMessage
			clean := path.Clean(p)
			if json.Unmarshal(projects[p], &obj) != nil || obj == nil {
				notes = append(notes, fmt.Sprintf("%s: the settings for project %s must be an object, not %s; they are ignored.", source, p, kindOf(projects[p])))
				s.ignore(clean, anyKey)
				continue
			}
			if _, dup := s.projects[clean]; dup {
				notes = append(notes, fmt.Sprintf("%s: the project %s appears more than once under projects; only %q is used.", source, clean, p))
			}
			if s.projects == nil {
				s.projects = map[string]layer{}
			}
			s.projects[clean] = parseLayer(&s, source, clean, obj, &notes)
		}
	}
	return s, notes, nil
}

// notJSON is the error text for a settings file that is not a JSON
// object, with the line of a syntax error.
func notJSON(source string, data []byte, err error) string {
	const fix = "Fix the file; until then hutch cannot read its sandbox settings."
	var syn *json.SyntaxError
	if errors.As(err, &syn) {
		line := 1 + bytes.Count(data[:min(int(syn.Offset), len(data))], []byte("\n"))
		return fmt.Sprintf("%s: line %d: the file is not valid JSON (%s). %s", source, line, syn.Error(), fix)
	}
	if !json.Valid(data) {
		return fmt.Sprintf("%s: the file is not valid JSON. %s", source, fix)
	}
	return fmt.Sprintf("%s: the file holds %s, not a JSON object. %s", source, kindOf(data), fix)
}

// parseLayer reads the sandbox-* keys of one object; project is "" for
// the top level. Keys it leaves out are recorded in s.
func parseLayer(s *Settings, source, project string, obj map[string]json.RawMessage, notes *[]string) layer {
	l := layer{}
	for _, k := range sortedKeys(obj) {
		raw := obj[k]
		label := k
		if project != "" {
			label = k + " for project " + project
		}
		kd, known := kinds[k]
		switch {
		case k == "projects" && project == "":
			continue
		case !known && (project != "" || strings.HasPrefix(k, "sandbox-")):
			*notes = append(*notes, fmt.Sprintf("%s: %s is not a sandbox setting; it is ignored. hutch project settings lists the settings there are.", source, label))
			continue
		case !known, isNull(raw):
			continue
		}
		v, problem := parseValue(kd, raw)
		if problem != "" {
			*notes = append(*notes, fmt.Sprintf("%s: %s %s; the setting is ignored.", source, label, problem))
			s.ignore(project, k)
			continue
		}
		l[k] = v
	}
	return l
}

// imageRef is what an image reference may look like: no spaces, no line
// breaks, nothing that could smuggle a second instruction into FROM.
var imageRef = lazyregexp.New(`^[A-Za-z0-9][A-Za-z0-9._/:@-]*$`)

// minMemory is the smallest memory ceiling Docker accepts.
const minMemory = 6 << 20

// parseValue reads one value of kind k, or says what is wrong with it
// (as the rest of a sentence that starts with the key). A value that
// could be a secret (a list) is described by its type, never quoted.
func parseValue(k kind, raw json.RawMessage) (any, string) {
	var str string
	isString := json.Unmarshal(raw, &str) == nil
	s := strings.TrimSpace(str)
	switch k {
	case kindBool:
		var b bool
		if json.Unmarshal(raw, &b) == nil {
			return b, ""
		}
		if isString {
			switch strings.ToLower(s) {
			case "true", "1", "yes":
				return true, ""
			case "false", "0", "no":
				return false, ""
			}
			return nil, fmt.Sprintf("must be true or false, not %q", s)
		}
		return nil, "must be true or false, not " + kindOf(raw)
	case kindList:
		var list []string
		if isString {
			if s == "" {
				return []string(nil), "" // back to the default
			}
			return []string{str}, ""
		}
		if json.Unmarshal(raw, &list) == nil && list != nil {
			return list, ""
		}
		var items []json.RawMessage
		if json.Unmarshal(raw, &items) == nil {
			for _, it := range items {
				if json.Unmarshal(it, new(string)) != nil {
					return nil, "must be a string or a list of strings, not a list holding " + kindOf(it)
				}
			}
		}
		return nil, "must be a string or a list of strings, not " + kindOf(raw)
	case kindAllow:
		return parseAllow(raw)
	}
	// The rest are scalars: strings, and for memory and cpus numbers too.
	t := bytes.TrimSpace(raw)
	number := !isString && len(t) > 0 && (t[0] == '-' || t[0] >= '0' && t[0] <= '9')
	if number && (k == kindMemory || k == kindCPUs) {
		s = string(t)
	} else if !isString {
		return nil, "must be a string, not " + kindOf(raw)
	}
	switch k {
	case kindImage:
		if s != "" && !imageRef.MatchString(s) {
			return nil, fmt.Sprintf("must be an image reference such as %s, not %q", DefaultBase, s)
		}
	case kindNetwork:
		n, ok := parseNetwork(s)
		if !ok {
			return nil, fmt.Sprintf("must be open, allowlist, none or host, not %q", s)
		}
		return n, ""
	case kindMemory:
		if s == "" {
			return int64(0), ""
		}
		v, err := units.RAMInBytes(s)
		if err != nil || v <= 0 {
			return nil, fmt.Sprintf("must be a size such as 512m or 8g, not %q", s)
		}
		if v < minMemory {
			return nil, fmt.Sprintf("must be at least 6m, the engine's minimum, not %q", s)
		}
		return v, ""
	case kindCPUs:
		if s == "" {
			return float64(0), ""
		}
		v, err := strconv.ParseFloat(s, 64)
		if err != nil || !(v > 0) || v > 1024 || math.IsInf(v, 0) {
			return nil, fmt.Sprintf("must be a positive number of CPUs such as 0.5 or 4, not %q", s)
		}
		return v, ""
	case kindDuration:
		if s == "" {
			return DefaultLifecycleTimeout, ""
		}
		v, err := time.ParseDuration(s)
		if err != nil || v <= 0 || v > MaxLifecycleTimeout {
			return nil, fmt.Sprintf("must be a duration such as 45m or 2h, at most 24h, not %q", s)
		}
		return v, ""
	}
	return s, ""
}

// parseNetwork reads a value of sandbox-network; "", default and bridge
// (its name before there were policies) mean open.
func parseNetwork(s string) (string, bool) {
	switch v := strings.ToLower(strings.TrimSpace(s)); v {
	case "", "default", NetworkBridge, NetworkOpen:
		return NetworkOpen, true
	case NetworkAllowlist, NetworkNone, NetworkHost:
		return v, true
	}
	return "", false
}

// parseAllow reads sandbox-network-allow: hosts separated by commas, in
// one string or in a list of strings, each checked as
// netpolicy.ParseAllowlist checks it. Empty entries are skipped; the
// empty string is the default, no host.
func parseAllow(raw json.RawMessage) (any, string) {
	var parts []string
	var one string
	if json.Unmarshal(raw, &one) == nil {
		parts = []string{one}
	} else if json.Unmarshal(raw, &parts) != nil || parts == nil {
		return nil, "must be hosts separated by commas (a string or a list of strings), not " + kindOf(raw)
	}
	var entries []string
	for _, p := range parts {
		for _, e := range strings.Split(p, ",") {
			if e = strings.TrimSpace(e); e != "" {
				entries = append(entries, e)
			}
		}
	}
	if _, err := netpolicy.ParseAllowlist(entries); err != nil {
		// The policy package names the key of conversations; the entry
		// and the rule are what matter here.
		why := strings.TrimPrefix(err.Error(), "sandbox.network.allow ")
		return nil, "must be hosts such as github.com, *.npmjs.org or registry.npmjs.org:443, separated by commas, but " + why
	}
	return entries, ""
}

func isNull(raw json.RawMessage) bool { return string(bytes.TrimSpace(raw)) == "null" }

// kindOf names the JSON type of raw for a note ("a number").
func kindOf(raw json.RawMessage) string {
	t := bytes.TrimSpace(raw)
	if len(t) == 0 {
		return "nothing"
	}
	switch t[0] {
	case '{':
		return "an object"
	case '[':
		return "a list"
	case '"':
		return "a string"
	case 't', 'f':
		return "a boolean"
	case 'n':
		return "null"
	}
	return "a number"
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// Resolved are the effective settings of one project: defaults, then the
// file's global keys, then the project's override, key by key.
type Resolved struct {
	Enabled bool
	// Image is sandbox-image: used as-is, nothing is built ("" = generate).
	Image string
	// Base is the generated image's base unless devcontainer.json names one.
	Base                                 string
	Packages, Setup, Agents, Mounts, Env []string
	// User is sandbox-user: "" (the devcontainer's user, else the caller's
	// uid:gid), host, root, or a user passed to the engine as-is.
	User string
	// Network is sandbox-network: NetworkOpen, NetworkAllowlist,
	// NetworkNone or NetworkHost.
	Network string
	// NetworkAllow is sandbox-network-allow, one host per entry: what
	// hutch's egress proxy lets through under allowlist.
	NetworkAllow []string
	// MemoryBytes and CPUs are ceilings; 0 is unlimited.
	MemoryBytes int64
	CPUs        float64
	Persist     bool
	// Devcontainer: read the project's devcontainer.json.
	Devcontainer bool
	// LifecycleTimeout bounds each of the devcontainer's lifecycle
	// commands: one still running then is killed, and up fails.
	LifecycleTimeout time.Duration
	// Sources maps every key to where its value came from: SourceDefault,
	// the settings file, or the file followed by " (project override)".
	Sources map[string]string
}

// Effective merges the global keys of s with the override of project
// (cleaned before it is looked up). A key the override sets wins whole:
// a list in the override replaces the global list rather than extending
// it. sandbox-agents unset installs DefaultAgent; set to [] it installs
// none.
func Effective(s Settings, project string) Resolved {
	r := Resolved{
		Base:         DefaultBase,
		Agents:       []string{DefaultAgent},
		Network:      NetworkOpen,
		Persist:      true,
		Devcontainer: true,
		Sources:      map[string]string{},

		LifecycleTimeout: DefaultLifecycleTimeout,
	}
	for _, k := range Keys {
		r.Sources[k] = SourceDefault
	}
	source := s.Source
	if source == "" {
		source = "settings"
	}
	r.apply(s.global, source)
	if project != "" {
		r.apply(s.projects[path.Clean(project)], source+" (project override)")
	}
	return r
}

func (r *Resolved) apply(l layer, source string) {
	for _, k := range Keys {
		v, ok := l[k]
		if !ok {
			continue
		}
		r.Sources[k] = source
		switch k {
		case KeyEnabled:
			r.Enabled = v.(bool)
		case KeyPersist:
			r.Persist = v.(bool)
		case KeyDevcontainer:
			r.Devcontainer = v.(bool)
		case KeyImage:
			r.Image = v.(string)
		case KeyBase:
			r.Base = cmpOr(v.(string), DefaultBase)
		case KeyUser:
			r.User = v.(string)
		case KeyNetwork:
			r.Network = v.(string)
		case KeyNetworkAllow:
			r.NetworkAllow = v.([]string)
		case KeyMemory:
			r.MemoryBytes = v.(int64)
		case KeyCPUs:
			r.CPUs = v.(float64)
		case KeyPackages:
			r.Packages = v.([]string)
		case KeySetup:
			r.Setup = v.([]string)
		case KeyAgents:
			r.Agents = v.([]string)
			if r.Agents == nil {
				r.Agents = []string{DefaultAgent}
			}
		case KeyMount:
			r.Mounts = v.([]string)
		case KeyEnv:
			r.Env = v.([]string)
		case KeyLifecycle:
			r.LifecycleTimeout = v.(time.Duration)
		}
	}
}

// FormatDuration writes d as a setting would: 30m, 1h30m, 45s.
func FormatDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

func cmpOr(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// Table is the effective settings as rows of key, value and source, in
// the order of Keys, for hutch project settings. Values of sandbox-env
// are not shown (they are often tokens): only the names.
func (r Resolved) Table() [][3]string {
	none := func(s string) string { return cmpOr(s, "(none)") }
	list := func(l []string) string { return none(strings.Join(l, ", ")) }
	rows := make([][3]string, 0, len(Keys))
	for _, k := range Keys {
		var v string
		switch k {
		case KeyEnabled:
			v = strconv.FormatBool(r.Enabled)
		case KeyPersist:
			v = strconv.FormatBool(r.Persist)
		case KeyDevcontainer:
			v = strconv.FormatBool(r.Devcontainer)
		case KeyImage:
			v = cmpOr(r.Image, "(none: the image is generated)")
		case KeyBase:
			v = r.Base
		case KeyPackages:
			v = list(r.Packages)
		case KeySetup:
			v = list(r.Setup)
		case KeyAgents:
			v = list(r.Agents)
		case KeyMount:
			v = list(r.Mounts)
		case KeyEnv:
			names := make([]string, len(r.Env))
			for i, e := range r.Env {
				name, _, ok := strings.Cut(e, "=")
				if !ok {
					name = "(not KEY=VALUE)"
				} else {
					name = strings.TrimSpace(name) + "=…"
				}
				names[i] = name
			}
			v = list(names)
		case KeyUser:
			v = cmpOr(r.User, "(devcontainer user, else your uid:gid)")
		case KeyNetwork:
			v = r.Network
		case KeyNetworkAllow:
			v = list(r.NetworkAllow)
		case KeyMemory:
			v = "unlimited"
			if r.MemoryBytes > 0 {
				v = units.BytesSize(float64(r.MemoryBytes))
			}
		case KeyCPUs:
			v = "unlimited"
			if r.CPUs > 0 {
				v = strconv.FormatFloat(r.CPUs, 'f', -1, 64)
			}
		case KeyLifecycle:
			v = FormatDuration(r.LifecycleTimeout) + " per lifecycle command"
		}
		src := r.Sources[k]
		if src == "" {
			src = SourceDefault
		}
		rows = append(rows, [3]string{k, v, src})
	}
	return rows
}

// Policy is the egress policy r asks for: what hutch's proxy lets through
// from a sandbox whose network is allowlist or none (host and open are
// netpolicy.ModeOpen).
func (r Resolved) Policy() netpolicy.Policy {
	return policyOf(r.Network, r.NetworkAllow)
}

func policyOf(network string, allow []string) netpolicy.Policy {
	switch network {
	case NetworkAllowlist:
		// The entries were checked when they were read; one that is not
		// (a Resolved made by hand) allows nothing rather than everything.
		a, err := netpolicy.ParseAllowlist(allow)
		if err != nil {
			a = netpolicy.Allowlist{}
		}
		return netpolicy.Policy{Mode: netpolicy.ModeAllowlist, Allow: a}
	case NetworkNone:
		return netpolicy.Policy{Mode: netpolicy.ModeNone}
	}
	return netpolicy.Policy{Mode: netpolicy.ModeOpen}
}

// Policy is the egress policy of project as s sets it, for a proxy that
// reads it again at every connection. ok is false when an entry of
// sandbox-network or sandbox-network-allow that applies to the project
// (at the top level or in its override) was left out with a note: the
// caller then keeps the policy it had, so that a typo made while the
// sandbox runs never widens what it may reach.
func (s Settings) Policy(project string) (p netpolicy.Policy, ok bool) {
	clean := ""
	if project != "" {
		clean = path.Clean(project)
	}
	bad := func(layer string) bool {
		b := s.ignored[layer]
		return b[KeyNetwork] || b[KeyNetworkAllow] || (layer != "" && b[anyKey])
	}
	if bad("") || (clean != "" && bad(clean)) {
		return netpolicy.Policy{}, false
	}
	return Effective(s, project).Policy(), true
}
