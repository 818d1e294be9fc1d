package benchkit

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path"
	"path/filepath"
	"slices"
	"sync/atomic"
	"time"

	"github.com/hutchsandbox/hutch/internal/agent"
	"github.com/hutchsandbox/hutch/internal/agentbin"
	"github.com/hutchsandbox/hutch/internal/engine"
	"github.com/hutchsandbox/hutch/internal/office"
	"github.com/hutchsandbox/hutch/internal/sandbox"
	"github.com/hutchsandbox/hutch/internal/sandbox/image"
)

// This file is what the side-by-side benches (bench/kube, bench/microvm)
// share: one mode measured against another, image mode so far, operation
// by operation in the same run, and printed as one table per comparison.

// Runtime is what a compared mode's runtime offers: commands, and a
// client of the office's agent for the rows that go to it directly.
type Runtime interface {
	sandbox.Runtime
	Agent(ctx context.Context, spec sandbox.Spec) (*agent.Client, error)
}

// Mode is one side of every comparison: a runtime, its office, how it is
// brought to nothing running, and how many starts it has reported (the
// cold start rows check that one happened).
type Mode struct {
	// Name heads the mode's columns ("kube p50") and starts its series'
	// names ("kube Runtime.Exec").
	Name    string
	Runtime Runtime
	Spec    sandbox.Spec
	// Stop leaves nothing running of the office's runtime, Remove nothing
	// at all; both are untimed.
	Stop, Remove func(context.Context) error
	// StartEvents are the runtime's events (its Config.Event, wired to
	// Event) that count as a start.
	StartEvents []string
	// First is the time of the office's first command, the one that made
	// its runtime (set by Versus.FirstCommands).
	First time.Duration

	starts atomic.Int64
}

// Event counts the runtime's starts; give it as the runtime's event hook.
func (m *Mode) Event(e string) {
	if slices.Contains(m.StartEvents, e) {
		m.starts.Add(1)
	}
}

var trueReq = sandbox.ExecRequest{Argv: []string{"true"}}

func (m *Mode) execTrue(ctx context.Context) error {
	return check(m.Runtime.Exec(ctx, m.Spec, trueReq))
}

// ColdStart returns the series of a cold start: before each run, untimed,
// down (m.Stop or m.Remove) and a mark of the runtime's start count; timed,
// Runtime.Exec of `true`, which fails unless the runtime reported a start,
// so that a down that did nothing cannot pass a warm command off as a cold
// start. what says what a start does ("booted", "started"), for the
// message of that failure.
func (m *Mode) ColdStart(ctx context.Context, name string, down func(context.Context) error, what string) *Series {
	var mark int64
	return &Series{
		Name: m.Name + " " + name,
		Before: func() error {
			if err := down(ctx); err != nil {
				return fmt.Errorf("untimed stop: %w", err)
			}
			mark = m.starts.Load()
			return nil
		},
		Run: func() error {
			if err := m.execTrue(ctx); err != nil {
				return err
			}
			if m.starts.Load() == mark {
				return errors.New("the runtime reported no start: nothing was " + what)
			}
			return nil
		},
	}
}

// check turns a command that did not exit 0 into an error.
func check(res sandbox.ExecResult, err error) error {
	if err != nil {
		return err
	}
	if res.ExitCode != 0 {
		return fmt.Errorf("exit %d %s", res.ExitCode, res.Message())
	}
	return nil
}

// BusyboxEngine connects to the Docker engine and makes sure it has
// BusyboxRef (see EnsureImage), the image both sides of a comparison run.
// The caller closes the engine.
func BusyboxEngine(ctx context.Context, progress Logf) (*engine.Engine, error) {
	eng, err := engine.Connect(ctx)
	if err != nil {
		return nil, fmt.Errorf("no container engine answers (hack/docker-up starts Docker): %w", err)
	}
	if err := EnsureImage(ctx, eng.Client, BusyboxRef, progress); err != nil {
		_ = eng.Close()
		return nil, err
	}
	return eng, nil
}

// Scratch is what a side-by-side bench sets up before its modes: temp
// dirs, the agent, and a logger for the runtimes.
type Scratch struct {
	// Dir is the bench's temp dir (hutch-bench-<name>-*): the hutch
	// build, the runtimes' state dirs and the workspace.
	Dir string
	// RunDir is a temp dir of its own under a short name (hb<first letter
	// of name>*), for the runtimes' run dirs: unix socket paths are
	// limited to 107 bytes.
	RunDir string
	// Workspace is Dir/workspace, where Office makes the offices.
	Workspace string
	// Agent is a static hutch built from this module, the agent of both
	// modes.
	Agent agentbin.Binary
	// Log takes the runtimes' warnings (a VM or pod that ended, a slow
	// stop) to stderr, beside the progress lines: the report must not
	// hide what went wrong.
	Log *slog.Logger

	progress Logf
}

// NewScratch makes the temp dirs of the bench called name ("kube") and
// builds the agent into Dir. Close removes the dirs.
func NewScratch(ctx context.Context, name string, progress Logf) (_ *Scratch, err error) {
	s := &Scratch{Log: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})), progress: progress}
	defer func() {
		if err != nil {
			s.Close()
		}
	}()
	if s.Dir, err = os.MkdirTemp("", "hutch-bench-"+name+"-"); err != nil {
		return nil, err
	}
	if s.RunDir, err = os.MkdirTemp("", "hb"+name[:1]); err != nil {
		return nil, err
	}
	s.Workspace = filepath.Join(s.Dir, "workspace")
	progress("building a static hutch (CGO_ENABLED=0 go build ./cmd/hutch), the agent of both modes")
	bin, err := BuildHutch(ctx, s.Dir)
	if err != nil {
		return nil, err
	}
	if s.Agent, err = agentbin.Locate(bin); err != nil {
		return nil, err
	}
	return s, nil
}

// Close removes the temp dirs.
func (s *Scratch) Close() {
	if s.RunDir != "" {
		_ = os.RemoveAll(s.RunDir)
	}
	if s.Dir != "" {
		_ = os.RemoveAll(s.Dir)
	}
}

// Office makes an office directory in the workspace for a conversation
// and the spec the runtimes get for it: the office alone is projected,
// read-write.
func (s *Scratch) Office(conv string, limits sandbox.Limits) (sandbox.Spec, error) {
	addr, err := office.NewAddress("web", conv)
	if err != nil {
		return sandbox.Spec{}, err
	}
	key := string(addr.Key())
	dir := filepath.Join(s.Workspace, key)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return sandbox.Spec{}, err
	}
	return sandbox.Spec{
		OfficeKey: key, Platform: "web", ConversationID: conv,
		OfficeDir: dir, OfficeRuntimePath: "/workspace/" + key,
		Mounts: []sandbox.Mount{{HostPath: dir, RuntimePath: "/workspace/" + key}},
		Limits: limits,
	}, nil
}

// ImageMode makes image mode the side a bench compares against: an
// office for conv, and a runtime on BusyboxRef (state in Dir/state-image,
// run dir RunDir/i) stopped and removed through its Lifecycle. remove
// deletes the office's container and network whatever happened (bounded,
// a failure reported as progress); defer it.
func (s *Scratch) ImageMode(eng *engine.Engine, conv string, limits sandbox.Limits) (m *Mode, remove func(), err error) {
	m = &Mode{Name: "image", StartEvents: []string{"started"}}
	if m.Spec, err = s.Office(conv, limits); err != nil {
		return nil, nil, err
	}
	rt, err := image.New(image.Config{
		Engine: eng, Image: BusyboxRef,
		StateDir: filepath.Join(s.Dir, "state-image"), RunDir: filepath.Join(s.RunDir, "i"),
		Agent: s.Agent, Log: s.Log, Event: m.Event,
	})
	if err != nil {
		return nil, nil, err
	}
	key := m.Spec.OfficeKey
	m.Runtime = rt
	m.Stop = func(ctx context.Context) error { return rt.Stop(ctx, key) }
	m.Remove = func(ctx context.Context) error { return rt.Remove(ctx, key) }
	remove = func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		s.progress("cleanup: removing the image-mode container and its network")
		if err := rt.Remove(ctx, key); err != nil {
			s.progress("cleanup: image Remove: %v", err)
		}
	}
	return m, remove, nil
}

// Row is one row of a Comparison: the same operation in both modes.
type Row struct {
	Name          string
	Subject, Base *Series
}

// Comparison is one table of a side-by-side bench: p50 and p90 (nearest
// rank) of each operation in both modes, their ratio subject/base, and
// how many runs succeeded and failed in each.
type Comparison struct {
	// Title is the table's first line, which Print continues with the
	// rounds: "<Title>, 5 rounds interleaved[ after 2 warm-up rounds]".
	Title string
	// Subject and Base are the modes' names, which head their columns
	// ("kube p50", "image p90"); their first letters head the counts
	// ("runs k+i").
	Subject, Base string
	Rows          []Row
	// Legend follows the table, each line indented by two spaces.
	Legend []string
	// Rounds is how many rounds Measure interleaves, after WarmUp rounds
	// of warm-up (none when 0).
	Rounds, WarmUp int
}

// Series returns the table's series for Interleave, subject and base
// alternating, so that every round rotates through both modes.
func (c *Comparison) Series() []*Series {
	var out []*Series
	for _, r := range c.Rows {
		out = append(out, r.Subject, r.Base)
	}
	return out
}

// Print writes the table to w after a blank line, then its legend and the
// first failure of every series that failed.
func (c *Comparison) Print(w io.Writer) {
	title := c.Title
	if c.Rounds > 0 {
		title += fmt.Sprintf(", %d rounds interleaved", c.Rounds)
	}
	if c.WarmUp > 0 {
		title += fmt.Sprintf(" after %d warm-up rounds", c.WarmUp)
	}
	Printf(w, "\n%s\n", title)
	tw := Table(w)
	s, b := c.Subject, c.Base
	Printf(tw, "operation\t%s p50\t%s p90\t%s p50\t%s p90\tratio p50\tratio p90\truns %.1s+%.1s\tfailed %.1s+%.1s\n", s, s, b, b, s, b, s, b)
	var errs []string
	for _, r := range c.Rows {
		Printf(tw, "%s\t%s\t%s\t%s\t%s\t%.2f\t%.2f\t%d+%d\t%d+%d\n", r.Name,
			Ms(r.Subject.P50()), Ms(r.Subject.Pct(90)), Ms(r.Base.P50()), Ms(r.Base.Pct(90)),
			Ratio(r.Subject.P50(), r.Base.P50()), Ratio(r.Subject.Pct(90), r.Base.Pct(90)),
			len(r.Subject.Times), len(r.Base.Times), r.Subject.Fail, r.Base.Fail)
		for _, s := range []*Series{r.Subject, r.Base} {
			if s.Err != nil {
				errs = append(errs, fmt.Sprintf("  first failure of %s: %v", s.Name, s.Err))
			}
		}
	}
	_ = tw.Flush()
	for _, l := range c.Legend {
		Println(w, "  "+l)
	}
	for _, e := range errs {
		Println(w, e)
	}
}

// Versus measures a subject mode against a base mode (image mode so far)
// in comparisons whose paths run interleaved round by round.
type Versus struct {
	Subject, Base *Mode
	Progress      Logf
}

// Comparison returns an empty comparison of v's modes.
func (v Versus) Comparison(title string, rounds, warmUp int, legend []string) *Comparison {
	return &Comparison{Title: title, Subject: v.Subject.Name, Base: v.Base.Name, Legend: legend, Rounds: rounds, WarmUp: warmUp}
}

// FirstCommands runs each mode's first command (which makes its office's
// runtime) and keeps its time in First: one-off work, printed, not
// compared.
func (v Versus) FirstCommands(ctx context.Context) error {
	for _, m := range []*Mode{v.Subject, v.Base} {
		v.Progress("%s: first command (makes the office's runtime)", m.Name)
		t0 := time.Now()
		if err := m.execTrue(ctx); err != nil {
			return fmt.Errorf("%s: first command: %w", m.Name, err)
		}
		m.First = time.Since(t0)
		v.Progress("%s: first command took %s", m.Name, Ms(m.First))
	}
	return nil
}

// Measure runs c's warm-up rounds, recording nothing, then its rounds,
// interleaved; a failed run is recorded and the rounds go on, so that the
// table shows it. label names the rounds in progress lines.
func (v Versus) Measure(ctx context.Context, c *Comparison, label string) error {
	if c.WarmUp > 0 {
		v.Progress("%s: warm-up, %d rounds", label, c.WarmUp)
		if err := WarmUp(ctx, Rounds{N: c.WarmUp}, c.Series()); err != nil {
			return fmt.Errorf("%s: warm-up: %w", label, err)
		}
	}
	v.Progress("%s: %d rounds", label, c.Rounds)
	return Interleave(ctx, Rounds{N: c.Rounds, Label: label, Progress: v.Progress, KeepGoing: true}, c.Series())
}

// Exec measures warm commands, after 5 warm-up rounds: Runtime.Exec of
// `true` in each mode's running runtime, and in a diagnostic row
// agent.Client.Exec of `true` (in the office) on the client Runtime.Agent
// returned once, which leaves out each mode's check that its runtime is
// up to date. Both runtimes must be running. title and legend are the
// bench's words for the table (see Comparison).
func (v Versus) Exec(ctx context.Context, rounds int, title string, legend []string) (*Comparison, error) {
	c := v.Comparison(title, rounds, 5, legend)
	row := Row{Name: "Runtime.Exec `true`"}
	diag := Row{Name: "diag: agent client Exec `true`"}
	var err error
	if row.Subject, diag.Subject, err = execSeries(ctx, v.Subject); err != nil {
		return nil, err
	}
	if row.Base, diag.Base, err = execSeries(ctx, v.Base); err != nil {
		return nil, err
	}
	c.Rows = []Row{row, diag}
	return c, v.Measure(ctx, c, "warm exec")
}

func execSeries(ctx context.Context, m *Mode) (rt, cl *Series, err error) {
	client, err := m.Runtime.Agent(ctx, m.Spec)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: Runtime.Agent: %w", m.Name, err)
	}
	req := trueReq
	req.Dir = m.Spec.OfficeRuntimePath
	rt = &Series{Name: m.Name + " Runtime.Exec", Run: func() error { return m.execTrue(ctx) }}
	cl = &Series{Name: m.Name + " agent client Exec", Run: func() error { return check(client.Exec(ctx, req)) }}
	return rt, cl, nil
}

const (
	// WriteSize is the size of the file Versus.Writes writes: large
	// enough that the path's throughput, not a round trip, decides the
	// time.
	WriteSize = 16 << 20
	// writeAPIFile and writeCmdFile are the names of the written files
	// in the office.
	writeAPIFile, writeCmdFile = "bench-api.bin", "bench-cmd.bin"
)

// WriteCommand is the command of Versus.Writes' command row, run in the
// office: WriteSize zeros into a file, without fsync.
var WriteCommand = fmt.Sprintf("head -c %d /dev/zero > %s", WriteSize, writeCmdFile)

// Writes measures WriteSize-byte writes into the office, after 2 warm-up
// rounds: WriteSize random bytes through the agent's file API
// (Runtime.Agent, then agent.Client.WriteFile, which stages, fsyncs and
// renames), and, in a row named cmdRow, WriteCommand through Runtime.Exec.
// One write of each kind is checked on the host first, and each file is
// removed on the host, untimed, after every run. title and legend are the
// bench's words for the table (see Comparison).
func (v Versus) Writes(ctx context.Context, rounds int, title, cmdRow string, legend []string) (*Comparison, error) {
	// Random bytes, so that nothing on the way can make the write cheap
	// (a sparse file, a compressing layer).
	data := make([]byte, WriteSize)
	if _, err := rand.Read(data); err != nil {
		return nil, err
	}
	c := v.Comparison(title, rounds, 2, legend)
	api := Row{Name: "agent file API WriteFile"}
	byCmd := Row{Name: cmdRow}
	var err error
	if api.Subject, byCmd.Subject, err = writeSeries(ctx, v.Subject, data); err != nil {
		return nil, err
	}
	if api.Base, byCmd.Base, err = writeSeries(ctx, v.Base, data); err != nil {
		return nil, err
	}
	c.Rows = []Row{api, byCmd}
	return c, v.Measure(ctx, c, "16 MiB writes")
}

// writeSeries returns m's series of Writes, after writing once of each
// kind and checking on the host that the writes land in the office, whole.
func writeSeries(ctx context.Context, m *Mode, data []byte) (api, byCmd *Series, err error) {
	apiHost, cmdHost := filepath.Join(m.Spec.OfficeDir, writeAPIFile), filepath.Join(m.Spec.OfficeDir, writeCmdFile)
	cmd := sandbox.ExecRequest{Argv: []string{WriteCommand}}
	api = &Series{
		Name: m.Name + " WriteFile",
		Run: func() error {
			cl, err := m.Runtime.Agent(ctx, m.Spec)
			if err != nil {
				return err
			}
			return cl.WriteFile(ctx, path.Join(m.Spec.OfficeRuntimePath, writeAPIFile), bytes.NewReader(data), 0o644)
		},
		After: func() { _ = os.Remove(apiHost) },
	}
	byCmd = &Series{
		Name:  m.Name + " head -c",
		Run:   func() error { return check(m.Runtime.Exec(ctx, m.Spec, cmd)) },
		After: func() { _ = os.Remove(cmdHost) },
	}
	if err := api.Run(); err != nil {
		return nil, nil, fmt.Errorf("%s: WriteFile: %w", m.Name, err)
	}
	if got, err := os.ReadFile(apiHost); err != nil || !bytes.Equal(got, data) {
		return nil, nil, fmt.Errorf("%s: the file written through the agent is not in the office on the host as written (%d bytes, %v)", m.Name, len(got), err)
	}
	api.After()
	if err := byCmd.Run(); err != nil {
		return nil, nil, fmt.Errorf("%s: %s: %w", m.Name, WriteCommand, err)
	}
	if fi, err := os.Stat(cmdHost); err != nil || fi.Size() != WriteSize {
		return nil, nil, fmt.Errorf("%s: the file written by the command is not in the office on the host with %d bytes (%v)", m.Name, WriteSize, err)
	}
	byCmd.After()
	return api, byCmd, nil
}
