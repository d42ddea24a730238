package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// runConvert runs `joiner convert args...` in-process.
func runConvert(t *testing.T, stdin string, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	cmd := newConvertCmd(&globals{})
	var out, errb bytes.Buffer
	cmd.SetArgs(args)
	cmd.SetIn(strings.NewReader(stdin))
	cmd.SetOut(&out)
	cmd.SetErr(&errb)
	cmd.SilenceUsage = true
	cmd.SilenceErrors = true
	err = cmd.Execute()
	return out.String(), errb.String(), err
}

const cliProvisioner = `apiVersion: karpenter.sh/v1alpha5
kind: Provisioner
metadata:
  name: default
spec:
  providerRef: {name: default}
  kubeletConfiguration: {containerRuntime: containerd, maxPods: 30}
`

const cliTemplate = `apiVersion: karpenter.k8s.aws/v1alpha1
kind: AWSNodeTemplate
metadata:
  name: default
spec:
  instanceProfile: profile
  subnetSelector: {karpenter.sh/discovery: c}
  securityGroupSelector: {karpenter.sh/discovery: c}
`

const cliConfigMap = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: keep}   # as is\n"

func TestConvertCmdDirectoryAndStdin(t *testing.T) {
	dir := t.TempDir()
	// Lexical order: the class file sorts after the pool file; the kubelet
	// block still moves across files. Other extensions are ignored.
	for name, body := range map[string]string{
		"a-provisioner.yaml": cliProvisioner,
		"b-template.yml":     cliTemplate,
		"notes.txt":          "not yaml: [",
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	stdout, stderr, err := runConvert(t, cliConfigMap, "-f", dir, "-f", "-")
	if err != nil {
		t.Fatalf("convert: %v\nstderr:\n%s", err, stderr)
	}
	docs := strings.Split(stdout, "---\n")
	if len(docs) != 3 {
		t.Fatalf("got %d documents:\n%s", len(docs), stdout)
	}
	if !strings.Contains(docs[0], "kind: NodePool") || !strings.Contains(docs[1], "kind: EC2NodeClass") || !strings.Contains(docs[1], "maxPods: 30") {
		t.Errorf("unexpected conversion:\n%s", stdout)
	}
	if docs[2] != cliConfigMap {
		t.Errorf("stdin document changed: %q", docs[2])
	}
	wantWarn := "warning: Provisioner default: spec.kubeletConfiguration.containerRuntime has no v1 equivalent (containerd is the only runtime); dropped\n" +
		"warning: Provisioner default: spec.kubeletConfiguration moved to EC2NodeClass default spec.kubelet (v1 keeps kubelet on the node class)\n"
	if stderr != wantWarn {
		t.Errorf("stderr:\n%s\nwant:\n%s", stderr, wantWarn)
	}
}

func TestConvertCmdMalformed(t *testing.T) {
	f := filepath.Join(t.TempDir(), "bad.yaml")
	if err := os.WriteFile(f, []byte(cliConfigMap+"---\nkind: [\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	stdout, _, err := runConvert(t, "", "-f", f)
	if err == nil {
		t.Fatal("no error for malformed YAML")
	}
	if want := f + ": document 2 (line 5)"; !strings.Contains(err.Error(), want) {
		t.Errorf("error %q does not name %q", err, want)
	}
	if stdout != "" {
		t.Errorf("wrote output on error: %q", stdout)
	}
}

func TestConvertCmdErrors(t *testing.T) {
	if _, _, err := runConvert(t, ""); err == nil || !strings.Contains(err.Error(), "-f FILE|DIR|- is required") {
		t.Errorf("no -f: %v", err)
	}
	if _, _, err := runConvert(t, "", "-f", filepath.Join(t.TempDir(), "missing.yaml")); err == nil || !strings.Contains(err.Error(), "missing.yaml") {
		t.Errorf("missing file: %v", err)
	}
	if _, _, err := runConvert(t, "", "-f", t.TempDir()); err == nil || !strings.Contains(err.Error(), "no *.yaml or *.yml files") {
		t.Errorf("empty dir: %v", err)
	}
}

func TestConvertCmdValidate(t *testing.T) {
	// No subnet selector: v1 requires subnetSelectorTerms.
	in := strings.Replace(cliTemplate, "  subnetSelector: {karpenter.sh/discovery: c}\n", "", 1)
	stdout, stderr, err := runConvert(t, in, "-f", "-")
	if err == nil {
		t.Fatalf("invalid v1 output accepted:\n%s", stdout)
	}
	wantErr := "error: EC2NodeClass default from <stdin>: document 1 (line 1) (AWSNodeTemplate default): spec.subnetSelectorTerms: at least one term is required, got none\n"
	if !strings.Contains(err.Error(), "1 validation error(s)") || stderr != wantErr {
		t.Errorf("err %v\nstderr:\n%s\nwant:\n%s", err, stderr, wantErr)
	}
	if stdout != "" {
		t.Errorf("wrote output although validation failed: %q", stdout)
	}
	stdout, _, err = runConvert(t, in, "-f", "-", "--validate=false")
	if err != nil || !strings.Contains(stdout, "kind: EC2NodeClass") {
		t.Errorf("--validate=false: %v\n%s", err, stdout)
	}
}
