package cli

import (
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/hutchsandbox/hutch/internal/devcontainer/features"
	"github.com/hutchsandbox/hutch/internal/errdefs"
	"github.com/hutchsandbox/hutch/internal/project/box"
)

// approval is what approving l's devcontainer.json covers as it is now:
// the file, and the Dockerfile and local features it builds from (which
// agents can edit as well, and which run at build time with a network).
// A file that does not parse builds nothing that could be known.
func (p *projectCmd) approval(l *loaded) box.Approval {
	a := box.Approval{Config: l.dcData}
	if dc, err := p.parseDevcontainer(l); err == nil {
		a.Inputs = box.BuildInputs(l.dir, dc, l.dcPath)
	}
	return a
}

// notApproved is the note of a devcontainer.json that is not applied
// because it, or what it builds from, is not what the user approved.
func notApproved(l *loaded, a box.Approval) string {
	if len(a.Inputs) == 0 {
		return fmt.Sprintf("%s is new or changed since you last approved it, so it is not applied (agents can edit the project). Read it, then run `hutch project trust` to apply it.", l.dcPath)
	}
	return fmt.Sprintf("%s or the Dockerfile or local features it uses are new or changed since you last approved them, so it is not applied (agents can edit the project, and these run when the image is built). Read them, then run `hutch project trust` to apply it.", l.dcPath)
}

// printInputs lists what an approval covers besides devcontainer.json.
func printInputs(w io.Writer, inputs map[string]string) error {
	if len(inputs) == 0 {
		return nil
	}
	names := make([]string, 0, len(inputs))
	for n := range inputs {
		names = append(names, n)
	}
	sort.Strings(names)
	if err := printf(w, "The approval covers what it builds from the project (a change to any needs approval again):\n"); err != nil {
		return err
	}
	for _, n := range names {
		what := ""
		switch v := inputs[n]; {
		case v == "missing":
			what = " (missing now)"
		case strings.HasPrefix(v, "unreadable: "):
			what = " (" + v + ")"
		}
		if err := printf(w, "  %s%s\n", n, what); err != nil {
			return err
		}
	}
	return nil
}

// featureMirrorsVar names the registries features are fetched from in
// place of those their references name.
const featureMirrorsVar = "HUTCH_FEATURE_MIRRORS"

// featureMirrors reads HUTCH_FEATURE_MIRRORS.
func (p *projectCmd) featureMirrors() (features.Mirrors, error) {
	m, err := features.ParseMirrors(p.g.env(featureMirrorsVar))
	if err != nil {
		return nil, errdefs.New(errdefs.ErrInvalid, fmt.Sprintf("%s is invalid: %v (pairs separated by commas), or unset it.", featureMirrorsVar, err))
	}
	return m, nil
}
