package events_test

import (
	"encoding/json"
	"os"
	"regexp"
	"slices"
	"testing"

	"github.com/hutchsandbox/hutch/internal/events"
)

// TestActions_Documented: docs/api.md's table of actions and the Event
// schema of the OpenAPI description list every action, in the order of
// Actions, and none besides: a reader switches on them.
func TestActions_Documented(t *testing.T) {
	doc, err := os.ReadFile("../../docs/api.md")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, m := range regexp.MustCompile("(?m)^\\| `([a-z]+\\.[a-z]+|refused)`(?:, `([a-z]+\\.[a-z]+)`)? \\|").FindAllSubmatch(doc, -1) {
		got = append(got, string(m[1]))
		if len(m[2]) > 0 {
			got = append(got, string(m[2]))
		}
	}
	if !slices.Equal(got, events.Actions) {
		t.Errorf("docs/api.md's actions:\n%q\nevents.Actions:\n%q", got, events.Actions)
	}
	data, err := os.ReadFile("../api/openapi.json")
	if err != nil {
		t.Fatal(err)
	}
	var spec struct {
		Components struct {
			Schemas struct {
				Event struct {
					Properties struct {
						Action struct {
							Enum []string `json:"enum"`
						} `json:"action"`
					} `json:"properties"`
				} `json:"Event"`
			} `json:"schemas"`
		} `json:"components"`
	}
	if err := json.Unmarshal(data, &spec); err != nil {
		t.Fatal(err)
	}
	if enum := spec.Components.Schemas.Event.Properties.Action.Enum; !slices.Equal(enum, events.Actions) {
		t.Errorf("openapi.json's actions:\n%q\nevents.Actions:\n%q", enum, events.Actions)
	}
}
