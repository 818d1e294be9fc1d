package settings

import (
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"
	_ "time/tzdata" // zone names are checked the same on every host

	"github.com/docker/go-units"

	"github.com/hutchsandbox/hutch/internal/errdefs"
	"github.com/hutchsandbox/hutch/internal/lazyregexp"
	"github.com/hutchsandbox/hutch/internal/netpolicy"
)

// Runtime holds the sandbox.* settings that shape managed runtimes. Zero
// fields are unset; the runtime applies its defaults.
type Runtime struct {
	// CPUs, MemoryBytes and Pids are the default limits of every runtime.
	CPUs        float64
	MemoryBytes int64
	Pids        int64
	// BoostCPUs and BoostMemoryBytes are what a boost raises limits to.
	BoostCPUs        float64
	BoostMemoryBytes int64
	// CeilingCPUs, CeilingMemoryBytes and CeilingPids bound the limits
	// anyone but the operator's settings can give a runtime: the agent's
	// sandbox tool, /sandbox limits and boosts, the API.
	CeilingCPUs        float64
	CeilingMemoryBytes int64
	CeilingPids        int64
	// CeilingDiskBytes bounds what a runtime may write outside its
	// office and mounts (image mode: its writable layer and the layers a
	// re-create carried).
	CeilingDiskBytes int64
	// IdleTimeout stops a runtime that ran nothing for this long.
	IdleTimeout time.Duration
	// Pool is how many started runtimes the daemon keeps ready per
	// image in use (image mode); nil: the default, DefaultPool.
	Pool *int
	// TimeZone is the IANA zone commands run in (TZ), in every mode.
	TimeZone string
	// Network is sandbox.network: open, allowlist or none; "" is unset
	// (see ResolveNetwork for what that means in each mode).
	Network netpolicy.Mode
	// NetworkAllow lists the hosts a runtime may reach through hutch's
	// egress proxy under the allowlist mode (a microVM's only network).
	NetworkAllow []string
	// Kube holds the sandbox.kube.* settings of the kube:<image> mode.
	Kube KubeSettings
}

// runtimeKey is one settable sandbox.* key: its path in the file, how a
// value is checked and stored, and how it lands in Runtime.
type runtimeKey struct {
	name  string   // user-facing: sandbox.cpus
	path  []string // inside "sandbox"
	help  string
	parse func(string) (any, error)
	apply func(*Runtime, any)
}

// RuntimeKeys lists the settable sandbox.* keys in the order help shows them.
var RuntimeKeys = []runtimeKey{
	{"sandbox.cpus", []string{"cpus"}, "default CPUs of a runtime (0.5 = half a CPU)", parseCPUValue, func(r *Runtime, v any) { r.CPUs = v.(float64) }},
	{"sandbox.memory", []string{"memory"}, "default memory of a runtime, Docker units (512m, 1g); swap is the same", parseMemoryValue, func(r *Runtime, v any) { r.MemoryBytes = v.(int64) }},
	{"sandbox.pids", []string{"pids"}, "process ceiling of a runtime", parsePidsValue, func(r *Runtime, v any) { r.Pids = v.(int64) }},
	{"sandbox.boost.cpus", []string{"boost", "cpus"}, "CPUs a boost raises to", parseCPUValue, func(r *Runtime, v any) { r.BoostCPUs = v.(float64) }},
	{"sandbox.boost.memory", []string{"boost", "memory"}, "memory a boost raises to", parseMemoryValue, func(r *Runtime, v any) { r.BoostMemoryBytes = v.(int64) }},
	{"sandbox.ceiling.cpus", []string{"ceiling", "cpus"}, "most CPUs a boost or temporary limits may give a runtime; unset: the boost size", parseCPUValue, func(r *Runtime, v any) { r.CeilingCPUs = v.(float64) }},
	{"sandbox.ceiling.memory", []string{"ceiling", "memory"}, "most memory a boost or temporary limits may give a runtime; unset: the boost size", parseMemoryValue, func(r *Runtime, v any) { r.CeilingMemoryBytes = v.(int64) }},
	{"sandbox.ceiling.pids", []string{"ceiling", "pids"}, "most processes temporary limits may give a runtime; unset: sandbox.pids", parsePidsValue, func(r *Runtime, v any) { r.CeilingPids = v.(int64) }},
	{"sandbox.ceiling.disk", []string{"ceiling", "disk"}, "most disk a runtime may fill outside its office and mounts, Docker units (20g); one over it is stopped until removed; unset: 10g", parseDiskValue, func(r *Runtime, v any) { r.CeilingDiskBytes = v.(int64) }},
	{"sandbox.idleTimeout", []string{"idleTimeout"}, "stop a runtime idle this long (10m, 1h)", parseDurationValue, func(r *Runtime, v any) { r.IdleTimeout = v.(time.Duration) }},
	{"sandbox.pool", []string{"pool"}, "runtimes the daemon keeps started per image in use (image mode, Docker, root) for new conversations' first commands; idle ones paused; unset: 2, 0: none", parsePoolValue, func(r *Runtime, v any) { n := v.(int); r.Pool = &n }},
	{"sandbox.timezone", []string{"timezone"}, "time zone commands run in, in every mode (Europe/Berlin, UTC)", parseTimeZoneValue, func(r *Runtime, v any) { r.TimeZone = v.(string) }},
	{"sandbox.network", []string{"network", "policy"}, "how runtimes reach the network: open (a route anywhere; the default of containers and pods), allowlist (no route but hutch's proxy, which lets through sandbox.network.allow) or none", parseNetworkValue, func(r *Runtime, v any) { r.Network = v.(netpolicy.Mode) }},
	{"sandbox.network.allow", []string{"network", "allow"}, "hosts reachable under sandbox.network allowlist, and a microVM's only network, comma-separated (github.com,*.npmjs.org); unset: none", parseAllowValue, func(r *Runtime, v any) { r.NetworkAllow = v.([]string) }},
	{"sandbox.kube.kubeconfig", []string{"kube", "kubeconfig"}, "kubeconfig file of kube: mode, an absolute path; unset: in-cluster, then KUBECONFIG, then ~/.kube/config", parseKubeconfigValue, func(r *Runtime, v any) { r.Kube.Kubeconfig = v.(string) }},
	{"sandbox.kube.namespace", []string{"kube", "namespace"}, "namespace of kube: mode pods; unset: the kubeconfig's, else default", parseNamespaceValue, func(r *Runtime, v any) { r.Kube.Namespace = v.(string) }},
	{"sandbox.kube.storage", []string{"kube", "storage"}, "how kube: mode pods reach the workspace: hostPath (same path on the node, the default), hostPath:/node/path or pvc:<claim>", parseStorageValue, func(r *Runtime, v any) { r.Kube.Storage = v.(KubeStorage) }},
	{"sandbox.kube.nodeSelector", []string{"kube", "nodeSelector"}, "node labels kube: mode pods must match, comma-separated (disktype=ssd,zone=a)", parseNodeSelectorValue, func(r *Runtime, v any) { r.Kube.NodeSelector = v.(map[string]string) }},
	{"sandbox.kube.runtimeClass", []string{"kube", "runtimeClass"}, "runtimeClassName of kube: mode pods (gvisor, kata); unset: the cluster's default", parseRuntimeClassValue, func(r *Runtime, v any) { r.Kube.RuntimeClass = v.(string) }},
	{"sandbox.kube.agentImage", []string{"kube", "agentImage"}, "repository of the hutch agent image kube: mode pods pull, without a tag (it comes from the agent's hash); unset: hutch-agent", parseAgentImageValue, func(r *Runtime, v any) { r.Kube.AgentImage = v.(string) }},
}

// Name is the key as users write it.
func (k runtimeKey) Name() string { return k.name }

// Help says what the key does.
func (k runtimeKey) Help() string { return k.help }

func lookupKey(name string) (runtimeKey, error) {
	for _, k := range RuntimeKeys {
		if k.name == name {
			return k, nil
		}
	}
	names := make([]string, len(RuntimeKeys))
	for i, k := range RuntimeKeys {
		names[i] = k.name
	}
	return runtimeKey{}, errdefs.New(errdefs.ErrInvalid, fmt.Sprintf("Unknown setting %q; settable keys: %s", name, strings.Join(names, ", ")))
}

// plainValue is what a value may look like: no whitespace, no shell
// metacharacters, nothing a later consumer could misread.
var plainValue = lazyregexp.New(`^[A-Za-z0-9.]+$`)

func checkPlain(v, what string) error {
	if !plainValue.MatchString(v) {
		return errdefs.New(errdefs.ErrInvalid, fmt.Sprintf("%s %q may hold only letters, digits and '.' (no spaces or shell characters)", what, v))
	}
	return nil
}

// ParseCPUs parses a positive CPU count such as 0.5 or 2.
func ParseCPUs(s string) (float64, error) {
	if err := checkPlain(s, "CPUs"); err != nil {
		return 0, err
	}
	v, err := strconv.ParseFloat(s, 64)
	if err != nil || v <= 0 || v > 1024 {
		return 0, errdefs.New(errdefs.ErrInvalid, fmt.Sprintf("CPUs %q must be a positive number such as 0.5 or 2", s))
	}
	return v, nil
}

// ParseMemory parses a memory size in Docker's units (512m, 1g, 1073741824).
func ParseMemory(s string) (int64, error) {
	v, err := parseSize("Memory", "512m or 4g", s)
	if err != nil {
		return 0, err
	}
	if v < 6<<20 {
		return 0, errdefs.New(errdefs.ErrInvalid, fmt.Sprintf("Memory %q is below the engine's minimum of 6m", s))
	}
	return v, nil
}

// ParseDisk parses a disk size in Docker's binary units (10g).
func ParseDisk(s string) (int64, error) { return parseSize("Disk", "10g or 500m", s) }

// parseSize parses a positive size in Docker's binary units; what names
// the value in errors, examples shows good ones.
func parseSize(what, examples, s string) (int64, error) {
	if err := checkPlain(s, what); err != nil {
		return 0, err
	}
	v, err := units.RAMInBytes(s)
	if err != nil || v <= 0 {
		return 0, errdefs.New(errdefs.ErrInvalid, fmt.Sprintf("%s %q must be a positive size such as %s", what, s, examples))
	}
	return v, nil
}

// ParsePids parses a positive process ceiling.
func ParsePids(s string) (int64, error) {
	if err := checkPlain(s, "Pids"); err != nil {
		return 0, err
	}
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil || v <= 0 {
		return 0, errdefs.New(errdefs.ErrInvalid, fmt.Sprintf("Pids %q must be a positive whole number such as 1024", s))
	}
	return v, nil
}

// timeZoneName is what an IANA zone name looks like: Europe/Berlin,
// America/Argentina/Buenos_Aires, Etc/GMT+2, UTC.
var timeZoneName = lazyregexp.New(`^[A-Za-z][A-Za-z0-9_+-]*(/[A-Za-z0-9_+-]+)*$`)

// ParseTimeZone checks an IANA time zone name against the zone database
// built into hutch, so a typo is refused here rather than silently giving
// commands UTC.
func ParseTimeZone(s string) (string, error) {
	if !timeZoneName.MatchString(s) {
		return "", errdefs.New(errdefs.ErrInvalid, fmt.Sprintf("Time zone %q must be an IANA name such as Europe/Berlin or UTC", s))
	}
	if _, err := time.LoadLocation(s); err != nil {
		return "", errdefs.New(errdefs.ErrInvalid, fmt.Sprintf("Time zone %q is not in the time zone database; use an IANA name such as Europe/Berlin or UTC", s))
	}
	return s, nil
}

// ParseNetworkAllow parses sandbox.network.allow: comma-separated host
// entries, each checked as the egress proxy reads it.
func ParseNetworkAllow(s string) ([]string, error) {
	var entries []string
	for e := range strings.SplitSeq(s, ",") {
		entries = append(entries, strings.TrimSpace(e))
	}
	if _, err := netpolicy.ParseAllowlist(entries); err != nil {
		return nil, err
	}
	return entries, nil
}

func parseAllowValue(s string) (any, error)    { return ParseNetworkAllow(s) }
func parseNetworkValue(s string) (any, error)  { return netpolicy.ParseMode(s) }
func parseTimeZoneValue(s string) (any, error) { return ParseTimeZone(s) }
func parseCPUValue(s string) (any, error)      { return ParseCPUs(s) }
func parseMemoryValue(s string) (any, error)   { return ParseMemory(s) }
func parsePidsValue(s string) (any, error)     { return ParsePids(s) }
func parseDiskValue(s string) (any, error)     { return ParseDisk(s) }

// DefaultPool is how many ready runtimes the daemon keeps per image in
// use when sandbox.pool is unset.
const DefaultPool = 2

// MaxPool bounds sandbox.pool: every member is a started container.
const MaxPool = 32

// ParsePool parses sandbox.pool: a whole number from 0 to MaxPool.
func ParsePool(s string) (int, error) {
	if err := checkPlain(s, "Pool"); err != nil {
		return 0, err
	}
	v, err := strconv.Atoi(s)
	if err != nil || v < 0 || v > MaxPool {
		return 0, errdefs.New(errdefs.ErrInvalid, fmt.Sprintf("Pool %q must be a whole number from 0 (no warm pool) to %d", s, MaxPool))
	}
	return v, nil
}

func parsePoolValue(s string) (any, error) { return ParsePool(s) }

// PoolSize is sandbox.pool, or DefaultPool when unset.
func (r Runtime) PoolSize() int {
	if r.Pool == nil {
		return DefaultPool
	}
	return *r.Pool
}

func parseDurationValue(s string) (any, error) {
	if err := checkPlain(s, "Duration"); err != nil {
		return nil, err
	}
	d, err := time.ParseDuration(s)
	if err != nil || d <= 0 {
		return nil, errdefs.New(errdefs.ErrInvalid, fmt.Sprintf("Duration %q must be positive, such as 10m or 1h", s))
	}
	return d, nil
}

// LoadRuntime reads the sandbox.* runtime settings of the file at path.
// Values are stored as strings or numbers; each is checked as SetRuntime
// checks it, and a bad one fails closed naming the file and key.
func LoadRuntime(path string) (Runtime, error) {
	var r Runtime
	data, exists, err := readFile(path)
	if err != nil || !exists {
		return r, err
	}
	d, err := parse(path, data)
	if err != nil {
		return r, err
	}
	for _, k := range RuntimeKeys {
		raw, ok := lookupRaw(d.sandbox, k.path)
		if !ok {
			continue
		}
		s, ok := scalar(raw)
		if !ok {
			return Runtime{}, malformed(path, k.name+" must be a string or a number")
		}
		v, err := k.parse(s)
		if err != nil {
			return Runtime{}, malformed(path, k.name+": "+err.Error())
		}
		k.apply(&r, v)
	}
	return r, nil
}

func lookupRaw(m map[string]json.RawMessage, path []string) (json.RawMessage, bool) {
	for i, p := range path {
		raw, ok := m[p]
		if !ok {
			return nil, false
		}
		if i == len(path)-1 {
			return raw, true
		}
		// A fresh map each level: unmarshalling into m itself would merge
		// the nested object's keys into the caller's map, and a later
		// lookup of a top-level key would read the nested value.
		var next map[string]json.RawMessage
		if !isObject(raw) || json.Unmarshal(raw, &next) != nil {
			return nil, false
		}
		m = next
	}
	return nil, false
}

// scalar renders a JSON string or number as the text a user would type.
func scalar(raw json.RawMessage) (string, bool) {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s, true
	}
	var n json.Number
	if json.Unmarshal(raw, &n) == nil {
		return n.String(), true
	}
	return "", false
}

// SetRuntime sets (value != "") or removes (value == "") one sandbox.*
// runtime key in the file at path, keeping every other key. The value is
// checked first and stored as the string the user gave.
func SetRuntime(path, key, value string) error {
	k, err := lookupKey(key)
	if err != nil {
		return err
	}
	if value != "" {
		if _, err := k.parse(value); err != nil {
			return err
		}
	}
	d, err := loadDoc(path)
	if err != nil {
		return err
	}
	sandbox := d.sandbox
	if sandbox == nil {
		sandbox = map[string]json.RawMessage{}
	}
	setPath(sandbox, k.path, value)
	return saveDoc(path, d, sandbox)
}

// setPath sets or deletes a string at path inside m, dropping objects left empty.
func setPath(m map[string]json.RawMessage, path []string, value string) {
	if len(path) == 1 {
		if value == "" {
			delete(m, path[0])
		} else {
			m[path[0]] = mustMarshal(value)
		}
		return
	}
	child := map[string]json.RawMessage{}
	if raw, ok := m[path[0]]; ok && isObject(raw) {
		_ = json.Unmarshal(raw, &child)
	}
	setPath(child, path[1:], value)
	if len(child) == 0 {
		delete(m, path[0])
	} else {
		m[path[0]] = mustMarshal(child)
	}
}

// RuntimeValues returns the runtime keys set in the file at path, as
// stored, sorted by key.
func RuntimeValues(path string) ([][2]string, error) {
	data, exists, err := readFile(path)
	if err != nil || !exists {
		return nil, err
	}
	d, err := parse(path, data)
	if err != nil {
		return nil, err
	}
	var out [][2]string
	for _, k := range RuntimeKeys {
		if raw, ok := lookupRaw(d.sandbox, k.path); ok {
			s, _ := scalar(raw)
			out = append(out, [2]string{k.name, s})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i][0] < out[j][0] })
	return out, nil
}
