// Command pause is the pause container of hack/kube-up's test cluster:
// it holds a pod's namespaces, sleeping until SIGTERM or SIGINT, which
// it handles itself because as pid 1 it would otherwise ignore them.
// Built static by hack/kube-up (no registry serves the usual image here).
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	<-sig
}
