package mcpserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/hutchsandbox/hutch/internal/errdefs"
	"github.com/hutchsandbox/hutch/internal/mcptools"
)

// Proxy is a server that serves the tools of a daemon's MCP endpoint
// (HTTPHandler, at /mcp): `hutch mcp` uses it when a daemon serves the
// state dir, so that its commands run in the daemon, which tracks,
// limits and stops them, as `hutch exec` does.
//
// It is a client of the endpoint on one side and a server on the other,
// not a relay of bytes: the handshake, protocol version and session of
// each side are the SDK's, a call the client cancels is cancelled at the
// daemon, and the daemon's progress of a call reaches the client that
// asked for it.
type Proxy struct {
	endpoint string
	hc       *http.Client
	log      *slog.Logger

	mu sync.Mutex
	cs *mcp.ClientSession

	// lastToken numbers the progress tokens the proxy gives the daemon.
	lastToken atomic.Int64
	// pmu guards progress: for each call under way whose client asked for
	// progress, by the token the daemon was given, what passes a
	// notification on.
	pmu      sync.Mutex
	progress map[string]func(*mcp.ProgressNotificationParams)
}

// DialProxy connects to the MCP endpoint at endpoint (a URL naming the
// conversation, as HTTPHandler takes it) through hc. It fails when the
// endpoint does not answer the handshake or list its tools. A nil log
// discards.
func DialProxy(ctx context.Context, endpoint string, hc *http.Client, log *slog.Logger) (*Proxy, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	p := &Proxy{endpoint: endpoint, hc: hc, log: log, progress: map[string]func(*mcp.ProgressNotificationParams){}}
	if _, err := p.session(ctx); err != nil {
		return nil, err
	}
	return p, nil
}

// Server returns the server to run on stdio: the endpoint's tools, with
// their schemas and descriptions, and its instructions.
func (p *Proxy) Server(ctx context.Context) (*mcp.Server, error) {
	cs, err := p.session(ctx)
	if err != nil {
		return nil, err
	}
	listed, err := cs.ListTools(ctx, nil)
	if err != nil {
		return nil, p.unavailable(err)
	}
	s := mcp.NewServer(&mcp.Implementation{Name: "hutch", Title: "hutch sandbox", Version: Version}, &mcp.ServerOptions{
		Instructions: cs.InitializeResult().Instructions,
		Logger:       p.log,
	})
	for _, t := range listed.Tools {
		var schema struct {
			Type string `json:"type"`
		}
		data, _ := json.Marshal(t.InputSchema)
		if json.Unmarshal(data, &schema) != nil || schema.Type != "object" {
			// AddTool would panic; the daemon is hutch and never lists one.
			p.log.Warn("the daemon lists a tool without an object schema; not served", "tool", t.Name)
			continue
		}
		s.AddTool(t, p.call)
	}
	return s, nil
}

// Close ends the session with the daemon.
func (p *Proxy) Close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cs == nil {
		return nil
	}
	err := p.cs.Close()
	p.cs = nil
	return err
}

// session returns the session with the daemon, connecting anew after a
// call found the last one broken (the daemon restarted, or closed the
// session after SessionTimeout).
func (p *Proxy) session(ctx context.Context) (*mcp.ClientSession, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cs != nil {
		return p.cs, nil
	}
	c := mcp.NewClient(&mcp.Implementation{Name: "hutch-mcp", Version: Version}, &mcp.ClientOptions{Logger: p.log, ProgressNotificationHandler: p.progressed})
	// hutch's server sends nothing unasked, so no standalone stream is
	// kept open.
	cs, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: p.endpoint, HTTPClient: p.hc, DisableStandaloneSSE: true, MaxRetries: -1}, nil)
	if err != nil {
		return nil, p.unavailable(err)
	}
	p.cs = cs
	return cs, nil
}

// drop forgets a broken session, so the next call connects again.
func (p *Proxy) drop(cs *mcp.ClientSession) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cs == cs {
		p.cs = nil
	}
	_ = cs.Close()
}

func (p *Proxy) unavailable(err error) error {
	return errdefs.New(errdefs.ErrUnavailable, fmt.Sprintf("The hutch daemon's MCP endpoint did not answer: %v", err))
}

// call forwards one tools/call. A protocol error of the daemon (an
// unknown tool, bad arguments) is passed on as it is; a broken session
// is a tool error, and the next call connects again. The call is never
// repeated: a command may have run.
func (p *Proxy) call(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	cs, err := p.session(ctx)
	if err != nil {
		return &mcp.CallToolResult{Content: mcptools.Text(err.Error()), IsError: true}, nil
	}
	// The stdio client's _meta is not passed on: it describes that side's
	// session (its protocol version among others), not this one's. Its
	// progress token is one of that session's, so the daemon is given one
	// of this session's, and the daemon's notifications under it are
	// passed on under the client's.
	params := &mcp.CallToolParams{Name: req.Params.Name}
	if len(req.Params.Arguments) > 0 {
		params.Arguments = req.Params.Arguments
	}
	if token := req.Params.GetProgressToken(); token != nil {
		ours := "hutch-mcp-" + strconv.FormatInt(p.lastToken.Add(1), 10)
		params.SetProgressToken(ours)
		p.follow(ours, func(n *mcp.ProgressNotificationParams) {
			err := req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: token, Progress: n.Progress, Total: n.Total, Message: n.Message})
			if err != nil && ctx.Err() == nil {
				p.log.Debug("progress not passed on", "error", err)
			}
		})
		defer p.unfollow(ours)
	}
	res, err := cs.CallTool(ctx, params)
	var rpcErr *jsonrpc.Error
	switch {
	case err == nil:
		return res, nil
	case errors.As(err, &rpcErr), ctx.Err() != nil:
		return nil, err
	}
	p.log.Warn("the daemon's MCP session broke; the next call connects again", "error", err)
	p.drop(cs)
	return &mcp.CallToolResult{Content: mcptools.Text(p.unavailable(err).Error()), IsError: true}, nil
}

// follow passes the daemon's progress under token on with pass, until
// unfollow.
func (p *Proxy) follow(token string, pass func(*mcp.ProgressNotificationParams)) {
	p.pmu.Lock()
	defer p.pmu.Unlock()
	p.progress[token] = pass
}

func (p *Proxy) unfollow(token string) {
	p.pmu.Lock()
	defer p.pmu.Unlock()
	delete(p.progress, token)
}

// progressed passes a progress notification of the daemon on to the
// client whose call it is about; one about no call under way (it came
// after the result) is dropped. It passes it on under pmu, so none is
// passed on once unfollow returned, and so after the call's result.
func (p *Proxy) progressed(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
	token, _ := req.Params.ProgressToken.(string)
	p.pmu.Lock()
	defer p.pmu.Unlock()
	if pass := p.progress[token]; pass != nil {
		pass(req.Params)
	}
}
