package crds

import (
	"os"
	"testing"

	"github.com/joiner-dev/joiner/test/testenv"
)

// apiserver is one kube-apiserver (with etcd) for the package, serving the
// CRDs of this folder; the tests that need it skip without the binaries
// (`make tools`) or under -short.
var apiserver testenv.Shared

// KarpenterCRDsEnv names an environment variable: when it holds a folder
// (e.g. Karpenter v1.14.1's pkg/apis/crds), the API server serves those CRDs
// instead of Joiner's, so the ported Karpenter suites check their expected
// verdicts against Karpenter's own CRDs (the Go validation is still checked
// against the same expectations).
const KarpenterCRDsEnv = "JOINER_KARPENTER_CRDS"

func TestMain(m *testing.M) {
	testenv.Main(m, &apiserver, testenv.Options{CRDs: true, CRDDir: os.Getenv(KarpenterCRDsEnv)})
}
