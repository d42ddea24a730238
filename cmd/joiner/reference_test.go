package main

import (
	"bytes"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

const (
	refBegin = "<!-- BEGIN GENERATED REFERENCE (go test ./cmd/joiner -run TestReadmeReference -update) -->"
	refEnd   = "<!-- END GENERATED REFERENCE -->"
)

// TestReadmeReference keeps the README's flag and metric reference equal
// to what the binary defines: every flag of every subcommand (from cobra)
// and every joiner_* (and karpenter_*) metric declared in the code (from
// the Go sources).
func TestReadmeReference(t *testing.T) {
	root := filepath.Join("..", "..")
	var b strings.Builder
	b.WriteString(refBegin + "\n\n### Flags\n\n")
	writeFlags(&b, newRootCmd())
	b.WriteString("\n### Metrics\n\n| metric | type | help |\n|---|---|---|\n")
	ms, err := collectMetrics(root)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range ms {
		fmt.Fprintf(&b, "| `%s` | %s | %s |\n", m.name, m.kind, strings.ReplaceAll(m.help, "|", "\\|"))
	}
	b.WriteString("\n" + refEnd)
	want := b.String()

	path := filepath.Join(root, "README.md")
	readme, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	i, j := bytes.Index(readme, []byte(refBegin)), bytes.Index(readme, []byte(refEnd))
	if i < 0 || j < i {
		t.Fatalf("README.md lacks the generated reference markers %q ... %q", refBegin, refEnd)
	}
	got := string(readme[i : j+len(refEnd)])
	if got == want {
		return
	}
	if !*updateGolden { // -update, declared in status_test.go
		t.Fatalf("README.md's flag/metric reference is out of date: run go test ./cmd/joiner -run TestReadmeReference -update")
	}
	out := append(append(append([]byte{}, readme[:i]...), want...), readme[j+len(refEnd):]...)
	if err := os.WriteFile(path, out, 0o644); err != nil {
		t.Fatal(err)
	}
}

func writeFlags(b *strings.Builder, root *cobra.Command) {
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		if c.Hidden || c.Name() == "help" || c.Name() == "completion" {
			return
		}
		var rows []string
		c.NonInheritedFlags().VisitAll(func(f *pflag.Flag) {
			if f.Hidden || f.Name == "help" {
				return
			}
			name := "`--" + f.Name + "`"
			if f.Shorthand != "" {
				name = "`-" + f.Shorthand + "`, " + name
			}
			def := f.DefValue
			if def == "" || def == "[]" {
				def = "-"
			} else {
				def = "`" + def + "`"
			}
			rows = append(rows, fmt.Sprintf("| %s | %s | %s |", name, def, strings.ReplaceAll(f.Usage, "|", "\\|")))
		})
		if len(rows) > 0 {
			fmt.Fprintf(b, "**`%s`**\n\n| flag | default | meaning |\n|---|---|---|\n%s\n\n", c.CommandPath(), strings.Join(rows, "\n"))
		}
		subs := c.Commands()
		sort.Slice(subs, func(i, j int) bool { return subs[i].Name() < subs[j].Name() })
		for _, s := range subs {
			walk(s)
		}
	}
	walk(root)
}

type metricDoc struct{ name, kind, help string }

// metricName: Joiner's metrics, and those it keeps under Karpenter's names.
var metricName = regexp.MustCompile(`^(joiner|karpenter)_[a-z0-9_]+$`)

// collectMetrics finds every prometheus.*Opts literal and NewDesc call
// naming a joiner_* or karpenter_* metric in the non-test Go sources.
func collectMetrics(root string) ([]metricDoc, error) {
	seen := map[string]metricDoc{}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			switch d.Name() {
			case ".git", "bin", "tools", "node_modules":
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, 0)
		if err != nil {
			return err
		}
		ast.Inspect(f, func(n ast.Node) bool {
			switch x := n.(type) {
			case *ast.CompositeLit:
				sel, ok := x.Type.(*ast.SelectorExpr)
				if !ok || !strings.HasSuffix(sel.Sel.Name, "Opts") {
					return true
				}
				var m metricDoc
				m.kind = strings.ToLower(strings.TrimSuffix(sel.Sel.Name, "Opts"))
				for _, e := range x.Elts {
					kv, ok := e.(*ast.KeyValueExpr)
					if !ok {
						continue
					}
					key, _ := kv.Key.(*ast.Ident)
					if key == nil {
						continue
					}
					switch key.Name {
					case "Name":
						m.name = stringLit(kv.Value)
					case "Help":
						m.help = stringLit(kv.Value)
					}
				}
				if metricName.MatchString(m.name) {
					seen[m.name] = m
				}
			case *ast.CallExpr:
				sel, ok := x.Fun.(*ast.SelectorExpr)
				if !ok || sel.Sel.Name != "NewDesc" || len(x.Args) < 2 {
					return true
				}
				if name := stringLit(x.Args[0]); metricName.MatchString(name) {
					if _, ok := seen[name]; !ok {
						seen[name] = metricDoc{name: name, kind: "gauge", help: stringLit(x.Args[1])}
					}
				}
			}
			return true
		})
		return nil
	})
	out := make([]metricDoc, 0, len(seen))
	for _, m := range seen {
		out = append(out, m)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].name < out[j].name })
	return out, err
}

// stringLit evaluates a string literal or a + concatenation of them.
func stringLit(e ast.Expr) string {
	switch x := e.(type) {
	case *ast.BasicLit:
		if s, err := strconv.Unquote(x.Value); err == nil {
			return s
		}
	case *ast.BinaryExpr:
		return stringLit(x.X) + stringLit(x.Y)
	case *ast.Ident:
		// a constant of the same file (the parser resolves those)
		if x.Obj == nil {
			break
		}
		if spec, ok := x.Obj.Decl.(*ast.ValueSpec); ok {
			for i, n := range spec.Names {
				if n.Name == x.Name && i < len(spec.Values) {
					return stringLit(spec.Values[i])
				}
			}
		}
	}
	return ""
}
