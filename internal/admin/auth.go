package admin

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"sync"
	"time"
)

// Lifetimes of what grants access.
const (
	// DefaultLinkTTL is how long a link is good for when none is asked.
	DefaultLinkTTL = 30 * time.Minute
	// MaxLinkTTL bounds what a caller may ask for.
	MaxLinkTTL = 24 * time.Hour
	// SessionTTL is how long a session lasts after its last request.
	SessionTTL = 8 * time.Hour
)

// newSecret returns 32 random bytes, URL-safe base64 (43 characters).
func newSecret() string {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		panic("admin: no randomness: " + err.Error()) // crypto/rand never fails on Linux
	}
	return base64.RawURLEncoding.EncodeToString(b)
}

// digest is what the stores keep of a secret: never the secret itself,
// so a dump of the process's memory structures names no usable token.
func digest(secret string) [32]byte { return sha256.Sum256([]byte(secret)) }

// link is an issued, not yet used, one-time login link.
type link struct {
	who     string
	expires time.Time
}

// session is a signed-in browser.
type session struct {
	who     string
	csrf    string // the token every state-changing form carries
	expires time.Time
}

// store holds links and sessions in memory: a daemon restart ends them
// all, which is the safe direction.
type store struct {
	now func() time.Time

	mu       sync.Mutex
	links    map[[32]byte]link
	sessions map[[32]byte]*session
}

func newStore(now func() time.Time) *store {
	return &store{now: now, links: map[[32]byte]link{}, sessions: map[[32]byte]*session{}}
}

// issue makes a one-time link token for who, good for ttl.
func (s *store) issue(who string, ttl time.Duration) (string, time.Time) {
	tok := newSecret()
	exp := s.now().Add(ttl)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.purgeLocked()
	s.links[digest(tok)] = link{who: who, expires: exp}
	return tok, exp
}

// valid reports whether a link token could be redeemed now, without
// using it (the sign-in page shows its button only then).
func (s *store) valid(tok string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	l, ok := s.links[digest(tok)]
	return ok && s.now().Before(l.expires)
}

// redeem uses a link token once and starts a session; ok is false for a
// token that is unknown, used or expired. It returns the session id (the
// cookie's value) and the session.
func (s *store) redeem(tok string) (string, *session, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	d := digest(tok)
	l, ok := s.links[d]
	delete(s.links, d) // used or not, a presented token never works again
	if !ok || !s.now().Before(l.expires) {
		return "", nil, false
	}
	id := newSecret()
	sess := &session{who: l.who, csrf: newSecret(), expires: s.now().Add(SessionTTL)}
	s.sessions[digest(id)] = sess
	return id, sess, true
}

// session returns the live session of a cookie value and extends it.
func (s *store) session(id string) (*session, bool) {
	if id == "" {
		return nil, false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	sess, ok := s.sessions[digest(id)]
	if !ok {
		return nil, false
	}
	now := s.now()
	if !now.Before(sess.expires) {
		delete(s.sessions, digest(id))
		return nil, false
	}
	sess.expires = now.Add(SessionTTL)
	c := *sess
	return &c, true
}

// end signs a session out.
func (s *store) end(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.sessions, digest(id))
}

func (s *store) purgeLocked() {
	now := s.now()
	for d, l := range s.links {
		if !now.Before(l.expires) {
			delete(s.links, d)
		}
	}
	for d, sess := range s.sessions {
		if !now.Before(sess.expires) {
			delete(s.sessions, d)
		}
	}
}

// sameSecret compares two secrets in constant time.
func sameSecret(a, b string) bool {
	return len(a) == len(b) && subtle.ConstantTimeCompare([]byte(a), []byte(b)) == 1
}
