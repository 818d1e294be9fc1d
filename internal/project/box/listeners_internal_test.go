package box

import (
	"net"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParseProcNetTCP(t *testing.T) {
	v4 := `  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 0100007F:1E61 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 1 1 0000000000000000 100 0 0 10 0
   1: 010011AC:0050 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 2 1 0000000000000000 100 0 0 10 0
   2: 0100007F:1E61 0100007F:D2F0 01 00000000:00000000 00:00000000 00000000     0        0 3 1 0000000000000000 100 0 0 10 0
`
	v6 := `  sl  local_address                         remote_address                        st
   0: 00000000000000000000000001000000:1F90 00000000000000000000000000000000:0000 0A
   1: 00000000000000000000000000000000:0016 00000000000000000000000000000000:0000 0A
`
	var got []string
	for _, in := range []string{v4, v6} {
		ls, err := parseProcNetTCP(strings.NewReader(in))
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range ls {
			got = append(got, net.JoinHostPort(l.Addr.String(), strconv.Itoa(l.Port)))
		}
	}
	want := []string{"127.0.0.1:7777", "172.17.0.1:80", "[::1]:8080", "[::]:22"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("listeners (-want +got):\n%s", diff)
	}
}

func TestHostListenersSeesALiveSocket(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = l.Close() }()
	port := l.Addr().(*net.TCPAddr).Port
	ls, err := HostListeners()
	if err != nil {
		t.Fatal(err)
	}
	for _, x := range ls {
		if x.Port == port && x.Addr.String() == "127.0.0.1" {
			return
		}
	}
	t.Errorf("HostListeners did not list 127.0.0.1:%d", port)
}
