package userdata

import (
	"fmt"
	"strconv"
	"strings"
)

// shellCommands splits a POSIX shell script into simple commands, each a
// list of words with quoting removed: '...' is literal, "..." honours
// backslash before " \ $ and `, an unquoted backslash escapes the next
// character (a backslash-newline continues the line), # at the start of a
// word comments to the end of the line, and unquoted newlines, ;, & and |
// end a command. Nothing is expanded ($VAR stays as written). It is what
// Parse needs to read a bootstrap.sh call, not a shell: redirections and
// sub-shells are just words. An unterminated quote runs to the end.
func shellCommands(script string) [][]string {
	var cmds [][]string
	var words []string
	var w strings.Builder
	inWord := false
	endWord := func() {
		if inWord {
			words = append(words, w.String())
			w.Reset()
			inWord = false
		}
	}
	endCmd := func() {
		endWord()
		if len(words) > 0 {
			cmds = append(cmds, words)
			words = nil
		}
	}
	s := []rune(script)
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '\'':
			inWord = true
			for i++; i < len(s) && s[i] != '\''; i++ {
				w.WriteRune(s[i])
			}
		case c == '"':
			inWord = true
			for i++; i < len(s) && s[i] != '"'; i++ {
				if s[i] == '\\' && i+1 < len(s) && strings.ContainsRune("\"\\$`\n", s[i+1]) {
					i++
					if s[i] == '\n' {
						continue
					}
				}
				w.WriteRune(s[i])
			}
		case c == '\\':
			if i+1 < len(s) {
				i++
				if s[i] != '\n' {
					inWord = true
					w.WriteRune(s[i])
				}
			}
		case c == '#' && !inWord:
			for i+1 < len(s) && s[i+1] != '\n' {
				i++
			}
		case c == '\n' || c == ';' || c == '&' || c == '|':
			endCmd()
		case c == ' ' || c == '\t' || c == '\r':
			endWord()
		default:
			inWord = true
			w.WriteRune(c)
		}
	}
	endCmd()
	return cmds
}

// shellWords is the words of s taken as one command line (newlines and
// command separators only separate words): how systemd and the EKS
// scripts split KUBELET_EXTRA_ARGS and nodeadm flags into kubelet
// arguments.
func shellWords(s string) []string {
	var out []string
	for _, c := range shellCommands(s) {
		out = append(out, c...)
	}
	return out
}

// flagValues yields the --name value pairs of args: "--name=value", or
// "--name value" when the next word is a value: always for a program
// whose every option takes one (bootstrap.sh; its values may start with
// "--"), else when the next word is not a flag (the kubelet). A flag
// without a value yields "".
func flagValues(args []string, alwaysValue bool, yield func(name, value string) error) error {
	for i := 0; i < len(args); i++ {
		a := args[i]
		if !strings.HasPrefix(a, "-") {
			continue
		}
		name, value, ok := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if !ok && i+1 < len(args) && (alwaysValue || !strings.HasPrefix(args[i+1], "-")) {
			i++
			value = args[i]
		}
		if err := yield(name, value); err != nil {
			return err
		}
	}
	return nil
}

// applyKubeletArgs applies kubelet command-line flags to f as the kubelet
// does: every --node-labels adds to the labels (a key repeated takes the
// later value), the last --register-with-taints, --max-pods and
// --cluster-dns (its first address) win over what came before (the
// kubelet config file, earlier flags).
func applyKubeletArgs(args []string, f *NodeFacts) error {
	return flagValues(args, false, func(name, value string) error {
		switch name {
		case "node-labels":
			labels, err := ParseLabels(value)
			if err != nil {
				return fmt.Errorf("--node-labels: %w", err)
			}
			for k, v := range labels {
				f.Labels[k] = v
			}
		case "register-with-taints":
			f.Taints = nil
			for _, s := range strings.Split(value, ",") {
				if s = strings.TrimSpace(s); s == "" {
					continue
				}
				t, err := ParseTaint(s)
				if err != nil {
					return fmt.Errorf("--register-with-taints: %w", err)
				}
				f.Taints = append(f.Taints, t)
			}
		case "max-pods":
			n, err := strconv.ParseInt(value, 10, 32)
			if err != nil {
				return fmt.Errorf("--max-pods=%s: %w", value, err)
			}
			f.MaxPods = int32(n)
		case "pods-per-core":
			n, err := strconv.ParseInt(value, 10, 32)
			if err != nil {
				return fmt.Errorf("--pods-per-core=%s: %w", value, err)
			}
			f.PodsPerCore = int32(n)
		case "cluster-dns":
			if dns, _, _ := strings.Cut(value, ","); dns != "" {
				f.ClusterDNS = dns
			}
		}
		return nil
	})
}
