package cli

import (
	"bytes"
	"testing"
)

func TestImageCmd_Flags(t *testing.T) {
	var out bytes.Buffer
	g := &globals{stdout: &out, stderr: &out, logLevel: "warn"}
	cmd := newImageCmd(g)
	build, _, err := cmd.Find([]string{"build"})
	if err != nil || build.Name() != "build" {
		t.Fatalf("image build: %v", err)
	}
	for _, f := range []string{"tag", "base", "timezone"} {
		if build.Flags().Lookup(f) == nil {
			t.Errorf("image build lacks --%s", f)
		}
	}
	cmd.SetArgs([]string{"build", "extra"})
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	if err := cmd.Execute(); err == nil {
		t.Error("image build with an argument: no error")
	}
}
