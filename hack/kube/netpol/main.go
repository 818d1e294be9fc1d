//go:build ignore

// Command netpol enforces NetworkPolicy in hack/kube-up's test cluster:
// sigs.k8s.io/kube-network-policies's controller, run as a host process.
// That project's own command reads only a pod's in-cluster config (a
// service account token at a fixed path); this one reads the kubeconfig
// -kubeconfig names. The controller queues the first packet of each
// connection to or from a pod some policy selects (nftables, table inet
// kube-network-policies, postrouting) and decides it in user space.
//
// Built by hack/kube-up in a module of its own (the build tag keeps it
// out of hutch's); it ends on SIGTERM or SIGINT, deleting its table.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"
	"sigs.k8s.io/kube-network-policies/pkg/networkpolicy"
)

func main() {
	kubeconfig := flag.String("kubeconfig", "", "the cluster's kubeconfig")
	node := flag.String("hostname-override", "", "the node's name (default: the host name)")
	klog.InitFlags(nil)
	flag.Parse()
	if err := run(*kubeconfig, *node); err != nil {
		fmt.Fprintln(os.Stderr, "netpol:", err)
		os.Exit(1)
	}
}

func run(kubeconfig, node string) error {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return err
	}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	inf := informers.NewSharedInformerFactory(client, 0)
	// As the project's command: fail closed (a packet queued while the
	// controller is down is dropped), and DNS decided after DNAT.
	c, err := networkpolicy.NewController(client,
		inf.Networking().V1().NetworkPolicies(), inf.Core().V1().Namespaces(), inf.Core().V1().Pods(),
		nil, nil, nil, nil,
		networkpolicy.Config{NodeName: node, NetfilterBug1766Fix: true})
	if err != nil {
		return err
	}
	inf.Start(ctx.Done())
	// Run returns when ctx ends, having deleted its nftables table.
	return c.Run(ctx)
}
