package kube

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"

	"github.com/hutchsandbox/hutch/internal/errdefs"
)

// Cluster is a connection to one cluster's API server.
type Cluster struct {
	// Config is the REST config (exec streams are made from it).
	Config *rest.Config
	// Client makes the API calls.
	Client API
	// Namespace is where hutch's pods go.
	Namespace string
	// Source says where the credentials came from, for messages.
	Source string
}

// quietKlog silences client-go's own logging (klog, to stderr), once per
// process: it reports as errors what is routine here (an exec stream
// closed by hutch when a connection ends), and hutch reports every
// failure itself, through its own log, with what to do about it.
var quietKlog sync.Once

// inClusterNamespace is the service account's namespace file of a pod.
const inClusterNamespace = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"

// Connect finds the cluster: the kubeconfig file given, else the
// in-cluster service account (hutch running as a pod), else KUBECONFIG,
// else ~/.kube/config (client-go's loading rules). The namespace is the
// one given, else the service account's or the kubeconfig context's,
// else "default".
func Connect(kubeconfig, namespace string) (*Cluster, error) {
	quietKlog.Do(func() { klog.SetLogger(logr.Discard()) })
	var (
		cfg    *rest.Config
		ns     string
		source string
		err    error
	)
	if kubeconfig == "" {
		if cfg, err = rest.InClusterConfig(); err == nil {
			source = "in-cluster service account"
			if data, rerr := os.ReadFile(inClusterNamespace); rerr == nil {
				ns = strings.TrimSpace(string(data))
			}
		} else if !errors.Is(err, rest.ErrNotInCluster) {
			return nil, errdefs.New(errdefs.ErrUnavailable, "kube mode: in-cluster config: "+err.Error())
		}
	}
	if cfg == nil {
		rules := clientcmd.NewDefaultClientConfigLoadingRules()
		if kubeconfig != "" {
			rules.ExplicitPath = kubeconfig
		}
		cc := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{})
		cfg, err = cc.ClientConfig()
		if err != nil {
			where := kubeconfig
			if where == "" {
				where = "KUBECONFIG or ~/.kube/config"
			}
			return nil, errdefs.New(errdefs.ErrUnavailable, fmt.Sprintf(
				"kube mode finds no cluster: not running in one, and %s gives no usable config (%s). Set sandbox.kube.kubeconfig or KUBECONFIG.", where, firstLine(err)))
		}
		ns, _, _ = cc.Namespace()
		source = "kubeconfig " + strings.Join(rules.Precedence, ":")
		if kubeconfig != "" {
			source = "kubeconfig " + kubeconfig
		}
	}
	if namespace != "" {
		ns = namespace
	}
	if ns == "" {
		ns = "default"
	}
	// Exec streams and watches hold connections for long; the defaults
	// (5 QPS) would throttle a busy daemon's Gets.
	cfg.QPS, cfg.Burst = 50, 100
	cfg.UserAgent = "hutch"
	cs, err := newAPI(cfg)
	if err != nil {
		return nil, errdefs.New(errdefs.ErrInvalid, "kube mode: "+err.Error())
	}
	return &Cluster{Config: cfg, Client: cs, Namespace: ns, Source: source}, nil
}

// Ping checks that the API server answers and the namespace exists.
func (c *Cluster) Ping(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	// Discovery's ServerVersion takes no context: ask for /version
	// directly, so an API server that never answers cannot hang a start.
	if err := c.Client.CoreREST().Get().AbsPath("/version").Do(ctx).Error(); err != nil {
		return errdefs.New(errdefs.ErrUnavailable, fmt.Sprintf("The Kubernetes API server at %s does not answer (%s): %s", c.Config.Host, c.Source, firstLine(err)))
	}
	if _, err := c.Client.Namespaces().Get(ctx, c.Namespace, getOpts); err != nil {
		return classify(err, "namespace "+c.Namespace)
	}
	return nil
}

func firstLine(err error) string {
	if err == nil {
		return ""
	}
	s := err.Error()
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	return s
}
