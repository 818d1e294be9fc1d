package egress

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/hutchsandbox/hutch/internal/netpolicy"
)

// minPlaceholder is the length of the shortest placeholder the proxy acts
// on: a shorter one could turn up in a request by chance, and the empty
// one is in every request. (The vault's tokens, "hutch-placeholder-" and
// 32 hex digits, are 50 bytes.)
const minPlaceholder = 16

// maxBody is the largest request body read into memory, to be scanned
// in full and substituted for secrets that set Body.
const maxBody = 1 << 20

// Secret is a credential the sandboxed command knows only by its
// placeholder. The proxy puts Value in place of Placeholder in requests
// to Hosts, over TLS it verified, and refuses every other request that
// carries Placeholder.
type Secret struct {
	// Name identifies the secret in refusals, logs and events (GH_TOKEN).
	Name string
	// Placeholder is what the command sees instead of Value. One shorter
	// than 16 bytes is ignored: it could occur in a request by chance.
	Placeholder string
	// Value is the real credential. It never appears in a log line, an
	// Event or an error text.
	Value string
	// Hosts are the hosts (and ports) the value may be sent to, written as
	// sandbox.network.allow entries. The zero Allowlist allows none.
	Hosts netpolicy.Allowlist
	// Expires ends the secret: past it, a request carrying the
	// placeholder is refused. The zero time never expires.
	Expires time.Time
	// Body also substitutes the value in request bodies of at most 1 MiB.
	// Header values (Basic credentials decoded), the path and the query
	// are substituted whatever Body says.
	Body bool
}

// Kinds and reasons of an Event.
const (
	KindSubstituted = "substituted"
	KindRefused     = "refused"

	ReasonNotListed = "host not listed for this secret"
	ReasonExpired   = "expired"
	ReasonPlainHTTP = "plain HTTP"
)

// Event is one use of a secret's placeholder: substituted, or refused
// with a reason. It names the secret, never its value or placeholder.
type Event struct {
	Time   time.Time `json:"time"`
	Office string    `json:"office"`
	Secret string    `json:"secret"`
	Host   string    `json:"host"`
	Port   int       `json:"port"`
	// Kind is KindSubstituted or KindRefused.
	Kind string `json:"kind"`
	// Reason says why a refusal was made (ReasonNotListed,
	// ReasonExpired, ReasonPlainHTTP); empty for a substitution.
	Reason string `json:"reason,omitempty"`
}

// target is where one request goes.
type target struct {
	host string
	port int
	// tls: over a TLS connection the proxy verified against the host's
	// name, the only way a value ever leaves.
	tls bool
}

// refusal is why one secret may not go with one request.
type refusal struct {
	secret string
	reason string
	// exfiltration: the host is not one the secret names, so the command
	// tried to send it elsewhere, rather than using it wrongly (expired,
	// or over plain HTTP) toward its own host.
	exfiltration bool
}

// verdict is the refusal of sec in a request to t, or nil when its value
// may be substituted there. The host is checked before expiry, so an
// attempt to send an expired secret elsewhere is reported as what it is.
func (t target) verdict(sec Secret, now time.Time) *refusal {
	listed := sec.Hosts.Allows(t.host, t.port)
	switch {
	case !t.tls:
		return &refusal{secret: sec.Name, reason: ReasonPlainHTTP, exfiltration: !listed}
	case !listed:
		return &refusal{secret: sec.Name, reason: ReasonNotListed, exfiltration: true}
	case !sec.Expires.IsZero() && !now.Before(sec.Expires):
		return &refusal{secret: sec.Name, reason: ReasonExpired}
	}
	return nil
}

// secrets are the secrets the proxy acts on now.
func (s *server) secrets() []Secret {
	if s.secretsFn == nil {
		return nil
	}
	all := s.secretsFn()
	out := make([]Secret, 0, len(all))
	for _, sec := range all {
		if len(sec.Placeholder) >= minPlaceholder {
			out = append(out, sec)
		}
	}
	return out
}

// refusals are what a body scanner refused after the request had begun
// to go out; the error handler answers with them.
type refusals struct {
	mu   sync.Mutex
	list []refusal
}

func (rs *refusals) add(r refusal) bool {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	for _, have := range rs.list {
		if have.secret == r.secret {
			return false
		}
	}
	rs.list = append(rs.list, r)
	return true
}

func (rs *refusals) get() []refusal {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	return append([]refusal(nil), rs.list...)
}

// errRefusedInBody ends a body that went out in part before a refused
// placeholder turned up in it.
var errRefusedInBody = errors.New("hutch egress: the request body carries a refused secret placeholder")

// scan is one request's search for placeholders.
type scan struct {
	secrets []Secret
	seen    []bool // by index into secrets
}

func (sc *scan) text(s string) {
	for i, sec := range sc.secrets {
		if !sc.seen[i] && strings.Contains(s, sec.Placeholder) {
			sc.seen[i] = true
		}
	}
}

func (sc *scan) bytes(b []byte) {
	for i, sec := range sc.secrets {
		if !sc.seen[i] && bytes.Contains(b, []byte(sec.Placeholder)) {
			sc.seen[i] = true
		}
	}
}

// guard scans r for the placeholders of the current secrets. When one
// may not go to t it answers w with 403, records the refusal and returns
// why r was not forwarded (so does a body it cannot read, with 400).
// Otherwise it substitutes the values of those found, where they go, and
// returns ""; r is then ready to forward. A body too large to
// read ahead is scanned as it streams, and refusals found there land in
// late (see errRefusedInBody).
//
// Scanned: every header value (Authorization's Basic credentials
// decoded), the Host header, URL user info, the path and the query (each
// as written and percent-decoded), and the body. Substituted: header
// values, Basic credentials, the path and the query as written, and for
// secrets with Body set a body of at most maxBody.
func (s *server) guard(w http.ResponseWriter, r *http.Request, t target, late *refusals) (denied string) {
	secs := s.secrets()
	if len(secs) == 0 {
		return ""
	}
	sc := &scan{secrets: secs, seen: make([]bool, len(secs))}
	for _, vs := range r.Header {
		for _, v := range vs {
			sc.text(v)
		}
	}
	if creds, _, ok := basicCredentials(r.Header.Get("Authorization")); ok {
		sc.text(creds)
	}
	sc.text(r.Host)
	if r.URL.User != nil {
		sc.text(r.URL.User.String())
	}
	sc.text(r.URL.EscapedPath())
	sc.text(r.URL.Path)
	sc.text(r.URL.RawQuery)
	if q, err := url.QueryUnescape(r.URL.RawQuery); err == nil {
		sc.text(q)
	}

	var body []byte
	complete := true
	if r.Body != nil && r.Body != http.NoBody {
		var err error
		body, err = io.ReadAll(io.LimitReader(r.Body, maxBody+1))
		if err != nil {
			http.Error(w, "hutch egress: reading the request body: "+err.Error(), http.StatusBadRequest)
			return "unreadable request body"
		}
		complete = len(body) <= maxBody
		sc.bytes(body)
	}

	now := time.Now()
	var refused []refusal
	for i, sec := range secs {
		if sc.seen[i] {
			if rf := t.verdict(sec, now); rf != nil {
				refused = append(refused, *rf)
			}
		}
	}
	if len(refused) > 0 {
		s.refuse(w, r, t, refused)
		return "carries a secret placeholder"
	}

	sub := &substitution{scan: sc, used: make([]bool, len(secs))}
	sub.headers(r.Header)
	sub.url(r.URL)
	if body != nil {
		if complete {
			setBody(r, sub.body(body))
		} else {
			// Too large to hold: forwarded unchanged, and scanned as it
			// goes for placeholders that may not go to t at all.
			rest := &scanBody{
				rc:   r.Body,
				keep: longestPlaceholder(secs) - 1,
				check: func(b []byte) bool {
					return s.refuseLate(r.Context(), t, secs, b, late)
				},
			}
			rest.tail = tailOf(body, rest.keep)
			r.Body = struct {
				io.Reader
				io.Closer
			}{io.MultiReader(bytes.NewReader(body), rest), r.Body}
		}
	}
	for i, used := range sub.used {
		if used {
			s.substituted(r.Context(), t, secs[i].Name)
		}
	}
	return ""
}

// substitution replaces the placeholders of the secrets a scan found,
// all of which may go to the request's host, and notes which it used.
type substitution struct {
	*scan
	used []bool
}

// replace substitutes in s, each value first passed through enc.
func (sub *substitution) replace(s string, enc func(string) string, onlyBody bool) string {
	var pairs []string
	for i, sec := range sub.secrets {
		if !sub.seen[i] || (onlyBody && !sec.Body) || !strings.Contains(s, sec.Placeholder) {
			continue
		}
		sub.used[i] = true
		pairs = append(pairs, sec.Placeholder, enc(sec.Value))
	}
	if pairs == nil {
		return s
	}
	// One pass: a value that happens to hold another placeholder is not
	// substituted again.
	return strings.NewReplacer(pairs...).Replace(s)
}

func verbatim(s string) string { return s }

func (sub *substitution) headers(h http.Header) {
	for k, vs := range h {
		for i, v := range vs {
			vs[i] = sub.replace(v, verbatim, false)
		}
		if http.CanonicalHeaderKey(k) != "Authorization" {
			continue
		}
		for i, v := range vs {
			creds, enc, ok := basicCredentials(v)
			if !ok {
				continue
			}
			if out := sub.replace(creds, verbatim, false); out != creds {
				vs[i] = v[:len("Basic ")] + enc.EncodeToString([]byte(out))
			}
		}
	}
}

// url substitutes in the path and query as written, percent-encoding
// each value for where it goes, so that a value holding '/' or '&' stays
// one path segment or one parameter.
func (sub *substitution) url(u *url.URL) {
	p := u.EscapedPath()
	if out := sub.replace(p, url.PathEscape, false); out != p {
		if dec, err := url.PathUnescape(out); err == nil {
			u.Path, u.RawPath = dec, out
		}
	}
	u.RawQuery = sub.replace(u.RawQuery, url.QueryEscape, false)
}

// body substitutes the values of secrets that set Body.
func (sub *substitution) body(b []byte) []byte {
	s := string(b)
	if out := sub.replace(s, verbatim, true); out != s {
		return []byte(out)
	}
	return b
}

// setBody makes b the request's whole body, with its length.
func setBody(r *http.Request, b []byte) {
	_ = r.Body.Close()
	r.ContentLength = int64(len(b))
	r.TransferEncoding = nil
	r.Header.Del("Content-Length")
	if len(b) == 0 {
		r.Body, r.GetBody = http.NoBody, nil
		return
	}
	r.Body = io.NopCloser(bytes.NewReader(b))
	r.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(b)), nil }
}

// basicCredentials decodes an Authorization value of the Basic scheme,
// with or without base64 padding, and returns the encoding it used.
func basicCredentials(v string) (string, *base64.Encoding, bool) {
	if len(v) < len("Basic ") || !strings.EqualFold(v[:len("Basic ")], "Basic ") {
		return "", nil, false
	}
	data := strings.TrimSpace(v[len("Basic "):])
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding} {
		if b, err := enc.DecodeString(data); err == nil {
			return string(b), enc, true
		}
	}
	return "", nil, false
}

func longestPlaceholder(secs []Secret) int {
	n := 0
	for _, sec := range secs {
		n = max(n, len(sec.Placeholder))
	}
	return n
}

func tailOf(b []byte, n int) []byte {
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return append([]byte(nil), b...)
}

// scanBody passes a body on while looking for placeholders across read
// boundaries: it keeps the last keep bytes of what went before. When
// check refuses, the read that would carry the placeholder fails instead,
// so the transport abandons the request without sending it.
type scanBody struct {
	rc    io.ReadCloser
	keep  int
	check func([]byte) bool
	tail  []byte
	win   []byte
	err   error
}

func (b *scanBody) Read(p []byte) (int, error) {
	if b.err != nil {
		return 0, b.err
	}
	n, err := b.rc.Read(p)
	if n > 0 {
		b.win = append(append(b.win[:0], b.tail...), p[:n]...)
		if b.check(b.win) {
			b.err = errRefusedInBody
			return 0, b.err
		}
		b.tail = append(b.tail[:0], b.win[max(0, len(b.win)-b.keep):]...)
	}
	return n, err
}

// refuseLate checks a streamed part of a body, records each new refusal
// and reports whether there was one.
func (s *server) refuseLate(ctx context.Context, t target, secs []Secret, b []byte, late *refusals) bool {
	now := time.Now()
	refused := false
	for _, sec := range secs {
		if !bytes.Contains(b, []byte(sec.Placeholder)) {
			continue
		}
		if rf := t.verdict(sec, now); rf != nil {
			refused = true
			if late.add(*rf) {
				s.recordRefusal(ctx, t, *rf)
			}
		}
	}
	return refused
}

// refuse answers a request that carries placeholders it may not, and
// records each refusal.
func (s *server) refuse(w http.ResponseWriter, r *http.Request, t target, refused []refusal) {
	for _, rf := range refused {
		s.recordRefusal(r.Context(), t, rf)
	}
	http.Error(w, refusalText(t, refused), http.StatusForbidden)
}

// refusalText names each refused secret and the host, never a value.
func refusalText(t target, refused []refusal) string {
	var b strings.Builder
	for i, rf := range refused {
		if i > 0 {
			b.WriteByte('\n')
		}
		fmt.Fprintf(&b, "hutch egress: secret %s refused for %s: %s", rf.secret, hostPort(t.host, t.port), rf.reason)
	}
	return b.String()
}

func (s *server) recordRefusal(ctx context.Context, t target, rf refusal) {
	s.log.LogAttrs(ctx, slog.LevelWarn, "egress placeholder refused",
		slog.String("office", s.office), slog.String("secret", rf.secret),
		slog.String("host", t.host), slog.Int("port", t.port),
		slog.String("reason", rf.reason), slog.Bool("exfiltration", rf.exfiltration))
	s.record(Event{Secret: rf.secret, Host: t.host, Port: t.port, Kind: KindRefused, Reason: rf.reason})
}

func (s *server) substituted(ctx context.Context, t target, name string) {
	s.log.LogAttrs(ctx, slog.LevelInfo, "egress placeholder substituted",
		slog.String("office", s.office), slog.String("secret", name),
		slog.String("host", t.host), slog.Int("port", t.port))
	s.record(Event{Secret: name, Host: t.host, Port: t.port, Kind: KindSubstituted})
}

func (s *server) record(e Event) {
	if s.recordFn == nil {
		return
	}
	e.Time, e.Office = time.Now(), s.office
	s.recordFn(e)
}
