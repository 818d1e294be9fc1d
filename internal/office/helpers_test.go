package office_test

import (
	"errors"
	"testing"
)

// checkErr fails t unless err has exactly the text want and the class
// class. An empty want means no error is expected.
func checkErr(t *testing.T, err error, want string, class error) {
	t.Helper()
	if want == "" {
		if err != nil {
			t.Fatalf("unexpected error: %v", err)
		}
		return
	}
	if err == nil {
		t.Fatalf("got no error, want %q", want)
	}
	if err.Error() != want {
		t.Errorf("error text got %q, want %q", err.Error(), want)
	}
	if class != nil && !errors.Is(err, class) {
		t.Errorf("error %q is not of class %v", err, class)
	}
}
