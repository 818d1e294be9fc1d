package chat

import (
	"context"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/hutchsandbox/hutch/internal/errdefs"
	"github.com/hutchsandbox/hutch/internal/office"
	"github.com/hutchsandbox/hutch/internal/projection"
	"github.com/hutchsandbox/hutch/internal/sandbox"
	"github.com/hutchsandbox/hutch/internal/service"
	"github.com/hutchsandbox/hutch/internal/testenv"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

// golden compares got with testdata/<name>.golden (rewritten with -update).
func golden(t *testing.T, name, got string) {
	t.Helper()
	file := filepath.Join("testdata", name+".golden")
	if *update {
		if err := os.WriteFile(file, []byte(got+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(file)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if diff := cmp.Diff(string(want), got+"\n"); diff != "" {
		t.Errorf("%s mismatch (-want +got):\n%s", file, diff)
	}
}

// newService is a service over a fresh state dir.
func newService(t *testing.T, getenv func(string) string) *service.Service {
	t.Helper()
	if getenv == nil {
		getenv = func(string) string { return "" }
	}
	layout, err := service.ResolveLayout(service.LayoutOptions{StateDir: filepath.Join(t.TempDir(), "state"), Getenv: getenv})
	if err != nil {
		t.Fatal(err)
	}
	svc := service.New(layout, nil)
	// The microVM mode stages the agent (a static hutch) even to answer
	// that no runtime runs.
	svc.SetAgentBinary(testenv.HutchBinary(t))
	t.Cleanup(func() { _ = svc.Close() })
	return svc
}

func addr(t *testing.T, platform, id string) office.Address {
	t.Helper()
	a, err := office.NewAddress(platform, id)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// send handles message and fails the test on an error.
func send(t *testing.T, svc *service.Service, mode sandbox.Mode, conv office.Address, message string) string {
	t.Helper()
	r, err := Handle(context.Background(), svc, mode, conv, message)
	if err != nil {
		t.Fatalf("Handle(%q): %v", message, err)
	}
	return r.Text
}

// TestHostMode walks one conversation through the commands in host mode;
// the state carries over from step to step.
func TestHostMode(t *testing.T) {
	svc := newService(t, nil)
	host := sandbox.Mode{Kind: sandbox.KindHost}
	conv := addr(t, "slack", "C0123ABC")
	steps := []struct{ golden, message string }{
		{"host_status_default", "/sandbox"},
		{"help", "<@U0BOT> /sandbox help"},
		{"unknown_command", "/sandbox bogus"},
		{"status_usage", "/sandbox status now"},
		{"boost_usage", "/sandbox boost 4"},
		{"host_boost", "/sandbox boost"},
		{"host_limits", "/sandbox limits cpus=2 memory=4g"},
		{"door_show", "/sandbox door"},
		{"door_usage", "/sandbox door shared full"},
		{"host_door_shared", "/sandbox door shared"},
		{"host_door_full", "@hutch: /sandbox DOOR Full"},
	}
	for _, s := range steps {
		golden(t, s.golden, send(t, svc, host, conv, s.message))
	}
	// Chat changed nothing: in host mode the door decides whether commands
	// run on the host at all, and any participant can send a message.
	pol, err := svc.Resolve(conv, host, "")
	if err != nil {
		t.Fatal(err)
	}
	if pol.Decision.Source != projection.SourceDefault || pol.Refusal == nil {
		t.Errorf("after the door commands: source %v, refusal %v; want no setting and commands refused", pol.Decision.Source, pol.Refusal)
	}
	// The operator can.
	shared, err := projection.ParseDoorWord("shared")
	if err != nil {
		t.Fatal(err)
	}
	if err := svc.SetDoor(t.Context(), conv, shared); err != nil {
		t.Fatal(err)
	}
	golden(t, "host_status_shared", send(t, svc, host, conv, "/sandbox"))
}

func TestDoor_OtherModes(t *testing.T) {
	svc := newService(t, nil)
	conv := addr(t, "discord", "998877")
	for _, tc := range []struct {
		golden string
		mode   sandbox.Mode
	}{
		{"container_door_shared", sandbox.Mode{Kind: sandbox.KindContainer, Target: "agents"}},
		{"cloudflare_door_isolated", sandbox.Mode{Kind: sandbox.KindCloudflare, Target: "team"}},
		{"gondolin_door_full", sandbox.Mode{Kind: sandbox.KindGondolin, Target: "default"}},
	} {
		word := map[sandbox.Kind]string{sandbox.KindContainer: "shared", sandbox.KindCloudflare: "isolated", sandbox.KindGondolin: "full"}[tc.mode.Kind]
		golden(t, tc.golden, send(t, svc, tc.mode, conv, "/sandbox door "+word))
	}
	golden(t, "container_status", send(t, svc, sandbox.Mode{Kind: sandbox.KindContainer, Target: "agents"}, conv, "/sandbox"))
	golden(t, "gondolin_boost", send(t, svc, sandbox.Mode{Kind: sandbox.KindGondolin, Target: "default"}, conv, "/sandbox boost"))
}

// TestMentionsAndCommandForms: every accepted spelling gives the same
// reply; anything else is not a command.
func TestMentionsAndCommandForms(t *testing.T) {
	svc := newService(t, nil)
	host := sandbox.Mode{Kind: sandbox.KindHost}
	conv := addr(t, "telegram", "-100200")
	want := send(t, svc, host, conv, "/sandbox help")
	for _, m := range []string{
		"  /sandbox   help  ",
		"<@U0BOT> /sandbox help",
		"<@!1234>, /sandbox help",
		"@hutch /sandbox help",
		"@hutch: /sandbox help",
		"<@U0BOT> @hutch /sandbox help",
		"/sandbox@hutch_bot help",
		"/Sandbox HELP",
		"/sandbox\nhelp",
	} {
		if got := send(t, svc, host, conv, m); got != want {
			t.Errorf("%q: got\n%s\nwant\n%s", m, got, want)
		}
	}
	for _, m := range []string{"", "   ", "hello", "/pi-sandbox", "/pi-sandbox door full", "@hutch", "<@U0BOT>", "/sandboxes", "/sandbox@", "please /sandbox", "<@> /sandbox", "sandbox"} {
		_, err := Handle(context.Background(), svc, host, conv, m)
		if !errors.Is(err, errdefs.ErrInvalid) {
			t.Errorf("%q: err = %v, want class invalid", m, err)
		}
	}
	_, err := Handle(context.Background(), svc, host, office.Address{Platform: "irc", ConversationID: "x"}, "/sandbox")
	if !errors.Is(err, errdefs.ErrInvalid) {
		t.Errorf("bad address: err = %v, want class invalid", err)
	}
}

// TestNotACommand_Text pins the error text a surface shows for a message
// that is not a command.
func TestNotACommand_Text(t *testing.T) {
	_, err := Handle(context.Background(), newService(t, nil), sandbox.DefaultMode, addr(t, "web", "w1"), "/pi-sandbox")
	golden(t, "not_a_command", err.Error())
}

func TestDoorWordsAllHaveHelp(t *testing.T) {
	for _, w := range projection.DoorWords {
		if doorHelp[w] == "" {
			t.Errorf("door word %q has no help line", w)
		}
		if _, err := projection.ParseDoorWord(w); err != nil {
			t.Errorf("door word %q: %v", w, err)
		}
	}
	if len(doorHelp) != len(projection.DoorWords) {
		t.Errorf("doorHelp has %d entries, DoorWords %d", len(doorHelp), len(projection.DoorWords))
	}
}

func TestFormatLimits(t *testing.T) {
	for _, tc := range []struct {
		l        sandbox.Limits
		withPids bool
		want     string
	}{
		{sandbox.Limits{CPUs: 0.5, MemoryBytes: 1 << 30, Pids: 1024}, true, "0.5 CPUs, 1GiB memory, 1024 processes"},
		{sandbox.Limits{CPUs: 1, MemoryBytes: 1536 << 20, Pids: 1}, true, "1 CPU, 1.5GiB memory, 1 process"},
		{sandbox.Limits{CPUs: 2, MemoryBytes: 4 << 30}, false, "2 CPUs, 4GiB memory"},
		{sandbox.Limits{}, true, "unlimited CPUs, unlimited memory, unlimited processes"},
	} {
		if got := formatLimits(tc.l, tc.withPids); got != tc.want {
			t.Errorf("formatLimits(%+v) = %q, want %q", tc.l, got, tc.want)
		}
	}
}

func FuzzHandle_Parse(f *testing.F) {
	for _, s := range []string{"/sandbox", "<@U1> /sandbox door full", "@x: /sandbox limits cpus=2", "/sandbox@bot", "/pi-sandbox"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		args, err := parse(s)
		if err != nil {
			if !errors.Is(err, errdefs.ErrInvalid) {
				t.Fatalf("parse(%q): error of the wrong class: %v", s, err)
			}
			return
		}
		for _, a := range args {
			if a == "" {
				t.Fatalf("parse(%q): empty word in %q", s, args)
			}
		}
	})
}
