package features

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"

	"github.com/google/go-containerregistry/pkg/v1/remote/transport"

	"github.com/hutchsandbox/hutch/internal/errdefs"
)

// guardedTransport carries registry requests with two rules of hutch's
// own. go-containerregistry speaks plain HTTP to registries on private
// (RFC 1918) addresses and .local names as well as the loopback; a
// feature reference is the project's to write, so only the loopback is
// reached without TLS, and a token realm over plain HTTP is refused too.
// And a manifest is read up to maxManifest bytes, not the library's
// 100 MiB.
type guardedTransport struct {
	base http.RoundTripper
}

func (t guardedTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.URL.Scheme == "http" && !isLoopback(req.URL.Hostname()) {
		return nil, fmt.Errorf("plain HTTP to %s refused: only a registry on the loopback is reached without TLS", req.URL.Host)
	}
	resp, err := t.base.RoundTrip(req)
	if err == nil && strings.Contains(req.URL.Path, "/manifests/") {
		resp.Body = &limitedBody{rc: resp.Body, left: maxManifest}
	}
	return resp, err
}

func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// errManifestTooLarge is what a manifest past maxManifest reads as.
var errManifestTooLarge = fmt.Errorf("the registry's manifest is larger than %s", mebibytes(maxManifest))

// limitedBody fails a response body past its limit.
type limitedBody struct {
	rc   io.ReadCloser
	left int64
}

func (b *limitedBody) Read(p []byte) (int, error) {
	if b.left <= 0 {
		return 0, errManifestTooLarge
	}
	if int64(len(p)) > b.left {
		p = p[:b.left]
	}
	n, err := b.rc.Read(p)
	b.left -= int64(n)
	return n, err
}

func (b *limitedBody) Close() error { return b.rc.Close() }

// registryError turns what go-containerregistry returned while getting
// what of ref from registry (ref's own, or its mirror) into an error that
// names the feature, says what failed and what to do, with the class
// that fits.
func registryError(ctx context.Context, ref Ref, registry, what string, err error) error {
	if ctx.Err() != nil {
		return fmt.Errorf("feature %s: %w", ref.ID, ctx.Err())
	}
	where := registry
	if registry != ref.Registry {
		where = fmt.Sprintf("%s (the mirror of %s)", registry, ref.Registry)
	}
	if errors.Is(err, errManifestTooLarge) {
		return errdefs.New(errdefs.ErrInvalid, fmt.Sprintf("feature %s: %s's manifest is larger than the %s a feature's may be; it is not a Dev Container Feature", ref.ID, ref.Reference(), mebibytes(maxManifest)))
	}
	var terr *transport.Error
	if errors.As(err, &terr) {
		codes := make(map[transport.ErrorCode]bool)
		for _, d := range terr.Errors {
			codes[d.Code] = true
		}
		switch {
		case terr.StatusCode == http.StatusNotFound || codes[transport.ManifestUnknownErrorCode] || codes[transport.NameUnknownErrorCode] || codes[transport.BlobUnknownErrorCode]:
			return errdefs.New(errdefs.ErrNotFound, fmt.Sprintf("feature %s: not found in registry %s (%v); check the feature's name and version", ref.ID, where, terr))
		case terr.StatusCode == http.StatusUnauthorized || terr.StatusCode == http.StatusForbidden || codes[transport.UnauthorizedErrorCode] || codes[transport.DeniedErrorCode]:
			return errdefs.New(errdefs.ErrFailedPrecondition, fmt.Sprintf("feature %s: registry %s refused access to %s (%v); registries answer so for a name that does not exist too: check it, and if the feature is private, log in with docker login %s", ref.ID, where, what, terr, registry))
		}
		return errdefs.New(errdefs.ErrUnavailable, fmt.Sprintf("feature %s: registry %s failed to serve %s (%v); try again later", ref.ID, where, what, terr))
	}
	return errdefs.New(errdefs.ErrUnavailable, fmt.Sprintf("feature %s: cannot reach %s: %v", ref.ID, where, err))
}
