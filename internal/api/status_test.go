package api_test

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/hutchsandbox/hutch/internal/api"
	"github.com/hutchsandbox/hutch/internal/sandbox"
)

// TestStatus_RoundTrip: every field of sandbox.Status survives the API
// (StatusOf, JSON, Sandbox), so what `hutch sandbox status` shows through
// a daemon is what the daemon knows. The status is filled by reflection:
// a field added to sandbox.Status and not carried fails here.
func TestStatus_RoundTrip(t *testing.T) {
	var st sandbox.Status
	fill(t, reflect.ValueOf(&st).Elem(), 1)
	b, err := json.Marshal(api.StatusOf(st))
	if err != nil {
		t.Fatal(err)
	}
	var back api.Status
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(st, api.SandboxStatus(back)); diff != "" {
		t.Errorf("lost on the way (-sent +received):\n%s\nwire: %s", diff, b)
	}
}

// fill gives every field of v a distinct non-zero value.
func fill(t *testing.T, v reflect.Value, n int) int {
	switch v.Kind() {
	case reflect.Struct:
		if v.Type() == reflect.TypeFor[time.Time]() {
			v.Set(reflect.ValueOf(time.Date(2026, 12, 1, 10, n, 0, 0, time.UTC)))
			return n + 1
		}
		for i := 0; i < v.NumField(); i++ {
			n = fill(t, v.Field(i), n)
		}
		return n
	case reflect.String:
		v.SetString("value-" + string(rune('a'+n)))
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Int, reflect.Int64:
		v.SetInt(int64(n))
	case reflect.Float64:
		v.SetFloat(float64(n) + 0.5)
	default:
		t.Fatalf("fill: a field of kind %s; teach the test", v.Kind())
	}
	return n + 1
}
