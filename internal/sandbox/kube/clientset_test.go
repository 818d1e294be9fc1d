package kube

import (
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// clientsetAPI serves API from a clientset: client-go's fake one, for
// the tests that script the API server's answers.
type clientsetAPI struct{ cs kubernetes.Interface }

func (c clientsetAPI) Pods(ns string) PodAPI       { return c.cs.CoreV1().Pods(ns) }
func (c clientsetAPI) Secrets(ns string) SecretAPI { return c.cs.CoreV1().Secrets(ns) }
func (c clientsetAPI) Namespaces() NamespaceAPI    { return c.cs.CoreV1().Namespaces() }
func (c clientsetAPI) CoreREST() rest.Interface    { return c.cs.CoreV1().RESTClient() }
func (c clientsetAPI) NetworkPolicies(ns string) NetworkPolicyAPI {
	return c.cs.NetworkingV1().NetworkPolicies(ns)
}
