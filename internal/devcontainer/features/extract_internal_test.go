package features

import (
	"archive/tar"
	"bytes"
	"io/fs"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/hutchsandbox/hutch/internal/devcontainer/features/featuretest"
	"github.com/hutchsandbox/hutch/internal/errdefs"
)

// tree lists dir's files and folders with their modes and contents.
func tree(t *testing.T, dir string) map[string]string {
	t.Helper()
	root, err := os.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = root.Close() }()
	out := map[string]string{}
	err = fs.WalkDir(root.FS(), ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == "." {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		switch {
		case fi.IsDir():
			out[p+"/"] = fi.Mode().Perm().String()
		case fi.Mode().IsRegular():
			b, err := fs.ReadFile(root.FS(), p)
			if err != nil {
				return err
			}
			out[p] = fi.Mode().Perm().String() + " " + string(b)
		default:
			out[p] = fi.Mode().String()
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestUnpack(t *testing.T) {
	type E = featuretest.Entry
	small := Limits{Artifact: 1 << 20, Extracted: 100, Files: 5}
	tests := []struct {
		name    string
		tar     []byte
		lim     Limits
		gzip    bool
		want    map[string]string
		notes   []string
		wantErr string
	}{
		{
			name: "feature",
			tar: featuretest.Tar(t, featuretest.Files{
				"devcontainer-feature.json": `{"id":"x"}`, "install.sh": "#!/bin/sh\n", "lib/helper.sh": "h", "empty/": "",
			}),
			want: map[string]string{
				"devcontainer-feature.json": "-rw-r--r-- {\"id\":\"x\"}", "install.sh": "-rwxr-xr-x #!/bin/sh\n",
				"lib/": "-rwxr-xr-x", "lib/helper.sh": "-rwxr-xr-x h", "empty/": "-rwxr-xr-x",
			},
		},
		{
			name: "gzip_and_bare_names_without_folders",
			tar:  featuretest.TarEntries(t, E{Name: "a/b/c", Body: "deep", Mode: 0o700}, E{Name: "top", Body: "t"}),
			gzip: true,
			want: map[string]string{"a/": "-rwxr-xr-x", "a/b/": "-rwxr-xr-x", "a/b/c": "-rwxr-xr-x deep", "top": "-rw-r--r-- t"},
		},
		{
			name: "links_devices_fifos_left_out",
			tar: featuretest.TarEntries(t,
				E{Name: "./install.sh", Body: "x"},
				E{Name: "./passwd", Type: tar.TypeSymlink, Link: "/etc/passwd"},
				E{Name: "./hard", Type: tar.TypeLink, Link: "install.sh"},
				E{Name: "./null", Type: tar.TypeChar},
				E{Name: "./disk", Type: tar.TypeBlock},
				E{Name: "./fifo", Type: tar.TypeFifo},
			),
			want: map[string]string{"install.sh": "-rw-r--r-- x"},
			notes: []string{"feature f: left out the link passwd -> /etc/passwd, the link hard -> install.sh, the device null, the device disk, the FIFO fifo" +
				": features are installed from their regular files and folders only"},
		},
		{
			name:    "climbs_out",
			tar:     featuretest.TarEntries(t, E{Name: "./ok", Body: "x"}, E{Name: "../../etc/cron.d/evil", Body: "x"}),
			wantErr: `feature f: the archive entry "../../etc/cron.d/evil" is unsafe: it climbs out of the feature's folder with ".."; hutch does not unpack it`,
		},
		{
			name:    "climbs_out_in_the_middle",
			tar:     featuretest.TarEntries(t, E{Name: "a/../../x", Body: "x"}),
			wantErr: `it climbs out of the feature's folder`,
		},
		{
			name:    "absolute",
			tar:     featuretest.TarEntries(t, E{Name: "/etc/passwd", Body: "x"}),
			wantErr: `"/etc/passwd" is unsafe: it is an absolute path`,
		},
		{
			name: "through_a_skipped_link",
			// A link is never made, so a file "beneath" it lands in a
			// real folder of that name.
			tar:  featuretest.TarEntries(t, E{Name: "l", Type: tar.TypeSymlink, Link: "/etc"}, E{Name: "l/passwd", Body: "x"}),
			want: map[string]string{"l/": "-rwxr-xr-x", "l/passwd": "-rw-r--r-- x"},
			notes: []string{"feature f: left out the link l -> /etc" +
				": features are installed from their regular files and folders only"},
		},
		{
			name:    "twice",
			tar:     featuretest.TarEntries(t, E{Name: "a", Body: "1"}, E{Name: "./a", Body: "2"}),
			wantErr: "feature f: the archive holds a twice",
		},
		{
			name:    "too_many_files",
			tar:     featuretest.TarEntries(t, E{Name: "1"}, E{Name: "2"}, E{Name: "3"}, E{Name: "4"}, E{Name: "5"}, E{Name: "6"}),
			lim:     small,
			wantErr: "feature f: the archive holds more than 5 files and folders, the most a feature may have",
		},
		{
			name:    "too_large",
			tar:     featuretest.TarEntries(t, E{Name: "a", Body: strings.Repeat("x", 60)}, E{Name: "b", Body: strings.Repeat("x", 60)}),
			lim:     small,
			wantErr: "feature f: the archive's files are larger than the 100 bytes a feature may unpack to",
		},
		{
			// An entry of a type hutch skips still expands: the stream
			// itself is bounded.
			name:    "gzip_bomb",
			tar:     oddTar(t, 'Z', 2<<20),
			lim:     Limits{Artifact: 1 << 20, Extracted: 1 << 10, Files: 5},
			gzip:    true,
			wantErr: "feature f: the archive expands to more than the 1024 bytes a feature may unpack to",
		},
		{
			name:    "not_a_tar",
			tar:     []byte(strings.Repeat("not a tar at all ", 64)),
			wantErr: "feature f: the archive is not a valid tar",
		},
		{
			name:    "bad_gzip",
			tar:     []byte{0x1f, 0x8b, 0, 0},
			wantErr: "feature f: the archive is not valid gzip",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			data := tt.tar
			if tt.gzip {
				data = featuretest.Gzip(t, data)
			}
			dir := t.TempDir()
			notes, err := unpack("f", bytes.NewReader(data), dir, tt.lim.orDefaults())
			if tt.wantErr != "" {
				if err == nil || !errdefs.IsInvalid(err) || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("unpack: %v, want an invalid error containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, tree(t, dir)); diff != "" {
				t.Errorf("unpacked (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.notes, notes); diff != "" {
				t.Errorf("notes (-want +got):\n%s", diff)
			}
		})
	}
}

// oddTar is a tar of one entry of type typ with size bytes of zeros.
func oddTar(t *testing.T, typ byte, size int) []byte {
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	if err := tw.WriteHeader(&tar.Header{Name: "odd", Typeflag: typ, Size: int64(size), Mode: 0o644}); err != nil {
		t.Fatal(err)
	}
	if _, err := tw.Write(make([]byte, size)); err != nil {
		t.Fatal(err)
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// TestUnpack_NotesBounded: a thousand links give one note of five and a
// count.
func TestUnpack_NotesBounded(t *testing.T) {
	var entries []featuretest.Entry
	for i := range 1000 {
		entries = append(entries, featuretest.Entry{Name: strings.Repeat("l", 1+i%50) + string(rune('a'+i%26)) + string(rune('a'+i/26)), Type: tar.TypeSymlink, Link: "x"})
	}
	notes, err := unpack("f", bytes.NewReader(featuretest.TarEntries(t, entries...)), t.TempDir(), Limits{}.orDefaults())
	if err != nil {
		t.Fatal(err)
	}
	if len(notes) != 1 || !strings.Contains(notes[0], " and 995 more: ") {
		t.Errorf("notes = %q", notes)
	}
	if slices.ContainsFunc(notes, func(n string) bool { return strings.Count(n, "the link") != 5 }) {
		t.Errorf("notes = %q, want five links named", notes)
	}
}
