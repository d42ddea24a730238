package sim

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
)

// Policy is a parsed IAM identity-based policy document. It is evaluated
// as IAM evaluates one identity policy: an explicit Deny wins, else an
// Allow is needed, else the request is implicitly denied.
type Policy struct {
	Statements []Statement
}

// Statement is one policy statement. Exactly one of Action/NotAction and
// one of Resource/NotResource is set.
type Statement struct {
	Sid                   string
	Effect                string // Allow or Deny
	Action, NotAction     []string
	Resource, NotResource []string
	Conditions            []Condition
}

// Condition is one condition-key test of a statement: the operator (with
// its ForAllValues:/ForAnyValue: qualifier and IfExists suffix) applied to
// one key and its values.
type Condition struct {
	Operator string
	Key      string
	Values   []string
}

// Decision is the outcome of evaluating a request.
type Decision int

// Decisions.
const (
	ImplicitDeny Decision = iota
	Allowed
	ExplicitDeny
)

func (d Decision) String() string {
	return [...]string{"implicit deny", "allowed", "explicit deny"}[d]
}

// AuthRequest is one authorization IAM makes for a call: an action on a
// resource ARN with its request context (condition keys to values; keys
// compare case-insensitively, as IAM's do).
type AuthRequest struct {
	Action   string
	Resource string
	Context  map[string][]string
}

// policyDocument is the JSON form; Principal is refused (an identity
// policy names none).
type policyDocument struct {
	Version   string
	Statement json.RawMessage
}

type statementJSON struct {
	Sid         string
	Effect      string
	Action      stringList
	NotAction   stringList
	Resource    stringList
	NotResource stringList
	Condition   map[string]map[string]stringList
}

// stringList is a policy element written as one string or a list; Bool
// and numeric condition values read as their text.
type stringList []string

func (s *stringList) UnmarshalJSON(b []byte) error {
	var many []json.RawMessage
	if err := json.Unmarshal(b, &many); err != nil {
		many = []json.RawMessage{b}
	}
	out := make([]string, 0, len(many))
	for _, raw := range many {
		var v any
		if err := json.Unmarshal(raw, &v); err != nil {
			return err
		}
		switch v := v.(type) {
		case string:
			out = append(out, v)
		case bool, float64:
			out = append(out, fmt.Sprint(v))
		default:
			return fmt.Errorf("value %s: want a string, boolean or number", raw)
		}
	}
	*s = out
	return nil
}

// conditionOperators are the operators the evaluator knows (without
// qualifier or IfExists).
var conditionOperators = []string{
	"StringEquals", "StringNotEquals", "StringEqualsIgnoreCase", "StringNotEqualsIgnoreCase",
	"StringLike", "StringNotLike", "ArnEquals", "ArnLike", "ArnNotEquals", "ArnNotLike", "Bool", "Null",
}

// ParsePolicy parses an IAM policy document (Version 2012-10-17). Unknown
// fields, a Principal, unknown condition operators and statements without
// an effect, action or resource are errors naming the statement.
func ParsePolicy(b []byte) (*Policy, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var doc policyDocument
	if err := dec.Decode(&doc); err != nil {
		return nil, fmt.Errorf("policy document: %w", err)
	}
	if doc.Version != "2012-10-17" {
		return nil, fmt.Errorf("policy document: Version %q: want 2012-10-17", doc.Version)
	}
	var raw []json.RawMessage
	if err := json.Unmarshal(doc.Statement, &raw); err != nil {
		raw = []json.RawMessage{doc.Statement}
	}
	p := &Policy{}
	for i, r := range raw {
		dec := json.NewDecoder(bytes.NewReader(r))
		dec.DisallowUnknownFields()
		var sj statementJSON
		if err := dec.Decode(&sj); err != nil {
			return nil, fmt.Errorf("policy statement %d: %w", i, err)
		}
		st, err := sj.statement()
		if err != nil {
			return nil, fmt.Errorf("policy statement %d (%s): %w", i, sj.Sid, err)
		}
		p.Statements = append(p.Statements, st)
	}
	return p, nil
}

func (sj statementJSON) statement() (Statement, error) {
	st := Statement{Sid: sj.Sid, Effect: sj.Effect, Action: sj.Action, NotAction: sj.NotAction,
		Resource: sj.Resource, NotResource: sj.NotResource}
	switch {
	case sj.Effect != "Allow" && sj.Effect != "Deny":
		return st, fmt.Errorf("Effect %q: want Allow or Deny", sj.Effect)
	case (len(sj.Action) == 0) == (len(sj.NotAction) == 0):
		return st, errors.New("want exactly one of Action and NotAction")
	case (len(sj.Resource) == 0) == (len(sj.NotResource) == 0):
		return st, errors.New("want exactly one of Resource and NotResource")
	}
	for _, op := range sortedKeys(sj.Condition) {
		if _, _, base := splitOperator(op); !slices.Contains(conditionOperators, base) {
			return st, fmt.Errorf("condition operator %q is not supported", op)
		}
		for _, key := range sortedKeys(sj.Condition[op]) {
			st.Conditions = append(st.Conditions, Condition{Operator: op, Key: key, Values: sj.Condition[op][key]})
		}
	}
	return st, nil
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// Decide evaluates every request of one call: ExplicitDeny when a Deny
// matches any of them, Allowed when each is allowed, else ImplicitDeny.
// The index is that of the first request not allowed (-1 when allowed).
func (p *Policy) Decide(reqs []AuthRequest) (Decision, int) {
	first, out := -1, Allowed
	for i, r := range reqs {
		d := p.Evaluate(r)
		if d == ExplicitDeny {
			return ExplicitDeny, i
		}
		if d == ImplicitDeny && out == Allowed {
			first, out = i, ImplicitDeny
		}
	}
	return out, first
}

// Evaluate decides one request.
func (p *Policy) Evaluate(r AuthRequest) Decision {
	ctx := make(map[string][]string, len(r.Context))
	for k, v := range r.Context {
		ctx[strings.ToLower(k)] = v
	}
	allowed := false
	for _, st := range p.Statements {
		if !st.matches(r.Action, r.Resource, ctx) {
			continue
		}
		if st.Effect == "Deny" {
			return ExplicitDeny
		}
		allowed = true
	}
	if allowed {
		return Allowed
	}
	return ImplicitDeny
}

func (st Statement) matches(action, resource string, ctx map[string][]string) bool {
	actionMatch := func(patterns []string) bool {
		return slices.ContainsFunc(patterns, func(p string) bool { return wildcardMatch(strings.ToLower(p), strings.ToLower(action)) })
	}
	resourceMatch := func(patterns []string) bool {
		return slices.ContainsFunc(patterns, func(p string) bool { return wildcardMatch(p, resource) })
	}
	if len(st.Action) > 0 && !actionMatch(st.Action) || len(st.NotAction) > 0 && actionMatch(st.NotAction) {
		return false
	}
	if len(st.Resource) > 0 && !resourceMatch(st.Resource) || len(st.NotResource) > 0 && resourceMatch(st.NotResource) {
		return false
	}
	for _, c := range st.Conditions {
		if !c.holds(ctx) {
			return false
		}
	}
	return true
}

// splitOperator splits ForAllValues:StringLikeIfExists into its set
// qualifier, IfExists and base operator.
func splitOperator(op string) (qualifier string, ifExists bool, base string) {
	if q, rest, ok := strings.Cut(op, ":"); ok {
		qualifier, op = q, rest
	}
	if strings.HasSuffix(op, "IfExists") && op != "IfExists" {
		ifExists, op = true, strings.TrimSuffix(op, "IfExists")
	}
	return qualifier, ifExists, op
}

// holds tests the condition against the request context (lower-case keys).
// A missing key: Null tests for it; IfExists and negated operators hold;
// ForAllValues holds (nothing to test); anything else fails.
func (c Condition) holds(ctx map[string][]string) bool {
	qualifier, ifExists, base := splitOperator(c.Operator)
	have, present := ctx[strings.ToLower(c.Key)]
	if base == "Null" {
		want := slices.Contains(c.Values, "true")
		return want != present
	}
	negated := strings.Contains(base, "Not")
	if !present {
		return ifExists || negated || qualifier == "ForAllValues"
	}
	match := func(v string) bool {
		return slices.ContainsFunc(c.Values, func(want string) bool { return valueMatches(base, want, v) })
	}
	result := func(v string) bool { return match(v) != negated }
	switch qualifier {
	case "ForAllValues":
		return !slices.ContainsFunc(have, func(v string) bool { return !result(v) })
	case "ForAnyValue":
		return slices.ContainsFunc(have, result)
	}
	if negated {
		return !slices.ContainsFunc(have, match)
	}
	return slices.ContainsFunc(have, match)
}

func valueMatches(base, want, v string) bool {
	switch base {
	case "StringEquals", "StringNotEquals":
		return want == v
	case "StringEqualsIgnoreCase", "StringNotEqualsIgnoreCase", "Bool":
		return strings.EqualFold(want, v)
	default: // StringLike, ArnEquals, ArnLike and their negations
		return wildcardMatch(want, v)
	}
}

// wildcardMatch matches s against pattern, where * matches any run of
// characters (slashes and colons included) and ? any one character.
func wildcardMatch(pattern, s string) bool {
	p, i := 0, 0
	star, mark := -1, 0
	for i < len(s) {
		switch {
		case p < len(pattern) && (pattern[p] == '?' || pattern[p] == s[i]):
			p++
			i++
		case p < len(pattern) && pattern[p] == '*':
			star, mark = p, i
			p++
		case star >= 0:
			p = star + 1
			mark++
			i = mark
		default:
			return false
		}
	}
	for p < len(pattern) && pattern[p] == '*' {
		p++
	}
	return p == len(pattern)
}
