package client

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"time"
)

// Event is one change in the daemon's event log: a runtime created,
// re-created (with why), stopped or removed, limits and boosts, door and
// vault changes (names only, never values), refusals, portal sign-ins;
// from every surface (the CLI, the API, chat, MCP, the admin portal, the
// daemon itself). GET /v1/events answers events as JSON lines.
type Event struct {
	// Time is when the change was made (UTC).
	Time time.Time `json:"time"`
	// Surface is where it came from: cli, api, chat, mcp, portal or
	// daemon.
	Surface string `json:"surface"`
	// Who made it, when known: a portal user, a chat's user.
	Who string `json:"who,omitempty"`
	// Action is what happened, e.g. runtime.created, door.set,
	// vault.set, refused.
	Action string `json:"action"`
	// Target is what changed: a conversation ("platform/id"), an office
	// key, "global", or a project; empty when nothing in particular.
	Target string `json:"target,omitempty"`
	// Detail says what changed to what, or why: names and reasons only.
	Detail string `json:"detail,omitempty"`
}

// eventsPath is GET /v1/events with the last n events (n < 0: the
// daemon's default), following when follow.
func eventsPath(n int, follow bool) string {
	q := url.Values{}
	if n >= 0 {
		q.Set("n", strconv.Itoa(n))
	}
	if follow {
		q.Set("follow", "1")
	}
	if len(q) == 0 {
		return "/v1/events"
	}
	return "/v1/events?" + q.Encode()
}

// Events returns the newest n events of the daemon's log, oldest first
// (n < 0: the daemon's default, 100; it answers at most 1000).
func (c *Client) Events(ctx context.Context, n int) ([]Event, error) {
	out := []Event{}
	err := c.readEvents(ctx, eventsPath(n, false), func(e Event) error {
		out = append(out, e)
		return nil
	})
	return out, err
}

// FollowEvents calls fn with the newest n events of the daemon's log
// (n < 0: the daemon's default, 100; 0: none), then with each new one as
// it is written, until ctx ends (ctx's error is returned) or fn returns
// an error (returned as it is).
func (c *Client) FollowEvents(ctx context.Context, n int, fn func(Event) error) error {
	err := c.readEvents(ctx, eventsPath(n, true), fn)
	if err == nil {
		// The daemon ended the stream (it shut down): not the caller's
		// doing.
		return &noAnswer{msg: "The hutch daemon ended the event stream", err: errEndOfStream}
	}
	return err
}

var errEndOfStream = errors.New("end of stream")

// readEvents calls fn with each event of the JSON lines at path.
func (c *Client) readEvents(ctx context.Context, path string, fn func(Event) error) error {
	resp, err := c.send(ctx, "GET", path, nil)
	if err != nil {
		return err
	}
	defer func() { _ = resp.Body.Close() }()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		var e Event
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			return fmt.Errorf("bad event line %q: %w", sc.Bytes(), err)
		}
		if err := fn(e); err != nil {
			return err
		}
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if err := sc.Err(); err != nil {
		return &noAnswer{msg: "The hutch daemon went away mid-stream", err: err}
	}
	return nil
}
