package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
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
  consolidation: {enabled: true}
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

// TestConvertCmdMalformed: a document that is not YAML is reported with its
// file and position; the documents around it are still written, and the
// command fails.
func TestConvertCmdMalformed(t *testing.T) {
	f := filepath.Join(t.TempDir(), "bad.yaml")
	if err := os.WriteFile(f, []byte(cliConfigMap+"---\nkind: [\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	stdout, stderr, err := runConvert(t, "", "-f", f)
	if err == nil || !strings.Contains(err.Error(), "1 document(s) not converted") {
		t.Fatalf("err %v, want one document not converted", err)
	}
	if want := "error: " + f + ": document 2 (line 5): malformed manifest: "; !strings.HasPrefix(stderr, want) {
		t.Errorf("stderr %q does not start with %q", stderr, want)
	}
	if stdout != cliConfigMap {
		t.Errorf("stdout %q, want the ConfigMap", stdout)
	}
}

func TestConvertCmdErrors(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"no -f", nil, "-f FILE|DIR|- is required"},
		{"missing file", []string{"-f", filepath.Join(t.TempDir(), "missing.yaml")}, "missing.yaml"},
		{"empty directory", []string{"-f", t.TempDir()}, "no *.yaml, *.yml or *.json files (-R reads subdirectories)"},
		{"unknown output", []string{"-f", "-", "-o", "table"}, `-o "table": want yaml, json or name`},
		{"both defaults", []string{"-f", "-", "--default-role", "r", "--default-instance-profile", "p"}, "--default-role and --default-instance-profile are mutually exclusive"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			stdout, _, err := runConvert(t, cliTemplate, tt.args...)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("err %v, want it to contain %q", err, tt.want)
			}
			if stdout != "" {
				t.Errorf("wrote output: %q", stdout)
			}
		})
	}
}

// TestConvertCmdValidate: an object v1 rejects is listed field by field
// with its document and not written; --validate=false writes it.
func TestConvertCmdValidate(t *testing.T) {
	// No subnet selector: v1 requires subnetSelectorTerms.
	in := strings.Replace(cliTemplate, "  subnetSelector: {karpenter.sh/discovery: c}\n", "", 1)
	stdout, stderr, err := runConvert(t, in+"---\n"+cliConfigMap, "-f", "-")
	if err == nil || !strings.Contains(err.Error(), "1 document(s) not converted") {
		t.Fatalf("err %v", err)
	}
	// the wording after the field is api/aws/v1's
	wantErr := "error: <stdin>: document 1 (line 1): AWSNodeTemplate default: converted EC2NodeClass default: spec.subnetSelectorTerms: "
	if !strings.Contains(stderr, wantErr) || strings.Count(stderr, "error: ") != 1 {
		t.Errorf("stderr:\n%s\nwant one error starting:\n%s", stderr, wantErr)
	}
	if stdout != cliConfigMap {
		t.Errorf("stdout %q, want only the ConfigMap", stdout)
	}
	stdout, _, err = runConvert(t, in, "-f", "-", "--validate=false")
	if err != nil || !strings.Contains(stdout, "kind: EC2NodeClass") {
		t.Errorf("--validate=false: %v\n%s", err, stdout)
	}
}

// writeFiles writes name -> body under dir, creating directories.
func writeFiles(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for name, body := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// kindsAndNames lists the documents of a YAML stream as "Kind name".
func kindsAndNames(t *testing.T, stream string) []string {
	t.Helper()
	var out []string
	for _, doc := range strings.Split(stream, "---\n") {
		var tm struct {
			Kind     string
			Metadata struct{ Name string }
		}
		if err := yaml.Unmarshal([]byte(doc), &tm); err != nil {
			t.Fatalf("output document does not read: %v\n%s", err, doc)
		}
		out = append(out, tm.Kind+" "+tm.Metadata.Name)
	}
	return out
}

// TestConvertCmdPartialFailure: every document that converts is written;
// each one that does not is listed on stderr with its file, position, kind,
// name and field (an input that is not UTF-8 with the byte's offset), and
// the command exits non-zero.
func TestConvertCmdPartialFailure(t *testing.T) {
	dir := t.TempDir()
	badType := strings.Replace(cliProvisioner, "maxPods: 30", "evictionMaxPodGracePeriod: 3m", 1)
	writeFiles(t, dir, map[string]string{
		"a.yaml": cliTemplate + "---\n" + badType,
		"b.yaml": cliConfigMap + "# caf\xe9\n",
		"c.yaml": strings.Replace(cliConfigMap, "keep", "also-kept", 1),
	})
	stdout, stderr, err := runConvert(t, "", "-f", dir)
	if err == nil || err.Error() != "convert: 2 document(s) not converted (errors above; the others were written)" {
		t.Errorf("err %v", err)
	}
	if got, want := kindsAndNames(t, stdout), []string{"EC2NodeClass default", "ConfigMap also-kept"}; !reflect.DeepEqual(got, want) {
		t.Errorf("written %q, want %q\n%s", got, want, stdout)
	}
	a, b := filepath.Join(dir, "a.yaml"), filepath.Join(dir, "b.yaml")
	for _, want := range []string{
		"error: " + a + `: document 2 (line 10): Provisioner default: spec.kubeletConfiguration.evictionMaxPodGracePeriod: "3m": expected an integer (seconds)` + "\n",
		"error: " + b + ": malformed manifest: byte 0xe9 at offset 69 (line 4, column 6, in document 1 (line 1)) is not UTF-8; nothing of this input is converted\n",
	} {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr:\n%s\nlacks:\n%s", stderr, want)
		}
	}
}

// TestConvertCmdJSON: -o json writes the one object, or a v1 List of them
// as kubectl does, keeping userData byte for byte.
func TestConvertCmdJSON(t *testing.T) {
	withUserData := strings.Replace(cliTemplate, "spec:\n", "spec:\n  userData: |\n    #!/bin/bash\n    echo hi\n", 1)
	stdout, stderr, err := runConvert(t, withUserData, "-f", "-", "-o", "json")
	if err != nil {
		t.Fatalf("%v\n%s", err, stderr)
	}
	var one struct {
		Kind string
		Spec struct{ UserData string }
	}
	if err := json.Unmarshal([]byte(stdout), &one); err != nil || one.Kind != "EC2NodeClass" || one.Spec.UserData != "#!/bin/bash\necho hi\n" {
		t.Errorf("one object: %+v (%v)\n%s", one, err, stdout)
	}
	if !strings.HasPrefix(stdout, "{\n    \"apiVersion\": \"karpenter.k8s.aws/v1\",\n") {
		t.Errorf("not indented as kubectl does:\n%s", stdout)
	}
	stdout, _, err = runConvert(t, "# a comment\n---\n"+cliProvisioner+"---\n"+cliTemplate+"---\n"+cliConfigMap, "-f", "-", "-o", "json")
	if err != nil {
		t.Fatal(err)
	}
	var list struct {
		APIVersion, Kind string
		Items            []struct {
			Kind     string
			Metadata struct{ Name string }
		}
	}
	if err := json.Unmarshal([]byte(stdout), &list); err != nil {
		t.Fatalf("%v\n%s", err, stdout)
	}
	var got []string
	for _, it := range list.Items {
		got = append(got, it.Kind+" "+it.Metadata.Name)
	}
	if want := []string{"NodePool default", "EC2NodeClass default", "ConfigMap keep"}; list.APIVersion != "v1" || list.Kind != "List" || !reflect.DeepEqual(got, want) {
		t.Errorf("%s %s %q, want a v1 List of %q", list.APIVersion, list.Kind, got, want)
	}
}

// TestConvertCmdRecursive: a directory contributes its *.yaml, *.yml and
// *.json files; with -R those of its subdirectories too, in lexical order.
func TestConvertCmdRecursive(t *testing.T) {
	dir := t.TempDir()
	cm := func(name string) string { return strings.Replace(cliConfigMap, "keep", name, 1) }
	writeFiles(t, dir, map[string]string{
		"b-top.yaml":         cm("top"),
		"a/nested.yml":       cm("nested"),
		"a/deeper/more.json": `{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "json"}}`,
		"c/notes.txt":        "not: [yaml",
	})
	tests := []struct {
		args []string
		want []string
	}{
		{[]string{"-f", dir}, []string{"ConfigMap top"}},
		{[]string{"-f", dir, "-R"}, []string{"ConfigMap json", "ConfigMap nested", "ConfigMap top"}},
		{[]string{"-f", dir, "--recursive", "-o", "yaml"}, []string{"ConfigMap json", "ConfigMap nested", "ConfigMap top"}},
	}
	for _, tt := range tests {
		stdout, stderr, err := runConvert(t, "", tt.args...)
		if err != nil {
			t.Fatalf("%v: %v\n%s", tt.args, err, stderr)
		}
		if got := kindsAndNames(t, stdout); !reflect.DeepEqual(got, tt.want) {
			t.Errorf("%v: read %q, want %q", tt.args, got, tt.want)
		}
	}
	if _, _, err := runConvert(t, "", "-f", filepath.Join(dir, "c"), "-R"); err == nil || !strings.Contains(err.Error(), "no *.yaml, *.yml or *.json files") {
		t.Errorf("directory tree without manifests: %v", err)
	}
}

// TestConvertCmdDefaultRole: a template that relied on the default
// instance profile gets karpenter-convert's role placeholder and a warning,
// or the role or instance profile the flags give.
func TestConvertCmdDefaultRole(t *testing.T) {
	in := strings.Replace(cliTemplate, "  instanceProfile: profile\n", "", 1)
	tests := []struct {
		args      []string
		want      string
		warnAbout string
	}{
		{nil, "  role: $KARPENTER_NODE_ROLE\n", "written as role $KARPENTER_NODE_ROLE, as karpenter-convert does"},
		{[]string{"--default-role", "KarpenterNodeRole-demo"}, "  role: KarpenterNodeRole-demo\n", "written as role KarpenterNodeRole-demo (the default role given)"},
		{[]string{"--default-instance-profile", "KarpenterNodeInstanceProfile-demo"}, "  instanceProfile: KarpenterNodeInstanceProfile-demo\n", "written as instanceProfile KarpenterNodeInstanceProfile-demo"},
	}
	for _, tt := range tests {
		stdout, stderr, err := runConvert(t, in, append([]string{"-f", "-"}, tt.args...)...)
		if err != nil {
			t.Fatalf("%v: %v\n%s", tt.args, err, stderr)
		}
		if !strings.Contains(stdout, tt.want) {
			t.Errorf("%v: output lacks %q:\n%s", tt.args, tt.want, stdout)
		}
		if !strings.Contains(stderr, "warning: AWSNodeTemplate default: spec.instanceProfile is unset") || !strings.Contains(stderr, tt.warnAbout) {
			t.Errorf("%v: stderr lacks the warning %q:\n%s", tt.args, tt.warnAbout, stderr)
		}
	}
}

// TestConvertCmdIgnoreDefaults: --ignore-defaults leaves out the
// requirements the v1alpha5 webhook defaulted, as karpenter-convert's flag.
func TestConvertCmdIgnoreDefaults(t *testing.T) {
	for flag, want := range map[string]bool{"--ignore-defaults=false": true, "--ignore-defaults": false} {
		stdout, _, err := runConvert(t, cliProvisioner+"---\n"+cliTemplate, "-f", "-", flag)
		if err != nil {
			t.Fatal(err)
		}
		if got := strings.Contains(stdout, "karpenter.k8s.aws/instance-category"); got != want {
			t.Errorf("%s: defaulted requirements written %v, want %v\n%s", flag, got, want, stdout)
		}
	}
}
