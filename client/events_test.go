package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"github.com/hutchsandbox/hutch/client"
	"github.com/hutchsandbox/hutch/internal/events"
)

// TestEvent_SameJSONAsTheLog: client.Event mirrors events.Event (whose
// lines GET /v1/events answers): a line decodes whole, and encodes back
// to the same bytes.
func TestEvent_SameJSONAsTheLog(t *testing.T) {
	for _, e := range []events.Event{
		{Time: time.Date(2026, 12, 3, 13, 0, 0, 123456789, time.UTC), Surface: events.SurfaceAPI, Action: events.DoorSet, Target: "web/x", Detail: "shared"},
		{Time: time.Date(2026, 12, 3, 13, 0, 1, 0, time.UTC), Surface: events.SurfacePortal, Who: "ana", Action: events.PortalSignIn},
	} {
		line := e.Line()
		var got client.Event
		if err := json.Unmarshal(line, &got); err != nil {
			t.Fatal(err)
		}
		back, err := json.Marshal(got)
		if err != nil {
			t.Fatal(err)
		}
		if string(back)+"\n" != string(line) {
			t.Errorf("client.Event encodes %s, the log's line is %s", back, line)
		}
	}
}

// eventsServer serves the log in dir as GET /v1/events does (?n=,
// ?follow=1), for the client's side of the stream.
func eventsServer(t *testing.T, log *events.Log) *client.Client {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := 100
		if v := r.URL.Query().Get("n"); v != "" {
			n, _ = strconv.Atoi(v)
		}
		w.Header().Set("Content-Type", "application/x-ndjson")
		if r.URL.Query().Get("follow") != "1" {
			evs, _ := log.Last(n)
			for _, e := range evs {
				_, _ = w.Write(e.Line())
			}
			return
		}
		rc := http.NewResponseController(w)
		_ = rc.Flush()
		_ = log.Follow(r.Context(), n, func(e events.Event) error {
			if _, err := w.Write(e.Line()); err != nil {
				return err
			}
			return rc.Flush()
		})
	}))
	t.Cleanup(srv.Close)
	return &client.Client{BaseURL: srv.URL}
}

// TestEvents_ListAndFollow: Events answers the newest n, oldest first;
// FollowEvents gives those and then each new event, until its context
// ends or its function fails.
func TestEvents_ListAndFollow(t *testing.T) {
	log := events.Open(t.TempDir())
	for _, d := range []string{"one", "two", "three"} {
		if err := log.Append(events.Event{Surface: events.SurfaceCLI, Action: events.DoorSet, Target: "web/x", Detail: d}); err != nil {
			t.Fatal(err)
		}
	}
	c := eventsServer(t, log)
	ctx := context.Background()
	got, err := c.Events(ctx, 2)
	if err != nil || len(got) != 2 || got[0].Detail != "two" || got[1].Detail != "three" || got[1].Action != events.DoorSet {
		t.Fatalf("Events(2) = %+v, %v", got, err)
	}
	if got, err := c.Events(ctx, -1); err != nil || len(got) != 3 {
		t.Errorf("Events(-1) = %+v, %v; want the 3", got, err)
	}

	fctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	var seen []string
	errStop := errors.New("enough")
	err = c.FollowEvents(fctx, 1, func(e client.Event) error {
		seen = append(seen, e.Detail)
		if len(seen) == 1 {
			if err := log.Append(events.Event{Surface: events.SurfaceAPI, Action: events.VaultSet, Detail: "four"}); err != nil {
				t.Error(err)
			}
		}
		if len(seen) == 2 {
			return errStop
		}
		return nil
	})
	if !errors.Is(err, errStop) || len(seen) != 2 || seen[0] != "three" || seen[1] != "four" {
		t.Errorf("FollowEvents = %v, saw %q; want three, then four, then fn's error", err, seen)
	}

	cctx, ccancel := context.WithCancel(ctx)
	time.AfterFunc(100*time.Millisecond, ccancel)
	if err := c.FollowEvents(cctx, 0, func(client.Event) error { return nil }); !errors.Is(err, context.Canceled) {
		t.Errorf("FollowEvents until its context ends: %v, want context.Canceled", err)
	}
}

// TestEvents_RealDaemon: a door set through the API is in the event log
// GET /v1/events answers, and a follower sees the next change as it is
// made.
func TestEvents_RealDaemon(t *testing.T) {
	c, stop, err := tcpDaemon("t")
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	ctx := context.Background()
	if _, err := c.Events(ctx, 0); err != nil {
		t.Fatalf("Events on a daemon with no event yet: %v", err)
	}
	conv := client.Conversation{Platform: "web", ConversationID: "events"}
	if _, err := c.SetDoor(ctx, conv, "shared"); err != nil {
		t.Fatal(err)
	}
	list, err := c.Events(ctx, -1)
	if err != nil || len(list) == 0 {
		t.Fatalf("Events = %+v, %v", list, err)
	}
	last := list[len(list)-1]
	if last.Action != "door.set" || last.Target != "web/events" || last.Surface != "api" || last.Time.IsZero() {
		t.Errorf("the last event %+v, want the door set through the API", last)
	}

	fctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	errSeen := errors.New("seen")
	done := make(chan error, 1)
	go func() {
		done <- c.FollowEvents(fctx, 0, func(e client.Event) error {
			if e.Action == "vault.set" {
				return errSeen
			}
			return nil
		})
	}()
	// The follower may connect after the first set: set until it sees one.
	for i := 0; ; i++ {
		if _, err := c.VaultSet(ctx, client.VaultRequest{Conversation: &conv}, map[string]string{"K": strconv.Itoa(i)}); err != nil {
			t.Fatal(err)
		}
		select {
		case err := <-done:
			if !errors.Is(err, errSeen) {
				t.Errorf("FollowEvents = %v, want it to see vault.set", err)
			}
			return
		case <-time.After(200 * time.Millisecond):
		}
		if fctx.Err() != nil {
			t.Fatal("the follower saw no vault.set within 30 s")
		}
	}
}
