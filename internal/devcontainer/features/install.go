package features

import (
	"archive/tar"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/hutchsandbox/hutch/internal/errdefs"
	"github.com/hutchsandbox/hutch/internal/jsonc"
)

// Build is the image WriteContext lays out: the features of a plan
// installed on a base image.
type Build struct {
	// Base is the image the features are installed on (FROM).
	Base string
	// ImageUser is the base image's USER, restored once the features,
	// which install as root, are in; "" leaves root, the default.
	ImageUser string
	// Users are what every install script is told of users.
	Users Users
	// BaseMetadata are the entries of the base image's
	// devcontainer.metadata label and ConfigMetadata those of
	// devcontainer.json: the new label holds the base's, then the
	// features', then the file's, as the reference CLI writes it. Each
	// is a JSON object.
	BaseMetadata   []json.RawMessage
	ConfigMetadata []json.RawMessage
}

const (
	// MetadataLabel is the label editors read a dev container's merged
	// metadata from.
	MetadataLabel = "devcontainer.metadata"
	// ContainerDir is where features are copied to in the image while
	// they install, as the reference CLI does.
	ContainerDir = "/tmp/dev-container-features"
	// EnvFileName is the file, in each feature's folder, its install
	// script's environment is sourced from (the spec's name).
	EnvFileName = "devcontainer-features.env"
	// contextDir is the folder of the build context the features' folders
	// are in.
	contextDir = "features"
)

var (
	// imageRef is what FROM may name: a reference or an image ID, with
	// nothing the Dockerfile would read as syntax or a variable.
	imageRef = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._:/@+-]*$`)
	// userSpec is what USER may name: a user or uid, with a group.
	userSpec = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9_.@-]*(:[A-Za-z0-9_][A-Za-z0-9_.@-]*)?$`)
)

// folder is the name of feature i's folder in the context and the image.
func folder(i int, f *Resolved) string {
	return fmt.Sprintf("%d-%s", i, folderName(f.Ref.Name()))
}

// Dockerfile returns the Dockerfile that installs features (in order) on
// b.Base with the classic builder: as root, for each feature a COPY of its
// folder, its containerEnv as ENV lines (before its install, as the spec
// and the reference CLI place them, so a later feature and the feature's
// own script see them), and a RUN that sources its env file (EnvFile) and
// runs install.sh from its folder, directly when it is executable (chmod
// +x first) or through /bin/sh, then removes the folder (the image keeps
// the COPY's layer, but nothing of it is left in /tmp). Then the
// devcontainer.metadata label and b.ImageUser.
//
// Nothing of a feature's options reaches the Dockerfile: they are in the
// env files, single-quoted. containerEnv values are double-quoted with
// their backslashes and quotes escaped; "$" is left to the Dockerfile's
// own substitution, which features rely on ("PATH": "/x/bin:${PATH}") and
// which runs no command. A containerEnv name that is not a valid variable
// name, a value with a line break or NUL, and a base or user with
// anything but the characters of a reference fail it with class
// errdefs.ErrInvalid.
func Dockerfile(features []*Resolved, b Build) (string, error) {
	if !imageRef.MatchString(b.Base) {
		return "", errdefs.New(errdefs.ErrInvalid, fmt.Sprintf("the base image %q is not an image reference", b.Base))
	}
	if b.ImageUser != "" && !userSpec.MatchString(b.ImageUser) {
		return "", errdefs.New(errdefs.ErrInvalid, fmt.Sprintf("the base image's user %q is not a user name or id", b.ImageUser))
	}
	var d strings.Builder
	fmt.Fprintf(&d, "FROM %s\n", b.Base)
	d.WriteString("# Written by hutch: the devcontainer.json's features, one layer each.\n")
	d.WriteString("USER root\n")
	for i, f := range features {
		dir := path.Join(ContainerDir, folder(i, f))
		fmt.Fprintf(&d, "\n# %s\n", comment(f.Ref.ID))
		if f.HasInstall {
			fmt.Fprintf(&d, "COPY %s/%s %s\n", contextDir, folder(i, f), dir)
		}
		env := f.Metadata.ContainerEnv
		for _, k := range slices.Sorted(maps.Keys(env)) {
			line, err := envLine(k, env[k])
			if err != nil {
				return "", errdefs.New(errdefs.ErrInvalid, fmt.Sprintf("feature %s: containerEnv %s", f.Ref.ID, err))
			}
			d.WriteString(line)
		}
		if f.HasInstall {
			fmt.Fprintf(&d, "RUN set -e; cd %[1]s; chmod -R 0755 . 2>/dev/null || :; set -a; . ./%[2]s; set +a; "+
				"if [ -x ./%[3]s ]; then ./%[3]s; else /bin/sh ./%[3]s; fi; cd /; rm -rf %[1]s; rmdir %[4]s 2>/dev/null || :\n",
				dir, EnvFileName, InstallScript, ContainerDir)
		}
	}
	label, err := MetadataLabelValue(features, b)
	if err != nil {
		return "", err
	}
	fmt.Fprintf(&d, "\nLABEL %s=\"%s\"\n", MetadataLabel, labelQuote(label))
	if b.ImageUser != "" {
		fmt.Fprintf(&d, "USER %s\n", b.ImageUser)
	}
	return d.String(), nil
}

// envLine is an ENV instruction setting name to value.
func envLine(name, value string) (string, error) {
	if !envName.MatchString(name) {
		return "", fmt.Errorf("%q is not a valid environment variable name (letters, digits and _, not starting with a digit)", name)
	}
	if strings.ContainsAny(value, "\n\r\x00") {
		return "", fmt.Errorf("%s holds a line break or a NUL byte, which a Dockerfile's ENV cannot carry", name)
	}
	return fmt.Sprintf("ENV %s=\"%s\"\n", name, strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(value)), nil
}

// labelQuote escapes a label value for a double-quoted Dockerfile word:
// backslash, quote and "$", which would otherwise be substituted.
func labelQuote(s string) string {
	return strings.NewReplacer(`\`, `\\`, `"`, `\"`, `$`, `\$`).Replace(s)
}

// comment keeps s on one comment line.
func comment(s string) string {
	return strings.Map(func(r rune) rune {
		if r < ' ' || r == 0x7f {
			return '?'
		}
		return r
	}, s)
}

// labelFeatureProperties are what the reference CLI copies from a
// feature's metadata into the image's label (containerEnv is in the
// image's environment already).
var labelFeatureProperties = []string{
	"onCreateCommand", "updateContentCommand", "postCreateCommand", "postStartCommand", "postAttachCommand",
	"init", "privileged", "capAdd", "securityOpt", "entrypoint", "mounts", "customizations",
}

// MetadataLabelValue is the devcontainer.metadata label of the image
// Dockerfile builds: a JSON array of b.BaseMetadata, then one entry per
// feature ({"id": <its ID as written>, and the properties of its metadata
// that the reference CLI keeps: lifecycle commands, init, privileged,
// capAdd, securityOpt, entrypoint, mounts, customizations}), then
// b.ConfigMetadata.
func MetadataLabelValue(features []*Resolved, b Build) (string, error) {
	var entries []json.RawMessage
	for _, e := range slices.Concat(b.BaseMetadata, b.ConfigMetadata) {
		if jsonc.KindOf(e) != jsonc.Object || !json.Valid(e) {
			return "", errdefs.New(errdefs.ErrInvalid, "a devcontainer.metadata entry is not a JSON object")
		}
	}
	entries = append(entries, b.BaseMetadata...)
	for _, f := range features {
		picked := map[string]json.RawMessage{}
		mems, _ := jsonc.Members(f.Metadata.Raw)
		for _, m := range mems {
			if slices.Contains(labelFeatureProperties, m.Name) {
				picked[m.Name] = m.Raw
			}
		}
		var e bytes.Buffer
		e.WriteString("{")
		id, _ := json.Marshal(f.Ref.ID)
		e.WriteString(`"id":` + string(id))
		for _, p := range labelFeatureProperties {
			if raw, ok := picked[p]; ok {
				fmt.Fprintf(&e, `,"%s":%s`, p, raw)
			}
		}
		e.WriteString("}")
		entries = append(entries, e.Bytes())
	}
	entries = append(entries, b.ConfigMetadata...)
	if entries == nil {
		entries = []json.RawMessage{}
	}
	var out bytes.Buffer
	enc := json.NewEncoder(&out)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(entries); err != nil {
		return "", err
	}
	return strings.TrimSuffix(out.String(), "\n"), nil
}

// WriteContext lays features out as a build context in dir, an empty
// folder of hutch's own: the Dockerfile (which it also returns) and, in
// features/<n>-<name>/, each feature's folder with its env file
// (EnvFile of b.Users and the feature's Env) written in as
// devcontainer-features.env. Build it with the classic builder or
// BuildKit; TarContext makes the archive the Engine API takes.
func WriteContext(dir string, features []*Resolved, b Build) (string, error) {
	dockerfile, err := Dockerfile(features, b)
	if err != nil {
		return "", err
	}
	for i, f := range features {
		if !f.HasInstall {
			continue
		}
		env, err := EnvFile(b.Users, f.Env)
		if err != nil {
			return "", fmt.Errorf("feature %s: %w", f.Ref.ID, err)
		}
		dst := filepath.Join(dir, contextDir, folder(i, f))
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			return "", err
		}
		if err := os.CopyFS(dst, os.DirFS(f.Dir)); err != nil {
			return "", fmt.Errorf("feature %s: copying it into the build context: %w", f.Ref.ID, err)
		}
		// A file of that name the feature brings is replaced, as the
		// reference CLI replaces it.
		envPath := filepath.Join(dst, EnvFileName)
		if err := os.Remove(envPath); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return "", err
		}
		if err := os.WriteFile(envPath, []byte(env), 0o644); err != nil {
			return "", err
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "Dockerfile"), []byte(dockerfile), 0o644); err != nil {
		return "", err
	}
	return dockerfile, nil
}

// TarContext writes the folder dir (a context WriteContext laid out) to
// w as a tar: its regular files and folders, in name order, owned by root
// with fixed times, so the same context gives the same archive.
func TarContext(dir string, w io.Writer) error {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return err
	}
	defer func() { _ = root.Close() }()
	fsys := root.FS()
	tw := tar.NewWriter(w)
	epoch := time.Unix(0, 0)
	err = fs.WalkDir(fsys, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == "." {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		hdr := &tar.Header{Name: p, ModTime: epoch, Format: tar.FormatPAX}
		switch {
		case fi.IsDir():
			hdr.Typeflag, hdr.Name, hdr.Mode = tar.TypeDir, p+"/", 0o755
			return tw.WriteHeader(hdr)
		case fi.Mode().IsRegular():
			hdr.Typeflag, hdr.Size, hdr.Mode = tar.TypeReg, fi.Size(), 0o644
			if fi.Mode()&0o111 != 0 {
				hdr.Mode = 0o755
			}
			if err := tw.WriteHeader(hdr); err != nil {
				return err
			}
			f, err := fsys.Open(p)
			if err != nil {
				return err
			}
			defer func() { _ = f.Close() }()
			_, err = io.CopyN(tw, f, fi.Size())
			return err
		}
		return nil // nothing else is in a context of ours
	})
	if err != nil {
		return err
	}
	return tw.Close()
}
