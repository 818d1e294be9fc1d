package lazyregexp

import (
	"slices"
	"testing"
)

func TestRegexp_CompilesOnFirstUse(t *testing.T) {
	re := New(`^a(b+)$`)
	if !re.MatchString("abb") || re.MatchString("ac") {
		t.Error("MatchString does not follow the expression")
	}
	if got := re.FindStringSubmatch("abbb"); !slices.Equal(got, []string{"abbb", "bbb"}) {
		t.Errorf("FindStringSubmatch = %q", got)
	}
}

func TestRegexp_InvalidPanicsAtFirstUse(t *testing.T) {
	re := New(`(`) // no panic here: nothing is compiled yet
	defer func() {
		if recover() == nil {
			t.Error("an invalid expression did not panic when first used")
		}
	}()
	re.MatchString("x")
}
