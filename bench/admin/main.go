// Command admin measures the admin portal's home page under many viewers
// beside the API's list call, side by side in one run:
//
//	go run ./bench/admin [-offices 200] [-viewers 20] [-rounds 20]
//
// It registers -offices offices (each with a recorded channel kind, so
// every one resolves its door policy from it) in a fresh state dir, in
// host mode (no runtimes: the page's cost is resolving and rendering every
// office, which is what grows with them), serves the portal and the API
// over loopback HTTP in this process, and signs one browser session in
// through a link. Each round then sends -viewers GETs of the home page at
// once, with the session's cookie, and -viewers GETs of GET /v1/offices
// at once; the two alternate round by round. Each request's latency is
// recorded from send to the last byte read.
//
// The table shows p50 and p90 (nearest rank) of both and their ratio
// page/API. The page does more than the call (it resolves each office's
// door policy and renders HTML for it), so the ratio says what a viewer
// costs beyond the plain list; these machines are noisy, so the claim is
// that ratio, never a bare time, and nothing is asserted.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/hutchsandbox/hutch/bench/benchkit"
	"github.com/hutchsandbox/hutch/internal/admin"
	"github.com/hutchsandbox/hutch/internal/api"
	"github.com/hutchsandbox/hutch/internal/office"
	"github.com/hutchsandbox/hutch/internal/sandbox"
	"github.com/hutchsandbox/hutch/internal/service"
)

type opts struct {
	offices, viewers, rounds int
}

func main() {
	var o opts
	flag.IntVar(&o.offices, "offices", 200, "registered offices")
	flag.IntVar(&o.viewers, "viewers", 20, "concurrent viewers per round")
	flag.IntVar(&o.rounds, "rounds", 20, "rounds (each: viewers page loads at once, then viewers API calls at once)")
	flag.Parse()
	benchkit.Main("bench/admin", "interrupted: stopping", func(ctx context.Context) error { return run(ctx, o) })
}

func run(ctx context.Context, o opts) error {
	progress := benchkit.Progress("bench/admin")
	root, err := os.MkdirTemp("", "hutch-bench-admin-")
	if err != nil {
		return err
	}
	defer func() { _ = os.RemoveAll(root) }()
	layout := service.Layout{StateDir: filepath.Join(root, "state"), Workspace: filepath.Join(root, "ws"), RunDir: filepath.Join(root, "run")}
	for _, d := range []string{layout.StateDir, layout.Workspace} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return err
		}
	}
	svc := service.New(layout, nil)
	kinds := []string{"public_channel", "private_channel", "im", "external"}
	for i := range o.offices {
		addr, err := office.NewAddress("slack", fmt.Sprintf("C%06d", i))
		if err != nil {
			return err
		}
		if err := svc.SetChannelKind(addr, kinds[i%len(kinds)]); err != nil {
			return err
		}
	}
	progress("registered %d offices", o.offices)
	mode := sandbox.Mode{Kind: sandbox.KindHost}

	portalTS := httptest.NewUnstartedServer(nil)
	portalTS.Start()
	defer portalTS.Close()
	portal, err := admin.New(admin.Options{Service: svc, Mode: mode, BaseURL: portalTS.URL})
	if err != nil {
		return err
	}
	portalTS.Config.Handler = portal.Handler()
	apiTS := httptest.NewServer((&api.Server{Service: svc, Mode: mode}).Handler())
	defer apiTS.Close()

	jar, _ := cookiejar.New(nil)
	tr := &http.Transport{MaxIdleConnsPerHost: o.viewers}
	hc := &http.Client{Jar: jar, Transport: tr}
	defer tr.CloseIdleConnections()
	if err := signIn(ctx, hc, portal, portalTS.URL); err != nil {
		return err
	}

	page := &benchkit.Series{Name: "home page"}
	list := &benchkit.Series{Name: "GET /v1/offices"}
	get := func(target string) error {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, target, nil)
		if err != nil {
			return err
		}
		resp, err := hc.Do(req)
		if err != nil {
			return err
		}
		defer func() { _ = resp.Body.Close() }()
		n, err := io.Copy(io.Discard, resp.Body)
		if err != nil {
			return err
		}
		if resp.StatusCode != http.StatusOK || n == 0 {
			return fmt.Errorf("%s: status %d, %d bytes", target, resp.StatusCode, n)
		}
		return nil
	}
	burst := func(s *benchkit.Series, target string) {
		var wg sync.WaitGroup
		var mu sync.Mutex
		for range o.viewers {
			wg.Go(func() {
				start := time.Now()
				err := get(target)
				d := time.Since(start)
				mu.Lock()
				s.Record(d, err)
				mu.Unlock()
			})
		}
		wg.Wait()
	}
	// Warm-up: one burst of each, not recorded.
	warm := &benchkit.Series{}
	burst(warm, portalTS.URL+"/admin/")
	burst(warm, apiTS.URL+"/v1/offices")
	if warm.Err != nil {
		return fmt.Errorf("warm-up: %w", warm.Err)
	}
	progress("%d rounds of %d viewers", o.rounds, o.viewers)
	for i := range o.rounds {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if i%2 == 0 {
			burst(page, portalTS.URL+"/admin/")
			burst(list, apiTS.URL+"/v1/offices")
		} else {
			burst(list, apiTS.URL+"/v1/offices")
			burst(page, portalTS.URL+"/admin/")
		}
	}

	benchkit.Header{Bench: "bench/admin", Detail: true}.Print(os.Stdout)
	fmt.Printf("%d offices (channel kinds in turn: %s), host mode, portal and API in this process over loopback HTTP; %d viewers at once, %d rounds, alternating\n",
		o.offices, strings.Join(kinds, ", "), o.viewers, o.rounds)
	fmt.Println("latency from send to last byte; percentiles nearest-rank; ratio = page / API")
	fmt.Println()
	tw := benchkit.Table(os.Stdout)
	benchkit.Println(tw, "operation\tp50\tp90\truns\tfailed")
	for _, s := range []*benchkit.Series{page, list} {
		benchkit.Printf(tw, "%s\t%s\t%s\t%d\t%d\n", s.Name, benchkit.Ms(s.P50()), benchkit.Ms(s.Pct(90)), len(s.Times), s.Fail)
	}
	benchkit.Printf(tw, "ratio page/API\t%.2f\t%.2f\t\t\n", benchkit.Ratio(page.P50(), list.P50()), benchkit.Ratio(page.Pct(90), list.Pct(90)))
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Println("  home page: the session is checked, every office's door policy resolved (settings and channel kind read), the page rendered.")
	fmt.Println("  GET /v1/offices: the registry read and the list encoded as JSON.")
	for _, s := range []*benchkit.Series{page, list} {
		if s.Err != nil {
			return fmt.Errorf("%s: %d failed, first: %w", s.Name, s.Fail, s.Err)
		}
	}
	return nil
}

// signIn redeems a link the way the sign-in page's button does.
func signIn(ctx context.Context, hc *http.Client, portal *admin.Server, base string) error {
	link, _, err := portal.Link("bench/admin", 0)
	if err != nil {
		return err
	}
	u, err := url.Parse(link)
	if err != nil {
		return err
	}
	form := url.Values{"token": {u.Query().Get("token")}}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/admin/login", strings.NewReader(form.Encode()))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Sec-Fetch-Site", "same-origin")
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	body, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "Offices and runtimes") {
		return fmt.Errorf("sign in: status %d", resp.StatusCode)
	}
	return nil
}
