package client_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"strings"

	"github.com/hutchsandbox/hutch/client"
)

// The examples below run against a real API handler in host mode
// (tcpDaemon: what hutch serve --listen 127.0.0.1:7878 serves), so their
// output is checked by go test.

// This is the README's example: a command in a conversation's sandbox,
// through the daemon of ~/.hutch. It needs a running hutch serve, so go
// test compiles it without running it; TestReadme_ShowsTheExample keeps
// the README's copy the same.
func ExampleLocal() {
	ctx := context.Background()
	// README begin
	c := client.Local("") // the daemon of $HUTCH_STATE_DIR or ~/.hutch
	conv := client.Conversation{Platform: "slack", ConversationID: "C0123ABC"}
	req := client.ExecRequest{Conversation: conv, Command: "uname -a"}
	res, err := c.Exec(ctx, req, nil, os.Stdout, os.Stderr) // output streams as it comes
	fmt.Println(res.ExitCode, err)
	// README end
}

// Connect to a daemon over TCP with its token, and run a command whose
// output streams to this process's standard output.
func ExampleRemote() {
	c, stop, err := tcpDaemon("the-token") // hutch serve --listen 127.0.0.1:7878
	if err != nil {
		log.Fatal(err)
	}
	defer stop()
	ctx := context.Background()

	conv := client.Conversation{Platform: "web", ConversationID: "example"}
	// Host mode cannot isolate an office: open the door to the shared
	// workspace first, or its commands are refused.
	if _, err := c.SetDoor(ctx, conv, "shared"); err != nil {
		log.Fatal(err)
	}
	res, err := c.Exec(ctx, client.ExecRequest{Conversation: conv, Command: "echo hello; exit 3"}, nil, os.Stdout, os.Stderr)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("exit code", res.ExitCode)
	// Output:
	// hello
	// exit code 3
}

// Feed a command its standard input, and keep its streams apart.
func ExampleClient_Exec() {
	c, stop, err := tcpDaemon("t")
	if err != nil {
		log.Fatal(err)
	}
	defer stop()
	ctx := context.Background()
	conv := client.Conversation{Platform: "web", ConversationID: "exec"}
	if _, err := c.SetDoor(ctx, conv, "shared"); err != nil {
		log.Fatal(err)
	}

	var stdout, stderr bytes.Buffer
	req := client.ExecRequest{Conversation: conv, Command: "tr a-z A-Z; echo done >&2", TimeoutSeconds: 10}
	res, err := c.Exec(ctx, req, strings.NewReader("quiet please\n"), &stdout, &stderr)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("stdout %q, stderr %q, exit code %d, timed out %v\n", stdout.String(), stderr.String(), res.ExitCode, res.TimedOut)
	// Output:
	// stdout "QUIET PLEASE\n", stderr "done\n", exit code 0, timed out false
}

// Write a file into a conversation's office, describe it, list its
// directory and read it back: bytes, unchanged.
func ExampleClient_WriteFile() {
	c, stop, err := tcpDaemon("t")
	if err != nil {
		log.Fatal(err)
	}
	defer stop()
	ctx := context.Background()
	conv := client.Conversation{Platform: "web", ConversationID: "files"}
	if _, err := c.SetDoor(ctx, conv, "shared"); err != nil {
		log.Fatal(err)
	}

	// Relative paths are in the conversation's office.
	if _, err := c.WriteFile(ctx, conv, "notes/todo.txt", strings.NewReader("ship it\n"), 0o644); err != nil {
		log.Fatal(err)
	}
	fi, err := c.StatFile(ctx, conv, "notes/todo.txt")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(fi.Name, fi.Size, fi.Mode)
	list, err := c.ListFiles(ctx, conv, "notes")
	if err != nil {
		log.Fatal(err)
	}
	for _, e := range list {
		fmt.Println("listed:", e.Name)
	}
	if err := c.ReadFile(ctx, conv, "notes/todo.txt", os.Stdout); err != nil {
		log.Fatal(err)
	}
	// Output:
	// todo.txt 8 -rw-r--r--
	// listed: todo.txt
	// ship it
}

// Read and set the door policy: what of the workspace a conversation's
// runtime sees.
func ExampleClient_SetDoor() {
	c, stop, err := tcpDaemon("t")
	if err != nil {
		log.Fatal(err)
	}
	defer stop()
	ctx := context.Background()
	conv := client.Conversation{Platform: "web", ConversationID: "door"}

	p, err := c.Policy(ctx, conv)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%s (%s)\n%s\n", p.Policy, p.Origin, p.Refusal)
	p, err = c.SetDoor(ctx, conv, "shared")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%s (%s), %d mounts\n", p.Policy, p.Origin, len(p.Mounts))
	// Output:
	// isolated / conversation / public (no channel kind recorded)
	// Sandbox 'host' cannot provide an isolated conversation office; use image:*, or explicitly choose trusted workspace policy
	// trusted / shared-support / public (conversation setting), 4 mounts
}

// Keep credentials in a conversation's vault: values go in, names come
// back.
func ExampleClient_VaultSet() {
	c, stop, err := tcpDaemon("t")
	if err != nil {
		log.Fatal(err)
	}
	defer stop()
	ctx := context.Background()
	conv := client.Conversation{Platform: "web", ConversationID: "vault"}
	v := client.VaultRequest{Conversation: &conv}

	if _, err := c.VaultSet(ctx, v, map[string]string{"GITHUB_TOKEN": "ghp_example", "NPM_TOKEN": "npm_example"}); err != nil {
		log.Fatal(err)
	}
	if _, err := c.VaultRemove(ctx, v, "NPM_TOKEN"); err != nil {
		log.Fatal(err)
	}
	entries, err := c.VaultList(ctx, v)
	if err != nil {
		log.Fatal(err)
	}
	for _, e := range entries {
		fmt.Println(e.Kind, e.Name)
	}
	// Output:
	// env GITHUB_TOKEN
}

// A runtime's status, in a managed mode (image, gondolin, kube); host
// mode has none, and says so with an error of its own code.
func ExampleClient_SandboxStatus() {
	c, stop, err := tcpDaemon("t")
	if err != nil {
		log.Fatal(err)
	}
	defer stop()
	ctx := context.Background()
	conv := client.Conversation{Platform: "web", ConversationID: "status"}

	st, err := c.SandboxStatus(ctx, conv)
	var ce *client.Error
	switch {
	case errors.As(err, &ce):
		fmt.Println(ce.StatusCode, ce.Code)
	case err != nil:
		log.Fatal(err)
	default:
		fmt.Println(st.Name, st.State, st.CPUs, st.MemoryBytes)
	}
	// Output:
	// 501 not_supported
}

// Errors the daemon answers carry the API's code and HTTP status.
func ExampleError() {
	c, stop, err := tcpDaemon("the-token")
	if err != nil {
		log.Fatal(err)
	}
	defer stop()

	_, err = client.Remote(c.BaseURL, "a-wrong-token").Health(context.Background())
	var ce *client.Error
	if errors.As(err, &ce) {
		fmt.Printf("%d %s: %s\n", ce.StatusCode, ce.Code, ce.Message)
	}
	// Output:
	// 401 unauthorized: Missing or wrong bearer token
}
