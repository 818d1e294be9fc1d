// Package admin is hutch's admin portal: server-rendered pages, served by
// the daemon on a TCP address of their own, to see and steer every office
// and runtime without a terminal.
//
// Access starts with a one-time link (`hutch admin link`, or the daemon's
// API for a chat bot's /admin command): its token is good once, for a
// short time, and only a POST from the sign-in page redeems it, so a chat
// platform that fetches links for previews cannot use it up. Redeeming
// sets a session cookie (HttpOnly, SameSite=Strict, Secure over TLS).
// Every state-changing request is a POST that must carry the session's
// CSRF token and come from the portal's own origin (the browser's
// Sec-Fetch-Site or Origin). Anything refused gets a plain page that
// says so and shows no data.
//
// Pages read and act only through the service layer the CLI and the API
// use; every action is written to an audit log the portal shows.
package admin

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/hutchsandbox/hutch/internal/events"
	"github.com/hutchsandbox/hutch/internal/sandbox"
	"github.com/hutchsandbox/hutch/internal/service"
)

//go:embed templates/*.html static/*
var assets embed.FS

// cookieName is the session cookie.
const cookieName = "hutch_admin"

// Server serves the portal.
type Server struct {
	svc  *service.Service
	mode sandbox.Mode
	log  *slog.Logger
	now  func() time.Time
	// base is the portal's external URL (scheme://host[:port]), which
	// links point at and the origin state-changing requests must come from.
	base   *url.URL
	secure bool // cookies only over TLS

	store *store
	pages *template.Template
	cop   *http.CrossOriginProtection
}

// Options configure a Server.
type Options struct {
	Service *service.Service
	// Mode is the daemon's mode.
	Mode sandbox.Mode
	// BaseURL is where browsers reach the portal, e.g. http://127.0.0.1:8731.
	BaseURL string
	// Log receives one line per refused request; nil discards.
	Log *slog.Logger
	// Now is the clock (tests); nil is time.Now.
	Now func() time.Time
}

// New returns the portal.
func New(o Options) (*Server, error) {
	if o.Service == nil {
		return nil, errors.New("admin: no service")
	}
	base, err := url.Parse(o.BaseURL)
	if err != nil || (base.Scheme != "http" && base.Scheme != "https") || base.Host == "" || (base.Path != "" && base.Path != "/") {
		return nil, fmt.Errorf("admin: the portal's URL %q must be http(s)://host[:port]", o.BaseURL)
	}
	base.Path = ""
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	now := o.Now
	pages, err := template.New("").Funcs(funcs).Funcs(template.FuncMap{
		// since is on the portal's clock, as idle stops and re-creations are.
		"since": func(t time.Time) string {
			if t.IsZero() {
				return "-"
			}
			return ago(now().Sub(t))
		},
	}).ParseFS(assets, "templates/*.html")
	if err != nil {
		return nil, fmt.Errorf("admin templates: %w", err)
	}
	if err := foldAudit(auditPath(o.Service.Layout().StateDir), o.Service.Events()); err != nil {
		return nil, err
	}
	cop := http.NewCrossOriginProtection()
	cop.SetDenyHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		o.Log.Warn("admin: cross-origin request refused", "method", r.Method, "path", r.URL.Path)
		refuse(w, http.StatusForbidden, "This request came from another site, so it was refused.")
	}))
	return &Server{
		svc: o.Service, mode: o.Mode, log: o.Log, now: o.Now,
		base: base, secure: base.Scheme == "https",
		store: newStore(o.Now), pages: pages, cop: cop,
	}, nil
}

// Link issues a one-time sign-in link for who (recorded in the audit
// log as the actor), good for ttl (DefaultLinkTTL when zero).
func (s *Server) Link(who string, ttl time.Duration) (string, time.Time, error) {
	if ttl == 0 {
		ttl = DefaultLinkTTL
	}
	if ttl < time.Minute || ttl > MaxLinkTTL {
		return "", time.Time{}, fmt.Errorf("a link lasts between 1m and %s, not %s", MaxLinkTTL, ttl)
	}
	if strings.TrimSpace(who) == "" {
		who = "unknown"
	}
	tok, exp := s.store.issue(who, ttl)
	return s.base.String() + "/admin/login?token=" + url.QueryEscape(tok), exp, nil
}

// Handler returns the portal's routes.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	static, _ := fs.Sub(assets, "static")
	mux.Handle("GET /admin/static/", http.StripPrefix("/admin/static/", http.FileServerFS(static)))
	mux.HandleFunc("GET /admin/login", s.loginPage)
	mux.HandleFunc("POST /admin/login", s.login)
	mux.Handle("POST /admin/logout", s.authed(s.logout))
	mux.Handle("GET /admin/{$}", s.authed(s.home))
	mux.Handle("GET /admin/office", s.authed(s.officePage))
	mux.Handle("POST /admin/door", s.authed(s.setDoor))
	mux.Handle("GET /admin/audit", s.authed(s.auditPage))
	s.actionRoutes(mux)
	s.usageRoutes(mux)
	s.moreRoutes(mux)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		notFound(w, "There is no such page.")
	})
	return s.headers(s.cop.Handler(mux))
}

// headers sets what every answer carries: no caching (pages hold live
// state), no framing, no sniffing, no referrer (a link's token must not
// leak through one), and a policy that runs only the portal's own files.
func (s *Server) headers(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		if strings.HasPrefix(r.URL.Path, "/admin/static/") {
			// Built into the binary: the same for as long as it runs.
			h.Set("Cache-Control", "private, max-age=3600")
		} else {
			h.Set("Cache-Control", "no-store")
		}
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("X-Frame-Options", "DENY")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("Content-Security-Policy", "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; frame-ancestors 'none'; form-action 'self'; base-uri 'none'")
		next.ServeHTTP(w, r)
	})
}

// request is what an authenticated handler gets.
type request struct {
	*http.Request
	sess *session
	id   string // the session cookie's value
}

// authed admits a request with a live session; a POST must also carry
// the session's CSRF token (cross-origin ones never reach here).
func (s *Server) authed(h func(http.ResponseWriter, *request) error) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, err := r.Cookie(cookieName)
		var sess *session
		ok := false
		if err == nil {
			sess, ok = s.store.session(c.Value)
		}
		if !ok {
			refuse(w, http.StatusUnauthorized, "You are not signed in, or your session ended. Ask for a new link: hutch admin link (or /admin in a chat).")
			return
		}
		if r.Method == http.MethodPost {
			r.Body = http.MaxBytesReader(w, r.Body, 64<<10)
			if !sameSecret(r.PostFormValue("csrf"), sess.csrf) {
				s.log.Warn("admin: request without a valid CSRF token refused", "path", r.URL.Path, "who", sess.who)
				refuse(w, http.StatusForbidden, "This form is stale or did not come from the portal; reload the page and try again.")
				return
			}
		}
		r = r.WithContext(portalActor(r, sess.who))
		if err := h(w, &request{Request: r, sess: sess, id: c.Value}); err != nil {
			s.fail(w, r, err)
		}
	})
}

// loginPage shows a sign-in button for a token that could be redeemed;
// it does not redeem it (a link preview's GET must not use it up).
func (s *Server) loginPage(w http.ResponseWriter, r *http.Request) {
	tok := r.URL.Query().Get("token")
	if tok == "" || !s.store.valid(tok) {
		refuse(w, http.StatusForbidden, "This link is not valid: it was already used, it expired, or it is wrong. Ask for a new one: hutch admin link (or /admin in a chat).")
		return
	}
	s.render(w, http.StatusOK, "login.html", map[string]any{"Token": tok})
}

// login redeems a token: a session starts and the browser goes home.
func (s *Server) login(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, 4<<10)
	id, sess, ok := s.store.redeem(r.PostFormValue("token"))
	if !ok {
		refuse(w, http.StatusForbidden, "This link is not valid: it was already used, it expired, or it is wrong. Ask for a new one: hutch admin link (or /admin in a chat).")
		return
	}
	// Secure follows whether the portal is served over HTTPS (s.secure): a
	// browser does not send a Secure cookie to a plain-HTTP loopback portal.
	http.SetCookie(w, &http.Cookie{ //nolint:gosec // G124: Secure is s.secure, see above
		Name: cookieName, Value: id, Path: "/admin/",
		HttpOnly: true, Secure: s.secure, SameSite: http.SameSiteStrictMode,
	})
	s.svc.Record(portalActor(r, sess.who), events.PortalSignIn, "", "")
	http.Redirect(w, r, "/admin/", http.StatusSeeOther)
}

func (s *Server) logout(w http.ResponseWriter, r *request) error {
	s.store.end(r.id)
	http.SetCookie(w, &http.Cookie{Name: cookieName, Value: "", Path: "/admin/", MaxAge: -1, HttpOnly: true, Secure: s.secure, SameSite: http.SameSiteStrictMode}) //nolint:gosec // G124: Secure is s.secure, as at login
	s.svc.Record(r.Context(), events.PortalSignOut, "", "")
	refuse(w, http.StatusOK, "You are signed out.")
	return nil
}

// portalActor is r's context naming the portal and who as the actor of
// what the request changes (the event log).
func portalActor(r *http.Request, who string) context.Context {
	return events.WithTargetSlot(events.WithActor(r.Context(), events.Actor{Surface: events.SurfacePortal, Who: who}))
}

// render executes a page template.
func (s *Server) render(w http.ResponseWriter, status int, name string, data any) {
	var b strings.Builder
	if err := s.pages.ExecuteTemplate(&b, name, data); err != nil {
		s.log.Error("admin: render", "page", name, "error", err)
		refuse(w, http.StatusInternalServerError, "This page could not be shown; the daemon's log says why.")
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	_, _ = w.Write([]byte(b.String()))
}

// refuse answers with a plain page holding only msg.
func refuse(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	_ = refusalPage().Execute(w, refusal{Msg: msg})
}

// notFound answers 404 with a plain page holding msg and a link back to
// the portal's home: what was asked for is not there, and nothing else is
// shown (no actions on what does not exist). The link leads to a sign-in
// refusal for a browser without a session, so it gives nothing away.
func notFound(w http.ResponseWriter, msg string) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(http.StatusNotFound)
	_ = refusalPage().Execute(w, refusal{Msg: msg, Back: true})
}

// refusal is what the refusal page shows.
type refusal struct {
	Msg string
	// Back: a link back to the portal's home follows the message.
	Back bool
}

// refusalPage is parsed on first use: every hutch process runs this
// package's init, and few of them serve the portal.
var refusalPage = sync.OnceValue(func() *template.Template {
	return template.Must(template.New("refusal").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>hutch admin</title><link rel="stylesheet" href="/admin/static/admin.css"></head>
<body><main><h1>hutch admin</h1><p role="alert">{{.Msg}}</p>{{if .Back}}
<p><a href="/admin/">Back to offices and runtimes</a></p>{{end}}</main></body></html>
`))
})
