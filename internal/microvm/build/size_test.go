package build

import (
	"testing"

	"github.com/hutchsandbox/hutch/internal/errdefs"
)

func TestParseSize(t *testing.T) {
	tests := []struct {
		in   string
		want int64
	}{
		{"0", 0},
		{"1073741824", 1 << 30},
		{"4096B", 4096},
		{"512M", 512 << 20},
		{"512m", 512 << 20},
		{"512MB", 512 << 20},
		{"512MiB", 512 << 20},
		{"1G", 1 << 30},
		{"1g", 1 << 30},
		{"1GB", 1 << 30},
		{"1GiB", 1 << 30},
		{"1.5G", 3 << 29},
		{"2T", 2 << 40},
		{"64k", 64 << 10},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := ParseSize(tt.in)
			if err != nil {
				t.Fatalf("ParseSize(%q): %v", tt.in, err)
			}
			if got != tt.want {
				t.Errorf("ParseSize(%q) = %d, want %d", tt.in, got, tt.want)
			}
		})
	}
	for _, in := range []string{"", "-1G", "1 G", "G", "1X", "1GiBs", "1e9", " 1G", "1,5G", "0x10"} {
		_, err := ParseSize(in)
		if err == nil || !errdefs.IsInvalid(err) {
			t.Errorf("ParseSize(%q) = %v, want an invalid-argument error", in, err)
		}
	}
}

func TestFormatSize(t *testing.T) {
	tests := []struct {
		in   int64
		want string
	}{
		{0, "0 B"},
		{1023, "1023 B"},
		{1024, "1 KiB"},
		{270967, "265 KiB"},
		{14190528, "13.5 MiB"},
		{1 << 30, "1 GiB"},
		{2090860544, "1.9 GiB"},
		{3 << 40, "3 TiB"},
	}
	for _, tt := range tests {
		if got := formatSize(tt.in); got != tt.want {
			t.Errorf("formatSize(%d) = %q, want %q", tt.in, got, tt.want)
		}
	}
}
