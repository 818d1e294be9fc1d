package api_test

import (
	"bufio"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestEvents_FollowersBounded: at most MaxEventFollowers clients follow
// the log at once; one more is refused 503, and a slot frees when a
// client goes.
func TestEvents_FollowersBounded(t *testing.T) {
	ts := newServer(t, "")
	hc := &http.Client{Transport: &http.Transport{MaxConnsPerHost: 0}}
	defer hc.CloseIdleConnections()
	var open []*http.Response
	var mu sync.Mutex
	defer func() {
		mu.Lock()
		defer mu.Unlock()
		for _, r := range open {
			_ = r.Body.Close()
		}
	}()
	follow := func() *http.Response {
		resp, err := hc.Get(ts.URL + "/v1/events?follow=1")
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	for i := range 32 {
		resp := follow()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("follower %d: %d", i, resp.StatusCode)
		}
		mu.Lock()
		open = append(open, resp)
		mu.Unlock()
	}
	resp := follow()
	body := new(strings.Builder)
	_, _ = bufio.NewReader(resp.Body).WriteTo(body)
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(body.String(), `"code":"unavailable"`) {
		t.Errorf("follower 33: %d %s", resp.StatusCode, body)
	}
	// One goes: a slot frees (the server sees it at its next poll).
	mu.Lock()
	_ = open[0].Body.Close()
	open = open[1:]
	mu.Unlock()
	var last int
	for range 100 {
		time.Sleep(20 * time.Millisecond)
		resp = follow()
		last = resp.StatusCode
		if last == http.StatusOK {
			mu.Lock()
			open = append(open, resp)
			mu.Unlock()
			break
		}
		_ = resp.Body.Close()
	}
	if last != http.StatusOK {
		t.Errorf("after a follower went: %d", last)
	}
	for _, q := range []string{"n=-1", "n=x", "follow=yes"} {
		resp, err := hc.Get(ts.URL + "/v1/events?" + q)
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest {
			t.Errorf("?%s: %d, want 400", q, resp.StatusCode)
		}
	}
}
