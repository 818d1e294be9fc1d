package features_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/moby/moby/api/types/build"
	"github.com/moby/moby/api/types/jsonstream"
	"github.com/moby/moby/client"

	"github.com/hutchsandbox/hutch/internal/devcontainer"
	"github.com/hutchsandbox/hutch/internal/devcontainer/features"
	"github.com/hutchsandbox/hutch/internal/devcontainer/features/featuretest"
	"github.com/hutchsandbox/hutch/internal/engine"
	"github.com/hutchsandbox/hutch/internal/testenv"
)

// greeting is an option value that would run commands, or add a
// Dockerfile instruction, anywhere it was not quoted.
const greeting = "hi $(touch /pwned) `touch /pwned` 'q' \"dq\" \\ ${HOME}\nRUN touch /pwned\n"

// libQuoted is a containerEnv value with quotes, a backslash and shell
// syntax, which the image's environment must hold as written.
const libQuoted = "a \"b\" $(id) `x` \\ end"

// TestInstall_Docker installs a devcontainer.json's features on the real
// engine, from end to end: a local feature that depends on a feature in
// an OCI registry (the in-process one), and a local one whose install.sh
// has no shebang and no execute bit. It builds the context WriteContext
// lays out both with BuildKit (engine.BuildDir, as hutch builds) and the
// classic builder, then checks what the install scripts saw (options,
// hostile ones verbatim; the spec's user variables; root; their own
// folder; the containerEnv of the feature installed before, PATH with
// ${PATH} expanded), that nothing ran that should not have, the image's
// environment, user and devcontainer.metadata label.
func TestInstall_Docker(t *testing.T) {
	cli := testenv.Docker(t)
	base := testenv.BusyboxImage(t, cli)
	eng, err := engine.Connect(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = eng.Close() })

	reg := featuretest.NewRegistry(t)
	libRef := reg.Ref("devcontainers/features/lib:1")
	reg.Push(t, "devcontainers/features/lib:1", featuretest.Files{
		"devcontainer-feature.json": `{"id": "lib", "version": "1.0.0", "name": "lib",
			"options": {"prefix": {"type": "string", "default": "/usr/local/lib-default"}},
			"containerEnv": {"LIB_HOME": "/opt/lib", "PATH": "/opt/lib/bin:${PATH}", "LIB_QUOTED": ` + jsonString(libQuoted) + `},
			"postCreateCommand": "libtool"}`,
		"install.sh": "#!/bin/sh\nset -e\nmkdir -p \"$PREFIX/bin\"\nprintf '#!/bin/sh\\necho libtool-ok\\n' > \"$PREFIX/bin/libtool\"\nchmod +x \"$PREFIX/bin/libtool\"\n",
	})

	project := t.TempDir()
	dc := filepath.Join(project, ".devcontainer")
	put := func(rel, body string, mode os.FileMode) {
		t.Helper()
		p := filepath.Join(dc, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), mode); err != nil {
			t.Fatal(err)
		}
	}
	put("greeter/devcontainer-feature.json", `{"id": "greeter", "version": "1.0.0", "name": "greeter",
		"options": {"greeting": {"type": "string", "default": "hello"}, "loud": {"type": "boolean", "default": false}},
		"dependsOn": {"`+libRef+`": {"prefix": "/opt/lib"}},
		"containerEnv": {"GREETER": "on"}}`, 0o644)
	put("greeter/install.sh", `#!/bin/sh
set -e
out=/usr/local/share/greeter
mkdir -p "$out"
printf '%s' "$GREETING" > "$out/greeting"
printf '%s' "$LOUD" > "$out/loud"
printf '%s|%s|%s|%s' "$_CONTAINER_USER" "$_REMOTE_USER" "$_CONTAINER_USER_HOME" "$_REMOTE_USER_HOME" > "$out/users"
id -u > "$out/uid"
pwd > "$out/pwd"
libtool > "$out/libtool"
printf '%s' "$LIB_QUOTED" > "$out/lib_quoted"
`, 0o755)
	put("plain/devcontainer-feature.json", `{"id": "plain", "version": "1.0.0", "name": "plain"}`, 0o644)
	put("plain/install.sh", "mkdir -p /usr/local/share\necho plain > /usr/local/share/plain\n", 0o644)

	cfg := &devcontainer.Config{Dir: dc, Features: []devcontainer.Feature{
		{ID: "./greeter", Options: map[string]string{"greeting": greeting, "loud": "true"}},
		{ID: "./plain"},
	}}
	fetcher := &features.Fetcher{Dir: dc, ProjectRoot: project, WorkDir: t.TempDir()}
	plan, err := features.Resolve(context.Background(), fetcher, cfg)
	if err != nil {
		t.Fatal(err)
	}
	var order []string
	for _, f := range plan.Features {
		order = append(order, f.Ref.ID)
	}
	if diff := cmp.Diff([]string{"./plain", libRef, "./greeter"}, order); diff != "" {
		t.Fatalf("install order (-want +got):\n%s", diff)
	}
	dir := t.TempDir()
	dockerfile, err := features.WriteContext(dir, plan.Features, features.Build{
		Base: base, ImageUser: "nobody",
		Users: features.Users{ContainerUser: "root", RemoteUser: "nobody"},
	})
	if err != nil {
		t.Fatal(err)
	}

	builds := map[string]func(tag string) error{
		"buildkit": func(tag string) error {
			var out bytes.Buffer
			err := eng.BuildDir(context.Background(), engine.DirBuild{
				Root: dir, Context: dir, DockerfilePath: filepath.Join(dir, "Dockerfile"), Dockerfile: []byte(dockerfile),
				Tag: tag, Offline: true,
			}, &out)
			if err != nil {
				return errors.New(err.Error() + "\n" + out.String())
			}
			return nil
		},
		"classic": func(tag string) error { return classicBuild(cli, dir, tag) },
	}
	for name, buildImage := range builds {
		t.Run(name, func(t *testing.T) {
			tag := testenv.Name(t) + ":latest"
			t.Cleanup(func() { testenv.RemoveImage(t, cli, tag) })
			if err := buildImage(tag); err != nil {
				t.Fatalf("build: %v\nDockerfile:\n%s", err, dockerfile)
			}
			checkImage(t, cli, tag, libRef)
		})
	}
}

func jsonString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// classicBuild builds the context in dir with the engine's classic
// builder.
func classicBuild(cli *client.Client, dir, tag string) error {
	pr, pw := io.Pipe()
	go func() { _ = pw.CloseWithError(features.TarContext(dir, pw)) }()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	res, err := cli.ImageBuild(ctx, pr, client.ImageBuildOptions{
		Tags: []string{tag}, Dockerfile: "Dockerfile", Remove: true, ForceRemove: true,
		Version: build.BuilderV1, NetworkMode: "none",
	})
	if err != nil {
		_ = pr.Close()
		return err
	}
	defer func() { _ = res.Body.Close() }()
	var log strings.Builder
	dec := json.NewDecoder(res.Body)
	for {
		var msg jsonstream.Message
		err := dec.Decode(&msg)
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		log.WriteString(msg.Stream)
		if msg.Error != nil {
			return errors.New(msg.Error.Message + "\n" + log.String())
		}
	}
}

func checkImage(t *testing.T, cli *client.Client, tag, libRef string) {
	t.Helper()
	script := `cd /usr/local/share/greeter
for f in greeting loud users uid pwd libtool lib_quoted; do printf '%s=' "$f"; cat "$f"; printf '\n--\n'; done
printf 'plain='; cat /usr/local/share/plain; printf -- '--\n'
for p in /pwned /tmp/dev-container-features; do if [ -e "$p" ]; then echo "present: $p"; fi; done
printf 'GREETER=%s|LIB_HOME=%s|PATH=%s|LIB_QUOTED=%s\n' "$GREETER" "$LIB_HOME" "$PATH" "$LIB_QUOTED"
id -un
`
	stdout, stderr, code := testenv.RunContainer(t, cli, tag, "hutch.test="+testenv.Name(t), "sh", "-c", script)
	if code != 0 {
		t.Fatalf("checking the image: exit %d\n%s\n%s", code, stdout, stderr)
	}
	want := "greeting=" + greeting + "\n--\n" +
		"loud=true\n--\n" +
		"users=root|nobody|/root|/nonexistent\n--\n" +
		"uid=0\n\n--\n" +
		"pwd=/tmp/dev-container-features/2-greeter\n\n--\n" +
		"libtool=libtool-ok\n\n--\n" +
		"lib_quoted=" + libQuoted + "\n--\n" +
		"plain=plain\n--\n" +
		"GREETER=on|LIB_HOME=/opt/lib|PATH=/opt/lib/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin|LIB_QUOTED=" + libQuoted + "\n" +
		"nobody\n"
	if diff := cmp.Diff(want, stdout); diff != "" {
		t.Errorf("what the install scripts saw (-want +got):\n%s\nstderr:\n%s", diff, stderr)
	}

	inspect, err := cli.ImageInspect(context.Background(), tag)
	if err != nil {
		t.Fatal(err)
	}
	if inspect.Config.User != "nobody" {
		t.Errorf("the image's user is %q, want the base's restored (nobody)", inspect.Config.User)
	}
	var label []map[string]any
	if err := json.Unmarshal([]byte(inspect.Config.Labels[features.MetadataLabel]), &label); err != nil {
		t.Fatalf("label %s: %v\n%s", features.MetadataLabel, err, inspect.Config.Labels[features.MetadataLabel])
	}
	want2 := []map[string]any{{"id": "./plain"}, {"id": libRef, "postCreateCommand": "libtool"}, {"id": "./greeter"}}
	if diff := cmp.Diff(want2, label); diff != "" {
		t.Errorf("label (-want +got):\n%s", diff)
	}
}
