package api_test

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/hutchsandbox/hutch/client"
	"github.com/hutchsandbox/hutch/internal/errdefs"
)

// TestCodes_OneTable: the public client cannot import errdefs, so it
// spells the codes out again; this ties the two. For every class the
// daemon answers, the client's constant is errdefs' code, and an answer
// of that class's status without an ErrorBody (a proxy's) is read back
// as that code.
func TestCodes_OneTable(t *testing.T) {
	for class, want := range map[error]string{
		errdefs.ErrNotFound:           client.CodeNotFound,
		errdefs.ErrInvalid:            client.CodeInvalid,
		errdefs.ErrConflict:           client.CodeConflict,
		errdefs.ErrNotSupported:       client.CodeNotSupported,
		errdefs.ErrUnavailable:        client.CodeUnavailable,
		errdefs.ErrFailedPrecondition: client.CodeFailedPrecondition,
	} {
		err := errdefs.New(class, "x")
		if got := errdefs.Code(err); got != want {
			t.Errorf("%v: errdefs says %q, the client %q", class, got, want)
		}
		status := errdefs.HTTPStatus(err)
		ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			http.Error(w, "from a proxy", status)
		}))
		c := &client.Client{BaseURL: ts.URL}
		_, herr := c.Health(t.Context())
		ts.Close()
		if !client.IsCode(herr, want) {
			t.Errorf("%v: a bare %d is read by the client as %v, want code %q", class, status, herr, want)
		}
	}
	if errdefs.CodeInternal != client.CodeInternal {
		t.Errorf("internal: errdefs %q, client %q", errdefs.CodeInternal, client.CodeInternal)
	}
}
