package agentbin

import (
	"bytes"
	"crypto/sha256"
	"debug/elf"
	"encoding/binary"
	"encoding/hex"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// writeStaticELF writes a minimal static Linux ELF (one PT_LOAD, no
// interpreter) followed by payload, so Locate accepts it, and returns its
// hex SHA-256.
func writeStaticELF(t *testing.T, path string, payload string) string {
	t.Helper()
	var b bytes.Buffer
	hdr := elf.Header64{
		Type: uint16(elf.ET_EXEC), Machine: uint16(elf.EM_X86_64), Version: uint32(elf.EV_CURRENT),
		Phoff: 64, Ehsize: 64, Phentsize: 56, Phnum: 1,
	}
	copy(hdr.Ident[:], elf.ELFMAG)
	hdr.Ident[elf.EI_CLASS] = byte(elf.ELFCLASS64)
	hdr.Ident[elf.EI_DATA] = byte(elf.ELFDATA2LSB)
	hdr.Ident[elf.EI_VERSION] = byte(elf.EV_CURRENT)
	prog := elf.Prog64{Type: uint32(elf.PT_LOAD), Flags: uint32(elf.PF_R | elf.PF_X), Align: 0x1000}
	if err := binary.Write(&b, binary.LittleEndian, hdr); err != nil {
		t.Fatal(err)
	}
	if err := binary.Write(&b, binary.LittleEndian, prog); err != nil {
		t.Fatal(err)
	}
	b.WriteString(payload)
	if err := os.WriteFile(path, b.Bytes(), 0o755); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(b.Bytes())
	return hex.EncodeToString(sum[:])
}

// noRacyWindow lets a test remember the digest of a file it just wrote.
func noRacyWindow(t *testing.T) {
	old := racyWindow
	racyWindow = -time.Hour
	t.Cleanup(func() { racyWindow = old })
}

// plantDigest rewrites the cache entry's digest, keeping the file's
// identity: a later call that returns it read the cache, one that
// returns the true digest hashed the file.
func plantDigest(t *testing.T, stateDir string) {
	t.Helper()
	p := filepath.Join(stateDir, DigestCacheName)
	data, err := os.ReadFile(p)
	if err != nil {
		t.Fatalf("no digest was remembered: %v", err)
	}
	var planted = bytes.Repeat([]byte("a"), 64)
	i := bytes.Index(data, []byte(`"sha256":"`))
	if i < 0 {
		t.Fatalf("cache without a digest: %s", data)
	}
	i += len(`"sha256":"`)
	copy(data[i:i+64], planted)
	if err := os.WriteFile(p, data, 0o600); err != nil {
		t.Fatal(err)
	}
}

func TestLocateCached_RemembersTheDigestOfAnUnchangedFile(t *testing.T) {
	noRacyWindow(t)
	dir, state := t.TempDir(), t.TempDir()
	bin := filepath.Join(dir, "hutch")
	want := writeStaticELF(t, bin, "one")
	b, err := LocateCached(bin, state)
	if err != nil || b.SHA256 != want || b.Path != bin {
		t.Fatalf("LocateCached = %+v, %v; want digest %s", b, err, want)
	}
	if fi, err := os.Stat(filepath.Join(state, DigestCacheName)); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("cache file: %v, %v; want mode 0600", fi, err)
	}
	plantDigest(t, state)
	if b, err := LocateCached(bin, state); err != nil || b.SHA256 != string(bytes.Repeat([]byte("a"), 64)) {
		t.Errorf("second call = %+v, %v; want the remembered digest, read instead of hashed", b, err)
	}
}

func TestLocateCached_HashesAgainWhenTheFileChanged(t *testing.T) {
	noRacyWindow(t)
	cases := map[string]func(t *testing.T, bin string) string{
		// Same size, same modification time restored: only the change
		// time tells.
		"rewritten in place": func(t *testing.T, bin string) string {
			fi, err := os.Stat(bin)
			if err != nil {
				t.Fatal(err)
			}
			time.Sleep(10 * time.Millisecond) // a later change time on any clock tick
			want := writeStaticELF(t, bin, "two")
			if err := os.Chtimes(bin, fi.ModTime(), fi.ModTime()); err != nil {
				t.Fatal(err)
			}
			return want
		},
		"replaced by rename": func(t *testing.T, bin string) string {
			next := bin + ".new"
			want := writeStaticELF(t, next, "two")
			if err := os.Rename(next, bin); err != nil {
				t.Fatal(err)
			}
			return want
		},
	}
	for name, change := range cases {
		t.Run(name, func(t *testing.T) {
			dir, state := t.TempDir(), t.TempDir()
			bin := filepath.Join(dir, "hutch")
			writeStaticELF(t, bin, "one")
			if _, err := LocateCached(bin, state); err != nil {
				t.Fatal(err)
			}
			plantDigest(t, state)
			want := change(t, bin)
			if b, err := LocateCached(bin, state); err != nil || b.SHA256 != want {
				t.Errorf("after the change: %+v, %v; want the new digest %s", b, err, want)
			}
		})
	}
}

func TestLocateCached_DoesNotRememberAFreshFile(t *testing.T) {
	dir, state := t.TempDir(), t.TempDir()
	bin := filepath.Join(dir, "hutch")
	want := writeStaticELF(t, bin, "one")
	if b, err := LocateCached(bin, state); err != nil || b.SHA256 != want {
		t.Fatalf("LocateCached = %+v, %v; want %s", b, err, want)
	}
	if _, err := os.Stat(filepath.Join(state, DigestCacheName)); !os.IsNotExist(err) {
		t.Errorf("a binary changed within the last %v was remembered (%v): a rewrite in the same clock tick could go unseen", racyWindow, err)
	}
}

func TestLocateCached_IgnoresABrokenCache(t *testing.T) {
	noRacyWindow(t)
	dir, state := t.TempDir(), t.TempDir()
	bin := filepath.Join(dir, "hutch")
	want := writeStaticELF(t, bin, "one")
	for _, content := range []string{"", "{", `{"sha256":"short"}`, "\x00\x01"} {
		if err := os.WriteFile(filepath.Join(state, DigestCacheName), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		if b, err := LocateCached(bin, state); err != nil || b.SHA256 != want {
			t.Errorf("with cache %q: %+v, %v; want %s", content, b, err, want)
		}
	}
	if b, err := LocateCached(bin, filepath.Join(state, "missing", "dir")); err != nil || b.SHA256 != want {
		t.Errorf("with no state dir: %+v, %v; want %s", b, err, want)
	}
}

func TestLocateCached_StillRefusesADynamicBinary(t *testing.T) {
	state := t.TempDir()
	bin := filepath.Join(t.TempDir(), "hutch")
	if err := os.WriteFile(bin, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := LocateCached(bin, state); err == nil {
		t.Error("a file that is not a static ELF was accepted")
	}
}
