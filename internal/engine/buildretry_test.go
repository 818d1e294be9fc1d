package engine_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/hutchsandbox/hutch/internal/engine"
)

// killedStep is what Podman 4.3 streams when it killed a RUN step's
// runtime itself (containers/podman#17918), as seen in hutch's CI.
const killedStep = `{"stream":"STEP 1/2: FROM base\n"}
{"stream":"STEP 2/2: RUN mkdir -p /sandbox/home\n"}
{"error":"building at STEP \"RUN mkdir -p /sandbox/home\": while running runtime: signal: killed","errorDetail":{"message":"building at STEP \"RUN mkdir -p /sandbox/home\": while running runtime: signal: killed"}}
`

// quoted is a step that failed on its own whose RUN line holds the text
// of a killed step: an agent's Dockerfile must not buy itself a retry
// and a false explanation.
const quoted = `{"stream":"STEP 1/2: FROM base\n"}
{"stream":"STEP 2/2: RUN false # while running runtime: signal: killed\n"}
{"error":"building at STEP \"RUN false # while running runtime: signal: killed\": while running runtime: exit status 1","errorDetail":{"message":"building at STEP \"RUN false # while running runtime: signal: killed\": while running runtime: exit status 1"}}
`

// stepFailed is a step whose own process failed: never built again.
const stepFailed = `{"stream":"STEP 1/2: FROM base\n"}
{"stream":"STEP 2/2: RUN false\n"}
{"error":"building at STEP \"RUN false\": while running runtime: exit status 1","errorDetail":{"message":"building at STEP \"RUN false\": while running runtime: exit status 1"}}
`

const built = `{"stream":"STEP 1/2: FROM base\n"}
{"stream":"STEP 2/2: RUN mkdir -p /sandbox/home\n"}
{"stream":"Successfully tagged x:1\n"}
`

// fakePodman is a Podman 4.3 service that answers builds with the
// streams in answers, one per build and the last one from then on,
// counting the builds it read a whole context for.
func fakePodman(t *testing.T, answers ...string) (*engine.Engine, *atomic.Int32) {
	t.Helper()
	return fakeEngineBuilding(t, "Libpod/4.3.1 (linux)", answers...)
}

// fakeEngineBuilding is fakePodman with the ping's Server header given.
func fakeEngineBuilding(t *testing.T, server string, answers ...string) (*engine.Engine, *atomic.Int32) {
	t.Helper()
	var builds atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case strings.HasSuffix(r.URL.Path, "/_ping"):
			w.Header().Set("Api-Version", "1.41")
			w.Header().Set("Server", server)
			_, _ = w.Write([]byte("OK"))
		case strings.HasSuffix(r.URL.Path, "/build"):
			if _, err := io.Copy(io.Discard, r.Body); err != nil {
				t.Errorf("reading the build context: %v", err)
			}
			n := int(builds.Add(1))
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write([]byte(answers[min(n, len(answers))-1]))
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	t.Setenv("DOCKER_HOST", "tcp://"+srv.Listener.Addr().String())
	t.Setenv("DOCKER_API_VERSION", "")
	eng, err := engine.Connect(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = eng.Close() })
	return eng, &builds
}

// TestBuild_PodmanKilledStep: a step Podman killed itself is built again,
// with a line saying why, at most three times in all; a step that failed
// on its own is not. Podman's fault cannot be made on demand (it needs a
// thread of its Go runtime to end at the right moment), so a fake
// service plays its answers; each of hutch's three ways to build is
// driven through it.
func TestBuild_PodmanKilledStep(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	put(t, filepath.Join(dir, "Dockerfile"), "FROM base\nRUN mkdir -p /sandbox/home\n")
	ways := map[string]func(eng *engine.Engine, out io.Writer) error{
		"BuildFile": func(eng *engine.Engine, out io.Writer) error {
			return eng.BuildFile(ctx, []byte("FROM base\n"), "x:1", nil, false, out)
		},
		"BuildDir": func(eng *engine.Engine, out io.Writer) error {
			return eng.BuildDir(ctx, engine.DirBuild{
				Root: dir, Context: dir, DockerfilePath: filepath.Join(dir, "Dockerfile"),
				Dockerfile: []byte("FROM base\n"), Tag: "x:1",
			}, out)
		},
		"BuildDockerfile": func(eng *engine.Engine, out io.Writer) error {
			return engine.BuildDockerfile(ctx, eng.Client, []byte("FROM base\n"), "x:1", nil, out)
		},
	}
	const again = "Podman killed the runtime of that step itself, which Podman before 4.6 does to a build beside other work (containers/podman#17918); building again from its cache (attempt 2 of 3).\n"
	for name, build := range ways {
		t.Run(name, func(t *testing.T) {
			t.Run("killed once", func(t *testing.T) {
				eng, builds := fakePodman(t, killedStep, built)
				var out bytes.Buffer
				if err := build(eng, &out); err != nil {
					t.Fatalf("the second build failed: %v\n%s", err, out.String())
				}
				if got := builds.Load(); got != 2 {
					t.Errorf("%d builds, want 2", got)
				}
				if !strings.Contains(out.String(), again) {
					t.Errorf("the output does not say why it built again:\n%s", out.String())
				}
			})
			t.Run("killed every time", func(t *testing.T) {
				eng, builds := fakePodman(t, killedStep)
				var out bytes.Buffer
				err := build(eng, &out)
				if err == nil || !strings.Contains(err.Error(), "image build failed at STEP 2/2: RUN mkdir -p /sandbox/home: building at STEP") || !strings.Contains(err.Error(), "signal: killed") {
					t.Fatalf("err = %v, want the killed step named", err)
				}
				if got := builds.Load(); got != 3 {
					t.Errorf("%d builds, want 3", got)
				}
				if n := strings.Count(out.String(), "building again from its cache"); n != 2 {
					t.Errorf("%d lines say it builds again, want 2:\n%s", n, out.String())
				}
			})
			t.Run("holds the text in its RUN line", func(t *testing.T) {
				eng, builds := fakePodman(t, quoted, built)
				if err := build(eng, io.Discard); err == nil || !strings.Contains(err.Error(), "exit status 1") {
					t.Fatalf("err = %v, want the step's failure", err)
				}
				if got := builds.Load(); got != 1 {
					t.Errorf("%d builds, want 1", got)
				}
			})
			t.Run("a Podman that does not kill", func(t *testing.T) {
				eng, builds := fakeEngineBuilding(t, "Libpod/4.9.3 (linux)", killedStep, built)
				err := build(eng, io.Discard)
				want := int32(1)
				if name == "BuildDockerfile" {
					// Without the engine at hand, it goes by the message.
					want = 2
				} else if err == nil {
					t.Errorf("built again on Podman 4.9")
				}
				if got := builds.Load(); got != want {
					t.Errorf("%d builds, want %d", got, want)
				}
			})
			t.Run("failed on its own", func(t *testing.T) {
				eng, builds := fakePodman(t, stepFailed, built)
				var out bytes.Buffer
				err := build(eng, &out)
				if err == nil || !strings.Contains(err.Error(), "exit status 1") {
					t.Fatalf("err = %v, want the step's failure", err)
				}
				if got := builds.Load(); got != 1 {
					t.Errorf("%d builds, want 1: a step that failed on its own fails the same way again", got)
				}
			})
		})
	}
}
