package project

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"path"
	"strings"

	"github.com/hutchsandbox/hutch/internal/devcontainer"
	"github.com/hutchsandbox/hutch/internal/errdefs"
	"github.com/hutchsandbox/hutch/internal/lazyregexp"
)

// BuildRepo is the repository of the images hutch builds from a
// devcontainer.json's Dockerfile; the tag is a hash of what went in.
const BuildRepo = "hutch-devcontainer"

// BuildPaths returns the Dockerfile and the context directory the build
// property of dc names, resolved against the folder holding
// devcontainer.json (the context defaulting to that folder, as the spec
// says), cleaned and absolute. Both must lie inside project: the
// executor reads them without following links from the project down,
// and nothing outside it is the project's to build from. dcFile names
// the file in errors. The caller reads the Dockerfile from the path
// returned and gives its content to Resolve (Input.Dockerfile).
func BuildPaths(project string, dc *devcontainer.Config, dcFile string) (dockerfile, context string, err error) {
	if dc == nil || dc.Build == nil {
		return "", "", errdefs.New(errdefs.ErrInvalid, "no Dockerfile build to resolve")
	}
	dir := dc.Dir
	if dir == "" && dc.Path != "" {
		dir = path.Dir(dc.Path)
	}
	if dir == "" {
		dir = project
	}
	resolve := func(key, p string) (string, error) {
		abs := path.Clean(path.Join(dir, p))
		if path.IsAbs(p) {
			abs = path.Clean(p)
		}
		if !within(abs, project) {
			return "", errdefs.New(errdefs.ErrInvalid, fmt.Sprintf(
				"%s in %s names %s, which is outside the project %s: hutch builds only from what the project holds. Move it into the project and fix %s, or set sandbox-image to an image built from it.",
				key, dcFile, abs, project, key))
		}
		return abs, nil
	}
	if dockerfile, err = resolve("build.dockerfile", dc.Build.Dockerfile); err != nil {
		return "", "", err
	}
	if dockerfile == project {
		return "", "", errdefs.New(errdefs.ErrInvalid, fmt.Sprintf("build.dockerfile in %s names the project folder itself, not a Dockerfile. Fix build.dockerfile.", dcFile))
	}
	if context, err = resolve("build.context", cmpOr(dc.Build.Context, ".")); err != nil {
		return "", "", err
	}
	return dockerfile, context, nil
}

// BuildTag is the tag of a devcontainer build: hutch-devcontainer:<16
// hex digits of a SHA-256 over the project, the paths, the Dockerfile's
// content, the args and the target>. A change to any of them builds
// anew; a change to the context's other files does not (hashing them
// would mean reading the whole context on every command), which is what
// `hutch project rebuild` is for.
func BuildTag(project string, b ImageBuild, content []byte) string {
	shape := struct {
		Project, Dockerfile, Context, Target string
		Content                              []byte
		Args                                 map[string]string // marshalled in key order
	}{project, b.Dockerfile, b.Context, b.Target, content, b.Args}
	data, err := json.Marshal(shape)
	if err != nil {
		panic(err) // strings and bytes always marshal
	}
	sum := sha256.Sum256(data)
	return BuildRepo + ":" + hex.EncodeToString(sum[:8])
}

// secretArg are build arg names that look like they carry a secret.
var secretArg = lazyregexp.New(`(?i)(token|secret|passw|credential|private|api_?key|auth)`)

// resolveBuild is the image section of Resolve for a devcontainer.json
// whose build property names a Dockerfile: the ImageBuild, whose tag the
// Recipe then names as its base, and notes.
func resolveBuild(in Input, project string, dc *devcontainer.Config, dcFile string) (*ImageBuild, []string, error) {
	dockerfile, context, err := BuildPaths(project, dc, dcFile)
	if err != nil {
		return nil, nil, err
	}
	if in.Dockerfile == nil {
		return nil, nil, errdefs.New(errdefs.ErrNotFound, fmt.Sprintf(
			"%s builds its image from %s, which does not exist or is not a regular file. Fix build.dockerfile in %s, or set sandbox-image to the image to use.",
			dcFile, dockerfile, dcFile))
	}
	b := &ImageBuild{Dockerfile: dockerfile, Context: context, Args: dc.Build.Args, Target: dc.Build.Target, Content: in.Dockerfile}
	b.Tag = BuildTag(project, *b, in.Dockerfile)
	var notes []string
	if dc.Image != "" {
		notes = append(notes, fmt.Sprintf("%s names both an image (%s) and a Dockerfile to build; as the reference devcontainer CLI does, hutch builds the Dockerfile and does not use the image.", dcFile, dc.Image))
	}
	var secret []string
	for _, name := range sortedKeys(b.Args) {
		if secretArg.MatchString(name) {
			secret = append(secret, name)
		}
	}
	if len(secret) > 0 {
		notes = append(notes, fmt.Sprintf("build.args in %s passes %s to the Dockerfile build. Build args are kept in the image's history, where anyone who can run the image can read them (docker history), so a secret passed this way is not secret; give it to the commands that need it at run time instead.", dcFile, strings.Join(secret, ", ")))
	}
	return b, notes, nil
}

// userOrigin names the setting the container's user came from, for the
// error an engine gives when the image has no such user: sandbox-user
// when set, else the devcontainer key whose value it is.
func userOrigin(st Resolved, dc *devcontainer.Config, dcFile, user string) string {
	if strings.TrimSpace(st.User) != "" {
		return "sandbox-user in " + cmpOr(st.Sources[KeyUser], "the settings")
	}
	if dc != nil && user != "" {
		switch user {
		case strings.TrimSpace(dc.RemoteUser):
			return "remoteUser in " + dcFile
		case strings.TrimSpace(dc.ContainerUser):
			return "containerUser in " + dcFile
		}
	}
	return ""
}
