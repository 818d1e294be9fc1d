package tools

import (
	"context"
	"strconv"

	"github.com/hutchsandbox/hutch/internal/errdefs"
	"github.com/hutchsandbox/hutch/internal/lazyregexp"
)

// Limiter reads and sets the resource limits of one conversation's
// runtime. The service implements it for modes that have limits; modes
// without pass a nil Limiter.
type Limiter interface {
	// Status describes the runtime's current limits (and whether boosted).
	Status(ctx context.Context) (string, error)
	// SetLimits sets temporary limits; an empty value keeps that limit.
	// They last until the runtime stops. It returns what changed.
	SetLimits(ctx context.Context, cpus, memory string) (string, error)
}

// SandboxInput is the sandbox tool's input.
type SandboxInput struct {
	Action string `json:"action" jsonschema:"status: show this conversation's sandbox limits; set: set temporary limits (until the sandbox stops)"`
	CPUs   string `json:"cpus,omitempty" jsonschema:"With action set: CPUs, e.g. 2 or 0.5"`
	Memory string `json:"memory,omitempty" jsonschema:"With action set: memory, e.g. 512m or 4g"`
}

// SandboxOutput is the sandbox tool's result.
type SandboxOutput struct {
	Text string `json:"text" jsonschema:"The limits, or what changed"`
}

// limitValue is what a cpus or memory value may look like: it travels
// to the engine as a word, so no whitespace or shell metacharacters.
var limitValue = lazyregexp.New(`^[A-Za-z0-9_.-]+$`)

// SandboxTool shows or sets the limits of the conversation's runtime.
// mode is the conversation's sandbox mode as written ("host",
// "container:dev"); with a nil Limiter (a mode without limits) every
// action is refused with class errdefs.ErrNotSupported:
// `Sandbox '<mode>' cannot set limits; use image:*`. The values are
// checked here for shape only; the Limiter parses them.
func SandboxTool(ctx context.Context, lim Limiter, mode string, in SandboxInput) (SandboxOutput, error) {
	switch in.Action {
	case "status", "set":
	default:
		return SandboxOutput{}, errdefs.New(errdefs.ErrInvalid, "Unknown action "+strconv.Quote(in.Action)+": use status or set")
	}
	if lim == nil {
		return SandboxOutput{}, errdefs.New(errdefs.ErrNotSupported, "Sandbox '"+mode+"' cannot set limits; use image:*")
	}
	if in.Action == "status" {
		if in.CPUs != "" || in.Memory != "" {
			return SandboxOutput{}, errdefs.New(errdefs.ErrInvalid, "cpus and memory are only used with action=set")
		}
		text, err := lim.Status(ctx)
		if err != nil {
			return SandboxOutput{}, err
		}
		return SandboxOutput{Text: text}, nil
	}
	if in.CPUs == "" && in.Memory == "" {
		return SandboxOutput{}, errdefs.New(errdefs.ErrInvalid, "action=set requires cpus and/or memory")
	}
	for _, v := range []struct{ name, value string }{{"cpus", in.CPUs}, {"memory", in.Memory}} {
		if v.value != "" && !limitValue.MatchString(v.value) {
			return SandboxOutput{}, errdefs.New(errdefs.ErrInvalid, v.name+" must not contain whitespace or shell metacharacters")
		}
	}
	text, err := lim.SetLimits(ctx, in.CPUs, in.Memory)
	if err != nil {
		return SandboxOutput{}, err
	}
	return SandboxOutput{Text: text}, nil
}
