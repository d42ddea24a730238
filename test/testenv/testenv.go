// Package testenv runs a real Kubernetes control plane for integration tests:
// etcd and kube-apiserver on free loopback ports, optionally
// kube-controller-manager and kube-scheduler, with Joiner's CRDs installed.
// It also runs amazon-ec2-metadata-mock (AEMM) as a fake IMDS (see StartIMDS).
//
// The binaries are built by `make tools` into bin/ (JOINER_TOOLS_BIN, or the
// bin/ folder next to the repository's go.mod). When they are missing, or the
// tests run with -short, tests that need them are skipped with a message.
//
// One test:
//
//	env := testenv.Start(t, testenv.Options{CRDs: true, ControllerManager: true})
//	env.Client.CoreV1().Pods("default").List(ctx, metav1.ListOptions{})
//
// One control plane for a whole package:
//
//	var shared testenv.Shared
//	func TestMain(m *testing.M) { testenv.Main(m, &shared, testenv.Options{CRDs: true}) }
//	func TestX(t *testing.T)    { env := shared.Env(t); ... }
//
// Every process runs in its own process group and is killed with its group
// when the environment stops (t.Cleanup, or the end of Main). Process logs go
// to files in the environment's directory; the end of each is printed when a
// test fails.
package testenv

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// Binary names in the tools folder.
const (
	EtcdBin              = "etcd"
	APIServerBin         = "kube-apiserver"
	ControllerManagerBin = "kube-controller-manager"
	SchedulerBin         = "kube-scheduler"
	IMDSBin              = "ec2-metadata-mock"
)

// startTimeout bounds how long the control plane may take to become ready.
const startTimeout = 3 * time.Minute

// Options selects what a control plane runs.
type Options struct {
	// ControllerManager runs kube-controller-manager (ReplicaSets, PDB status,
	// garbage collection, node lifecycle...).
	ControllerManager bool
	// Controllers is kube-controller-manager's --controllers list; empty means
	// its defaults ("*"). The node lifecycle controller marks fake Nodes whose
	// Ready heartbeat is not renewed NotReady (and taints them unreachable)
	// after about 50 s; []string{"*", "-node-lifecycle-controller"} turns it off.
	Controllers []string
	// Scheduler runs kube-scheduler so pods bind to (possibly fake) Nodes.
	Scheduler bool
	// CRDs installs every CRD in CRDDir and waits until they are established.
	CRDs bool
	// CRDDir defaults to packaging/crds in the repository.
	CRDDir string
	// APIServerArgs are extra kube-apiserver flags (--name=value).
	APIServerArgs []string
}

// NodeAuthorization are the kube-apiserver flags of an EKS cluster's
// authorization (Node,RBAC with NodeRestriction), for security tests:
// Options{APIServerArgs: NodeAuthorization}.
var NodeAuthorization = []string{"--authorization-mode=Node,RBAC", "--enable-admission-plugins=NodeRestriction"}

// Env is a running control plane.
type Env struct {
	// Config reaches the API server as cluster admin.
	Config *rest.Config
	// Client is a clientset for Config.
	Client kubernetes.Interface
	// Kubeconfig is a kubeconfig file for Config, for child processes.
	Kubeconfig string
	// Dir holds data, keys and process logs.
	Dir string

	procs    []*process
	stopOnce sync.Once
}

// Dynamic returns a dynamic client for Config.
func (e *Env) Dynamic() dynamic.Interface {
	return dynamic.NewForConfigOrDie(e.Config)
}

// PIDs returns the process ids of the control plane's processes.
func (e *Env) PIDs() []int {
	pids := make([]int, 0, len(e.procs))
	for _, p := range e.procs {
		pids = append(pids, p.pid())
	}
	return pids
}

// Stop kills every process with its process group and waits for them; it is
// idempotent and also runs in t.Cleanup.
func (e *Env) Stop() {
	e.stopOnce.Do(func() {
		for i := len(e.procs) - 1; i >= 0; i-- {
			e.procs[i].stop()
		}
	})
}

// Logs returns the end (last n lines) of every process log.
func (e *Env) Logs(n int) string {
	var b strings.Builder
	for _, p := range e.procs {
		fmt.Fprintf(&b, "==== %s (pid %d) %s ====\n%s\n", p.name, p.pid(), p.logPath, p.logTail(n))
	}
	return b.String()
}

// StopWhenDone calls stop when the test ends; if it failed, it first logs
// title and the last 60 lines of logs.
func StopWhenDone(t testing.TB, title string, logs func(lines int) string, stop func()) {
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("%s\n%s", title, logs(60))
		}
		stop()
	})
}

// Start runs a control plane for one test and stops it in t.Cleanup. It skips
// the test under -short or when the binaries are missing.
func Start(t testing.TB, opts Options) *Env {
	t.Helper()
	if reason := unavailable(opts); reason != "" {
		t.Skip(reason)
	}
	env, err := start(context.Background(), t.TempDir(), opts)
	if env != nil {
		StopWhenDone(t, "testenv: process logs (tail)", env.Logs, env.Stop)
	}
	if err != nil {
		t.Fatalf("testenv: %v", err)
	}
	return env
}

// Shared is a control plane for all tests of a package, started by Main.
type Shared struct {
	env    *Env
	reason string // why env is nil
}

// Env returns the shared control plane, or skips the test with the reason it
// is not running.
func (s *Shared) Env(t testing.TB) *Env {
	t.Helper()
	if s.env == nil {
		t.Skip(s.reason)
	}
	return s.env
}

// Main starts one control plane for the package, runs its tests, stops the
// control plane and exits. Call it from TestMain. Under -short or without
// binaries the tests still run, and Shared.Env skips those that need it.
func Main(m *testing.M, s *Shared, opts Options) {
	os.Exit(run(m, s, opts))
}

func run(m *testing.M, s *Shared, opts Options) int {
	if !flag.Parsed() {
		flag.Parse()
	}
	if s.reason = unavailable(opts); s.reason != "" {
		return m.Run()
	}
	dir, err := os.MkdirTemp("", "joiner-testenv-")
	if err != nil {
		fmt.Fprintf(os.Stderr, "testenv: %v\n", err)
		return 1
	}
	defer os.RemoveAll(dir)
	env, err := start(context.Background(), dir, opts)
	if env != nil {
		defer env.Stop()
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "testenv: %v\n", err)
		return 1
	}
	s.env = env
	code := m.Run()
	if code != 0 {
		fmt.Fprintf(os.Stderr, "testenv: process logs (tail)\n%s", env.Logs(60))
	}
	return code
}

// ToolsBin is the folder holding the tool binaries: $JOINER_TOOLS_BIN, else
// bin/ beside the go.mod found by walking up from the working directory.
func ToolsBin() string {
	if d := os.Getenv("JOINER_TOOLS_BIN"); d != "" {
		return d
	}
	if root := RepoRoot(); root != "" {
		return filepath.Join(root, "bin")
	}
	return "bin"
}

// RepoRoot is the nearest folder upwards from the working directory whose
// go.mod is Joiner's, or "".
func RepoRoot() string {
	dir, err := os.Getwd()
	if err != nil {
		return ""
	}
	for {
		if data, err := os.ReadFile(filepath.Join(dir, "go.mod")); err == nil &&
			strings.Contains(string(data), "module github.com/joiner-dev/joiner\n") {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return ""
		}
		dir = parent
	}
}

// toolPath returns the path of a tool binary, or an error saying how to get it.
func toolPath(name string) (string, error) {
	p := filepath.Join(ToolsBin(), name)
	if st, err := os.Stat(p); err != nil || st.IsDir() || st.Mode()&0o111 == 0 {
		return "", fmt.Errorf("testenv: %s not found in %s: run `make tools` to build it", name, ToolsBin())
	}
	return p, nil
}

// unavailable says why a control plane with opts cannot run here, or "".
func unavailable(opts Options) string {
	if testing.Short() {
		return "testenv: real control plane skipped under -short"
	}
	return missingTools(opts)
}

// missingTools says which binary opts needs is missing, or "".
func missingTools(opts Options) string {
	names := []string{EtcdBin, APIServerBin}
	if opts.ControllerManager {
		names = append(names, ControllerManagerBin)
	}
	if opts.Scheduler {
		names = append(names, SchedulerBin)
	}
	for _, n := range names {
		if _, err := toolPath(n); err != nil {
			return err.Error()
		}
	}
	return ""
}

// start runs the control plane in dir. On error the returned Env (if not
// nil) holds the processes already started, for the caller to stop.
func start(ctx context.Context, dir string, opts Options) (*Env, error) {
	ctx, cancel := context.WithTimeout(ctx, startTimeout)
	defer cancel()
	for attempt := 1; ; attempt++ {
		d := dir
		if attempt > 1 {
			d = filepath.Join(dir, "retry"+strconv.Itoa(attempt))
			if err := os.MkdirAll(d, 0o755); err != nil {
				return nil, err
			}
		}
		env := &Env{Dir: d}
		err := env.launch(ctx, opts)
		// A free port can be taken between probing and binding: start afresh.
		if err != nil && attempt < 3 && strings.Contains(err.Error(), "address already in use") {
			env.Stop()
			continue
		}
		if err != nil && len(env.procs) == 0 {
			return nil, err
		}
		return env, err
	}
}

func (e *Env) launch(ctx context.Context, opts Options) error {
	token, err := randomHex(16)
	if err != nil {
		return err
	}
	if err := e.writeKeys(token); err != nil {
		return err
	}

	etcdPort, err := freePort()
	if err != nil {
		return err
	}
	peerPort, err := freePort()
	if err != nil {
		return err
	}
	etcdURL := "http://127.0.0.1:" + strconv.Itoa(etcdPort)
	peerURL := "http://127.0.0.1:" + strconv.Itoa(peerPort)
	etcd, err := e.run(EtcdBin, []string{
		"--name=testenv",
		"--data-dir=" + filepath.Join(e.Dir, "etcd"),
		"--listen-client-urls=" + etcdURL,
		"--advertise-client-urls=" + etcdURL,
		"--listen-peer-urls=" + peerURL,
		"--initial-advertise-peer-urls=" + peerURL,
		"--initial-cluster=testenv=" + peerURL,
		"--unsafe-no-fsync",
		"--log-level=warn",
	})
	if err != nil {
		return err
	}
	if err := waitHTTP(ctx, etcd, plainClient(), etcdURL+"/health", ""); err != nil {
		return fmt.Errorf("waiting for etcd: %w", err)
	}

	apiPort, err := freePort()
	if err != nil {
		return err
	}
	apiArgs := []string{
		"--etcd-servers=" + etcdURL,
		"--bind-address=127.0.0.1",
		"--advertise-address=127.0.0.1",
		"--secure-port=" + strconv.Itoa(apiPort),
		"--endpoint-reconciler-type=none",
		"--cert-dir=" + filepath.Join(e.Dir, "certs"),
		"--service-account-key-file=" + filepath.Join(e.Dir, "sa.pub"),
		"--service-account-signing-key-file=" + filepath.Join(e.Dir, "sa.key"),
		"--service-account-issuer=https://kubernetes.default.svc",
		"--token-auth-file=" + filepath.Join(e.Dir, "tokens.csv"),
		"--authorization-mode=RBAC",
		"--service-cluster-ip-range=10.96.0.0/16",
		"--allow-privileged=true",
		// No kubelet runs, so pods need no service account token; without
		// this, pods in a fresh namespace race the "default" ServiceAccount.
		"--disable-admission-plugins=ServiceAccount",
		"--profiling=false",
	}
	// An --authorization-mode in APIServerArgs replaces ours (the flag is
	// a list, and a mode listed twice is an error); other flags add up.
	for _, a := range opts.APIServerArgs {
		if strings.HasPrefix(a, "--authorization-mode=") {
			apiArgs = slices.DeleteFunc(apiArgs, func(s string) bool { return strings.HasPrefix(s, "--authorization-mode=") })
		}
	}
	api, err := e.run(APIServerBin, append(apiArgs, opts.APIServerArgs...))
	if err != nil {
		return err
	}
	host := "https://127.0.0.1:" + strconv.Itoa(apiPort)
	if err := waitHTTP(ctx, api, insecureClient(), host+"/readyz", token); err != nil {
		return fmt.Errorf("waiting for kube-apiserver: %w", err)
	}

	e.Config = &rest.Config{
		Host:            host,
		BearerToken:     token,
		TLSClientConfig: rest.TLSClientConfig{CAFile: filepath.Join(e.Dir, "certs", "apiserver.crt")},
		QPS:             200,
		Burst:           400,
	}
	if e.Client, err = kubernetes.NewForConfig(e.Config); err != nil {
		return fmt.Errorf("clientset: %w", err)
	}
	e.Kubeconfig = filepath.Join(e.Dir, "kubeconfig")
	if err := writeKubeconfig(e.Kubeconfig, e.Config); err != nil {
		return err
	}
	// The serving certificate must verify against the CA file: prove it once.
	if _, err := e.Client.Discovery().ServerVersion(); err != nil {
		return fmt.Errorf("talking to kube-apiserver with its CA: %w", err)
	}

	if opts.ControllerManager {
		args := []string{
			"--kubeconfig=" + e.Kubeconfig,
			"--authentication-kubeconfig=" + e.Kubeconfig,
			"--authorization-kubeconfig=" + e.Kubeconfig,
			"--bind-address=127.0.0.1",
			"--secure-port=0",
			"--service-account-private-key-file=" + filepath.Join(e.Dir, "sa.key"),
			"--leader-elect=true",
		}
		if len(opts.Controllers) > 0 {
			args = append(args, "--controllers="+strings.Join(opts.Controllers, ","))
		}
		cm, err := e.run(ControllerManagerBin, args)
		if err != nil {
			return err
		}
		if err := e.waitLease(ctx, cm, "kube-controller-manager"); err != nil {
			return err
		}
	}
	if opts.Scheduler {
		sched, err := e.run(SchedulerBin, []string{
			"--kubeconfig=" + e.Kubeconfig,
			"--authentication-kubeconfig=" + e.Kubeconfig,
			"--authorization-kubeconfig=" + e.Kubeconfig,
			"--bind-address=127.0.0.1",
			"--secure-port=0",
			"--leader-elect=true",
		})
		if err != nil {
			return err
		}
		if err := e.waitLease(ctx, sched, "kube-scheduler"); err != nil {
			return err
		}
	}
	if opts.CRDs {
		crdDir := opts.CRDDir
		if crdDir == "" {
			crdDir = filepath.Join(RepoRoot(), "packaging", "crds")
		}
		if _, err := InstallCRDs(ctx, e.Dynamic(), crdDir); err != nil {
			return err
		}
	}
	return nil
}

// run starts a tool binary and records it for Stop.
func (e *Env) run(name string, args []string) (*process, error) {
	bin, err := toolPath(name)
	if err != nil {
		return nil, err
	}
	p, err := startProcess(e.Dir, name, bin, args, nil)
	if err != nil {
		return nil, err
	}
	e.procs = append(e.procs, p)
	return p, nil
}

// writeKeys writes the service-account key pair and the admin token file.
func (e *Env) writeKeys(token string) error {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return fmt.Errorf("service-account key: %w", err)
	}
	pub, err := x509.MarshalPKIXPublicKey(&key.PublicKey)
	if err != nil {
		return fmt.Errorf("service-account public key: %w", err)
	}
	files := map[string][]byte{
		"sa.key":     pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)}),
		"sa.pub":     pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pub}),
		"tokens.csv": []byte(token + ",admin,admin,system:masters\n"),
	}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(e.Dir, name), data, 0o600); err != nil {
			return fmt.Errorf("writing %s: %w", name, err)
		}
	}
	return nil
}

// waitLease waits until the component holds its leader-election lease in
// kube-system: then its controllers are running.
func (e *Env) waitLease(ctx context.Context, p *process, name string) error {
	for {
		l, err := e.Client.CoordinationV1().Leases("kube-system").Get(ctx, name, metav1.GetOptions{})
		if err == nil && l.Spec.HolderIdentity != nil && *l.Spec.HolderIdentity != "" {
			return nil
		}
		if err := pause(ctx, p); err != nil {
			return fmt.Errorf("waiting for %s to lead: %w", name, err)
		}
	}
}

// waitHTTP polls url until it answers 200, the process exits or ctx ends.
func waitHTTP(ctx context.Context, p *process, c *http.Client, url, token string) error {
	var last string
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return err
		}
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := c.Do(req)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			last = resp.Status
		} else {
			last = err.Error()
		}
		if err := pause(ctx, p); err != nil {
			return fmt.Errorf("%w (last answer: %s)", err, last)
		}
	}
}

// pause waits a poll interval; it fails when the process has exited or ctx ends.
func pause(ctx context.Context, p *process) error {
	select {
	case <-p.done:
		return p.exitError()
	case <-ctx.Done():
		return fmt.Errorf("%s not ready: %w; last log lines:\n%s", p.name, ctx.Err(), p.logTail(40))
	case <-time.After(100 * time.Millisecond):
		return nil
	}
}

func plainClient() *http.Client { return &http.Client{Timeout: 5 * time.Second} }

func insecureClient() *http.Client {
	return &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // readiness probe of our own loopback server
	}}
}

func writeKubeconfig(path string, cfg *rest.Config) error {
	kc := clientcmdapi.NewConfig()
	kc.Clusters["testenv"] = &clientcmdapi.Cluster{Server: cfg.Host, CertificateAuthority: cfg.CAFile}
	kc.AuthInfos["admin"] = &clientcmdapi.AuthInfo{Token: cfg.BearerToken}
	kc.Contexts["testenv"] = &clientcmdapi.Context{Cluster: "testenv", AuthInfo: "admin"}
	kc.CurrentContext = "testenv"
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		return fmt.Errorf("writing kubeconfig: %w", err)
	}
	return nil
}

func randomHex(n int) (string, error) {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		return "", errors.New("testenv: no randomness for the admin token")
	}
	return hex.EncodeToString(b), nil
}
