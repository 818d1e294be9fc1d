package kube

import (
	"context"
	"errors"
	"os"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/hutchsandbox/hutch/internal/errdefs"
)

// Check tells whether the mode can work before a daemon serves it: the
// API server answers, the namespace exists, and an image is given.
func (r *Runtime) Check(ctx context.Context) error {
	if r.cfg.Image == "" {
		return errdefs.New(errdefs.ErrInvalid, "kube mode needs an image: --sandbox kube:<image>")
	}
	return r.cluster.Ping(ctx)
}

// Configured reports whether Connect has a cluster to look for: the
// kubeconfig given, an in-cluster service account, or a file KUBECONFIG
// or ~/.kube/config names. When it is false, kube mode is simply not set
// up here, rather than broken.
func Configured(kubeconfig string) bool {
	if kubeconfig != "" {
		return true
	}
	if _, err := rest.InClusterConfig(); !errors.Is(err, rest.ErrNotInCluster) {
		return true
	}
	for _, p := range clientcmd.NewDefaultClientConfigLoadingRules().GetLoadingPrecedence() {
		if _, err := os.Stat(p); err == nil {
			return true
		}
	}
	return false
}

// WithTimeout returns the cluster with a client whose every request ends
// after d, for callers that must not wait long on an API server that does
// not answer (hutch doctor).
func (c *Cluster) WithTimeout(d time.Duration) (*Cluster, error) {
	cfg := rest.CopyConfig(c.Config)
	cfg.Timeout = d
	cs, err := newAPI(cfg)
	if err != nil {
		return nil, errdefs.New(errdefs.ErrInvalid, "kube mode: "+err.Error())
	}
	out := *c
	out.Config, out.Client = cfg, cs
	return &out, nil
}
