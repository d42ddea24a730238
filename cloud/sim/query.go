package sim

import (
	"errors"
	"fmt"
	"net/url"
	"sort"
	"strconv"
	"strings"
)

// maxBody bounds a Query-protocol request body.
const maxBody = 1 << 20

// APIVersion is the EC2 API version the sim speaks.
const APIVersion = "2016-11-15"

// Request is a parsed EC2 Query-protocol request: Action, Version and the
// remaining form parameters.
type Request struct {
	Action string
	Params url.Values
	// principal signed the request (authorization).
	principal principal
}

// errBadRequest marks malformed requests (EC2 answers them with 400).
var errBadRequest = errors.New("malformed request")

// ParseQuery parses a form-encoded EC2 Query request body.
func ParseQuery(body []byte) (Request, error) {
	if len(body) > maxBody {
		return Request{}, fmt.Errorf("body of %d bytes exceeds %d: %w", len(body), maxBody, errBadRequest)
	}
	v, err := url.ParseQuery(string(body))
	if err != nil {
		return Request{}, fmt.Errorf("parsing form body: %v: %w", err, errBadRequest)
	}
	action := v.Get("Action")
	if action == "" {
		return Request{}, fmt.Errorf("missing Action: %w", errBadRequest)
	}
	if ver := v.Get("Version"); ver != APIVersion && ver != iamVersion {
		return Request{}, fmt.Errorf("Version %q is not %s (EC2) or %s (IAM): %w", ver, APIVersion, iamVersion, errBadRequest)
	}
	return Request{Action: action, Params: v}, nil
}

// Get returns the parameter named key.
func (r Request) Get(key string) string { return r.Params.Get(key) }

// Int returns an integer parameter (def when absent or invalid).
func (r Request) Int(key string, def int) int {
	n, err := strconv.Atoi(r.Params.Get(key))
	if err != nil {
		return def
	}
	return n
}

// indexes returns the sorted distinct N of keys "prefix.N" or
// "prefix.N.<rest>".
func (r Request) indexes(prefix string) []int {
	seen := map[int]bool{}
	p := prefix + "."
	for k := range r.Params {
		if !strings.HasPrefix(k, p) {
			continue
		}
		rest := k[len(p):]
		if i := strings.IndexByte(rest, '.'); i >= 0 {
			rest = rest[:i]
		}
		n, err := strconv.Atoi(rest)
		if err != nil || n < 1 || n > 10000 {
			continue
		}
		seen[n] = true
	}
	out := make([]int, 0, len(seen))
	for n := range seen {
		out = append(out, n)
	}
	sort.Ints(out)
	return out
}

// Strings returns the list "prefix.1", "prefix.2", ...
func (r Request) Strings(prefix string) []string {
	var out []string
	for _, n := range r.indexes(prefix) {
		if v, ok := r.Params[prefix+"."+strconv.Itoa(n)]; ok && len(v) > 0 {
			out = append(out, v[0])
		}
	}
	return out
}

// Sub returns the members of the structure list "prefix.N" as requests whose
// keys are relative to each member.
func (r Request) Sub(prefix string) []Request {
	var out []Request
	for _, n := range r.indexes(prefix) {
		out = append(out, r.Struct(prefix+"."+strconv.Itoa(n)))
	}
	return out
}

// Struct returns the structure "prefix" as a request with relative keys.
func (r Request) Struct(prefix string) Request {
	p := prefix + "."
	sub := url.Values{}
	for k, v := range r.Params {
		if strings.HasPrefix(k, p) {
			sub[k[len(p):]] = v
		}
	}
	return Request{Action: r.Action, Params: sub, principal: r.principal}
}

// Filter is one EC2 Filter.N.
type Filter struct {
	Name   string
	Values []string
}

// Filters returns Filter.N.Name / Filter.N.Value.M.
func (r Request) Filters() []Filter {
	var out []Filter
	for _, f := range r.Sub("Filter") {
		out = append(out, Filter{Name: f.Get("Name"), Values: f.Strings("Value")})
	}
	return out
}

// Tags returns a tag list "prefix.N.Key/Value" as a map.
func (r Request) Tags(prefix string) map[string]string {
	out := map[string]string{}
	for _, t := range r.Sub(prefix) {
		if k := t.Get("Key"); k != "" {
			out[k] = t.Get("Value")
		}
	}
	return out
}

// TagSpecs returns TagSpecification.N as resource type -> tags.
func (r Request) TagSpecs(prefix string) map[string]map[string]string {
	out := map[string]map[string]string{}
	for _, s := range r.Sub(prefix) {
		rt := s.Get("ResourceType")
		if out[rt] == nil {
			out[rt] = map[string]string{}
		}
		for k, v := range s.Tags("Tag") {
			out[rt][k] = v
		}
	}
	return out
}
