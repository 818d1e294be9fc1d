package daemon_test

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/hutchsandbox/hutch/internal/daemon"
	"github.com/hutchsandbox/hutch/internal/events"
	"github.com/hutchsandbox/hutch/internal/sandbox"
)

// TestDaemon_Events: a change made through the API is in GET /v1/events,
// streamed to a client that follows (over TCP, with the token) as it is
// made, and in the log's last events; without the token the route is
// refused; the daemon's shutdown ends the stream.
func TestDaemon_Events(t *testing.T) {
	svc := hostService(t)
	const token = "0123456789abcdef0123456789abcdef-events"
	d := start(t, svc, daemon.Options{Mode: sandbox.Mode{Kind: sandbox.KindHost}, TCP: "127.0.0.1:0", Token: token})
	m := regexp.MustCompile(`TCP:\s+(http://\S+)`).FindStringSubmatch(d.out.String())
	if m == nil {
		t.Fatalf("no TCP address in the daemon's output:\n%s", d.out.String())
	}
	base := m[1]
	hc := &http.Client{Transport: &http.Transport{}}
	defer hc.CloseIdleConnections()

	// Without the token: refused, like every route.
	resp, err := hc.Get(base + "/v1/events")
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("GET /v1/events without the token: %d", resp.StatusCode)
	}

	// A follower, from now on.
	req, _ := http.NewRequest("GET", base+"/v1/events?follow=1&n=0", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	stream, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = stream.Body.Close() }()
	if stream.StatusCode != http.StatusOK || stream.Header.Get("Content-Type") != "application/x-ndjson" {
		t.Fatalf("follow: %d %s", stream.StatusCode, stream.Header.Get("Content-Type"))
	}
	lines := make(chan string, 16)
	go func() {
		sc := bufio.NewScanner(stream.Body)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()

	// A change through the API (the unix socket).
	uc := rawClient(d.sock)
	defer uc.CloseIdleConnections()
	resp, err = uc.Post("http://hutch/v1/door", "application/json", strings.NewReader(`{"conversation":{"platform":"web","conversationId":"ev\"}{\"action\":\"forged\""},"policy":"full"}`))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("POST /v1/door: %d %s", resp.StatusCode, body)
	}
	var got events.Event
	select {
	case line, ok := <-lines:
		if !ok {
			t.Fatal("the stream ended before the change")
		}
		if err := json.Unmarshal([]byte(line), &got); err != nil {
			t.Fatalf("stream line %q: %v", line, err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the change did not reach the follower within 10 s")
	}
	want := events.Event{Time: got.Time, Surface: "api", Action: events.DoorSet, Target: "web/ev\"}{\"action\":\"forged\"", Detail: "trusted/full"}
	if got != want || got.Time.IsZero() {
		t.Errorf("followed %+v, want %+v", got, want)
	}

	// The same event in the last ones.
	req, _ = http.NewRequest("GET", base+"/v1/events?n=5", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err = hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ = io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	// The refusal of the request without the token, then the change.
	if resp.StatusCode != http.StatusOK || strings.Count(string(body), "\n") != 2 ||
		!strings.Contains(string(body), `"surface":"api","action":"refused","detail":"unauthorized"}`+"\n") || !strings.Contains(string(body), `"action":"door.set"`) {
		t.Errorf("GET /v1/events?n=5: %d %q", resp.StatusCode, body)
	}
	req, _ = http.NewRequest("GET", base+"/v1/events?n=x", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	if resp, err = hc.Do(req); err != nil || resp.StatusCode != http.StatusBadRequest {
		t.Errorf("GET /v1/events?n=x: %v %v", resp.StatusCode, err)
	} else {
		_ = resp.Body.Close()
	}

	// Shutdown ends the stream; it does not wait for the client.
	start := time.Now()
	if err := d.stop(t); err != nil {
		t.Errorf("daemon.Run returned %v", err)
	}
	if took := time.Since(start); took > 10*time.Second {
		t.Errorf("shutdown with a follower took %v", took)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for {
		select {
		case _, ok := <-lines:
			if !ok {
				return
			}
		case <-ctx.Done():
			t.Fatal("the stream did not end with the daemon")
		}
	}
}
