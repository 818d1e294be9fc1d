package build

import (
	"context"

	"github.com/hutchsandbox/hutch/internal/engine"
)

// What the black-box tests of integration_test.go (package build_test)
// need from inside. They cannot live in package build: they use testenv,
// which imports this package for its microVM test assets.

// LabelBuild is the label on export containers.
const LabelBuild = labelBuild

// InitrdEntry is one member of an initrd as read back.
type InitrdEntry = entry

var (
	ReadSuperblock = readSuperblock
	ReadInitrd     = readInitrd
	RequireTool    = requireTool
	ListDir        = listDir
	FormatSize     = formatSize
)

// ModinfoDepends parses a .modinfo section into a name and dependencies.
func ModinfoDepends(section []byte) (name string, depends []string) {
	info := parseModinfo(section)
	return info.Name, info.Depends
}

// ExportToExt4 runs the root filesystem half of a build: it exports
// imageID (from, by reference) into tree and makes the ext4 image out with
// free bytes free. dir is the asset directory the export container is
// labelled with. It returns the progress lines.
func ExportToExt4(ctx context.Context, eng *engine.Engine, from, imageID, dir, tree, out string, free int64) (string, error) {
	b, progress := testBuilder()
	b.opts = Options{Engine: eng, From: from}
	b.dir = dir
	if err := b.exportTree(ctx, imageID, tree); err != nil {
		return progress.String(), err
	}
	_, err := b.makeExt4(ctx, tree, out, free)
	return progress.String(), err
}
