package cloudflare

import (
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strings"

	"github.com/hutchsandbox/hutch/internal/errdefs"
)

// The environment variables ConfigFromEnv reads. The HUTCH_ names win;
// the CLOUDFLARE_ names are those bridges written for the reference
// system already document.
const (
	EnvURL             = "HUTCH_BRIDGE_URL"
	EnvToken           = "HUTCH_BRIDGE_TOKEN"
	EnvCA              = "HUTCH_BRIDGE_CA"
	EnvCloudflareURL   = "CLOUDFLARE_SANDBOX_URL"
	EnvCloudflareToken = "CLOUDFLARE_SANDBOX_TOKEN"
)

// Config is one cloudflare:<sandbox-id> mode: which bridge, and how to
// reach it.
type Config struct {
	// SandboxID is the mode's target. Each conversation's remote runtime
	// is named <SandboxID>-<office key>.
	SandboxID string
	// URL is the bridge's base URL, http:// or https://; the protocol's
	// paths (/health, /exec, /cancel) are appended to it.
	URL string
	// Token, when set, is sent as a bearer token on every request. It is
	// never logged and never part of an error text.
	Token string
	// CAFile names a PEM file of root certificates trusted for an https
	// URL in addition to the system's (a bridge with a private certificate).
	CAFile string
	// HTTPClient replaces the client New builds; CAFile is then ignored.
	// Tests set it. It must not set a Timeout: streamed commands run as
	// long as they run, and Exec bounds each request itself.
	HTTPClient *http.Client
	// Log receives debug lines (never env values or the token); nil discards.
	Log *slog.Logger
}

// Validate checks that the config names a sandbox id and an http(s) URL.
// Errors are of class errdefs.ErrInvalid.
func (c Config) Validate() error {
	if strings.TrimSpace(c.SandboxID) == "" {
		return errdefs.New(errdefs.ErrInvalid, "cloudflare sandbox requires sandbox id (e.g., cloudflare:team-sandbox)")
	}
	if strings.ContainsAny(c.SandboxID, " \t\n/") {
		return errdefs.New(errdefs.ErrInvalid, fmt.Sprintf("cloudflare sandbox id %q must not contain whitespace or '/'", c.SandboxID))
	}
	_, err := parseURL(c.URL)
	return err
}

// parseURL checks a bridge URL: http or https, with a host, no query.
func parseURL(raw string) (*url.URL, error) {
	if raw == "" {
		return nil, errdefs.New(errdefs.ErrInvalid, "The bridge URL is empty; set "+EnvURL+" (or "+EnvCloudflareURL+")")
	}
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" {
		return nil, errdefs.New(errdefs.ErrInvalid, fmt.Sprintf("The bridge URL %q is not an http:// or https:// URL of the bridge (e.g. https://bridge.example.com)", redact(raw)))
	}
	u.Path = strings.TrimSuffix(u.Path, "/")
	u.RawPath = ""
	return u, nil
}

// redact hides a password written into a URL's user info.
func redact(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return raw
	}
	return u.Redacted()
}

// ConfigFromEnv builds the config of cloudflare:<sandboxID> from the
// environment: the URL from HUTCH_BRIDGE_URL, else CLOUDFLARE_SANDBOX_URL
// (one is required); the token from HUTCH_BRIDGE_TOKEN, else
// CLOUDFLARE_SANDBOX_TOKEN; extra roots from the PEM file HUTCH_BRIDGE_CA.
// A missing URL is an error of class errdefs.ErrFailedPrecondition naming
// both variables.
func ConfigFromEnv(sandboxID string, getenv func(string) string) (Config, error) {
	first := func(names ...string) string {
		for _, n := range names {
			if v := strings.TrimSpace(getenv(n)); v != "" {
				return v
			}
		}
		return ""
	}
	c := Config{
		SandboxID: sandboxID,
		URL:       first(EnvURL, EnvCloudflareURL),
		Token:     first(EnvToken, EnvCloudflareToken),
		CAFile:    first(EnvCA),
	}
	if c.URL == "" {
		return Config{}, errdefs.New(errdefs.ErrFailedPrecondition, fmt.Sprintf(
			"Sandbox 'cloudflare:%s' needs the URL of its bridge: set %s (or %s), and %s (or %s) when the bridge requires a token",
			sandboxID, EnvURL, EnvCloudflareURL, EnvToken, EnvCloudflareToken))
	}
	return c, c.Validate()
}
