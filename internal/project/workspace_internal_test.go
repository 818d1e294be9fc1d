package project

import (
	"testing"

	"github.com/hutchsandbox/hutch/internal/devcontainer"
)

func TestFileWorkspace(t *testing.T) {
	const proj = "/home/me/code/api"
	tests := []struct {
		name   string
		dc     devcontainer.Config
		target string
	}{
		{"default folder", devcontainer.Config{}, "/workspaces/api"},
		{"workspaceFolder", devcontainer.Config{WorkspaceFolder: "/workspace/"}, "/workspace"},
		{"identity", devcontainer.Config{WorkspaceFolder: proj}, ""},
		{"mount target", devcontainer.Config{WorkspaceMount: "source=" + proj + ",target=/go/src/k8s.io/kubernetes,type=bind,consistency=cached", WorkspaceFolder: "/go/src/k8s.io/kubernetes"}, "/go/src/k8s.io/kubernetes"},
		{"mount of a parent", devcontainer.Config{WorkspaceMount: "source=/home/me/code,target=/src,type=bind", WorkspaceFolder: "/src/api"}, ""},
		{"a volume", devcontainer.Config{WorkspaceMount: "source=vol,target=/src,type=volume", WorkspaceFolder: "/src"}, ""},
		{"root", devcontainer.Config{WorkspaceFolder: "/"}, ""},
		{"a system folder", devcontainer.Config{WorkspaceFolder: "/usr/src/app"}, ""},
		{"etc", devcontainer.Config{WorkspaceFolder: "/etc"}, ""},
		{"hutch's home", devcontainer.Config{WorkspaceFolder: "/sandbox/home/x"}, ""},
		{"relative", devcontainer.Config{WorkspaceFolder: "work"}, ""},
		{"not a system folder by prefix", devcontainer.Config{WorkspaceFolder: "/usrdata/app"}, "/usrdata/app"},
	}
	for _, tt := range tests {
		got, ok := fileWorkspace(&tt.dc, proj)
		if got != tt.target || ok != (tt.target != "") {
			t.Errorf("%s: fileWorkspace = %q, %v; want %q", tt.name, got, ok, tt.target)
		}
	}
}
