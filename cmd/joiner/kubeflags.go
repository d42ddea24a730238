package main

import (
	"fmt"

	"github.com/spf13/cobra"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// kubeFlags are kubectl's connection flags (--kubeconfig, --context,
// -n/--namespace, --server, --token, --cluster, --user, ...) for the commands
// that talk to a cluster from a workstation: one road from flags to a
// rest.Config, resolved the way kubectl resolves them (flags, then
// $KUBECONFIG, then ~/.kube/config, then the in-cluster config).
type kubeFlags struct {
	rules     *clientcmd.ClientConfigLoadingRules
	overrides *clientcmd.ConfigOverrides
	fallback  string
}

// addKubeFlags registers kubectl's connection flags on cmd. namespace is the
// namespace used when neither -n nor the kubeconfig context names one.
func addKubeFlags(cmd *cobra.Command, namespace string) *kubeFlags {
	k := &kubeFlags{rules: clientcmd.NewDefaultClientConfigLoadingRules(), overrides: &clientcmd.ConfigOverrides{}, fallback: namespace}
	fl := cmd.Flags()
	fl.StringVar(&k.rules.ExplicitPath, clientcmd.RecommendedConfigPathFlag, "", "path to the kubeconfig file (default: $KUBECONFIG, then ~/.kube/config, then in-cluster)")
	clientcmd.BindOverrideFlags(k.overrides, fl, clientcmd.RecommendedConfigOverrideFlags(""))
	registerKubeCompletions(cmd, k)
	return k
}

func (k *kubeFlags) loader() clientcmd.ClientConfig {
	return clientcmd.NewNonInteractiveDeferredLoadingClientConfig(k.rules, k.overrides)
}

// restConfig resolves the flags into a client config.
func (k *kubeFlags) restConfig() (*rest.Config, error) {
	c, err := k.loader().ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("kubeconfig: %w", err)
	}
	return c, nil
}

// clientset is a typed client for the resolved cluster.
func (k *kubeFlags) clientset() (kubernetes.Interface, error) {
	c, err := k.restConfig()
	if err != nil {
		return nil, err
	}
	cs, err := kubernetes.NewForConfig(c)
	if err != nil {
		return nil, fmt.Errorf("kubernetes client: %w", err)
	}
	return cs, nil
}

// namespace is -n, else the kubeconfig context's namespace, else the
// command's default.
func (k *kubeFlags) namespace() (string, error) {
	if ns := k.namespaceGiven(); ns != "" {
		return ns, nil
	}
	if k.fallback != "" {
		return k.fallback, nil
	}
	return "default", nil
}

// namespaceGiven is -n, else the kubeconfig context's namespace; "" when
// neither names one (a command may then look in every namespace).
func (k *kubeFlags) namespaceGiven() string {
	if k.overrides.Context.Namespace != "" {
		return k.overrides.Context.Namespace
	}
	raw, err := k.loader().RawConfig()
	if err == nil {
		name := raw.CurrentContext
		if k.overrides.CurrentContext != "" {
			name = k.overrides.CurrentContext
		}
		if c, ok := raw.Contexts[name]; ok && c.Namespace != "" {
			return c.Namespace
		}
	}
	return ""
}
