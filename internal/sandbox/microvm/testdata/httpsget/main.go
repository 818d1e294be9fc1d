// Command httpsget is the guest's HTTPS client in the microVM egress
// tests: busybox's wget hands an https:// URL to a proxy as a plain
// request instead of a CONNECT. It GETs its argument with the header
// "Authorization: Bearer $API_TOKEN", through HTTPS_PROXY, trusting the
// roots of SSL_CERT_FILE, and prints the status and the body; it exits 2
// when no response came.
package main

import (
	"fmt"
	"io"
	"net/http"
	"os"
)

func main() {
	req, err := http.NewRequest(http.MethodGet, os.Args[1], nil)
	if err != nil {
		fmt.Println("error:", err)
		os.Exit(2)
	}
	req.Header.Set("Authorization", "Bearer "+os.Getenv("API_TOKEN"))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		fmt.Println("error:", err)
		os.Exit(2)
	}
	defer func() { _ = resp.Body.Close() }()
	fmt.Println(resp.Status)
	_, _ = io.Copy(os.Stdout, resp.Body)
}
