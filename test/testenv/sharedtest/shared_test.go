package sharedtest

import (
	"os"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/joiner-dev/joiner/test/testenv"
)

var shared testenv.Shared

func TestMain(m *testing.M) {
	testenv.Main(m, &shared, testenv.Options{
		CRDs:              true,
		ControllerManager: true,
		Controllers:       []string{"*", "-node-lifecycle-controller"},
	})
}

func TestSharedEnvServesCRDs(t *testing.T) {
	env := shared.Env(t)
	if _, err := env.Dynamic().Resource(testenv.CRDResource).Get(t.Context(), "nodepools.karpenter.sh", metav1.GetOptions{}); err != nil {
		t.Fatalf("NodePool CRD: %v", err)
	}
}

// The kubeconfig file is what child processes (a coordinator) get.
func TestSharedEnvKubeconfig(t *testing.T) {
	env := shared.Env(t)
	if _, err := os.Stat(env.Kubeconfig); err != nil {
		t.Fatal(err)
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", env.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Host != env.Config.Host {
		t.Errorf("kubeconfig host %q, want %q", cfg.Host, env.Config.Host)
	}
	if _, err := env.Client.CoreV1().Namespaces().Get(t.Context(), "default", metav1.GetOptions{}); err != nil {
		t.Errorf("default namespace: %v", err)
	}
}
