package agent

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"

	"github.com/hutchsandbox/hutch/internal/atomicfile"
	"github.com/hutchsandbox/hutch/internal/errdefs"
)

// The channel proof. A runtime's agent is reached by a path the runtime
// can write to (a socket in a bind-mounted directory): a process inside
// can replace the socket with a link to another runtime's socket, and
// whoever dials by path then talks to that other agent. So every
// connection starts with a challenge only the right agent answers: an
// HMAC, under a key per runtime, of a random challenge. The key reaches
// the agent as a read-only file (never in the container's config, which
// anyone with the engine can read) and is derived on the host from a
// secret in hutch's state dir, so every hutch process of an installation
// computes it, and another installation's agent cannot answer.
//
// The key proves nothing to the runtime's own processes (they can read
// it): it keeps one runtime from posing as another.
const (
	pathHello       = "/v1/hello"
	headerChallenge = "Hutch-Challenge"
	headerProof     = "Hutch-Proof"
	channelKeyBytes = 32
	challengeBytes  = 32
	// channelSecretFile is the installation's secret, in its state dir.
	channelSecretFile = "agent-channel.secret"
)

// proof is what an agent holding key answers to challenge.
func proof(key, challenge []byte) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte("hutch agent channel proof v1\x00"))
	m.Write(challenge)
	return m.Sum(nil)
}

// ChannelKey is the key of one runtime's channel: purpose names the
// runtime (its kind and its office key or project name). The
// installation's secret is made on first use (0600 in stateDir); two
// processes making it at once agree on one.
func ChannelKey(stateDir, purpose string) ([]byte, error) {
	path := filepath.Join(stateDir, channelSecretFile)
	secret, err := os.ReadFile(path) //nolint:gosec // G304: hutch's own 0700 state dir
	if errors.Is(err, fs.ErrNotExist) {
		if secret, err = makeChannelSecret(path); err != nil {
			return nil, err
		}
	} else if err != nil {
		return nil, fmt.Errorf("read the agent channel secret: %w", err)
	}
	if len(secret) < channelKeyBytes {
		return nil, fmt.Errorf("the agent channel secret %s is damaged (%d bytes): remove it, then remove the runtimes (they get new keys)", path, len(secret))
	}
	m := hmac.New(sha256.New, secret)
	m.Write([]byte("hutch agent channel key v1\x00"))
	m.Write([]byte(purpose))
	return m.Sum(nil), nil
}

// makeChannelSecret writes a fresh secret to path unless another process
// got there first, and returns the one that is there.
func makeChannelSecret(path string) ([]byte, error) {
	secret := make([]byte, channelKeyBytes)
	if _, err := rand.Read(secret); err != nil {
		return nil, err
	}
	tmp := fmt.Sprintf("%s.%x.tmp", path, secret[:4])
	if err := atomicfile.WriteFile(tmp, secret, 0o600); err != nil {
		return nil, fmt.Errorf("write the agent channel secret: %w", err)
	}
	defer func() { _ = os.Remove(tmp) }()
	// link, unlike rename, never replaces: the first writer wins.
	if err := os.Link(tmp, path); err != nil && !errors.Is(err, fs.ErrExist) {
		return nil, fmt.Errorf("write the agent channel secret: %w", err)
	}
	return os.ReadFile(path) //nolint:gosec // G304: hutch's own 0700 state dir
}

// WriteChannelKey writes key where a runtime's agent will read it (the
// source of a read-only bind mount). The file is readable by any uid
// (the agent of a project sandbox may run as the image's user); its
// directory is hutch's private run dir, and a file already holding key
// is left alone, since a running container sees the inode it mounted.
func WriteChannelKey(path string, key []byte) error {
	text := []byte(hex.EncodeToString(key) + "\n")
	if have, err := os.ReadFile(path); err == nil && hmac.Equal(have, text) { //nolint:gosec // G304: hutch's private run dir
		return nil
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return fmt.Errorf("agent channel key: %w", err)
	}
	if err := atomicfile.WriteFile(path, text, 0o644); err != nil { //nolint:gosec // G306: see above
		return fmt.Errorf("agent channel key: %w", err)
	}
	return nil
}

// readChannelKey reads a key file WriteChannelKey wrote.
func readChannelKey(path string) ([]byte, error) {
	b, err := os.ReadFile(path) //nolint:gosec // G304: the path the host gave the agent
	if err != nil {
		return nil, fmt.Errorf("agent channel key: %w", err)
	}
	if len(b) > 0 && b[len(b)-1] == '\n' {
		b = b[:len(b)-1]
	}
	key, err := hex.DecodeString(string(b))
	if err != nil || len(key) != channelKeyBytes {
		return nil, fmt.Errorf("agent channel key %s: not %d hex-encoded bytes", path, channelKeyBytes)
	}
	return key, nil
}

// handleHello answers a channel challenge.
func (s *Server) handleHello(w http.ResponseWriter, r *http.Request) {
	challenge, err := hex.DecodeString(r.Header.Get(headerChallenge))
	if err != nil || len(challenge) != challengeBytes {
		writeError(w, errdefs.New(errdefs.ErrInvalid, "A channel challenge is 32 hex-encoded bytes"))
		return
	}
	if s.Key == nil {
		writeError(w, errdefs.New(errdefs.ErrFailedPrecondition, "This agent holds no channel key"))
		return
	}
	w.Header().Set(headerProof, hex.EncodeToString(proof(s.Key, challenge)))
	w.WriteHeader(http.StatusNoContent)
}

// RequireProof makes every connection the client dials prove, before any
// request is sent on it, that its agent holds key. A connection that
// cannot is closed and the call fails with refusal, whose text should
// name the runtime and say what to do. Call it before the first use.
func (c *Client) RequireProof(key []byte, refusal string) *Client {
	c.key, c.refusal = key, refusal
	return c
}

// hello challenges a fresh connection's agent. Only the challenge goes
// out: nothing of a command, a file or an env reaches an agent that
// fails it.
func (c *Client) hello(ctx context.Context, cc http.RoundTripper) error {
	challenge := make([]byte, challengeBytes)
	if _, err := rand.Read(challenge); err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://agent"+pathHello, http.NoBody)
	if err != nil {
		return err
	}
	req.Header.Set(headerChallenge, hex.EncodeToString(challenge))
	resp, err := cc.RoundTrip(req)
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return errdefs.New(errdefs.ErrUnavailable, "agent unreachable: "+err.Error())
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxErrorBody))
	_ = resp.Body.Close()
	got, err := hex.DecodeString(resp.Header.Get(headerProof))
	if resp.StatusCode != http.StatusNoContent || err != nil || !hmac.Equal(got, proof(c.key, challenge)) {
		c.log.Warn("agent channel: the agent that answered failed the proof", "status", resp.StatusCode)
		return errdefs.New(errdefs.ErrFailedPrecondition, c.refusal)
	}
	return nil
}
